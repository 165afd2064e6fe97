"""One fuzz campaign per reader: target, input name, valid tiny input, mutators, judge and limits. The test runs a
fixed slice of each (seed and count there); ``tests/bench/fuzz_readers.py`` runs the long version."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz import audio_corpus, harness, reader_corpus
from tests.fuzz.reader_common import SIDECARS_ENV

LIMITS = harness.Limits(
    memory_bytes=768 << 20,
    rss_bytes=256 << 20,  # every input here is a few KB to a MB: a reader that needs more was tricked
    file_bytes=64 << 20,
    disk_left_bytes=1 << 20,
    cpu_seconds=120,
    seconds=120.0,
)


@dataclass(frozen=True)
class Campaign:
    name: str
    target: str
    input_name: str
    original: bytes
    mutators: tuple[harness.Mutator, ...]
    judge: reader_corpus.Judge


def _with_header(header: int, extra: tuple[harness.Mutator, ...] = ()) -> tuple[harness.Mutator, ...]:
    """The generic mutators on the whole file and on its first ``header`` bytes only (where the counts live)."""
    return (*harness.GENERIC, *(reader_corpus.prefix_only(m, header) for m in harness.GENERIC), *extra)


def gguf_campaign() -> Campaign:
    data = reader_corpus.gguf_file()
    mutators = _with_header(reader_corpus.gguf_header_length(data))
    return Campaign(
        "gguf",
        "tests.fuzz.reader_targets:read_gguf",
        "package.gguf",
        data,
        mutators,
        reader_corpus.gguf_judge,
    )


def _json_header_campaign(name: str, target: str, input_name: str, data: bytes) -> Campaign:
    """A format of an 8-byte header length and a JSON header (safetensors, the Phonon container)."""
    header = 8 + int.from_bytes(data[:8], "little")
    extra = (reader_corpus.prefix_only(reader_corpus.json_value, header),)
    judge = (
        reader_corpus.safetensors_judge
        if name == "safetensors"
        else reader_corpus.named_in_refusal(input_name)
    )
    return Campaign(name, target, input_name, data, _with_header(header, extra), judge)


def safetensors_campaign() -> Campaign:
    return _json_header_campaign(
        "safetensors",
        "tests.fuzz.reader_targets:read_safetensors",
        "model.safetensors",
        reader_corpus.safetensors_file(),
    )


def container_campaign() -> Campaign:
    return _json_header_campaign(
        "phonon-container",
        "tests.fuzz.reader_targets:read_container_file",
        "model.fermion",
        reader_corpus.container_file(),
    )


def archive_campaign(target: str, folder: Path) -> Campaign:
    archive = reader_corpus.phonon_archive(folder)
    os.environ[SIDECARS_ENV] = str(archive.sidecars)  # the zygote (spawned after this) inherits it
    return Campaign(
        target.rsplit(":", 1)[1],
        target,
        "phonon-2.bps.tar.zst",
        archive.data,
        reader_corpus.ARCHIVE_MUTATORS,
        reader_corpus.named_in_refusal("phonon-2.bps.tar.zst", leave_nothing=True),
    )


def journal_campaign() -> Campaign:
    data = reader_corpus.journal_file()
    text = "hello there how are you fine thanks"
    return Campaign(
        "journal",
        "tests.fuzz.reader_targets:read_journal",
        "2026-12-01T11-52-03.jsonl",
        data,
        reader_corpus.JOURNAL_MUTATORS,
        reader_corpus.journal_judge(text),
    )


def settings_campaign() -> Campaign:
    return Campaign(
        "settings",
        "tests.fuzz.reader_targets:load_settings",
        "settings.json",
        reader_corpus.settings_file(),
        (*harness.GENERIC, reader_corpus.json_value),
        reader_corpus.settings_judge,
    )


AUDIO_MAX_SECONDS = 600  # tests/fuzz/audio_targets.LIMITS


def audio_campaign(kind: str) -> Campaign:
    """An upload of one audio format, read as the server reads it (tests/fuzz/audio_targets.py)."""
    files = audio_corpus.ffmpeg_corpus() if kind in audio_corpus.FFMPEG_KINDS else audio_corpus.corpus()
    original = files[kind]
    mutators = _with_header(original.header)
    if kind.startswith("ogg"):
        mutators = (*mutators, *(audio_corpus.with_ogg_checksums(m) for m in harness.GENERIC[:2]))
    input_name = f"upload-{kind}.audio"  # by content, not by name: the extension says nothing
    return Campaign(
        f"audio-{kind}",
        "tests.fuzz.audio_targets:read_upload",
        input_name,
        original.data,
        mutators,
        audio_corpus.judge(input_name, original, AUDIO_MAX_SECONDS * 16000),
    )


CAMPAIGNS: dict[str, Callable[[Path], Campaign]] = {
    "gguf": lambda _folder: gguf_campaign(),
    "safetensors": lambda _folder: safetensors_campaign(),
    "phonon-container": lambda _folder: container_campaign(),
    "extract_phonon_archive": lambda folder: archive_campaign(
        "tests.fuzz.reader_targets:extract_phonon_archive", folder
    ),
    "import_phonon_archive": lambda folder: archive_campaign(
        "tests.fuzz.reader_targets:import_phonon_archive", folder
    ),
    "journal": lambda _folder: journal_campaign(),
    "settings": lambda _folder: settings_campaign(),
    **{
        f"audio-{kind}": (lambda _folder, kind=kind: audio_campaign(kind))
        for kind in (*audio_corpus.KINDS, *audio_corpus.FFMPEG_KINDS)
    },
}


@contextmanager
def campaign(name: str) -> Iterator[Campaign]:
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{name}-") as folder:
        yield CAMPAIGNS[name](Path(folder))


def run(spec: Campaign, seed: int, count: int, start: int = 0) -> harness.Report:
    with harness.Fuzzer(spec.target, spec.input_name, LIMITS) as fuzzer:
        return fuzzer.run(harness.cases(seed, count, spec.original, spec.mutators, start), spec.judge)
