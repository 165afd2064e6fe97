"""The TDT predictor step and joint as two small ggml graphs on the CPU: the greedy loop's per-token work.

Why: every emitted token reads the predictor's and the joint's matrices once. In f32 (v3: 47 MB) they do not fit
the CPU's last-level cache, so each token streams them from memory; in numpy each of those matvecs also woke
OpenBLAS's threads, which the worker lets sleep after every call (inference/client/connection.py). On ggml, f32:
54-58 against 81-85 ms for the 42 tokens of a 10 s clip; stored as q8_0 (13 MB) the matrices stay in cache from
one token to the next: 17-19 ms (2-core Zen 4; tests/bench/README.md, "The TDT loop in cache").

Storage: ``f32`` and ``native`` keep f32 (the checkpoint's values; every fixture decodes exactly as transformers
does). Reduced types never go below 8 bits — the decoder is 2 % of the model's weights and q8_0 already fits it
in cache — so f16 and bf16 keep their type and q8_0, q6_k, q4_k and int8 store the matrices as q8_0 (ONNX
Runtime's int8 GEMM would repack the whole weight for every one-row product). Rows that fit no block of the
type stay f32 (the loader's rule). The embedding stays a numpy f32 table: a token reads one row of it.
"""

from __future__ import annotations

import numpy as np

from inference.families.parakeet_tdt.config import ParakeetConfig
from inference.families.parakeet_tdt.decoder import DecoderState, DecoderWeights, TdtDecoder
from inference.native import Backend, Graph, GraphBuilder, Tensor, WeightStore, load_weights, open_backend
from inference.native.owner import NativeOwner

# Session weight type -> storage of the decoder's matrices.
DECODER_STORAGE = {
    "native": "f32",
    "f32": "f32",
    "f16": "f16",
    "bf16": "bf16",
    "q8_0": "q8_0",
    "q6_k": "q8_0",
    "q4_k": "q8_0",
    "int8": "q8_0",
}


def make_decoder(
    weights: DecoderWeights, config: ParakeetConfig, backend: Backend, weight_type: str
) -> TdtDecoder:
    """The greedy decoder for a session, its step on ggml with the matrices in ``DECODER_STORAGE[weight_type]``.

    The step runs on the CPU whatever the encoder's backend: a token is a few one-row products, which a GPU would
    only add a round trip to; beside a GPU encoder it gets a CPU backend of its own (ggml's products only).
    """
    storage = DECODER_STORAGE[weight_type]
    if backend.is_cpu:
        return TdtDecoder(weights, config, GgmlPredictionStep(backend, weights, storage))
    cpu = open_backend("cpu", backend.threads, api=backend.api, gemm="ggml")
    try:
        step = GgmlPredictionStep(cpu, weights, storage, owns_backend=True)
    except BaseException:
        cpu.close()
        raise
    return TdtDecoder(weights, config, step)


class GgmlPredictionStep(NativeOwner):
    """:class:`~inference.families.parakeet_tdt.decoder.PredictionStep` on ggml: one graph per LSTM step (all
    layers and the projection), one per joint."""

    def __init__(
        self, backend: Backend, weights: DecoderWeights, storage: str, owns_backend: bool = False
    ) -> None:
        """``owns_backend``: ``backend`` was opened for this step alone and is closed with it."""
        self._owned_backend = backend if owns_backend else None
        self.embedding = weights.embedding
        self.layers = len(weights.w_ih)
        self.hidden = weights.pred_w.shape[0]
        arrays: dict[str, np.ndarray] = {
            "pred_w": weights.pred_w,
            "pred_b": weights.pred_b,
            "head_w": weights.head_w,
            "head_b": weights.head_b,
        }
        for layer in range(self.layers):
            arrays[f"w_ih{layer}"] = weights.w_ih[layer]
            arrays[f"w_hh{layer}"] = weights.w_hh[layer]
            arrays[f"bias{layer}"] = weights.bias[layer]
        self._graphs: list[Graph] = []
        self._store: WeightStore | None = None
        self._store = load_weights(backend, arrays=arrays, storage=storage)
        try:
            self._advance = Graph(backend, self._build_advance, self._store)
            self._graphs.append(self._advance)
            self._joint = Graph(backend, self._build_joint, self._store)
            self._graphs.append(self._joint)
        except BaseException:
            self.close()
            raise

    def storage_types(self) -> dict[str, int]:
        """Bytes of the decoder's weights by ggml type (for tests and logs)."""
        if self._store is None:
            return {}
        return self._store.bytes_by_type()

    # ----------------------------------------------------------------- graphs
    def _build_advance(self, g: GraphBuilder, store: WeightStore) -> None:
        H = self.hidden
        x = g.input("x", (H,))
        for layer in range(self.layers):
            h = g.input(f"h{layer}", (H,))
            c = g.input(f"c{layer}", (H,))
            gates = g.add(
                g.add(g.linear(x, store[f"w_ih{layer}"]), g.linear(h, store[f"w_hh{layer}"])),
                store[f"bias{layer}"],
            )
            i, f, cell, o = (g.slice(gates, 0, k * H, (k + 1) * H) for k in range(4))
            c_next = g.add(g.mul(g.sigmoid(f), c), g.mul(g.sigmoid(i), g.tanh(cell)))
            h_next = g.mul(g.sigmoid(o), g.tanh(c_next))
            g.output(f"h{layer}_next", h_next)
            g.output(f"c{layer}_next", c_next)
            x = h_next
        g.output("pred", g.linear(x, store["pred_w"], store["pred_b"]))

    def _build_joint(self, g: GraphBuilder, store: WeightStore) -> None:
        H = self.hidden
        joined: Tensor = g.relu(g.add(g.input("frame", (H,)), g.input("pred", (H,))))
        g.output("logits", g.linear(joined, store["head_w"], store["head_b"]))

    # ----------------------------------------------------------------- PredictionStep
    def advance(self, state: DecoderState, token: int) -> None:
        graph = self._advance
        graph.set_input("x", self.embedding[token])
        for layer in range(self.layers):
            graph.set_input(f"h{layer}", state.h[layer])
            graph.set_input(f"c{layer}", state.c[layer])
        graph.compute()
        for layer in range(self.layers):  # rows of C-contiguous (layers, H) arrays: written in place
            graph.get_output(f"h{layer}_next", state.h[layer])
            graph.get_output(f"c{layer}_next", state.c[layer])
        state.pred = graph.get_output("pred")

    def joint(self, enc_proj_frame: np.ndarray, pred: np.ndarray) -> np.ndarray:
        graph = self._joint
        graph.set_input("frame", enc_proj_frame)
        graph.set_input("pred", pred)
        graph.compute()
        return graph.get_output("logits")

    def close(self) -> None:
        graphs, self._graphs = self._graphs, []
        for graph in graphs:
            graph.close()
        store, self._store = self._store, None
        if store is not None:
            store.close()
        backend, self._owned_backend = self._owned_backend, None
        if backend is not None:
            backend.close()
