"""Native decoders' stderr lines (libmpg123's frame warnings) go to the log, not the user's terminal; other
output written to stderr meanwhile is kept."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import pytest

from inference.native_stderr import DECODER_LINES, native_output_logged
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.skipif(os.name != "posix", reason="fd 2 is redirected on POSIX only")


def test_an_mp3_decodes_without_libmpg123_lines_on_stderr(tmp_path) -> None:  # type: ignore[no-untyped-def]
    mp3 = tmp_path / "sample.mp3"
    script = textwrap.dedent(f"""
        import os, sys
        import soundfile
        import io
        from inference.audio.decoding import decode_mono_16k
        from inference.audio.io import DEFAULT_FILE_LIMITS
        samples, rate = soundfile.read({str(REPO_ROOT / "resources/samples/demo_sample_1.wav")!r})
        soundfile.write({str(mp3)!r}, samples, rate, format="MP3")
        data = open({str(mp3)!r}, "rb").read()
        if len(sys.argv) > 1:  # the decode without the redirection: shows the file does make libmpg123 talk
            with soundfile.SoundFile(io.BytesIO(data)) as handle:  # block reads, each followed by a seek
                while len(handle.read(16384)):
                    pass
        decoded = decode_mono_16k(data, DEFAULT_FILE_LIMITS, "sample.mp3")
        print(decoded.size, 16000)
    """)
    raw = subprocess.run(
        [sys.executable, "-c", script, "raw"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    if "mpg123" not in raw.stderr:
        pytest.skip("this libsndfile/libmpg123 build decodes the file without complaint")
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    frames, rate = map(int, done.stdout.split())
    assert frames > rate and "mpg123" not in done.stderr and done.stderr == ""


def test_decoder_lines_are_logged_and_other_lines_pass_through(caplog, capfd) -> None:  # type: ignore[no-untyped-def]
    with caplog.at_level(logging.DEBUG, logger="captioneer.native"), native_output_logged(DECODER_LINES):
        os.write(2, b"[src/libmpg123/layer3.c:INT123_do_layer3():1774] error: part2_3_length too large\n")
        os.write(2, b"another thread's warning\n")
        with native_output_logged(DECODER_LINES):  # an overlapping decode shares the redirection
            os.write(2, b"[src/libmpg123/parse.c:1] note\n")
    err = capfd.readouterr().err
    assert err == "another thread's warning\n"
    logged = [record.getMessage() for record in caplog.records]
    assert any("part2_3_length" in message for message in logged) and any(
        "parse.c" in message for message in logged
    )
    os.write(2, b"after\n")  # fd 2 is the real stderr again
    assert capfd.readouterr().err == "after\n"
