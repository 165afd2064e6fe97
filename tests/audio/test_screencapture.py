"""macOS system audio through ScreenCaptureKit: the parts that run anywhere (buffer layout, resampling into
blocks, availability, the listing on darwin, the sentences); the capture itself needs a Mac (untested)."""

from __future__ import annotations

import importlib.util
import sys
import types

import numpy as np
import pytest

from inference.audio.devices import portable, screencapture
from inference.audio.devices.capture import SoundServerCapture
from inference.audio.devices.choices import SYSTEM_AUDIO, SYSTEM_DEFAULT, InputDeviceError
from inference.contract import SAMPLE_RATE


def test_planar_buffers_are_split_per_channel_then_averaged() -> None:
    left, right = np.array([0.2, 0.4, 0.6], np.float32), np.array([0.0, -0.4, 0.2], np.float32)
    raw = np.concatenate([left, right]).tobytes()  # non-interleaved: all of L, then all of R
    mono = screencapture.mono_from_bytes(raw, frames=3, channels=2, non_interleaved=True)
    np.testing.assert_allclose(mono, [0.1, 0.0, 0.4], atol=1e-7)
    assert mono.dtype == np.float32


def test_interleaved_buffers_are_read_frame_by_frame() -> None:
    raw = np.array([0.2, 0.0, 0.4, -0.4, 0.6, 0.2], np.float32).tobytes()  # L R L R L R
    mono = screencapture.mono_from_bytes(raw, frames=3, channels=2, non_interleaved=False)
    np.testing.assert_allclose(mono, [0.1, 0.0, 0.4], atol=1e-7)


def test_non_finite_samples_become_silence() -> None:
    raw = np.array([np.nan, np.inf, 0.5], np.float32).tobytes()
    mono = screencapture.mono_from_bytes(raw, frames=3, channels=1, non_interleaved=True)
    assert mono.tolist() == [0.0, 0.0, 0.5]


def test_48k_chunks_come_out_as_16k_blocks_of_the_asked_size() -> None:
    to16k = screencapture.To16kBlocks(screencapture.CAPTURE_RATE, 480)
    seconds = np.arange(screencapture.CAPTURE_RATE) / screencapture.CAPTURE_RATE
    tone = (0.5 * np.sin(2 * np.pi * 440 * seconds)).astype(np.float32)
    blocks = [block for chunk in np.array_split(tone, 97) for block in to16k.feed(chunk)]
    assert {len(block) for block in blocks} == {480}
    assert all(block.dtype == np.float32 for block in blocks)
    # a second of 48 kHz is 16000 samples at 16 kHz, less what the resampler still holds (its delay)
    assert SAMPLE_RATE - 2 * 480 <= sum(map(len, blocks)) <= SAMPLE_RATE
    middle = np.concatenate(blocks)[4000:12000]
    assert 0.3 < float(np.sqrt(np.mean(middle**2))) < 0.4  # the tone's RMS (0.5/√2) survives


@pytest.mark.parametrize(
    ("platform_name", "release", "has_pyobjc", "expected"),
    [
        ("linux", "", True, "macOS only"),
        ("darwin", "12.6.1", True, "(12.6.1) has no ScreenCaptureKit audio capture"),
        ("darwin", "14.4", False, "pyobjc-framework-ScreenCaptureKit is not installed"),
        ("darwin", "13.0", True, None),
    ],
)
def test_availability_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, platform_name: str, release: str, has_pyobjc: bool, expected: str | None
) -> None:
    monkeypatch.setattr(sys, "platform", platform_name)
    monkeypatch.setattr(screencapture.platform, "mac_ver", lambda: (release, ("", "", ""), ""))
    found = types.SimpleNamespace() if has_pyobjc else None
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: found)
    reason = screencapture.unavailable_reason()
    assert reason is None if expected is None else expected in (reason or "")


def test_unreadable_versions_count_as_too_old() -> None:
    assert screencapture.macos_version("13.2.1") == (13, 2, 1)
    assert screencapture.macos_version("") == ()
    assert screencapture.macos_version("beta") == ()


