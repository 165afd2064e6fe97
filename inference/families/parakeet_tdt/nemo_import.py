"""NeMo ``.nemo`` Parakeet-TDT checkpoint → the dense folder this family loads, without torch.

A ``.nemo`` is a tar of ``model_config.yaml``, ``model_weights.ckpt`` (read by :mod:`inference.models.torch_zip`,
which runs none of its pickle) and the tokenizer files. Tensor names map as transformers'
``convert_nemo_to_hf.py`` maps them (docs/reference_parity.md §1.2); BatchNorms stay unfolded (a fused one gets
mean 0 and variance :data:`UNIT_VARIANCE`); every tensor is written as float32 (``weight_type`` picks the type
at load time). Missing sidecars come from a stock v3 folder only after its vocabulary, architecture and features
are checked against the ``.nemo`` config. The output is renamed into place only when complete.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from inference.errors import Cancelled, ModelError, UsageError
from inference.families.parakeet_tdt import nemo_config
from inference.families.parakeet_tdt.sentencepiece_model import parse_model, tokenizer_json
from inference.models import tar_members
from inference.models.errors import DiskSpaceError
from inference.models.torch_zip import open_torch_state_dict

CONFIG_MEMBER = "model_config.yaml"
WEIGHTS_MEMBER = "model_weights.ckpt"
TOKENIZER_SUFFIX = ".model"
SIDECARS = ("config.json", "tokenizer.json", "processor_config.json")
PROVENANCE_FILE = "nemo_import.json"
# Sizes past which a member is refused unread: a config is tens of KB and a tokenizer a few MB; more would only
# make the YAML and protobuf parsers build gigabytes of objects.
_MEMBER_LIMITS = {CONFIG_MEMBER: 4 << 20}
_MAX_TOKENIZER_BYTES = 16 << 20
Progress = Callable[[int, int | None, str], None]

# NeMo name → this family's (transformers') name, applied in order (docs/reference_parity.md §1.2).
_RENAMES = (
    (re.compile(r"^encoder\.pre_encode\.conv\."), "encoder.subsampling.layers."),
    (re.compile(r"^encoder\.pre_encode\.out\."), "encoder.subsampling.linear."),
    (re.compile(r"^(encoder\.layers\.\d+\.conv)\.batch_norm\."), r"\1.norm."),
    (re.compile(r"\.self_attn\.linear_q\."), ".self_attn.q_proj."),
    (re.compile(r"\.self_attn\.linear_k\."), ".self_attn.k_proj."),
    (re.compile(r"\.self_attn\.linear_v\."), ".self_attn.v_proj."),
    (re.compile(r"\.self_attn\.linear_out\."), ".self_attn.o_proj."),
    (re.compile(r"\.self_attn\.linear_pos\."), ".self_attn.relative_k_proj."),
    (re.compile(r"\.self_attn\.pos_bias_([uv])$"), r".self_attn.bias_\1"),
    (re.compile(r"^decoder\.prediction\.embed\."), "decoder.embedding."),
    (re.compile(r"^decoder\.prediction\.dec_rnn\.lstm\."), "decoder.lstm."),
    (re.compile(r"^joint\.enc\."), "encoder_projector."),
    (re.compile(r"^joint\.pred\."), "decoder.decoder_projector."),
    (re.compile(r"^joint\.joint_net\.2\."), "joint.head."),
)
# The float32 v for which v + 1e-5 (BatchNorm's eps) is nearest 1, so a fused scale passes through the engine's
# fold γ / sqrt(v + eps) with a relative error of 7e-9.
UNIT_VARIANCE = np.float32(1 - 1e-5)
_RUNNING_STATS = re.compile(r"\.conv\.norm\.running_(mean|var)$")
_DROPPED = re.compile(r"^preprocessor\.|\.num_batches_tracked$|^encoder\.pos_enc\.")


def dense_name(nemo_name: str) -> str | None:
    """This family's name for a NeMo tensor, or None for a tensor the engine does not read."""
    if _DROPPED.search(nemo_name):
        return None
    for pattern, replacement in _RENAMES:
        nemo_name = pattern.sub(replacement, nemo_name)
    return nemo_name


@dataclass(frozen=True)
class NemoImport:
    tensors: int
    sidecars: str  # "the .nemo archive" or the sidecar folder


# ------------------------------------------------------------------------------------------ archive


