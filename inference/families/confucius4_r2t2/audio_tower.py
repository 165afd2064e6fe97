"""The Qwen3-ASR audio tower and projector as one ggml graph per chunk-count bucket.

Follows transformers 5.23 ``Qwen3ASREncoder`` + ``Qwen3ASRMultiModalProjector`` (docs/reference_parity.md §2.4,
docs/families/confucius4_r2t2.md §3) with the project decision of docs/reference_parity.md §2.7 for clips under one
conv chunk. All chunks run as the N axis of one conv stem; instead of compacting the last chunk's padding tokens,
the additive attention mask hides them (valid rows see only valid rows of their window), and every other op is
row-wise, so the valid rows equal the compacted computation. conv1 is a product of host-made im2col columns and
attention is ``ggml_flash_attn_ext``, both to avoid permuted copies of large activations.

Weight storage (``tower_weight_type``): ``native`` keeps the checkpoint's type except bf16, promoted to f32 (ggml's
CPU kernels would round the activations to bf16 too). conv1 and the position table are always f32; conv2/conv3
kernels are f16 when the matrices are f16, bf16 with bf16 matrices, and f32 otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from inference.errors import ModelError, UsageError
from inference.families.confucius4_r2t2.checkpoint import AUDIO, ModelFiles
from inference.families.confucius4_r2t2.config import AudioConfig
from inference.families.confucius4_r2t2.frontend import audio_token_count, chunk_token_count
from inference.native import (
    Backend,
    GgmlApi,
    GgmlType,
    GraphBuilder,
    GraphCache,
    StorageType,
    Tensor,
    WeightStore,
    load_weights,
)
from inference.native.quant import fitting_type

LAYER_NORM_EPS = 1e-5
HOP_SECONDS = 0.01  # one mel frame
CONV1_K = 16  # 9 taps + the bias column, padded


def sinusoid_positions(length: int, channels: int, max_timescale: float = 10000.0) -> np.ndarray:
    """(length, channels) float32: ``[sin(t*w_i), cos(t*w_i)]`` with ``w_i = exp(-i*ln(max)/(channels/2-1))``."""
    if channels % 2:
        raise ModelError(f"the audio tower's d_model ({channels}) must be even for its sinusoidal positions")
    half = channels // 2
    increment = np.log(max_timescale) / (half - 1)
    inv_timescales = np.exp(np.float32(-increment) * np.arange(half, dtype=np.float32)).astype(np.float32)
    scaled = np.arange(length, dtype=np.float32)[:, None] * inv_timescales[None, :]
    return np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1).astype(np.float32)


def post_conv_frequency(num_mel_bins: int) -> int:
    """Frequency bins after three stride-2 convolutions (128 -> 16)."""
    return (((num_mel_bins + 1) // 2 + 1) // 2 + 1) // 2


@dataclass(frozen=True)
class TowerPlan:
    """How one clip's mel becomes graph inputs."""

    chunks: int  # conv chunks (the conv's N axis)
    chunk_frames: int  # frames per chunk fed to the conv: 2*n_window, or the clip's length when shorter
    chunk_tokens: int  # post-conv tokens per chunk the graph computes
    tokens: int  # valid output tokens (audio_token_count of the clip)
    window: int  # attention window in tokens

    @property
    def graph_tokens(self) -> int:
        return self.chunks * self.chunk_tokens

    @property
    def key(self) -> tuple[int, int]:
        return self.chunks, self.chunk_frames


def plan_clip(frames: int, config: AudioConfig) -> TowerPlan:
    """Chunking, token count and window of a clip with ``frames`` valid mel frames."""
    if frames < 1:
        raise UsageError("the audio tower needs at least one mel frame", "pass a non-empty clip")
    chunk = config.chunk_frames
    tokens = audio_token_count(frames)
    if tokens > config.max_source_positions:
        seconds = config.max_source_positions / (chunk_token_count(chunk) / (chunk * HOP_SECONDS))
        raise UsageError(
            f"{frames * HOP_SECONDS:.2f} s of audio gives {tokens} audio tokens, more than the audio tower's "
            f"limit of {config.max_source_positions} (about {seconds:.1f} s)",
            "split the audio into shorter pieces: offline transcription does this with 30 s spans, "
            "streaming needs the endpointing session option",
        )
    if frames < chunk:  # the released behaviour: the conv stem sees the unpadded chunk
        per_chunk = chunk_token_count(frames)
        return TowerPlan(1, frames, per_chunk, tokens, per_chunk * config.window_chunks)
    per_chunk = chunk_token_count(chunk)
    return TowerPlan(math.ceil(frames / chunk), chunk, per_chunk, tokens, per_chunk * config.window_chunks)