def test_the_permission_error_says_where_to_allow_it_and_the_loopback_way() -> None:
    error = screencapture.permission_error("The user declined TCCs for application, window, display capture")
    assert "Screen Recording permission" in error.message and "declined" in error.message
    assert "Privacy & Security → Screen Recording" in error.fix and "BlackHole" in error.fix


def test_without_screencapturekit_system_audio_names_the_loopback_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(screencapture.platform, "mac_ver", lambda: ("12.7", ("", "", ""), ""))
    capture = SoundServerCapture("system")
    with pytest.raises(InputDeviceError) as caught:
        capture.start(lambda _block: None, lambda _reason: None)
    assert "macOS 13 or later" in caught.value.message
    assert "BlackHole" in caught.value.fix and "Audio MIDI Setup" in caught.value.fix


class FakeMicrophone:
    def __init__(self, ident: str, name: str) -> None:
        self.id, self.name, self.isloopback = ident, name, False


class FakeSoundcard:
    def default_microphone(self) -> FakeMicrophone:
        return FakeMicrophone("built-in", "MacBook Microphone")

    def all_microphones(self, include_loopback: bool) -> list[FakeMicrophone]:
        assert not include_loopback  # CoreAudio has no loopback to ask for
        return [FakeMicrophone("built-in", "MacBook Microphone")]


@pytest.mark.parametrize(("release", "offered"), [("14.5", True), ("12.7", False)])
def test_macos_lists_system_audio_where_screencapturekit_can_capture_it(
    monkeypatch: pytest.MonkeyPatch, release: str, offered: bool
) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(screencapture.platform, "mac_ver", lambda: (release, ("", "", ""), ""))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: types.SimpleNamespace())
    monkeypatch.setattr(portable, "soundcard_module", FakeSoundcard)
    system = [choice.id for choice in portable.list_choices() if choice.group == SYSTEM_AUDIO]
    assert system == ([SYSTEM_DEFAULT] if offered else [])


def test_only_system_audio_on_macos_goes_through_screencapturekit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert screencapture.applies_to(SYSTEM_DEFAULT)
    assert not screencapture.applies_to("mic:default")
    monkeypatch.setattr(sys, "platform", "linux")
    assert not screencapture.applies_to(SYSTEM_DEFAULT)


def test_planes_with_alignment_padding_are_read_from_their_own_start() -> None:
    padding = np.full(2, 9.0, np.float32)  # junk after each plane, as a 16-byte alignment leaves
    left, right = np.array([1.0, 1.0], np.float32), np.array([0.0, -1.0], np.float32)
    raw = np.concatenate([left, padding, right, padding]).tobytes()
    mono = screencapture.mono_from_bytes(raw, frames=2, channels=2, non_interleaved=True)
    np.testing.assert_allclose(mono, [0.5, 0.0])


def test_delivery_hands_on_16k_blocks_and_reports_macos_stopping_the_stream() -> None:
    capture = screencapture.ScreenCaptureAudio(block_samples=160)
    blocks: list[np.ndarray] = []
    ended: list[str | None] = []
    capture.start_delivering(blocks.append, ended.append)
    for _ in range(10):  # 10 × 10 ms at 48 kHz
        capture.on_audio(np.full(480, 0.25, np.float32))
    assert capture.wait_until_delivering(timeout_s=60)
    capture.on_stopped("The display was disconnected")
    assert capture._thread is not None
    capture._thread.join(timeout=60)
    assert ended == ["macOS stopped the system audio capture (The display was disconnected)"]
    assert blocks and {len(block) for block in blocks} == {160}
    assert not capture.wait_until_delivering(timeout_s=0)  # ended: no longer delivering


def test_stopping_ends_delivery_without_reporting_an_end() -> None:
    capture = screencapture.ScreenCaptureAudio(block_samples=160)
    ended: list[str | None] = []
    capture.start_delivering(lambda _block: None, ended.append)
    capture.stop()
    assert capture._thread is not None and not capture._thread.is_alive()
    assert ended == []
