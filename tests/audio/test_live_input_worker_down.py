"""`captioneer transcribe --input ID --mode streaming` stopped by `kill PID` (SIGTERM) while its worker is down
(past the restart limit, before a revival): the final transcript is what was heard, the audio played meanwhile a
gap marker, a note on stderr names what happened, and the exit code is 3 (docs/cli.md §6, §7)."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from inference.cli import EXIT_HEARD_ONLY
from tests.live_cli import LiveCli, words
from tests.sound_server import SPEAKERS, SoundServer, speech_wav
from tests.worker.test_cli_ending_while_down import kill_workers_past_the_limit

EMMA = "Emma quickly closed the early bottle and sang."
HEARTS = "There are twenty hearts in the garden."
GAP = re.compile(r"\[… ([0-9.]+)–([0-9.]+) s not transcribed …\]")


@pytest.fixture
def cli(sound_server: SoundServer) -> Iterator[LiveCli]:
    started = LiveCli(
        ["transcribe", "--input", "system", "--mode", "streaming", "--format", "jsonl"], sound_server.env
    )
    yield started
    started.kill()


def test_kill_while_the_worker_is_down_ends_with_what_was_heard_and_exit_code_3(
    sound_server: SoundServer, cli: LiveCli, tmp_path: Path
) -> None:
    cli.wait_note("listening on")
    sound_server.play(speech_wav(tmp_path, "emma", EMMA), SPEAKERS)
    cli.wait_words(EMMA, 0.8)
    kill_workers_past_the_limit(cli.process.pid)
    cli.wait_event(lambda e: e.get("kind") == "worker_failed", "the restart limit")
    sound_server.play(speech_wav(tmp_path, "hearts", HEARTS), SPEAKERS)  # heard while no worker runs
    done = cli.interrupt(signal.SIGTERM)
    assert cli.process.returncode == EXIT_HEARD_ONLY, cli.notes
    heard = str(done["text"])
    assert {"emma", "quickly", "bottle"} <= set(words(heard)) and "hearts" not in words(heard), heard
    assert GAP.search(heard) and heard.endswith("…]"), heard
    deltas = "".join(str(e["text"]) for e in cli.events if e["type"] == "delta")
    assert heard == deltas.strip()
    assert not [e for e in cli.events if e["type"] == "error" and e["fatal"]]
    assert any("the model's worker is down" in note and "exit code 3" in note for note in cli.notes), (
        cli.notes
    )