def attention_mask(plan: TowerPlan) -> np.ndarray:
    """Additive (graph_tokens, graph_tokens) mask: block-diagonal windows over the valid tokens; padded rows
    attend only to themselves (they are dropped from the output)."""
    n = plan.graph_tokens
    index = np.arange(n)
    window = index // plan.window
    valid = index < plan.tokens
    allowed = (window[:, None] == window[None, :]) & valid[:, None] & valid[None, :]
    allowed |= np.eye(n, dtype=bool) & ~valid[:, None]
    return np.where(allowed, np.float32(0.0), np.float32(-np.inf)).astype(np.float32)


def chunked_mel(mel: np.ndarray, plan: TowerPlan) -> np.ndarray:
    """(chunks, 1, mels, chunk_frames) conv input from the valid frames (zero right padding)."""
    mels, frames = mel.shape
    total = plan.chunks * plan.chunk_frames
    padded = np.zeros((mels, total), dtype=np.float32)
    padded[:, :frames] = mel
    return np.ascontiguousarray(
        padded.reshape(mels, plan.chunks, plan.chunk_frames).transpose(1, 0, 2)[:, None, :, :]
    )


def conv_out_size(size: int) -> int:
    """Output length of a k3/s2/p1 convolution."""
    return (size - 1) // 2 + 1


def conv1_columns(chunks: np.ndarray) -> np.ndarray:
    """im2col of the first convolution, done on the host: (chunks, OH*OW, CONV1_K) float32.

    Column ``kh*3 + kw`` holds the tap (kh, kw) of the zero-padded stride-2 window, column 9 is 1 (it
    multiplies the bias, folded into the kernel), the rest are 0 so that rows are 16 wide, which ggml's
    matrix kernels handle much better than 9.
    """
    n, _, height, width = chunks.shape
    out_h, out_w = conv_out_size(height), conv_out_size(width)
    padded = np.pad(chunks[:, 0], ((0, 0), (1, 1), (1, 1)))
    cols = np.zeros((n, out_h, out_w, CONV1_K), dtype=np.float32)
    for kh in range(3):
        for kw in range(3):
            cols[..., kh * 3 + kw] = padded[:, kh : kh + 2 * out_h - 1 : 2, kw : kw + 2 * out_w - 1 : 2]
    cols[..., 9] = 1.0
    return cols.reshape(n, out_h * out_w, CONV1_K)


