"""Meeting mode in the window against a real (private) PulseAudio: two espeak-ng voices take turns and talk over
each other, "Others" played into the speakers and "You" into the virtual microphone, which also hears the
speakers (a laptop without a headset: -3 dB and 3 ms late; a quiet speaker far away: -20 dB). The window must
label each side's words and must not caption the far end's words a second time as "You".

Each case prints what it measured (duplicated and lost words per speaker, the bleed filter's delay and
correlation); docs/audio_devices.md §6 keeps the figures."""

from __future__ import annotations

import subprocess
import wave
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from inference.audio.io import load_audio_file
from inference.contract import SAMPLE_RATE
from tests.app.test_sound_window import Window
from tests.live_cli import share_of_words, words
from tests.sound_server import MIC_FEED, SPEAKERS, SoundServer, die_with_parent, speech_wav

OTHERS_VOICE, YOUR_VOICE = (
    "gmw/en+john",
    "en-us+klatt3",
)  # two voices the demo model knows apart from training
THEIRS = ("emma quickly closed the early bottle and sang", "we will meet at half past six on friday")
YOURS = ("there are twenty hearts in the garden", "open the window and close the door")
ONLY_THEIRS = {w for s in THEIRS for w in s.split()} - {w for s in YOURS for w in s.split()}
ONLY_YOURS = {w for s in YOURS for w in s.split()} - {w for s in THEIRS for w in s.split()}
OVERLAP_S = 0.8  # each answer starts this long before the other side has finished


def voice(folder: Path, name: str, sentence: str, speaker: str) -> np.ndarray:
    speech_wav(folder, "probe", "a")  # skips, saying why, where espeak-ng or sox is missing
    wav = folder / f"{name}.wav"
    subprocess.run(
        ["espeak-ng", "-v", speaker, "-s", "150", "-w", str(wav), sentence], check=True, timeout=60
    )
    return load_audio_file(wav)


def write_wav(path: Path, samples: np.ndarray) -> Path:
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(SAMPLE_RATE)
        handle.writeframes(pcm.tobytes())
    return path


def conversation(folder: Path, bleed_db: float) -> tuple[Path, Path]:
    """(what the speakers play, what the microphone hears): Others, You over their last words, Others again
    over your last words, You again over theirs; the microphone also hears the speakers ``bleed_db`` quieter
    and 3 ms late."""
    turns = [
        ("others", voice(folder, f"o{i}", s, OTHERS_VOICE))
        if i % 2 == 0
        else ("you", voice(folder, f"y{i}", s, YOUR_VOICE))
        for i, s in enumerate((THEIRS[0], YOURS[0], THEIRS[1], YOURS[1]))
    ]
    at = int(0.5 * SAMPLE_RATE)
    placed = []
    for _who, audio in turns:
        placed.append(at)
        at += audio.size - int(OVERLAP_S * SAMPLE_RATE)
    total = at + int((OVERLAP_S + 2.5) * SAMPLE_RATE)
    tracks = {"others": np.zeros(total, np.float32), "you": np.zeros(total, np.float32)}
    for (who, audio), start in zip(turns, placed, strict=True):
        tracks[who][start : start + audio.size] += audio * np.float32(0.5)
    delay = int(0.003 * SAMPLE_RATE)
    heard = tracks["you"].copy()
    heard[delay:] += tracks["others"][:-delay] * np.float32(10 ** (bleed_db / 20))
    return write_wav(folder / "speakers.wav", tracks["others"]), write_wav(folder / "microphone.wav", heard)


def play_together(server: SoundServer, speakers: Path, microphone: Path) -> None:
    """Both files at once, as a call's far end and the person at the laptop: two paplay processes.

    Each buffers 1 s: with 100 ms, a loaded machine (two busy loops on 2 cores) starved one player now and then
    ("Stream underrun" mid-file, 2-12 times a run), which shifted the speakers' audio against the copy baked into
    the microphone's file by tens of ms. A real microphone hears the speakers themselves and cannot drift so."""
    players = [
        subprocess.Popen(
            ["paplay", "--latency-msec=1000", f"--device={device}", str(wav)],
            env=server.env,
            preexec_fn=die_with_parent,
        )
        for device, wav in ((SPEAKERS, speakers), (MIC_FEED, microphone))
    ]
    for player in players:
        assert player.wait(timeout=120) == 0


