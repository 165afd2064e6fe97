"""A damaged or hostile session journal never crashes the app and never costs the user the rest of their text:
each bad line is skipped with a warning, every other line still counts."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from app.live.journal import MAX_LINE_BYTES, list_sessions, read_session, sessions_dir, unfinished_sessions

HEADER = {"type": "session", "version": 1, "started": 1764589923.1, "model": "Demo", "source": "Microphone"}


def _delta(text: str, segment: int) -> dict[str, object]:
    return {"type": "delta", "segment_id": segment, "text": text, "start_s": 0.0, "end_s": 1.0, "at": 1.0}


def _journal(data_dir: Path, bad: bytes, header: dict[str, object] = HEADER) -> Path:
    folder = sessions_dir(data_dir)
    folder.mkdir(parents=True)
    path = folder / "2026-12-01T11-52-03.jsonl"
    lines = [json.dumps(header).encode(), json.dumps(_delta("hello", 0)).encode(), bad]
    lines.append(json.dumps(_delta(" world", 1)).encode())
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.parametrize(
    "bad",
    [
        b"[1, 2]",  # not an object: was an AttributeError out of list_sessions
        b'"text"',
        json.dumps(_delta("x", 0) | {"text": 5}).encode(),  # was a TypeError in the session model
        json.dumps({"type": "delta", "text": "x"}).encode(),  # no segment: was a KeyError, the session lost
        json.dumps(_delta("x", 0) | {"segment_id": True}).encode(),
        json.dumps({"type": "speech_end", "segment_id": 0, "start_s": "a", "end_s": 1}).encode(),
        json.dumps(_delta("x", 0) | {"start_s": [1]}).encode(),
        b"[" * 100_000,  # was a RecursionError
        b'{"type": "delta", "segment_id": 0, "text": "cut off by a power c',
    ],
)
def test_a_bad_line_is_skipped_and_the_other_text_kept(
    tmp_path: Path, bad: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path = _journal(tmp_path, bad)
    with caplog.at_level(logging.WARNING, "captioneer.app.journal"):
        [saved] = unfinished_sessions(tmp_path)
    assert saved.text == "hello world" and saved.model == "Demo"
    assert "skipped" in caplog.text
    _saved, model = read_session(path)
    assert [segment.text for segment in model.segments] == ["hello", " world"]


def test_a_damaged_byte_costs_one_character_not_the_session(tmp_path: Path) -> None:
    # invalid UTF-8 was a UnicodeDecodeError: the whole session was skipped
    _journal(tmp_path, json.dumps(_delta(" again", 0)).encode().replace(b"again", b"ag\xffin"))
    [saved] = list_sessions(tmp_path)
    assert saved.text == "hello ag\ufffdin world"


def test_a_line_longer_than_the_bound_is_skipped_unread(tmp_path: Path) -> None:
    long_delta = json.dumps(_delta(" " + "x" * MAX_LINE_BYTES, 0)).encode()
    [saved] = list_sessions(_journal(tmp_path, long_delta).parent.parent)
    assert saved.text == "hello world"


@pytest.mark.parametrize("started", ["yesterday", 1e300, float("nan"), True, -5])
def test_a_hostile_start_time_falls_back_to_the_file_time(tmp_path: Path, started: object) -> None:
    # "yesterday" was a ValueError that lost the session; 1e300 an OverflowError in its title
    path = _journal(tmp_path, b"", HEADER | {"started": started, "model": ["not", "a", "name"]})
    [saved] = list_sessions(tmp_path)
    assert saved.started == path.stat().st_mtime and saved.model == "?"
    assert saved.title.endswith("— ? — hello world")