def extract_members(
    archive: Path,
    into: Path,
    cancel: threading.Event | None = None,
    free: tar_members.FreeBytes = tar_members.free_bytes,
) -> dict[str, Path]:
    """The config, the weights and every ``*.model`` file of the tar, by base name, into ``into`` (one pass,
    nothing else written; member paths are never used as output paths).

    Every member must be a regular file or directory at a safe relative path, each path once, and each needed
    base name once; sizes are checked against the bytes present and the free disk before anything is written
    (:mod:`inference.models.tar_members`). Refusals name the archive and the member."""
    found: dict[str, Path] = {}
    source = archive.name
    seen: set[str] = set()
    archive_bytes = archive.stat().st_size
    try:
        with tar_members.open_archive(archive, source) as (tar, compressed):
            for member in tar:
                path = tar_members.member_path(member, source)
                if path is None:
                    continue  # a directory: nothing to write
                if path in seen:
                    raise ModelError(
                        f"{source} holds the member {path[:200]!r} twice",
                        "use the archive as it was published",
                    )
                seen.add(path)
                base = PurePosixPath(path).name
                wanted = base in (CONFIG_MEMBER, WEIGHTS_MEMBER) or base.endswith(TOKENIZER_SUFFIX)
                limit = None if base == WEIGHTS_MEMBER else _MEMBER_LIMITS.get(base, _MAX_TOKENIZER_BYTES)
                tar_members.check_size(member, source, compressed, archive_bytes, limit if wanted else None)
                if not wanted:
                    continue
                if base in found:
                    raise ModelError(
                        f"{source} holds two members named {base[:200]!r}",
                        "use the archive as it was published",
                    )
                target = into / f"member-{len(found)}"
                tar_members.copy_member(tar, member, target, source, free, cancel)
                found[base] = target
    except tar_members.DAMAGE as exc:
        error = tar_members.damage_error(source, exc)
        if error is None:
            raise
        raise error from None
    for required in (CONFIG_MEMBER, WEIGHTS_MEMBER):
        if required not in found:
            raise ModelError(
                f"{source} has no {required}; it is not a NeMo model archive", "check the .nemo file"
            )
    return found


def read_yaml(path: Path, source: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise ModelError("reading a .nemo config needs the PyYAML package", "pip install pyyaml") from None
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))  # safe_load: plain data only, no object tags
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError, MemoryError) as exc:
        raise ModelError(
            f"{source} is not valid YAML: {_yaml_problem(exc)}", "copy or download the .nemo again"
        ) from None


def _yaml_problem(exc: BaseException) -> str:
    """One line for a YAML error: its problem and where (PyYAML's own text spans several lines)."""
    problem = getattr(exc, "problem", None) or type(exc).__name__
    mark = getattr(exc, "problem_mark", None)
    return (
        f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(problem)
    )


# ------------------------------------------------------------------------------------------ sidecars


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(
            f"cannot read {path}: {exc}", "use the sidecars of nvidia/parakeet-tdt-0.6b-v3"
        ) from None


def _pieces(tokenizer_text: str, count: int) -> list[str]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer_text)
    return [tok.id_to_token(i) or "" for i in range(count)]


def stock_sidecars(folder: Path, parsed: nemo_config.NemoModelConfig) -> dict[str, str]:
    """The stock sidecar files as text, after checking them against the .nemo config (a clear error names
    every difference)."""
    missing = [name for name in SIDECARS if not (folder / name).is_file()]
    if missing:
        raise ModelError(
            f"the sidecar folder {folder} lacks {', '.join(missing)}",
            "pass the folder of an installed nvidia/parakeet-tdt-0.6b-v3 (config.json, tokenizer.json, "
            "processor_config.json)",
        )
    texts = {name: (folder / name).read_text(encoding="utf-8") for name in SIDECARS}
    stock_config = _read_json(folder / "config.json")
    differences = nemo_config.config_differences(parsed.config, stock_config)
    differences += nemo_config.feature_differences(
        parsed.processor, _read_json(folder / "processor_config.json")
    )
    if parsed.labels is not None:
        pieces = _pieces(texts["tokenizer.json"], len(parsed.labels) + 1)
        if pieces[: len(parsed.labels)] != parsed.labels:
            first = next(i for i, (a, b) in enumerate(zip(pieces, parsed.labels, strict=False)) if a != b)
            differences.append(
                f"vocabulary: piece {first} is {parsed.labels[first]!r} in the .nemo, "
                f"{pieces[first]!r} in tokenizer.json"
            )
    if differences:
        raise ModelError(
            f"the sidecars in {folder} do not belong to this .nemo: " + "; ".join(differences),
            "use the tokenizer and config of the model the .nemo was fine-tuned from",
        )
    return texts