def conv1_kernel(weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """The (OC, 1, 3, 3) kernel and its bias as (OC, CONV1_K) rows matching ``conv1_columns``."""
    kernel = np.zeros((weight.shape[0], CONV1_K), dtype=np.float32)
    kernel[:, :9] = weight.reshape(weight.shape[0], 9)
    kernel[:, 9] = bias
    return kernel


def _layer(i: int) -> str:
    return f"{AUDIO}layers.{i}."


def tower_tensor_names(config: AudioConfig) -> list[str]:
    """Canonical names of the tensors the tower uses as stored (q/k/v are fused separately)."""
    names = [f"{AUDIO}conv2d{i}.{kind}" for i in (2, 3) for kind in ("weight", "bias")]
    names += [f"{AUDIO}conv_out.weight", f"{AUDIO}ln_post.weight", f"{AUDIO}ln_post.bias"]
    names += [f"{AUDIO}proj{i}.{kind}" for i in (1, 2) for kind in ("weight", "bias")]
    for i in range(config.encoder_layers):
        p = _layer(i)
        for part in ("self_attn_layer_norm", "final_layer_norm", "self_attn.out_proj", "fc1", "fc2"):
            names += [f"{p}{part}.weight", f"{p}{part}.bias"]
    return names


def _matrix_storage(api: GgmlApi, dtype: str, requested: StorageType, row_length: int) -> str:
    """Storage of one matrix: the requested type, with ``native`` bf16 promoted to f32 (see module doc). Rows
    that do not fit the requested type's blocks (the 0.6B tower's 896-wide rows and K-quants' 256-value
    blocks) take the loader's fallback (:func:`~inference.native.quant.fitting_type`: q8_0, else f32)."""
    if requested is StorageType.NATIVE:
        return "f32" if dtype == "BF16" else dtype.lower()
    return fitting_type(api, GgmlType[requested.name], row_length).name.lower()


def _conv_storage(dtype: str, requested: StorageType) -> str:
    """conv2/conv3 kernels: f16 when the matrices are f16 (asked for, or ``native`` with f16 kernels: the
    stem's products then run in f16, ggml converting the im2col columns); bf16 with bf16 matrices, on ggml's bf16
    product (on a 2-core Zen 4 the live stem took 22 against 33 ms a chunk with f32 kernels on OpenBLAS, a 20 s
    clip's 0.6B tower 814 against 1049 ms, adding ~5e-5 to what the bf16 matrices give: tests/bench/README.md, "A
    bf16 tower by default"); otherwise f32, whose stem products go to OpenBLAS where the backend has it (q8_0
    would quantize the columns as well, and 3x3 rows do not fit its blocks anyway)."""
    if requested is StorageType.F16 or (requested is StorageType.NATIVE and dtype == "F16"):
        return "f16"
    return "bf16" if requested is StorageType.BF16 else "f32"


class StemCache:
    """Conv-stem rows of the chunks a live stream's last tower call saw, keyed by each chunk's mel bytes.

    Inside the open attention window every token changes when audio arrives, but a complete 1 s chunk's stem
    rows do not: only the chunks that are new (or whose mel changed, when the log-mel floor moved) go through
    the stem again. Only the last call's chunks are kept, so it holds at most one window."""

    def __init__(self) -> None:
        self._rows: dict[bytes, np.ndarray] = {}
        self.computed_chunks = 0  # chunks run through the stem (for tests and benchmarks)

    def rows(self, chunks: np.ndarray, compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        keys = [chunk.tobytes() for chunk in chunks]
        missing = [i for i, key in enumerate(keys) if key not in self._rows]
        if missing:
            fresh = compute(np.ascontiguousarray(chunks[missing]))
            self.computed_chunks += len(missing)
            for slot, i in enumerate(missing):
                self._rows[keys[i]] = fresh[slot]
        self._rows = {key: self._rows[key] for key in keys}
        stacked = np.stack([self._rows[key] for key in keys])
        return stacked.reshape(-1, stacked.shape[-1])


class AudioTower:
    """Audio-tower weights on a backend plus a cache of graphs keyed by (chunks, chunk frames)."""

    def __init__(
        self,
        backend: Backend,
        files: ModelFiles,
        config: AudioConfig,
        storage: StorageType | str = StorageType.NATIVE,
        max_graphs: int = 16,  # a live stream cycles through body graphs of 1..8 chunks per window
    ) -> None:
        self.backend = backend
        self.config = config
        self.storage = StorageType.parse(storage)
        self.freq = post_conv_frequency(config.num_mel_bins)
        self.weights = self._load(files)
        self.graphs = GraphCache(backend, self._build, max_graphs=max_graphs)
        # Live streams need rows whose bits do not depend on batching (cache on == cache off): their graphs
        # keep every product on ggml. Without the OpenBLAS products both are the same graphs.
        self.row_invariant_graphs = (
            GraphCache(backend, self._build_row_invariant, max_graphs=max_graphs)
            if backend.gemm
            else self.graphs
        )

    # ----------------------------------------------------------------- weights
    def _load(self, files: ModelFiles) -> WeightStore:
        cfg = self.config
        names = {name: files.tensors[name].stored_name for name in tower_tensor_names(cfg)}
        overrides: dict[str, str] = {}
        for name in names:
            info = files.tensors[name]
            if len(info.shape) >= 2:
                overrides[name] = (
                    _conv_storage(info.dtype, self.storage)
                    if ".conv2d" in name
                    else _matrix_storage(self.backend.api, info.dtype, self.storage, info.shape[-1])
                )
        with files.open_weights() as checkpoint:
            arrays: dict[str, np.ndarray] = {
                "tower.positions": sinusoid_positions(chunk_token_count(cfg.chunk_frames), cfg.d_model)
            }
            overrides["tower.positions"] = "f32"
            self.conv1 = conv1_kernel(
                checkpoint.numpy(files.tensors[f"{AUDIO}conv2d1.weight"].stored_name),
                checkpoint.numpy(files.tensors[f"{AUDIO}conv2d1.bias"].stored_name),
            )
            for i in range(cfg.encoder_layers):
                p = _layer(i)
                parts = [f"{p}self_attn.{proj}_proj" for proj in "qkv"]
                stored = [files.tensors[f"{part}.weight"] for part in parts]
                arrays[f"{p}qkv.weight"] = np.concatenate(
                    [checkpoint.numpy(info.stored_name) for info in stored], axis=0
                )
                arrays[f"{p}qkv.bias"] = np.concatenate(
                    [checkpoint.numpy(files.tensors[f"{part}.bias"].stored_name) for part in parts]
                )
                overrides[f"{p}qkv.weight"] = _matrix_storage(
                    self.backend.api, stored[0].dtype, self.storage, stored[0].shape[-1]
                )
            return load_weights(self.backend, checkpoint, names=names, overrides=overrides, arrays=arrays)

    def stored_types(self) -> Mapping[str, int]:
        """Backend bytes per ggml type (for logs and tests)."""
        return self.weights.bytes_by_type()

    # ----------------------------------------------------------------- graph
    def _build(self, g: GraphBuilder, key: tuple) -> None:
        """Graph of one key: ``(chunks, frames)`` the whole tower; ``("stem", chunks, frames)`` the conv stem
        with positions, rows out; ``("body", chunks, frames)`` the layers and projector from those rows."""
        if key[0] == "stem":
            chunks, frames = key[1:]
            g.output("rows", self._stem(g, chunks, frames))
            return
        if key[0] == "body":
            chunks, frames = key[1:]
            n = chunks * chunk_token_count(frames)
            g.output("embeddings", self._body(g, g.input("rows", (n, self.config.d_model)), n))
            return
        chunks, frames = key
        n = chunks * chunk_token_count(frames)
        g.output("embeddings", self._body(g, self._stem(g, chunks, frames), n))

    def _build_row_invariant(self, g: GraphBuilder, key: tuple) -> None:
        g.keep_products_on_ggml()
        self._build(g, key)

    def _stem(self, g: GraphBuilder, chunks: int, frames: int) -> Tensor:
        """Conv stem, ``conv_out`` and positions of ``chunks`` chunks: (chunks * per_chunk, d_model) rows. Chunks
        never mix here (they are the N axis of every conv), so a chunk's rows do not depend on its neighbours."""
        cfg, w = self.config, self.weights
        per_chunk = chunk_token_count(frames)
        n = chunks * per_chunk
        hidden = cfg.downsample_hidden_size
        height, width = conv_out_size(cfg.num_mel_bins), conv_out_size(frames)
        # conv1: host-made columns x the kernel repeated per chunk, in this operand order so the result is already
        # (chunks, C, H, W) for conv2's im2col: no permuted copy of the tower's largest activation.
        cols = g.input("conv1_cols", (chunks, height * width, CONV1_K))
        kernel = g.input("conv1_kernel", (chunks, hidden, CONV1_K))
        x = g.reshape(g.gelu(g.mul_mat(cols, kernel)), (chunks, hidden, height, width))
        x = g.gelu(
            g.conv2d(x, w[f"{AUDIO}conv2d2.weight"], w[f"{AUDIO}conv2d2.bias"], stride=(2, 2), padding=(1, 1))
        )
        x = g.gelu(
            g.conv2d(
                x,
                w[f"{AUDIO}conv2d3.weight"],
                w[f"{AUDIO}conv2d3.bias"],
                stride=(2, 2),
                padding=(1, 1),
                channels_last=True,
            )
        )
        # (chunks, F, T, C) -> (chunks, T, C, F) -> rows of C*F features, index c*F + f as in the reference.
        x = g.reshape(g.permute(x, (0, 2, 3, 1)), (n, hidden * self.freq))
        x = g.linear(x, w[f"{AUDIO}conv_out.weight"])
        positions = w["tower.positions"]
        if per_chunk < positions.shape[0]:
            positions = g.slice(positions, 0, 0, per_chunk)
        return g.reshape(g.add(g.reshape(x, (chunks, per_chunk, cfg.d_model)), positions), (n, cfg.d_model))

    def _body(self, g: GraphBuilder, x: Tensor, n: int) -> Tensor:
        """Encoder layers (windowed attention through the mask), ``ln_post`` and the projector."""
        cfg, w = self.config, self.weights
        mask = g.input("mask", (n, n))
        heads, head_dim = cfg.encoder_attention_heads, cfg.head_dim
        for i in range(cfg.encoder_layers):
            p = _layer(i)
            h = g.layer_norm(
                x, w[f"{p}self_attn_layer_norm.weight"], w[f"{p}self_attn_layer_norm.bias"], LAYER_NORM_EPS
            )
            qkv = g.linear(h, w[f"{p}qkv.weight"], w[f"{p}qkv.bias"])
            q, k, v = (
                g.permute(g.reshape(t, (n, heads, head_dim)), (1, 0, 2))
                for t in g.split(qkv, -1, (cfg.d_model,) * 3)
            )
            # Fused attention (f32 K/V: f32 accuracy) returns (n, heads, head_dim): no permuted copy either.
            a = g.reshape(g.flash_attention(q, k, v, mask, scale=head_dim**-0.5), (n, cfg.d_model))
            x = g.add(x, g.linear(a, w[f"{p}self_attn.out_proj.weight"], w[f"{p}self_attn.out_proj.bias"]))
            h = g.layer_norm(
                x, w[f"{p}final_layer_norm.weight"], w[f"{p}final_layer_norm.bias"], LAYER_NORM_EPS
            )
            h = g.gelu(g.linear(h, w[f"{p}fc1.weight"], w[f"{p}fc1.bias"]))
            x = g.add(x, g.linear(h, w[f"{p}fc2.weight"], w[f"{p}fc2.bias"]))
        x = g.layer_norm(x, w[f"{AUDIO}ln_post.weight"], w[f"{AUDIO}ln_post.bias"], LAYER_NORM_EPS)
        x = g.gelu(g.linear(x, w[f"{AUDIO}proj1.weight"], w[f"{AUDIO}proj1.bias"]))
        return g.linear(x, w[f"{AUDIO}proj2.weight"], w[f"{AUDIO}proj2.bias"])

    # ----------------------------------------------------------------- running
    def encode(
        self, mel: np.ndarray, stem_cache: StemCache | None = None, *, row_invariant: bool = False
    ) -> np.ndarray:
        """Audio embeddings (tokens, output_dim) float32 for the valid mel frames of one clip (mels, frames).

        ``stem_cache`` (a live stream's): conv-stem rows of chunks whose mel was seen before are taken from it
        instead of computed again; the layers still run over everything. ``row_invariant``: bits that do not
        depend on how the clip was batched, so that the cache changes nothing. The stem then runs chunk by chunk
        through one graph (a fixed shape: its bits are the chunk's own whichever library computes its products)
        and the layers, which mix a window's rows, through graphs that keep every product on ggml.
        """
        mel = np.asarray(mel, dtype=np.float32)
        if mel.ndim != 2 or mel.shape[0] != self.config.num_mel_bins:
            raise UsageError(
                f"the audio tower expects a mel of shape ({self.config.num_mel_bins}, frames), got {mel.shape}",
                "pass the valid frames of the frontend's output",
            )
        graphs = self.row_invariant_graphs if row_invariant else self.graphs
        plan = plan_clip(mel.shape[1], self.config)
        chunks = chunked_mel(mel, plan)
        whole_clip = not row_invariant and stem_cache is None
        # A clip under one chunk runs the stem on its own (unpadded) shape: one graph, as offline.
        if whole_clip or plan.chunk_frames != self.config.chunk_frames:
            kernel = np.broadcast_to(self.conv1, (plan.chunks, *self.conv1.shape))
            out = graphs.run(
                plan.key, conv1_cols=conv1_columns(chunks), conv1_kernel=kernel, mask=attention_mask(plan)
            )["embeddings"]
            return np.ascontiguousarray(out[: plan.tokens])
        if stem_cache is not None:
            rows = stem_cache.rows(chunks, self._stem_rows)
        else:
            rows = self._stem_rows(chunks).reshape(-1, self.config.d_model)
        out = graphs.run(("body", *plan.key), rows=rows, mask=attention_mask(plan))["embeddings"]
        return np.ascontiguousarray(out[: plan.tokens])

    def _stem_rows(self, chunks: np.ndarray) -> np.ndarray:
        """(chunks, per_chunk, d_model) stem rows of full-size chunks, one chunk per run of one graph.

        Chunks never mix in the stem, so a graph per chunk count buys no speed (8 chunks: 0.18 s either way),
        while each count's graph holds its own compute buffer (19 MiB per chunk, mostly conv2's columns) and
        pays 2-3x on its first run to fault it in; a live stream re-runs the stem over 1..8 chunks whenever the
        log-mel floor moves. The fixed shape also lets its f32 products go to OpenBLAS (1.4x ggml's here) in a
        live stream, whose rows must not depend on batching."""
        frames = chunks.shape[-1]
        rows = [
            self.graphs.run(
                ("stem", 1, frames), conv1_cols=conv1_columns(chunk[None]), conv1_kernel=self.conv1[None]
            )["rows"]
            for chunk in chunks
        ]
        return np.stack(rows).reshape(len(rows), chunk_token_count(frames), self.config.d_model)

    def close(self) -> None:
        if self.row_invariant_graphs is not self.graphs:
            self.row_invariant_graphs.close()
        self.graphs.close()
        self.weights.close()

    def __enter__(self) -> AudioTower:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