@pytest.fixture
def window(sound_server: SoundServer) -> Iterator[Window]:
    win = Window(sound_server)
    yield win
    win.kill()


@pytest.mark.parametrize("bleed_db", [-3.0, -20.0])
def test_meeting_mode_labels_both_sides_and_does_not_caption_the_bleed_twice(
    sound_server: SoundServer, window: Window, tmp_path: Path, bleed_db: float
) -> None:
    items = [tuple(item) for item in window.inputs["items"]]  # type: ignore[union-attr]
    texts = [text for text, _data in items]
    assert texts.index("System audio") < texts.index("Meeting: microphone + system audio")
    running = window.start("meeting:default")
    assert "Virtual-microphone (You)" in str(running["message"]), running
    assert "What this computer plays (Speakers) (Others)" in str(running["message"]), running

    play_together(sound_server, *conversation(tmp_path, bleed_db))
    # Their last sentence captioned: everything was played and captured. Yours may still be held back by the
    # bleed filter (as long as the microphone's copy comes before the speakers' capture); Stop passes it on.
    window.wait_for("their last sentence", lambda: share_of_words(THEIRS[1], window.captions()) >= 0.8)
    window.send({"cmd": "stop"})
    window.wait_event(lambda e: e["event"] == "state" and e["state"] == "idle", "the meeting to stop")
    window.send({"cmd": "transcript"})
    transcript = window.wait_event(lambda e: e["event"] == "transcript", "the transcript")

    said = {"You": Counter[str](), "Others": Counter[str]()}
    for speaker, text in transcript["segments"]:  # type: ignore[union-attr]
        said[str(speaker)].update(words(str(text)))
    expected = {
        "You": Counter(w for s in YOURS for w in s.split()),
        "Others": Counter(w for s in THEIRS for w in s.split()),
    }
    duplicated = sum(n for w, n in said["You"].items() if w in ONLY_THEIRS)
    misplaced = sum(n for w, n in said["Others"].items() if w in ONLY_YOURS)
    lost = {who: sum((expected[who] - said[who]).values()) for who in said}
    extra = {who: sum((said[who] - expected[who]).values()) for who in said}  # misheard or garbled copies
    print(
        f"\nmeeting, bleed {bleed_db:+.0f} dB 3 ms: duplicated (their words as You) {duplicated}, "
        f"your words as Others {misplaced}, lost: You {lost['You']}/{sum(expected['You'].values())}, "
        f"Others {lost['Others']}/{sum(expected['Others'].values())}; words not said: You {extra['You']}, "
        f"Others {extra['Others']}; bleed filter {transcript['bleed']}\n"
        f"{transcript['text']}"
    )
    assert duplicated <= 1, transcript["text"]  # one word where both talk at once; without the filter, all
    assert misplaced == 0, transcript["text"]
    # The demo model knows these words; what it may miss is a few said while the other side talks (a turn's
    # first or last two words: 0.8 s at 150 words/min) — the model's slip there, not the labels'.
    turns = [s.split() for s in (THEIRS[0], YOURS[0], THEIRS[1], YOURS[1])]
    overlapped = {w for t in turns[:-1] for w in t[-2:]} | {w for t in turns[1:] for w in t[:2]}
    for who in said:
        missed = expected[who] - said[who]
        assert set(missed) <= overlapped and lost[who] <= 3, (who, dict(missed), transcript["text"])
    assert extra["You"] <= 2 and extra["Others"] <= 2, transcript["text"]
    assert str(transcript["text"]).startswith("Others: emma"), transcript["text"]
