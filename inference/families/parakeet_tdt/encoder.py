"""FastConformer encoder of Parakeet-TDT as one ggml graph per shape bucket.

Follows transformers 5.23 ``ParakeetEncoder`` (docs/reference_parity.md §1.4) exactly, layer by layer as
docs/families/parakeet_tdt.md §4 lists: after *every* subsampling Conv2d the steps past the valid length are zeroed
(HF masks between convs; NeMo does not), and ``scale_input`` follows the config (a project decision). Padded frames
of a bucket are masked as the reference masks its own padding, so valid frames do not depend on the bucket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from inference.errors import ModelError, UsageError
from inference.families.parakeet_tdt.config import EncoderConfig
from inference.native import (
    Backend,
    GgmlType,
    GraphBudgetError,
    GraphBuilder,
    GraphCache,
    StorageType,
    Tensor,
    WeightStore,
    load_weights,
)
from inference.native.quant import fitting_type

FEATURE_BUCKET = 64  # feature frames per bucket step (8 encoder frames)
MEL_BINS_PER_STRIDE = 2


class TensorSource(Protocol):
    """What the encoder needs from a checkpoint: HF tensor names → shapes / f32 numpy."""

    def shape(self, name: str) -> tuple[int, ...]: ...

    def numpy(self, name: str) -> np.ndarray: ...


def conv_out_length(length: int) -> int:
    """One stride-2, kernel-3, padding-1 conv: floor((L + 2 - 3) / 2 + 1)."""
    return (length - 1) // 2 + 1


def subsampled_length(length: int, stages: int = 3) -> int:
    for _ in range(stages):
        length = conv_out_length(length)
    return length


def relative_positions(frames: int, hidden: int) -> np.ndarray:
    """(2T-1, hidden) table for positions T-1 … -(T-1), interleaved [sin, cos, sin, cos, …]."""
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, hidden, 2, dtype=np.float32) / np.float32(hidden)))
    positions = np.arange(frames - 1, -frames, -1, dtype=np.float32)
    freqs = positions[:, None] * inv_freq[None, :].astype(np.float32)
    table = np.empty((positions.size, hidden), dtype=np.float32)
    table[:, 0::2] = np.sin(freqs)
    table[:, 1::2] = np.cos(freqs)
    return table


def _prepared_arrays(src: TensorSource, hp: EncoderConfig) -> dict[str, np.ndarray]:
    """The only weights used in a different form than stored: the subsampling's depthwise kernels laid out
    channels-last and eval BatchNorm folded into the depthwise conv (small). Everything large is used in place,
    so f32 checkpoints stay memory-mapped."""
    arrays: dict[str, np.ndarray] = {}
    for idx in (2, 5):  # depthwise 2-D kernels (C, 1, KH, KW) -> (KH, KW, 1, C) for the channels-last conv
        kernel = src.numpy(f"encoder.subsampling.layers.{idx}.weight")
        arrays[f"sub.{idx}.weight"] = np.ascontiguousarray(kernel.transpose(2, 3, 1, 0), dtype=np.float32)
    for i in range(hp.num_hidden_layers):
        p = f"encoder.layers.{i}."
        q = f"L{i}."
        # Folded in float64 and rounded once; the reference applies conv then BatchNorm in f32.
        gamma = src.numpy(p + "conv.norm.weight").astype(np.float64)
        beta = src.numpy(p + "conv.norm.bias").astype(np.float64)
        mean = src.numpy(p + "conv.norm.running_mean").astype(np.float64)
        var = src.numpy(p + "conv.norm.running_var").astype(np.float64)
        s = gamma / np.sqrt(var + 1e-5)
        depthwise = src.numpy(p + "conv.depthwise_conv.weight").astype(np.float64)  # (C, 1, K)
        arrays[q + "conv.depthwise.weight"] = (depthwise[:, 0, :] * s[:, None]).astype(np.float32)
        dw_bias = src.numpy(p + "conv.depthwise_conv.bias").astype(np.float64) if hp.convolution_bias else 0.0
        arrays[q + "conv.depthwise.bias"] = ((dw_bias - mean) * s + beta).astype(np.float32)
    return arrays


def _direct_names(hp: EncoderConfig) -> dict[str, str]:
    """Weights used as stored: store name → checkpoint name."""
    names = {
        "sub.linear.weight": "encoder.subsampling.linear.weight",
        "sub.linear.bias": "encoder.subsampling.linear.bias",
    }
    for idx in (0, 2, 3, 5, 6):
        if idx not in (2, 5):  # the depthwise kernels are re-laid out (_prepared_arrays)
            names[f"sub.{idx}.weight"] = f"encoder.subsampling.layers.{idx}.weight"
        names[f"sub.{idx}.bias"] = f"encoder.subsampling.layers.{idx}.bias"
    for i in range(hp.num_hidden_layers):
        p = f"encoder.layers.{i}."
        q = f"L{i}."
        for norm in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"):
            names[q + f"{norm}.weight"] = p + f"{norm}.weight"
            names[q + f"{norm}.bias"] = p + f"{norm}.bias"
        for ff in ("feed_forward1", "feed_forward2"):
            for lin in ("linear1", "linear2"):
                names[q + f"{ff}.{lin}.weight"] = p + f"{ff}.{lin}.weight"
                if hp.attention_bias:
                    names[q + f"{ff}.{lin}.bias"] = p + f"{ff}.{lin}.bias"
        for proj in ("q", "k", "v", "o"):
            names[q + f"{proj}_proj.weight"] = p + f"self_attn.{proj}_proj.weight"
            if hp.attention_bias:
                names[q + f"{proj}_proj.bias"] = p + f"self_attn.{proj}_proj.bias"
        names[q + "bias_u"] = p + "self_attn.bias_u"
        names[q + "bias_v"] = p + "self_attn.bias_v"
        names[q + "relative_k_proj.weight"] = p + "self_attn.relative_k_proj.weight"
        for pw in ("pointwise_conv1", "pointwise_conv2"):
            names[q + f"conv.{pw}.weight"] = p + f"conv.{pw}.weight"
            if hp.convolution_bias:
                names[q + f"conv.{pw}.bias"] = p + f"conv.{pw}.bias"
    return names


@dataclass(frozen=True)
class EncoderOutput:
    hidden: np.ndarray  # (valid_frames, hidden) float32
    valid_frames: int


class ParakeetEncoder:
    """Owns the encoder weights on a backend and a cache of graphs per frame bucket."""

    def __init__(
        self,
        backend: Backend,
        checkpoint: Any,
        source: TensorSource,
        config: EncoderConfig,
        weight_type: str = "native",
        conv_weight_type: str = "native",
        max_graphs: int = 3,
        graph_arena_mb: int | None = None,
    ) -> None:
        """``graph_arena_mb``: the ``encoder_graph_arena_mb`` option, the compute memory all cached
        graphs may hold together (None: unbounded)."""
        self.backend = backend
        self.hp = config
        matmul_storage = StorageType.parse(weight_type)
        conv_storage = StorageType.parse(conv_weight_type)
        direct = _direct_names(config)
        missing = [n for n in direct.values() if n not in checkpoint]
        if missing:
            raise ModelError(
                f"checkpoint lacks encoder tensor {missing[0]!r}", "use an unmodified checkpoint"
            )
        arrays = _prepared_arrays(source, config)
        if conv_storage.needs_matrices:
            # Block-quantised and int8 types need matrices (rows of whole blocks along ne0; per-row scales), but a
            # Conv1d kernel is stored (C_out, C_in, 1): give the pointwise kernels to the loader as (C_out, C_in).
            for name in [n for n in direct if ".conv.pointwise" in n and n.endswith(".weight")]:
                kernel = source.numpy(direct.pop(name))
                arrays[name] = kernel.reshape(kernel.shape[:2])
        overrides: dict[str, Any] = {}
        for name in (*direct, *arrays):
            if name.startswith("sub.") and name.endswith(".weight") and not name.startswith("sub.linear"):
                # Depthwise 2-D convs run on ggml_conv_2d_dw_direct, which needs f32 kernels; the others go
                # through im2col, which takes f32/f16 kernels only.
                # (bf16 kernels included: a bf16 conv_weight_type applies to the pointwise kernels only.)
                im2col_ok = conv_storage in (StorageType.NATIVE, StorageType.F32, StorageType.F16)
                dense = conv_storage.value if im2col_ok else "f32"
                overrides[name] = "f32" if name in ("sub.2.weight", "sub.5.weight") else dense
            elif ".conv.pointwise" in name and name.endswith(".weight"):
                # As the loader treats ``weight_type``: rows that do not fill whole blocks take q8_0 or f32.
                overrides[name] = (
                    fitting_type(
                        backend.api, GgmlType[conv_storage.name], arrays[name].shape[-1]
                    ).name.lower()
                    if conv_storage.is_quantized
                    else conv_storage.value
                )
            elif name.endswith("conv.depthwise.weight"):
                overrides[name] = "f32"  # the exact f32 depthwise path needs f32 taps
            elif (name.endswith(".weight") and "norm" in name) or name.endswith(("bias_u", "bias_v")):
                overrides[name] = "f32"  # added to f32 activations: ggml_add needs f32 on both sides
        # 1x1 conv kernels are linear weights: stored as (C_out, C_in) matrices, the same bytes, so that f32 ones
        # can be packed like the others.
        pointwise = [name for name in direct if name.endswith(".weight") and _is_pointwise(name)]
        linear = [name for name in direct if _is_linear_weight(name)]
        # Matrix weights follow ``weight_type``; the loader keeps vectors (norms, biases) in f32. f32 matrices are
        # packed once where the backend does (native/packed_f32.py): every product of this encoder is row-wise.
        self.weights: WeightStore = load_weights(
            backend,
            checkpoint,
            names=direct,
            storage=matmul_storage,
            overrides=overrides,
            arrays=arrays,
            pack_f32=linear,
            as_matrices=pointwise,
        )
        self.position_table_frames, self._position_tables = self._project_positions(backend)
        self.graph_arena_mb = graph_arena_mb
        arena_bytes = None if graph_arena_mb is None else graph_arena_mb * 2**20
        self._graphs = GraphCache(backend, self._build, max_graphs=max_graphs, max_buffer_bytes=arena_bytes)

    @property
    def graph_builds(self) -> int:
        return self._graphs.builds

    @property
    def graph_buffer_bytes(self) -> int:
        """Compute memory the cached graphs hold (bounded by ``graph_arena_mb``)."""
        return self._graphs.buffer_bytes

    def close(self) -> None:
        self._graphs.close()
        if self._position_tables is not None:
            self._position_tables.close()
        self.weights.close()

    def _project_positions(self, backend: Backend) -> tuple[int, WeightStore | None]:
        """Every layer's relative-position keys ``relative_positions(T) @ W.T`` for the longest table kept, once.

        They depend on the frame count only, and the table of T frames is the middle of any longer one
        (positions T-1 … -(T-1)), so one table per layer serves every bucket up to ``POSITION_TABLE_FRAMES``
        frames as a view: each call saves (2T-1)·hidden² multiply-adds per layer (~8 % of a 10 s encode) and
        the stream of the weight. Kept per head, (heads, rows, head_dim), as the attention reads it, with zero
        rows after the last position for the padded rows ``position_rows`` adds. f32 weights only: the table is
        f32 (24 x 1.5 k x 1024 floats, 75 MB for 0.6B), which reduced types would not want to carry.
        """
        hp, w = self.hp, self.weights
        names = [f"L{i}.relative_k_proj.weight" for i in range(hp.num_hidden_layers)]
        if any(w[name].type != GgmlType.F32 for name in names):
            return 0, None
        frames = min(POSITION_TABLE_FRAMES, hp.max_position_embeddings)
        if frames <= 0:
            return 0, None
        positions = relative_positions(frames, hp.hidden_size)
        rows = 2 * frames - 1 + POSITION_PAD_ROWS
        heads, hd = hp.num_attention_heads, hp.head_dim
        tables = {}
        for i, name in enumerate(names):
            keys = np.zeros((rows, hp.hidden_size), np.float32)
            np.matmul(positions, w.numpy(name).T, out=keys[: positions.shape[0]])
            tables[f"L{i}.position_keys"] = np.ascontiguousarray(
                keys.reshape(rows, heads, hd).transpose(1, 0, 2)
            )
        return frames, load_weights(backend, arrays=tables, storage="f32")

    def __enter__(self) -> ParakeetEncoder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------
    def full_context_samples(self, hop_length: int = 160) -> int:
        """The longest clip (16 kHz samples) one full-context encode can hold within the position table."""
        buckets = 1
        while subsampled_length((buckets + 1) * FEATURE_BUCKET) <= self.hp.max_position_embeddings:
            buckets += 1
        return buckets * FEATURE_BUCKET * hop_length - hop_length  # the STFT adds a frame

    def encode(self, features: np.ndarray, valid_feature_frames: int) -> EncoderOutput:
        """features: (frames, mel) from the frontend (padded frames already zero)."""
        frames, mels = features.shape
        if mels != self.hp.num_mel_bins:
            raise UsageError(f"encoder expects {self.hp.num_mel_bins} mel bins, got {mels}")
        valid_out = subsampled_length(valid_feature_frames)
        if valid_feature_frames <= 0 or valid_out <= 0:
            return EncoderOutput(np.zeros((0, self.hp.hidden_size), np.float32), 0)
        bucket = -(-frames // FEATURE_BUCKET) * FEATURE_BUCKET
        t_enc = subsampled_length(bucket)
        if t_enc > self.hp.max_position_embeddings:
            raise UsageError(
                f"{frames * 0.01:.0f} s of audio exceeds the encoder's {self.hp.max_position_embeddings} positions "
                f"(about {self.hp.max_position_embeddings * 0.08:.0f} s) in full-context mode",
                "leave audio_chunk_mode at auto (longer clips then use long-form windows), or set it to fixed or vad",
            )
        padded = np.zeros((1, 1, bucket, mels), np.float32)
        padded[0, 0, :frames] = features
        inputs = {"features": padded}
        if t_enc > self.position_table_frames:  # else the graph reads the precomputed keys
            positions = np.zeros((position_rows(t_enc), self.hp.hidden_size), np.float32)
            positions[: 2 * t_enc - 1] = relative_positions(t_enc, self.hp.hidden_size)
            inputs["pos"] = positions
        length = valid_feature_frames
        for stage in (1, 2, 3):
            length = conv_out_length(length)
            size = subsampled_length(bucket, stage)
            valid = (np.arange(size) < length).astype(np.float32).reshape(size, 1)
            channels_last = np.repeat(valid[:, :, None], self.hp.subsampling_conv_channels, axis=2)
            if stage == 3:
                inputs["mask3"], inputs["mask3c"] = valid, channels_last  # the layers mask (T, 1) rows
            else:
                inputs[f"mask{stage}"] = channels_last
        key_mask = np.where(np.arange(t_enc) < valid_out, 0.0, -np.inf).astype(np.float32)
        inputs["attn_mask"] = np.broadcast_to(key_mask, (t_enc, t_enc)).copy()
        try:
            graph = self._graphs.get(bucket)
        except GraphBudgetError as exc:
            raise UsageError(
                f"encoding {frames * 0.01:.1f} s of audio at once needs {exc.needed_bytes / 2**20:.0f} MiB of compute "
                f"memory, more than encoder_graph_arena_mb={self.graph_arena_mb}",
                "raise --session-option encoder_graph_arena_mb, or use offline_mode=long_form (shorter windows)",
            ) from exc
        out = graph.run(inputs)["hidden"]
        return EncoderOutput(out[:valid_out], valid_out)

    # ------------------------------------------------------------------------------------------
    def _build(self, g: GraphBuilder, bucket: int) -> None:
        hp, w = self.hp, self.weights
        t1, t2, t3 = (subsampled_length(bucket, s) for s in (1, 2, 3))
        x = g.input("features", (1, 1, bucket, hp.num_mel_bins))
        channels = hp.subsampling_conv_channels
        m1, m2 = g.input("mask1", (t1, 1, channels)), g.input("mask2", (t2, 1, channels))
        m3c, m3 = g.input("mask3c", (t3, 1, channels)), g.input("mask3", (t3, 1))
        pos = g.input("pos", (position_rows(t3), hp.hidden_size)) if t3 > self.position_table_frames else None
        attn_mask = g.input("attn_mask", (t3, t3))

        # Subsampling channels-last, (1, T, F, C): the convs need no layout copies and the 1x1 convs are
        # plain products; the masks come pre-broadcast over C so that ggml multiplies whole rows.
        h = g.conv2d(x, w["sub.0.weight"], w["sub.0.bias"], stride=(2, 2), padding=(1, 1), channels_last=True)
        h = g.relu(g.mul(h, m1))
        for dw, pw, mask in ((2, 3, m2), (5, 6, m3c)):
            h = g.mul(g.depthwise_conv2d(h, w[f"sub.{dw}.weight"], w[f"sub.{dw}.bias"], (2, 2), (1, 1)), mask)
            h = g.relu(g.mul(g.linear(h, self._pointwise(g, f"sub.{pw}.weight"), w[f"sub.{pw}.bias"]), mask))
        freq, channels = h.shape[2], h.shape[3]
        h = g.reshape(
            g.cont(g.permute(h, (0, 1, 3, 2))), (t3, channels * freq)
        )  # index c·F + f, as HF flattens
        x = g.linear(h, w["sub.linear.weight"], w["sub.linear.bias"])
        if hp.scale_input:  # HF: hidden_states * sqrt(hidden) after the subsampling linear
            x = g.scale(x, math.sqrt(hp.hidden_size))

        for i in range(hp.num_hidden_layers):
            x = self._layer(g, x, f"L{i}.", pos, attn_mask, m3, t3)
        g.output("hidden", x)

    def _opt(self, name: str) -> Tensor | None:
        return self.weights[name] if name in self.weights else None  # noqa: SIM401 (WeightStore has no get)

    def _pointwise(self, g: GraphBuilder, name: str) -> Tensor:
        """A 1x1 conv kernel, (C_out, C_in, 1) or (C_out, C_in, 1, 1), seen as a (C_out, C_in) linear weight (a
        view, no copy); kernels already loaded as matrices (quantised ones) are used as they are."""
        weight = self.weights[name]
        return weight if len(weight.shape) == 2 else g.reshape(weight, weight.shape[:2])

    def _feed_forward(self, g: GraphBuilder, x: Tensor, p: str) -> Tensor:
        w = self.weights
        layer, module = p[: -len("feed_forward1.")], p[-len("feed_forward1.") : -1]
        h = g.layer_norm(x, w[f"{layer}norm_{module}.weight"], w[f"{layer}norm_{module}.bias"])
        h = g.silu(g.linear(h, w[p + "linear1.weight"], self._opt(p + "linear1.bias")))
        return g.scale(g.linear(h, w[p + "linear2.weight"], self._opt(p + "linear2.bias")), 0.5)

    def _layer(
        self, g: GraphBuilder, x: Tensor, p: str, pos: Tensor | None, attn_mask: Tensor, mask: Tensor, t: int
    ) -> Tensor:
        hp, w = self.hp, self.weights
        heads, hd = hp.num_attention_heads, hp.head_dim
        x = g.add(x, self._feed_forward(g, x, p + "feed_forward1."))

        # --- relative-position multi-head self-attention
        h = g.layer_norm(x, w[p + "norm_self_att.weight"], w[p + "norm_self_att.bias"])
        q, k, v = (
            g.permute(
                g.reshape(
                    g.linear(h, w[p + f"{n}_proj.weight"], self._opt(p + f"{n}_proj.bias")), (t, heads, hd)
                ),
                (1, 0, 2),
            )
            for n in "qkv"
        )  # each (heads, T, hd)
        q_u = g.add(q, g.reshape(w[p + "bias_u"], (heads, 1, hd)))
        q_v = g.add(q, g.reshape(w[p + "bias_v"], (heads, 1, hd)))
        rows = position_rows(t)
        if t <= self.position_table_frames:  # the middle of the precomputed keys (_project_positions), a view
            assert self._position_tables is not None
            start = self.position_table_frames - t
            rel = g.slice(self._position_tables[p + "position_keys"], 1, start, start + rows)
        else:
            assert pos is not None
            rel = g.linear(pos, w[p + "relative_k_proj.weight"])  # (2T-1, hidden)
            # Contiguous per head: as strided views (rows 4 KiB apart) both products ran at under half speed.
            rel = g.cont(g.permute(g.reshape(rel, (rows, heads, hd)), (1, 0, 2)))  # (heads, rows >= 2T-1, hd)
        content = g.mul_mat(g.cont(k), q_u)  # (heads, T, T)
        position_raw = g.mul_mat(rel, q_v)  # (heads, T, rows), contiguous
        scores = g.add(content, _relative_shift(g, position_raw, t, heads, rows))
        probs = g.softmax(scores, attn_mask, hd**-0.5)
        ctx = g.mul_mat(g.cont(g.transpose(v)), probs)  # (heads, T, hd)
        ctx = g.reshape(g.cont(g.permute(ctx, (1, 0, 2))), (t, hp.hidden_size))
        x = g.add(x, g.linear(ctx, w[p + "o_proj.weight"], self._opt(p + "o_proj.bias")))

        # --- convolution module
        h = g.layer_norm(x, w[p + "norm_conv.weight"], w[p + "norm_conv.bias"])
        h = g.linear(
            h,
            self._pointwise(g, p + "conv.pointwise_conv1.weight"),
            self._opt(p + "conv.pointwise_conv1.bias"),
        )
        h = g.mul(g.glu(h, axis=-1), mask)  # padded time steps are zeroed before the depthwise conv
        h = g.depthwise_conv1d(
            g.cont(g.transpose(h)),
            w[p + "conv.depthwise.weight"],
            w[p + "conv.depthwise.bias"],
            padding=(hp.conv_kernel_size - 1) // 2,
            time_major_out=True,
        )  # (T, C)
        h = g.silu(h)
        h = g.linear(
            h,
            self._pointwise(g, p + "conv.pointwise_conv2.weight"),
            self._opt(p + "conv.pointwise_conv2.bias"),
        )
        x = g.add(x, h)

        x = g.add(x, self._feed_forward(g, x, p + "feed_forward2."))
        return g.layer_norm(x, w[p + "norm_out.weight"], w[p + "norm_out.bias"])


def _is_linear_weight(name: str) -> bool:
    """Whether a store name is a weight only ever multiplied (nn.Linear weights and 1x1 conv kernels)."""
    return name.endswith(".weight") and ("_proj." in name or ".linear" in name or _is_pointwise(name))


def _is_pointwise(name: str) -> bool:
    """Whether a store name is a 1x1 conv kernel (subsampling layers 3 and 6, the conv module's two)."""
    return ".conv.pointwise" in name or name in ("sub.3.weight", "sub.6.weight")


# Buckets up to this many encoder frames (30 s) read their relative-position keys from a table made at load.
POSITION_TABLE_FRAMES = 376
# position_rows pads 2T-1 to a multiple of 8: at most 7 rows past the last position (zeros in the table).
POSITION_PAD_ROWS = 8


def position_rows(t: int) -> int:
    """Rows of the relative-position table for T frames: the 2T-1 positions, zero-padded to a multiple of 8.
    ggml's f32 GEMM runs the (heads, T, rows) position product at half speed when ``rows`` is odd (measured
    49 vs 101 GFLOP/s for 1503 vs 1504 rows, T 752, one thread); the padding rows are never read."""
    return -(-(2 * t - 1) // 8) * 8


def _relative_shift(g: GraphBuilder, raw: Tensor, t: int, heads: int, rows: int) -> Tensor:
    """Transformer-XL shift: out[h, i, j] = raw[h, i, (T-1) - i + j], as a strided view (no copy).

    In raw's contiguous (heads, T, rows) storage that element sits at (T-1) + i·(rows-1) + j, so the
    view starts at offset T-1 with a row stride of rows-1 elements (rows >= 2T-1: padding is never read).
    """
    return g.as_strided(raw, (heads, t, t), strides=(t * rows, rows - 1, 1), offset=t - 1)
