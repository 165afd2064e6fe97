"""Audio tower on ggml against the transformers 5.23 fixtures and a float64 numpy re-statement."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
import tower_numpy
from r2t2_fixtures import (
    FIXTURE_DIR,
    checkpoint_variant,
    load_audio,
    load_expected_arrays,
)

from inference.errors import UsageError
from inference.families.confucius4_r2t2.audio_tower import (
    AudioTower,
    _matrix_storage,
    attention_mask,
    plan_clip,
    sinusoid_positions,
)
from inference.families.confucius4_r2t2.checkpoint import R2T2Checkpoint, load_checkpoint
from inference.families.confucius4_r2t2.config import AudioConfig
from inference.families.confucius4_r2t2.frontend import audio_token_count, log_mel
from inference.native import Backend, StorageType, open_backend, open_checkpoint
from tests.native.openblas_spy import every_product_on_openblas

F32_TOLERANCE = 1e-4  # float32 fixtures; measured ~1.4e-6
F16_STORED_TOLERANCE = 2e-3  # the 35 s outputs are stored as float16 (half a step at |x|~2.3 is ~1e-3)
CLIPS = ("clip_tiny", "clip_short", "clip_a", "clip_b", "clip_long")
# (source checkpoint, n_window_infer): both layouts, both windows; the legacy one is bf16 on disk.
VARIANTS = [
    ("checkpoint_hf", 800),
    ("checkpoint_legacy", 400),
    ("checkpoint_hf", 400),
    ("checkpoint_legacy", 800),
]


def audio_config(**changes: int) -> AudioConfig:
    base = dict(
        num_mel_bins=128,
        encoder_layers=1,
        encoder_attention_heads=2,
        encoder_ffn_dim=8,
        d_model=8,
        n_window=50,
        n_window_infer=400,
        downsample_hidden_size=4,
        output_dim=8,
    )
    return AudioConfig(**{**base, **changes})


@pytest.fixture(scope="module")
def backend():
    with open_backend("cpu", threads=2) as opened:
        yield opened


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory, backend: Backend):
    """(checkpoint, window) -> (parsed checkpoint, tower), built once per module."""
    root = tmp_path_factory.mktemp("tower")
    made: dict[tuple[str, int], tuple[R2T2Checkpoint, AudioTower]] = {}

    def get(name: str, window: int) -> tuple[R2T2Checkpoint, AudioTower]:
        if (name, window) not in made:
            path = checkpoint_variant(FIXTURE_DIR / name, root / f"{name}-{window}", window)
            checkpoint = load_checkpoint(path)
            made[name, window] = checkpoint, AudioTower(backend, checkpoint.files, checkpoint.config.audio)
        return made[name, window]

    yield get
    for _, tower in made.values():
        tower.close()


@cache
def valid_mel(clip: str) -> np.ndarray:
    mel = log_mel(load_audio()[clip])
    return mel.values[:, : mel.valid_frames]


# ------------------------------------------------------------------------------------------ planning


def test_plan_counts_tokens_like_the_reference() -> None:
    config = audio_config()
    for frames in (50, 64, 99, 100, 101, 199, 200, 650, 3500):
        plan = plan_clip(frames, config)
        assert plan.tokens == audio_token_count(frames)
    short = plan_clip(64, config)
    assert (short.chunks, short.chunk_frames, short.chunk_tokens) == (
        1,
        64,
        8,
    )  # unpadded stem (docs/reference_parity.md §2.7)
    full = plan_clip(650, config)
    assert (full.chunks, full.chunk_frames, full.graph_tokens, full.tokens, full.window) == (
        7,
        100,
        91,
        85,
        52,
    )
    assert plan_clip(650, audio_config(n_window_infer=800)).window == 104
    assert plan_clip(640, config).key == plan_clip(601, config).key  # one graph per chunk count


def test_attention_mask_is_block_diagonal_and_hides_padding() -> None:
    plan = plan_clip(650, audio_config())  # 85 valid of 91 graph tokens, windows [0, 52) and [52, 85)
    mask = attention_mask(plan)
    allowed = mask == 0
    assert np.isneginf(mask[~allowed]).all()
    assert allowed[0, 51] and not allowed[0, 52] and allowed[52, 84] and not allowed[51, 52]
    assert not allowed[:85, 85:].any() and not allowed[85:, :85].any()
    assert (allowed[85:, 85:] == np.eye(6, dtype=bool)).all()  # padded rows see only themselves


def test_position_limit_is_reported_with_the_fix() -> None:
    config = audio_config()
    assert (
        plan_clip(11540, config).tokens == 1500
    )  # 115.40 s is the longest clip (docs/families/confucius4_r2t2.md §3)
    with pytest.raises(UsageError, match=r"limit of 1500 \(about 115\.4 s\)") as raised:
        plan_clip(11541, config)
    assert "30 s spans" in str(raised.value)


def test_sinusoid_table_is_sin_half_then_cos_half() -> None:
    table = sinusoid_positions(13, 64)
    np.testing.assert_allclose(table, tower_numpy.positions(13, 64), atol=2e-6)
    assert table[0, :32].max() == 0 and (table[0, 32:] == 1).all()


# ------------------------------------------------------------------------------------------ parity


@pytest.mark.parametrize(("name", "window"), VARIANTS)
def test_projected_embeddings_match_the_reference(variants, name: str, window: int) -> None:
    checkpoint, tower = variants(name, window)
    assert set(tower.stored_types()) == {"f32"}  # f32 as stored, bf16 promoted exactly
    expected = load_expected_arrays()
    for clip in CLIPS:
        reference = expected[f"projected/{clip}/w{window}"]
        got = tower.encode(valid_mel(clip))
        assert got.shape == reference.shape, clip
        tolerance = F16_STORED_TOLERANCE if reference.dtype == np.float16 else F32_TOLERANCE
        assert np.abs(got - reference.astype(np.float32)).max() < tolerance, clip


@pytest.mark.parametrize(("name", "window"), VARIANTS[:2])
def test_products_on_openblas_match_the_reference_too(tmp_path: Path, name: str, window: int) -> None:
    """Every f32 weight product of the tower (conv stem columns included) on OpenBLAS instead of ggml."""
    expected = load_expected_arrays()
    checkpoint = load_checkpoint(checkpoint_variant(FIXTURE_DIR / name, tmp_path / name, window))
    with open_backend("cpu", threads=2, gemm="openblas") as blas:
        shapes = every_product_on_openblas(blas)
        with AudioTower(blas, checkpoint.files, checkpoint.config.audio) as tower:
            for clip in CLIPS:
                reference = expected[f"projected/{clip}/w{window}"]
                got = tower.encode(valid_mel(clip))
                tolerance = F16_STORED_TOLERANCE if reference.dtype == np.float16 else F32_TOLERANCE
                assert np.abs(got - reference.astype(np.float32)).max() < tolerance, clip
    assert len(shapes) >= len(CLIPS) * 4  # conv stem, attention, feed-forward and projector products


def test_graphs_are_reused_per_chunk_count(variants) -> None:
    _, tower = variants("checkpoint_hf", 800)
    mel = valid_mel("clip_a")  # 6 chunks
    tower.encode(mel)
    builds = tower.graphs.builds
    first = tower.encode(mel[:, :560])
    again = tower.encode(mel[:, :560])
    assert tower.graphs.builds == builds  # 560 and 600 frames share the 6-chunk graph
    np.testing.assert_array_equal(first, again)


def _numpy_reference(checkpoint: R2T2Checkpoint, mel: np.ndarray) -> np.ndarray:
    files = checkpoint.files
    with open_checkpoint(files.weight_paths) as weights:
        return tower_numpy.tower(
            mel.astype(np.float64),
            lambda name: weights.numpy(files.tensors[name].stored_name).astype(np.float64),
            checkpoint.config.audio,
        )


def test_numpy_restatement_agrees_with_the_reference_fixture(variants) -> None:
    checkpoint, _ = variants("checkpoint_legacy", 400)
    reference = load_expected_arrays()["projected/clip_a/w400"]
    assert np.abs(_numpy_reference(checkpoint, valid_mel("clip_a")) - reference).max() < F32_TOLERANCE


@pytest.mark.parametrize("frames", [50, 99, 101, 520, 599])
def test_edge_lengths_match_the_numpy_restatement(variants, frames: int) -> None:
    """A 1-frame tail, the 52-token window boundary (520 frames), short unpadded clips."""
    checkpoint, tower = variants("checkpoint_legacy", 400)
    mel = valid_mel("clip_long")[:, :frames]
    got = tower.encode(mel)
    assert got.shape[0] == audio_token_count(frames)
    assert np.abs(got - _numpy_reference(checkpoint, mel)).max() < F32_TOLERANCE


@pytest.mark.parametrize(("storage", "bound"), [("f16", 5e-3), ("q8_0", 1e-1)])
def test_reduced_precision_storage_stays_close(backend: Backend, storage: str, bound: float) -> None:
    """Measured on clip_a: f16 ~4e-4, q8_0 ~2e-2 relative (d_model 64, so q8_0 blocks are coarse)."""
    checkpoint = load_checkpoint(FIXTURE_DIR / "checkpoint_hf")
    reference = load_expected_arrays()["projected/clip_a/w800"]
    with AudioTower(backend, checkpoint.files, checkpoint.config.audio, storage=storage) as tower:
        assert storage in tower.stored_types()
        got = tower.encode(valid_mel("clip_a"))
    assert np.linalg.norm(got - reference) / np.linalg.norm(reference) < bound


def test_bad_input_shape_is_a_usage_error(variants) -> None:
    _, tower = variants("checkpoint_hf", 800)
    with pytest.raises(UsageError, match="mel of shape"):
        tower.encode(np.zeros((80, 100), np.float32))


# Measured max |error| against the f32 reference (outputs up to |2.2|): f16 1.0e-3, q8_0 4.0e-2.
REDUCED_TOLERANCE = {"f16": 3e-3, "q8_0": 8e-2}


@pytest.mark.parametrize("storage", ["f16", "q8_0"])
def test_reduced_tower_storage_stays_close_to_the_reference(backend: Backend, storage: str) -> None:
    checkpoint = load_checkpoint(FIXTURE_DIR / "checkpoint_hf")
    with AudioTower(backend, checkpoint.files, checkpoint.config.audio, storage=storage) as tower:
        # f16 also stores the conv kernels in f16 (the stem's products run in f16); q8_0 keeps them f32.
        assert set(tower.stored_types()) == {"f32", storage}
        conv = tower.weights["thinker.audio_tower.conv2d2.weight"]
        assert conv.type.name == ("F16" if storage == "f16" else "F32")
        expected = load_expected_arrays()
        for clip in ("clip_short", "clip_a", "clip_b"):
            got = tower.encode(valid_mel(clip))
            error = np.abs(got - expected[f"projected/{clip}/w800"].astype(np.float32)).max()
            assert error < REDUCED_TOLERANCE[storage], (clip, error)
            assert error > 1e-5, (clip, error)  # the storage really changed


def test_k_quant_tower_storage_falls_back_where_rows_do_not_fit_its_blocks(backend: Backend) -> None:
    api = backend.api
    assert _matrix_storage(api, "F32", StorageType.Q6_K, 1024) == "q6_k"  # the 1.7B tower
    assert _matrix_storage(api, "F32", StorageType.Q4_K, 896) == "q8_0"  # the 0.6B tower: 896 = 28 x 32
    assert _matrix_storage(api, "F32", StorageType.Q6_K, 40) == "f32"
    assert _matrix_storage(api, "F32", StorageType.Q8_0, 40) == "f32"  # was a load error
    assert _matrix_storage(api, "BF16", StorageType.NATIVE, 1024) == "f32"
    assert _matrix_storage(api, "BF16", StorageType.F16, 40) == "f16"


def test_a_bf16_tower_runs_its_stem_on_bf16_kernels_and_row_invariant(backend: Backend) -> None:
    """bf16 matrices: the conv kernels are bf16 too, on ggml's bf16 product (faster than f32 kernels on OpenBLAS
    where the CPU has AVX512-BF16), and a live stream's stem rows still never depend on batching."""
    from inference.families.confucius4_r2t2.audio_tower import StemCache

    checkpoint = load_checkpoint(FIXTURE_DIR / "checkpoint_hf")
    name = "thinker.audio_tower.conv2d2.weight"
    expected = load_expected_arrays()["projected/clip_a/w800"].astype(np.float32)
    mel = valid_mel("clip_a")
    with AudioTower(backend, checkpoint.files, checkpoint.config.audio, storage="bf16") as tower:
        assert tower.weights[name].type.name == "BF16"
        got = tower.encode(mel, row_invariant=True)
        # measured 3.5e-3 (the f32 stem 3.4e-3, a q8_0 tower 1.9e-2)
        assert np.linalg.norm(got - expected) / np.linalg.norm(expected) < 1e-2
        cache = StemCache()
        for frames in (150, 237, 300, mel.shape[1]):  # a growing clip: stem rows reused, same bits
            part = mel[:, :frames]
            assert np.array_equal(
                tower.encode(part, cache, row_invariant=True), tower.encode(part, row_invariant=True)
            )
        assert cache.computed_chunks < sum(-(-f // 100) for f in (150, 237, 300, mel.shape[1]))


def test_a_live_stem_runs_any_number_of_new_chunks_through_one_graph(variants) -> None:
    """A moved log-mel floor sends a whole window through the stem again; one chunk's graph serves every
    count (a graph per count would hold 19 MiB of compute memory per chunk and fault it in on its first run)."""
    from inference.families.confucius4_r2t2.audio_tower import StemCache

    _, tower = variants("checkpoint_hf", 800)
    mel = valid_mel("clip_a")  # 6 chunks
    for chunks in (1, 3, 6):
        part = mel[:, : chunks * 100]
        cache = StemCache()  # nothing cached: every chunk goes through the stem
        assert np.array_equal(
            tower.encode(part, cache, row_invariant=True), tower.encode(part, row_invariant=True)
        )
        assert cache.computed_chunks == chunks
    stems = [key for key in (*tower.graphs.keys(), *tower.row_invariant_graphs.keys()) if key[0] == "stem"]
    assert stems == [("stem", 1, 100)]
