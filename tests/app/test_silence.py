"""A silent input is reported after a few seconds of audio (counted in samples), and again when sound returns."""

from __future__ import annotations

from app.live.silence import SilenceWatch

BLOCK = 480  # 30 ms at 16 kHz


def test_silence_is_reported_after_the_set_seconds_of_audio_and_cleared_by_sound() -> None:
    watch = SilenceWatch(after_s=4.0)
    changes = [watch.feed(-100.0, BLOCK) for _ in range(133)]  # 3.99 s
    assert set(changes) == {None} and not watch.silent
    assert watch.feed(-100.0, BLOCK) is True and watch.silent  # 4.02 s
    assert watch.feed(-100.0, BLOCK) is None  # said once, not every block
    assert watch.feed(-20.0, BLOCK) is False and not watch.silent
    assert watch.feed(-20.0, BLOCK) is None


def test_speech_now_and_then_keeps_an_input_from_counting_as_silent() -> None:
    watch = SilenceWatch(after_s=4.0)
    for _ in range(10):
        assert all(watch.feed(-80.0, BLOCK) is None for _ in range(100))  # 3 s of quiet
        assert watch.feed(-30.0, BLOCK) is None
    assert not watch.silent