def own_sidecars(
    members: dict[str, Path], parsed: nemo_config.NemoModelConfig, source: str
) -> dict[str, str] | None:
    """config.json, tokenizer.json and processor_config.json from the archive itself, or None when it lacks
    the tokenizer, the vocabulary or the preprocessor."""
    name = parsed.tokenizer_model
    if name is None or name not in members or parsed.processor is None or parsed.labels is None:
        return None
    model = parse_model(members[name].read_bytes(), f"{source}:{name}")
    text = tokenizer_json(model, f"{source}:{name}")
    pieces = [p.text for p in model.pieces]
    if pieces != parsed.labels:
        raise ModelError(
            f"{source}: its tokenizer {name} ({len(pieces)} pieces) does not spell the config's labels "
            f"({len(parsed.labels)})",
            "copy or download the .nemo again",
        )
    return {
        "config.json": json.dumps(parsed.config, indent=2) + "\n",
        "tokenizer.json": text,
        "processor_config.json": json.dumps(parsed.processor, indent=2) + "\n",
    }


# ------------------------------------------------------------------------------------------ weights


def write_weights(
    weights: Path,
    config: dict[str, Any],
    out: Path,
    source: str,
    progress: Progress | None,
    cancel: threading.Event | None,
    fused_batch_norm: bool = False,
) -> int:
    """Map, check and write every tensor the engine reads as float32 safetensors; returns the tensor count.
    With ``fused_batch_norm`` the BatchNorm running statistics are made up (mean 0, variance ~1), not read."""
    from inference.families.parakeet_tdt.checkpoint import expected_tensors
    from inference.families.parakeet_tdt.config import parse_config

    wanted = expected_tensors(parse_config(config, None, "config.json"))
    with open_torch_state_dict(weights, f"{source}:{WEIGHTS_MEMBER}") as state:
        mapping: dict[str, str] = {}
        for nemo_name, ref in state.tensors.items():
            name = dense_name(nemo_name)
            if name is None:
                continue
            if fused_batch_norm and _RUNNING_STATS.search(name):
                raise ModelError(
                    f"{source}: {nemo_name!r} is a BatchNorm statistic, but the config says "
                    "conv_norm_type fused_batch_norm",
                    "check the .nemo's model_config.yaml",
                )
            if name not in wanted:
                raise ModelError(
                    f"{source}: tensor {nemo_name!r} ({name}) is not part of a Parakeet-TDT model this "
                    "engine runs",
                    nemo_config._FIX,
                )
            if name in mapping:
                raise ModelError(
                    f"{source}: tensors {mapping[name]!r} and {nemo_name!r} both map to {name}",
                    "check the .nemo file",
                )
            if ref.shape != wanted[name]:
                raise ModelError(
                    f"{source}: tensor {nemo_name!r} has shape {list(ref.shape)}, the config implies "
                    f"{list(wanted[name])}",
                    "the .nemo's weights and model_config.yaml do not belong together",
                )
            if ref.dtype not in ("f4", "f2", "bf16", "f8"):
                raise ModelError(
                    f"{source}: tensor {nemo_name!r} is not floating point ({ref.dtype})",
                    "check the .nemo file",
                )
            mapping[name] = nemo_name
        missing = [
            name
            for name in wanted
            if name not in mapping and not (fused_batch_norm and _RUNNING_STATS.search(name))
        ]
        if missing:
            raise ModelError(
                f"{source} lacks {len(missing)} tensor(s) the engine needs, e.g. {missing[0]!r}",
                "the .nemo is incomplete or not a Parakeet-TDT model",
            )
        made: dict[str, np.ndarray] = {}  # after the check: their shapes are only as large as stored tensors'
        if fused_batch_norm:
            for name, shape in wanted.items():
                if name.endswith(".conv.norm.running_mean"):
                    made[name] = np.zeros(shape, dtype=np.float32)
                elif name.endswith(".conv.norm.running_var"):
                    made[name] = np.full(shape, UNIT_VARIANCE, dtype=np.float32)
        names = list(wanted)
        header: dict[str, Any] = {}
        offset = 0
        for name in names:
            size = 4 * int(np.prod(wanted[name], dtype=np.int64))
            header[name] = {
                "dtype": "F32",
                "shape": list(wanted[name]),
                "data_offsets": [offset, offset + size],
            }
            offset += size
        encoded = json.dumps(header, separators=(",", ":")).encode()
        encoded += b" " * (-len(encoded) % 8)
        _require_room(out, 8 + len(encoded) + offset, source)
        with out.open("wb") as fh:
            fh.write(struct.pack("<Q", len(encoded)))
            fh.write(encoded)
            for i, name in enumerate(names):
                if cancel is not None and cancel.is_set():
                    raise Cancelled("the .nemo import was cancelled")
                label = mapping.get(name, name)
                tensor = made[name] if name in made else state.read(mapping[name]).astype("<f4", copy=False)
                if not np.isfinite(tensor).all():
                    raise ModelError(
                        f"{source}: tensor {label!r} holds NaN or infinite values", "check the .nemo file"
                    )
                fh.write(np.ascontiguousarray(tensor).tobytes())
                if progress is not None:
                    progress(i + 1, len(names), f"converting {label}")
    return len(names)


