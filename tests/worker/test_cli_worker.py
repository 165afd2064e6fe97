"""`captioneer transcribe` runs its model in the worker: a killed worker is a one-line error, not a dead shell,
and a live stream from stdin survives it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile

from inference.audio.io import load_audio_file
from tests.conftest import REPO_ROOT
from tests.long_speech import espeak_available, recording
from tests.text_metrics import word_edits

DEMO = REPO_ROOT / "resources" / "demo_model"
SAMPLE = REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav"
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the worker through /proc")


def worker_of(parent: int, timeout: float = 60.0) -> int:
    """The pid of the spawned worker under ``parent`` (found through /proc)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmdline = (entry / "cmdline").read_bytes()
            except (OSError, IndexError, ValueError):
                continue
            if ppid == parent and b"spawn_main" in cmdline:
                return int(entry.name)
        time.sleep(0.02)
    raise AssertionError("no worker process appeared")


def cli(*args: str, **kwargs: object) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "app.launcher", "transcribe", *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )  # type: ignore[call-overload]


# `captioneer transcribe -` streaming raw f32le from stdin in VAD segments, printing events as jsonl.
SEGMENTED_JSONL_FROM_STDIN = (
    "-",
    "--model",
    str(DEMO),
    "--mode",
    "streaming",
    "--stream-mode",
    "segmented",
    "--format",
    "jsonl",
    "--input-format",
    "f32le",
)