def _require_room(out: Path, size: int, source: str) -> None:
    """Refuse before writing ``size`` bytes to ``out`` when its disk has not got them (and a margin)."""
    free = tar_members.free_bytes(out.parent) - tar_members.DISK_MARGIN
    if size > free:
        raise DiskSpaceError(
            f"{source}: its weights convert to {size} bytes of float32, but the model folder's disk has only "
            f"{max(0, free)} bytes to spare",
            "free some space, or move the model folder to a larger disk with CAPTIONEER_MODELS_DIR",
        )


# ------------------------------------------------------------------------------------------ entry point


def convert_nemo(
    source: Path,
    out_dir: Path,
    *,
    sidecars: Path | None = None,
    fallback_sidecars: Callable[[], tuple[Path, str] | None] | None = None,
    provenance: dict[str, Any] | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> NemoImport:
    """Write the dense checkpoint of the ``.nemo`` at ``source`` to ``out_dir`` (which must not exist).

    ``sidecars``: a folder with a stock ``config.json``, ``tokenizer.json`` and ``processor_config.json``, used
    (after checking) instead of the archive's own tokenizer and preprocessor. Without it the archive's own are
    used when complete, else the folder ``fallback_sidecars()`` gives with a description (e.g. an installed stock v3's).
    ``provenance`` is written to ``nemo_import.json`` next to the model with the tensor count and sidecar origin.
    """
    if out_dir.exists():
        raise UsageError(f"{out_dir} already exists", "remove it or pick another folder")
    work = out_dir.with_name(f".{out_dir.name}.partial-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    (work / ".archive").mkdir(parents=True)
    try:
        if progress is not None:
            progress(0, None, f"unpacking {source.name}")
        members = extract_members(source, work / ".archive", cancel)
        config_source = f"{source.name}:{CONFIG_MEMBER}"
        parsed = nemo_config.convert_config(read_yaml(members[CONFIG_MEMBER], config_source), config_source)
        if sidecars is not None:
            texts = stock_sidecars(sidecars, parsed)
            origin = str(sidecars)
        elif (own := own_sidecars(members, parsed, source.name)) is not None:
            texts, origin = own, "the .nemo archive"
        else:
            fallback = fallback_sidecars() if fallback_sidecars is not None else None
            if fallback is None:
                raise ModelError(
                    f"{source.name} lacks a complete tokenizer or preprocessor config of its own",
                    "install the stock Parakeet-TDT 0.6B v3 (`captioneer models install parakeet_tdt`) or "
                    "pass --sidecars DIR holding its config.json, tokenizer.json and processor_config.json",
                )
            texts, origin = stock_sidecars(fallback[0], parsed), fallback[1]
        config = json.loads(texts["config.json"])
        count = write_weights(
            members[WEIGHTS_MEMBER],
            config,
            work / "model.safetensors",
            source.name,
            progress,
            cancel,
            parsed.fused_batch_norm,
        )
        for name, text in texts.items():
            (work / name).write_text(text, encoding="utf-8")
        shutil.rmtree(work / ".archive", ignore_errors=True)
        record = {**(provenance or {}), "nemo_tensors_written": count, "sidecars": origin}
        (work / PROVENANCE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        os.replace(work, out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return NemoImport(count, origin)