def default_sigint() -> None:
    """In the child before exec: Ctrl-C's default action. A shell starts background jobs with SIGINT ignored and
    an ignored signal stays ignored across exec (Python then installs no KeyboardInterrupt handler), so a suite
    launched with ``&`` would otherwise test nothing but that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def within(proc: subprocess.Popen[bytes], seconds: float, read: Callable[[], bytes]) -> bytes:
    """``read()`` from the CLI's pipe, or kill the CLI and fail after ``seconds``: a stream that never answers
    must fail the test, not hang the suite."""
    box: list[bytes] = []
    reader = threading.Thread(target=lambda: box.append(read()), daemon=True)
    reader.start()
    reader.join(seconds)
    if reader.is_alive():
        proc.kill()
        reader.join(5)
        stderr = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
        raise AssertionError(f"no output from the CLI within {seconds:g} s; its stderr: {stderr}")
    return box[0]


def test_a_killed_worker_is_exit_code_1_with_one_line(tmp_path: Path) -> None:
    noise = np.random.default_rng(0).normal(0, 0.05, 600 * 16000).astype(np.float32)  # minutes of work
    wav = tmp_path / "ten_minutes.wav"
    soundfile.write(wav, noise, 16000, subtype="PCM_16")
    proc = cli(str(wav), "--model", str(DEMO))
    os.kill(worker_of(proc.pid), signal.SIGKILL)  # while it loads or transcribes
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    lines = err.decode().strip().splitlines()
    assert lines[-1].startswith("captioneer: error:") and "SIGKILL" in lines[-1], lines
    assert len(lines) == 1 or (len(lines) == 2 and "demo" in lines[0])  # at most the bundled-model note
    assert out == b""


def first_delta(proc: subprocess.Popen) -> dict:
    """The stream's first committed text: the open segment's provisional snapshots are read past."""
    assert proc.stdout is not None
    while True:
        event = json.loads(within(proc, 120, proc.stdout.readline))
        assert event["type"] in ("snapshot", "delta"), event
        if event["type"] == "delta":
            return event


def test_a_live_stream_from_stdin_survives_a_killed_worker() -> None:
    audio = load_audio_file(SAMPLE)
    gap = np.zeros(16000, np.float32)
    proc = cli(
        *SEGMENTED_JSONL_FROM_STDIN,
        stdin=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(np.concatenate([audio, gap]).astype("<f4").tobytes())
    proc.stdin.flush()
    first = first_delta(proc)  # the first segment is committed live (snapshots of it may come first)
    assert first["text"].strip()
    os.kill(worker_of(proc.pid), signal.SIGKILL)
    proc.stdin.write(np.concatenate([audio, gap]).astype("<f4").tobytes())
    proc.stdin.close()
    rest = [json.loads(line) for line in within(proc, 180, proc.stdout.read).decode().splitlines()]
    assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    kinds = [e["type"] for e in rest]
    assert "error" in kinds and kinds[-1] == "done"
    notice = rest[kinds.index("error")]
    assert (
        notice["kind"] == "worker_restarted" and notice["fatal"] is False and "SIGKILL" in notice["message"]
    )
    done = rest[-1]
    utterance = first["text"].strip()
    assert done["text"] == f"{utterance} {utterance}"  # kept from the first worker, then the new one's
    assert [s["text"] for s in done["segments"]] == [utterance, utterance]
    assert done["segments"][1]["start"] > done["segments"][0]["end"]


def test_a_single_utterance_from_stdin_gets_its_delta_and_speech_end_before_done() -> None:
    audio = load_audio_file(SAMPLE)
    audio = audio[: int(np.nonzero(np.abs(audio) > 0.05)[0][-1]) + 160]  # the input ends inside the speech
    proc = cli(
        *SEGMENTED_JSONL_FROM_STDIN,
        stdin=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(audio.astype("<f4").tobytes())
    proc.stdin.close()
    events = [json.loads(line) for line in within(proc, 180, proc.stdout.read).decode().splitlines()]
    assert proc.wait(timeout=120) == 0
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "done" and kinds[-3:-1] == ["delta", "speech_end"], kinds
    assert "".join(e["text"] for e in events if e["type"] == "delta") == events[-1]["text"]
    assert events[-2]["text"] == events[-1]["text"] == "emma quickly closed the early bottle and sang"


def test_ctrl_c_finishes_a_live_stream_with_done() -> None:
    """Ctrl-C in a terminal signals the whole process group, the worker included: the CLI drains and ends
    with `done`, the worker survives until then."""
    audio = load_audio_file(SAMPLE)
    proc = cli(
        *SEGMENTED_JSONL_FROM_STDIN,
        stdin=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=default_sigint,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(np.concatenate([audio, np.zeros(16000, np.float32), audio]).astype("<f4").tobytes())
    proc.stdin.flush()
    first = first_delta(proc)
    os.killpg(proc.pid, signal.SIGINT)  # stdin stays open: only the interrupt ends the stream
    rest = [json.loads(line) for line in within(proc, 180, proc.stdout.read).decode().splitlines()]
    assert proc.wait(timeout=60) == 0
    assert [e["type"] for e in rest][-1] == "done" and "error" not in [e["type"] for e in rest]
    assert rest[-1]["text"].startswith(first["text"].strip())
    proc.stdin.close()


def test_streaming_text_prints_committed_text_as_it_grows_then_the_final_text(tmp_path: Path) -> None:
    import io

    from inference.cli import main

    gap = np.zeros(16000, np.float32)
    two = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_2.wav")
    wav = tmp_path / "two_sentences.wav"
    soundfile.write(
        wav, np.concatenate([gap, load_audio_file(SAMPLE), gap, two, gap]), 16000, subtype="FLOAT"
    )
    out = io.StringIO()
    code = main(
        ["transcribe", str(wav), "--model", str(DEMO), "--mode", "streaming"], out=out, stdin=io.BytesIO(b"")
    )
    assert code == 0
    growing, final = out.getvalue().splitlines()
    assert final.startswith("emma quickly closed the early bottle and sang") and final.endswith("garden")
    assert growing and final.startswith(growing)  # committed text is never revised by the final text


def test_a_silent_cli_fails_the_read_instead_of_hanging() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    started = time.monotonic()
    with pytest.raises(AssertionError, match="no output from the CLI within 0.5 s"):
        within(proc, 0.5, proc.stdout.readline)  # type: ignore[union-attr]
    assert proc.wait(timeout=10) != 0 and time.monotonic() - started < 10


@pytest.mark.skipif(not espeak_available(), reason="needs espeak-ng for speech")
def test_stdin_streaming_keeps_every_word_when_its_worker_is_killed_twice() -> None:
    """`captioneer transcribe - --mode streaming` on raw PCM: two workers killed mid-stream, each while the
    stream holds speech it has not committed yet; the transcript equals the undisturbed one."""
    audio = recording(40.0, seed=21).audio.astype("<f4").tobytes()

    def run(kill_at_deltas: tuple[int, ...]) -> list[dict[str, object]]:
        proc = cli(
            "-",
            "--model",
            str(DEMO),
            "--mode",
            "streaming",
            "--format",
            "jsonl",
            "--input-format",
            "f32le",
            stdin=subprocess.PIPE,
        )
        assert proc.stdin is not None and proc.stdout is not None
        feeder = threading.Thread(target=lambda: (proc.stdin.write(audio), proc.stdin.close()), daemon=True)  # type: ignore[union-attr]
        feeder.start()
        events: list[dict[str, object]] = []
        deltas = 0
        while True:
            line = within(proc, 120, proc.stdout.readline)  # type: ignore[union-attr]
            if not line:
                break
            events.append(json.loads(line))
            if events[-1]["type"] == "delta":
                deltas += 1
                if deltas in kill_at_deltas:
                    os.kill(worker_of(proc.pid), signal.SIGKILL)
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
        return events

    undisturbed, killed = run(()), run((3, 9))
    restarts = [e for e in killed if e["type"] == "error" and e["kind"] == "worker_restarted"]
    assert len(restarts) == 2 and all(e["fatal"] is False for e in restarts)
    before, after = undisturbed[-1], killed[-1]
    assert before["type"] == after["type"] == "done"
    assert after["timing"]["audio_s"] == pytest.approx(before["timing"]["audio_s"])  # type: ignore[index]
    # the demo streams buffered windows here: a window schedule restarted at a word may change one word per kill
    assert word_edits(str(after["text"]), str(before["text"])) <= 2, (after["text"], before["text"])
