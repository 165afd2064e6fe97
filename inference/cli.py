"""``captioneer`` command line: transcribe files or stdin PCM, inspect the model catalog.

Exit codes: 0 success, 2 usage/validation error, 1 runtime failure. Errors are one line on stderr
naming the problem and the fix; ``--verbose`` adds the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import select
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

import numpy as np

from inference.app_commands import (
    AUDIO_FILES,
    DICTATE_DESCRIPTION,
    GUI_DESCRIPTION,
    add_dictate_arguments,
    add_gui_arguments,
)
from inference.audio.limits import DEFAULT_FILE_SECONDS as DEFAULT_TRANSCRIBE_MAX_AUDIO_S
from inference.audio.limits import MAX_RATE, MIN_RATE
from inference.audio.vad import needs_speech_stretches, speech_stretches
from inference.cli_signals import finish_on_signals
from inference.contract import BACKEND_NAMES
from inference.errors import CaptioneerError, UsageError, WorkerError
from inference.formats import FORMATS, render
from inference.paths import AppPaths

log = logging.getLogger("captioneer.cli")
STREAM_PUSH_SECONDS = 0.32
# A live stream ended while the model's worker was down: the transcript printed keeps what was heard, with the
# audio since the failure marked as a gap. Not 0 (part of the audio was never transcribed), not 1 (there is a
# transcript to keep): a script can tell the two apart.
EXIT_HEARD_ONLY = 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 as well; keep our one-line format
        raise UsageError(message, f"see `{self.prog} --help`")


BACKEND_HELP = "ggml backend (default auto: a GPU if any)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="captioneer",
        description="Local live captions and dictation. Without a command, opens the caption window.",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="show details and tracebacks on errors")
    parser.add_argument(
        "--version",
        action="store_true",
        help="print the version, the native build and the CPU backend variant in use",
    )
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND", title="commands")
    # gui and dictate run in the app (app.launcher takes them before this parser); they are listed here so that
    # `captioneer --help` names every command.
    add_gui_arguments(
        sub.add_parser("gui", help="open the caption window (the default)", description=GUI_DESCRIPTION)
    )
    add_dictate_arguments(
        sub.add_parser(
            "dictate",
            help="start or stop dictation in the running app (for a desktop shortcut)",
            description=DICTATE_DESCRIPTION,
        )
    )

    tr = sub.add_parser("transcribe", help="transcribe an audio file (or raw PCM on stdin with '-')")
    tr.add_argument(
        "audio", nargs="?", help=f"audio file ({AUDIO_FILES}), or '-' for raw PCM on stdin (see --input-*)"
    )
    tr.add_argument(
        "--input",
        metavar="ID",
        help="caption a live input until Ctrl-C (with --mode streaming): an id from 'captioneer devices', "
        "'mic' (the default microphone), 'system' (what this computer plays) or 'meeting' (both, printed as "
        "'You: …' and 'Others: …')",
    )
    tr.add_argument(
        "--model", help="model directory, .gguf file or installed package id (default: installed model)"
    )
    tr.add_argument("--family", help="model family (default: inferred from the checkpoint)")
    tr.add_argument(
        "--mode",
        choices=("offline", "streaming"),
        default="offline",
        help="offline: the whole file at once (default); streaming: fed as live audio, 0.32 s at a time",
    )
    tr.add_argument(
        "--stream-mode",
        choices=("auto", "native", "segmented"),
        default="auto",
        help="streaming: the model's own live path (native), VAD segments transcribed at each pause "
        "(segmented), or native where the model has one (auto)",
    )
    tr.add_argument("--language", help="language (ISO code or name; family-dependent)")
    tr.add_argument("--context", help="context text (names, terms) for families that take it")
    tr.add_argument(
        "--task",
        choices=("transcribe", "translate"),
        help="translate: the speech as English text, from any spoken language (Whisper models only)",
    )
    tr.add_argument(
        "--session-option", action="append", default=[], metavar="K=V", help="engine session option"
    )
    tr.add_argument("--request-option", action="append", default=[], metavar="K=V", help="per-request option")
    tr.add_argument("--backend", choices=BACKEND_NAMES, default="auto", help=BACKEND_HELP)
    tr.add_argument("--threads", type=int, help="CPU threads (default: physical cores)")
    tr.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="output format (default text); with --mode streaming, text prints committed text as it grows, "
        "then the final text, and jsonl prints every event",
    )
    tr.add_argument("--output", "-o", help="write the result to this file instead of stdout")
    tr.add_argument(
        "--max-audio-s",
        type=float,
        default=DEFAULT_TRANSCRIBE_MAX_AUDIO_S,
        metavar="SECONDS",
        help="longest audio to read, checked from the file's header and while decoding "
        f"(default {DEFAULT_TRANSCRIBE_MAX_AUDIO_S:g}, 4 hours)",
    )
    tr.add_argument(
        "--input-format",
        choices=("s16le", "f32le"),
        default="s16le",
        help="stdin PCM sample type (default s16le)",
    )
    tr.add_argument(
        "--input-rate", type=int, default=16000, help="stdin PCM sample rate in Hz (default 16000)"
    )
    tr.add_argument(
        "--input-channels", type=int, default=1, help="stdin PCM channels, interleaved (default 1)"
    )

    sub.add_parser(
        "devices", help="list the audio inputs (microphones, system audio) with the ids --input takes"
    )

    models = sub.add_parser("models", help="list, install, import, verify and remove model packages")
    msub = models.add_subparsers(dest="models_command", parser_class=_Parser)
    mlist = msub.add_parser("list", help="all packages with size and installed state")
    mlist.add_argument("--json", action="store_true", help="machine-readable output")
    info = msub.add_parser("info", help="details of one package")
    info.add_argument("id", help="package id (see `captioneer models list`)")
    msub.add_parser("path", help="print the model store directory")
    install = msub.add_parser(
        "install", help="download and install a package (resumes an interrupted download; token: HF_TOKEN)"
    )
    install.add_argument("id", help="package id (see `captioneer models list`)")
    install.add_argument("--force", action="store_true", help="reinstall even if already installed")
    remove = msub.add_parser("remove", help="delete an installed package")
    remove.add_argument("id", help="installed package id")
    mimport = msub.add_parser(
        "import",
        help="add a local model folder or .gguf file to the store, or convert a NeMo Parakeet-TDT checkpoint "
        "(.nemo) or a Phonon-2 archive (.tar.zst) or unpacked folder (model.fermion + config.json)",
    )
    mimport.add_argument("path", help="the model folder, .gguf, .nemo or .tar.zst file")
    mimport.add_argument(
        "--id",
        dest="package_id",
        help="package id to use (default: from the file/folder name; phonon2_source for a Phonon-2 source)",
    )
    mimport.add_argument("--link", action="store_true", help="link to the files instead of copying them")
    mimport.add_argument(
        "--sidecars",
        type=Path,
        metavar="DIR",
        help="Phonon-2 and .nemo: folder with the nvidia/parakeet-tdt-0.6b-v3 config.json, tokenizer.json and "
        "processor_config.json (default, Phonon-2: download them at the catalog's pinned revision; .nemo: the "
        "archive's own tokenizer, else an installed stock Parakeet-TDT v3 package's)",
    )
    mimport.add_argument(
        "--sha256",
        metavar="HEX",
        help="Phonon-2 and .nemo: the sha256 the archive (or, for a folder, model.fermion) must have "
        "(default: the published one; a .nemo the catalog does not know is not checked)",
    )
    mimport.add_argument(
        "--license",
        dest="license_text",
        metavar="TEXT",
        help=".nemo: the licence to record with the imported model (default: the catalog's, when it knows the file)",
    )
    verify = msub.add_parser("verify", help="recompute sizes and checksums of an installed package")
    verify.add_argument("id", help="installed package id")
    cleanup = msub.add_parser("cleanup", help="delete leftover partial downloads and temporary folders")
    cleanup.add_argument(
        "--all",
        action="store_true",
        help="also recent partial downloads (temporary folders of dead imports go anyway)",
    )

    serve = sub.add_parser("serve", help="a local HTTP transcription server with OpenAI-compatible routes")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; any other needs --api-key)",
    )
    serve.add_argument("--port", type=int, default=8488, help="TCP port (default 8488)")
    serve.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="ID|PATH",
        help="model to serve (repeat for several, each in its own worker; default: installed model)",
    )
    serve.add_argument("--api-key", help="require 'Authorization: Bearer KEY' (default: $CAPTIONEER_API_KEY)")
    serve.add_argument(
        "--max-concurrent",
        type=int,
        default=4,
        help="requests running at once per model; more get 429 with Retry-After (default 4)",
    )
    serve.add_argument(
        "--max-upload-mb", type=float, default=100.0, help="largest file upload (default 100 MB)"
    )
    serve.add_argument(
        "--max-audio-s", type=float, default=3600.0, help="longest file, in seconds (default 3600)"
    )
    serve.add_argument(
        "--request-timeout-s",
        type=float,
        default=600.0,
        help="longest time one file may take to transcribe (default 600)",
    )
    serve.add_argument(
        "--live-max-s",
        type=float,
        default=None,
        help="end a /live stream after this many seconds of audio, with its final transcript "
        "(default: no limit)",
    )
    serve.add_argument(
        "--grace-s",
        type=float,
        default=10.0,
        help="on SIGTERM/Ctrl-C, how long requests in flight may still finish (default 10)",
    )
    serve.add_argument(
        "--audio-dir",
        type=Path,
        metavar="DIR",
        help="let JSON requests name files under DIR in 'audio_path' (default: off)",
    )
    serve.add_argument(
        "--header-timeout-s",
        type=float,
        default=10.0,
        help="a request's headers must arrive within this many seconds (default 10)",
    )
    serve.add_argument(
        "--min-body-rate",
        type=float,
        default=1024.0,
        metavar="BYTES_PER_S",
        help="a request body slower than this over --body-window-s is abandoned with 408 (default 1024)",
    )
    serve.add_argument("--body-window-s", type=float, default=20.0, help="see --min-body-rate (default 20)")
    serve.add_argument(
        "--send-timeout-s",
        type=float,
        default=30.0,
        help="a client that reads nothing of its answer for this long is dropped (default 30)",
    )
    serve.add_argument(
        "--max-connections-per-client",
        type=int,
        default=64,
        help="open connections one remote address may hold (default 64)",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web origin (e.g. http://localhost:3000) whose pages may call the server without an API key, "
        "besides loopback ones (repeatable)",
    )
    serve.add_argument("--backend", choices=BACKEND_NAMES, default="auto", help=BACKEND_HELP)
    serve.add_argument("--threads", type=int, help="CPU threads per model (default: physical cores)")
    return parser


def _parse_kv(items: Sequence[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def _read_input_audio(args: argparse.Namespace, stdin: IO[bytes]) -> np.ndarray:
    from inference.audio.containers import container_kind
    from inference.audio.decoding import decode_mono_16k
    from inference.audio.io import decode_raw_pcm, load_audio_file, to_mono_16k

    limits = _transcribe_limits(args)
    if args.audio == "-":
        if not MIN_RATE <= args.input_rate <= MAX_RATE:
            raise UsageError(f"--input-rate must be in [{MIN_RATE}, {MAX_RATE}], got {args.input_rate}")
        if not 1 <= args.input_channels <= 16:
            raise UsageError(f"--input-channels must be in [1, 16], got {args.input_channels}")
        frame_bytes = (2 if args.input_format == "s16le" else 4) * args.input_channels
        most = limits.max_frames(args.input_rate) * frame_bytes
        data = stdin.read(most + 1)
        kind = container_kind(data)
        if kind is not None:  # `cat talk.flac | captioneer transcribe -`: a file, not samples
            if len(data) > most:  # held whole in memory: bounded as raw PCM is
                raise UsageError(
                    f"stdin holds an audio file ({kind}) of more than {most} bytes, more than is read from stdin",
                    "pass the file's path instead of '-' (a file is read as a stream)",
                )
            sys.stderr.write(
                f"captioneer: note: stdin holds an audio file ({kind}): decoded as a file (--input-format, --input-rate "
                "and --input-channels are for raw PCM)\n"
            )
            return decode_mono_16k(data, limits, "stdin")
        if len(data) > most:
            raise UsageError(
                f"the audio on stdin lasts more than the limit of {limits.max_seconds:g} s",
                limits.how_to_raise,
            )
        raw = decode_raw_pcm(data, args.input_format, args.input_channels)
        return to_mono_16k(raw, args.input_rate)
    return load_audio_file(Path(args.audio), limits)


def _file_blocks(args: argparse.Namespace) -> Any:
    from inference.audio.decoding import FileBlocks

    return FileBlocks(Path(args.audio), _transcribe_limits(args))


def _transcribe_limits(args: argparse.Namespace) -> Any:
    from inference.audio.limits import AudioLimits

    if not 0 < args.max_audio_s < float("inf"):
        raise UsageError(f"--max-audio-s must be a positive number of seconds, got {args.max_audio_s:g}")
    return AudioLimits(args.max_audio_s, "raise the limit with --max-audio-s SECONDS, or split the file")


def cmd_transcribe(args: argparse.Namespace, paths: AppPaths, out: IO[str], stdin: IO[bytes]) -> int:
    """Transcribe through the inference worker, so a native crash is an error message, not a dead shell."""
    from inference.registry import FamilyRegistry

    families = FamilyRegistry.from_environment()
    if args.family is not None:
        families.get(args.family)  # an unknown family is a usage error naming the known ones
    _check_live_input(args)
    if args.audio is not None and args.audio != "-" and not Path(args.audio).exists():
        from inference.errors import InputFileError

        raise InputFileError(f"audio file not found: {args.audio}", "check the path")
    if args.output:
        check_writable(Path(args.output))  # before the model runs, not after
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {args.threads}")
    if args.format == "jsonl" and args.mode != "streaming":
        raise UsageError(
            "--format jsonl prints streaming events", "add --mode streaming or choose --format json"
        )

    catalog = families.catalog(paths)
    model_path, package = catalog.resolve_model(args.model)
    if package is not None and package.format == "bundled" and args.model is None:
        sys.stderr.write(
            f"captioneer: note: using {package.name} — install a real model with `captioneer models install ID`\n"
        )
    family = args.family or families.detect_family(model_path)
    spec = families.spec(family)
    session_options = spec.validate_session_options(_parse_kv(args.session_option, "--session-option"))
    raw_request = _parse_kv(args.request_option, "--request-option")
    if args.language is not None:
        raw_request.setdefault("language", args.language)
    if args.context is not None:
        raw_request.setdefault("context", args.context)
    if args.task is not None:
        raw_request.setdefault("task", args.task)
    for name in ("language", "context", "task"):
        if name in raw_request and not spec.takes_request_option(name):
            if name == "task":
                raise UsageError(
                    f"the {family} family does not take --task: it cannot {raw_request['task']}",
                    f"translation into English needs {families.translators()}; drop --task",
                )
            raise UsageError(f"the {family} family does not take --{name}", f"remove --{name}")
    request_options = spec.validate_request_options(raw_request)
    # Files are read before the model loads, so a bad file fails fast; stdin streams as it arrives.
    live = args.audio is None or (args.audio == "-" and args.mode == "streaming")
    # An offline file is sent in blocks as it decodes (memory flat in its length); its header is checked now.
    blocks = _file_blocks(args) if args.mode == "offline" and args.audio not in (None, "-") else None
    audio = None if live or blocks is not None else _read_input_audio(args, stdin)

    from inference.client import WorkerClient, WorkerPolicy

    # A lost offline job is lost either way: fail at once. A live stream outlives a crash (restart).
    policy = WorkerPolicy(max_restarts=0) if args.mode == "offline" else WorkerPolicy()
    heard_only = False  # the stream ended while the worker was down
    with WorkerClient(policy) as client:
        engine = client.load(
            model_path, family, session_options, args.backend, args.threads, progress=_load_progress_printer()
        )
        if args.mode == "streaming":
            step = stream_push_samples({**session_options, **request_options})
            transcript, heard_only = _run_stream(
                engine, client, args, audio, stdin, request_options, out, step
            )
        else:
            transcript = _run_offline(engine, audio if blocks is None else blocks, request_options)
    exit_code = EXIT_HEARD_ONLY if heard_only else 0
    if args.format == "jsonl":
        from inference.contract import Done, event_to_json

        _emit(out, event_to_json(Done(transcript)))
        return exit_code
    if (audio is not None or blocks is not None) and needs_speech_stretches(
        len(transcript.words), args.format
    ):
        transcript.speech = speech_stretches(audio if audio is not None else _read_input_audio(args, stdin))
    rendered = render(transcript, args.format)
    if args.output:
        try:
            Path(args.output).write_text(rendered, encoding="utf-8")
        except OSError as exc:
            raise UsageError(
                f"cannot write {args.output}: {exc.strerror}", "choose a writable file with -o"
            ) from None
    else:
        out.write(rendered)
    return exit_code


def _check_live_input(args: argparse.Namespace) -> None:
    """``--input`` captions a device live: it needs --mode streaming and takes no file."""
    if args.input is None:
        if args.audio is None:
            raise UsageError("transcribe needs an audio file, '-' for stdin, or --input ID", "see --help")
        return
    if args.audio is not None:
        raise UsageError(f"give either a file ({args.audio}) or --input, not both", "drop one of them")
    if args.mode != "streaming":
        raise UsageError("--input captions a live device", "add --mode streaming")


def cmd_devices(out: IO[str]) -> int:
    """The inputs with their ids; PortAudio's, with a note on stderr, where no sound server answers."""
    from inference.audio.devices import render_listing
    from inference.audio.devices.listing import list_inputs_or_portaudio

    choices, note = list_inputs_or_portaudio()
    if note:
        sys.stderr.write(f"captioneer: {note}\n")
    out.write(render_listing(choices))
    return 0


def check_writable(path: Path) -> None:
    """Refuse an output path that cannot be written, naming why (missing folder, a folder, no permission)."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"-o {path} is a folder", "give a file name, e.g. -o talk.srt")
    if not folder.is_dir():
        raise UsageError(
            f"-o {path}: the folder {folder} does not exist", f"create it first (mkdir -p {folder})"
        )
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"-o {path}: no permission to write there", "choose another file")


def _load_progress_printer() -> Any:
    """Load progress on stderr, only for people watching a terminal (scripts get clean stderr)."""
    if not sys.stderr.isatty():
        return None

    def show(event: Any) -> None:
        if event.message:
            sys.stderr.write(f"captioneer: {event.message}\n")

    return show


def _run_offline(engine: Any, audio: Any, request_options: dict[str, Any]) -> Any:
    from inference.audio.decoding import FileBlocks
    from inference.contract import CancelToken

    cancel = CancelToken()
    try:
        if isinstance(audio, FileBlocks):
            return engine.transcribe_blocks(
                audio, expected_samples=audio.expected_samples, cancel=cancel, **request_options
            )
        return engine.transcribe(audio, cancel=cancel, **request_options)
    except KeyboardInterrupt:
        cancel.cancel()  # the worker stops at its next span; the CLI reports the interruption
        raise


def _emit(out: IO[str], event: dict[str, Any]) -> None:
    out.write(json.dumps(event, ensure_ascii=False) + "\n")
    out.flush()


def stream_push_samples(options: dict[str, Any]) -> int:
    """Samples per push of a streamed file or pipe: 320 ms, or the stream's chunk when that is shorter, so a
    push never holds two chunks (a push of more than a chunk is a backlog, decoded at once: catch-up)."""
    from inference.contract import SAMPLE_RATE

    seconds = STREAM_PUSH_SECONDS
    chunk_ms = options.get("chunk_size_ms")
    if isinstance(chunk_ms, int | float) and chunk_ms > 0:
        seconds = min(seconds, float(chunk_ms) / 1000.0)
    return max(1, int(seconds * SAMPLE_RATE))


def _run_stream(
    engine: Any,
    client: Any,
    args: argparse.Namespace,
    audio: Any,
    stdin: IO[bytes],
    request_options: dict[str, Any],
    out: IO[str],
    step: int,
) -> tuple[Any, bool]:
    """Push audio as it comes (a file in ``step``-sample pieces, or stdin as it arrives); events print as they
    happen.

    Ctrl-C or the end of the input finishes the stream: queued audio is drained and the final ``done``
    event follows. Returns the transcript and whether the stream ended while the client had no worker (past
    its restart limit, before a revival): then the transcript is what was heard, the rest a gap marker.
    """
    import threading

    from inference.audio.devices.choices import MEETING_DEFAULT, expand_short_name
    from inference.audio.devices.gaps import GapMarkers
    from inference.client import BacklogPolicy
    from inference.contract import Delta, Stats, event_to_json

    lock = threading.Lock()

    printed: list[str] = []
    deltas: list[Delta] = []  # every committed piece, gap markers included: the segments of what was heard

    def print_events(events: list[Any]) -> None:
        with lock:
            for event in events:
                if isinstance(event, Delta):
                    deltas.append(event)
                if args.format == "jsonl" and not isinstance(event, Stats):
                    _emit(out, event_to_json(event))
                elif args.format == "text" and isinstance(event, Delta) and event.text:
                    # Committed text as it grows, on one line; the final text follows on its own line.
                    out.write(event.text if printed else event.text.lstrip())
                    out.flush()
                    printed.append(event.text)

    if args.input is not None and expand_short_name(args.input) == MEETING_DEFAULT:
        from inference.cli_meeting import run_meeting_stream

        meeting = run_meeting_stream(engine, args.format, args.stream_mode, request_options, step, out)
        return meeting, False  # a meeting whose worker is down past its restart limit fails as a whole

    # A file or a pipe can wait for the model: block instead of refusing audio. A live device cannot wait:
    # its audio queues (bounded), as in the window.
    backlog = (
        BacklogPolicy("coalesce", max_in_flight=2, max_backlog_s=30.0)
        if args.input
        else BacklogPolicy("block")
    )
    # A live device that goes away leaves a marked gap in the transcript (as in the window).
    gaps = GapMarkers(print_events)
    stream = engine.open_stream(
        on_events=gaps.deliver, backlog=backlog, mode=args.stream_mode, **request_options
    )
    # Ctrl-C / kill end the feeding between two pushes (inference/cli_signals.py), never inside one.
    with finish_on_signals() as stop:
        if args.input is not None:
            from inference.audio.devices.feed import feed_until_interrupted

            feed_until_interrupted(
                lambda chunk: _push_live(stream, chunk),
                args.input,
                step,
                lambda note: sys.stderr.write(f"captioneer: {note}\n"),
                on_gap=gaps.add,
                stop=stop.is_set,
            )
        elif audio is not None:
            for start in range(0, audio.size, step):
                if stop.is_set():
                    break
                stream.push(audio[start : start + step])
        else:
            from inference.audio.io import PcmStreamDecoder

            decoder = PcmStreamDecoder(args.input_format, args.input_rate, args.input_channels)
            piece = step * (2 if args.input_format == "s16le" else 4) * args.input_channels
            first = True
            while not stop.is_set():
                data = _read_some(stdin, piece, stop.is_set)
                if first:
                    _refuse_a_file_on_stdin(data)
                    first = False
                samples = decoder.feed(data, last=not data)
                if samples.size:
                    stream.push(samples)
                if not data:
                    break
    if stop.is_set():
        sys.stderr.write("captioneer: interrupted; finishing the transcript\n")
    heard_only = False
    try:
        final = stream.finish()
    except WorkerError as exc:
        if client.gave_up is None:
            raise
        gaps.flush()
        final = _end_while_down(stream, exc, print_events, deltas, lock)
        heard_only = True
    else:
        gaps.flush()
    if printed:
        out.write("\n")
    return gaps.into(final), heard_only


def _end_while_down(
    stream: Any, error: CaptioneerError, print_events: Any, deltas: list[Any], lock: Any
) -> Any:
    """The stream ended while its worker was down: ``finish`` marked the held audio as a gap (a delta, printed
    already); say what happened (an event for jsonl, a note on stderr) and return the transcript of what was
    heard, with its segments."""
    from inference.contract import ErrorEvent
    from inference.heard import heard_with_segments

    fix = "run it again in a moment for the rest: a new run starts a fresh worker"
    message = (
        f"the model's worker is down ({error.message}) and no fresh one took over before the stream ended; "
        "the transcript keeps what was heard, the audio since the failure is marked as not transcribed"
    )
    print_events([ErrorEvent("worker_failed", message, fix, fatal=False)])
    sys.stderr.write(f"captioneer: {message} (exit code {EXIT_HEARD_ONLY}); {fix}\n")
    if error.fix:
        sys.stderr.write(f"captioneer: if it keeps failing: {error.fix}\n")
    with lock:
        return heard_with_segments(stream.heard(), list(deltas))


def _push_live(stream: Any, chunk: np.ndarray) -> None:
    """A live chunk the model has no room for is dropped with a note (the device cannot wait)."""
    from inference.client import BacklogFull

    try:
        stream.push(chunk)
    except BacklogFull as exc:
        sys.stderr.write(f"captioneer: {exc}\n")


def _refuse_a_file_on_stdin(head: bytes) -> None:
    """Streaming reads stdin as raw samples as they arrive: a file there would be heard as noise."""
    from inference.audio.containers import container_kind

    kind = container_kind(head)
    if kind is not None:
        raise UsageError(
            f"stdin holds an audio file ({kind}), not raw PCM samples",
            "pass the file's path instead of '-' (it streams from the file), or drop --mode streaming",
        )


def _read_some(stdin: IO[bytes], size: int, stop: Callable[[], bool] = lambda: False) -> bytes:
    """Up to ``size`` bytes, returning early with what a pipe has (b"" at the end of the input, or once ``stop()``
    says so while the pipe is quiet).

    On POSIX a real stdin is read from its descriptor after short ``select`` waits: Ctrl-C is a process-wide
    signal that the kernel may hand to any thread (the worker client's, a BLAS pool's), and then a ``read``
    blocked in the main thread never returns to let Python run the signal handler while the pipe stays
    open and quiet. Waking every 0.2 s lets the main thread run it and look at ``stop``."""
    fileno = _posix_fileno(stdin)
    if fileno is not None:
        while not select.select([fileno], [], [], 0.2)[0]:
            if stop():
                return b""
        return os.read(fileno, size)
    read1 = getattr(stdin, "read1", None)
    return read1(size) if read1 is not None else stdin.read(size)


def _posix_fileno(stream: IO[bytes]) -> int | None:
    """The descriptor of a real POSIX stream (the live loop reads stdin only through this function, so nothing
    sits in Python's buffer in front of the descriptor), else None."""
    if os.name != "posix":
        return None
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def cmd_models(args: argparse.Namespace, paths: AppPaths, out: IO[str]) -> int:
    from inference.models.checksums import file_checksums
    from inference.models.marker import installed_marker
    from inference.registry import FamilyRegistry

    families = FamilyRegistry.from_environment()
    catalog = families.catalog(paths)
    if args.models_command == "path":
        out.write(f"{paths.models}\n")
        return 0
    if args.models_command in ("install", "remove", "import", "verify", "cleanup"):
        return _cmd_models_store(args, paths, catalog, families.conversions(), out)
    if args.models_command == "info":
        pkg = catalog.get(args.id)
        installed = catalog.installed_path(pkg)
        marker = installed_marker(catalog.package_dir(pkg)) if installed is not None else None
        info = {
            "id": pkg.id,
            "name": pkg.name,
            "family": pkg.family,
            "format": pkg.format,
            "quantization": pkg.quantization,
            "size_bytes": pkg.size_bytes,
            "size_is_estimate": pkg.size_is_estimate,
            "hf_repo": pkg.hf_repo,
            "revision": pkg.revision,
            "files": [checksum.to_json() for checksum in file_checksums(pkg, marker)],
            "languages": list(pkg.languages),
            "license": pkg.license,
            "installed": installed is not None,
            "path": str(installed) if installed else None,
            "notes": pkg.notes,
        }
        out.write(json.dumps(info, indent=2, ensure_ascii=False) + "\n")
        return 0
    if args.models_command == "list" or args.models_command is None:
        entries = catalog.entries()
        if getattr(args, "json", False):
            rows = [
                {
                    "id": e.package.id,
                    "family": e.package.family,
                    "size_bytes": e.package.size_bytes,
                    "installed": e.installed,
                    "default": e.package.default,
                    "name": e.package.name,
                }
                for e in entries
            ]
            out.write(json.dumps(rows, indent=2) + "\n")
            return 0
        out.write(f"{'ID':32} {'FAMILY':16} {'SIZE':>9} {'STATE':10} NAME\n")
        for e in entries:
            size = _human_size(e.package.size_bytes, e.package.size_is_estimate)
            state = "installed" if e.installed else "-"
            mark = " (default)" if e.package.default else ""
            out.write(
                f"{e.package.id:32} {e.package.family:16} {size:>9} {state:10} {e.package.name}{mark}\n"
            )
        return 0
    raise UsageError(f"unknown models command {args.models_command!r}")


def _cmd_models_store(
    args: argparse.Namespace, paths: AppPaths, catalog: Any, conversions: Any, out: IO[str]
) -> int:
    """install / remove / import / verify / cleanup: progress goes to stderr, results to ``out``."""
    from inference.models.errors import CorruptPackageError, InstallCancelled
    from inference.models.store import ModelStore
    from inference.models.terminal import TerminalProgress

    store = ModelStore(paths, catalog, conversions=conversions)
    command = args.models_command
    if command == "remove":
        removed = store.remove(args.id)
        out.write(f"removed {args.id} ({removed})\n")
        return 0
    if command == "cleanup":
        removed_paths = store.cleanup(everything=args.all)
        out.write(f"removed {len(removed_paths)} leftover item(s)\n")
        return 0
    progress = TerminalProgress(sys.stderr)
    try:
        if command == "install":
            already = not args.force and catalog.installed_path(catalog.get(args.id)) is not None
            path = store.install(args.id, progress=progress, force=args.force)
            progress.close()
            out.write(f"{'already installed' if already else 'installed'} {args.id}: {path}\n")
        elif command == "import":
            path = store.import_local(
                Path(args.path),
                args.package_id,
                link=args.link,
                progress=progress,
                sidecars=args.sidecars,
                sha256=args.sha256,
                license_text=args.license_text,
            )
            progress.close()
            out.write(f"imported as {path.relative_to(store.root).parts[0]}: {path}\n")
        else:
            report = store.verify(args.id, progress=progress)
            progress.close()
            for check in report.files:
                note = f" ({check.problem})" if check.problem else ""
                out.write(f"{'ok ' if check.ok else 'BAD'} {check.path}{note}\n")
            if not report.ok:
                raise CorruptPackageError(
                    f"{args.id} is damaged: " + "; ".join(report.problems),
                    f"reinstall it with `captioneer models install {args.id} --force`",
                )
            out.write(f"{args.id} is intact\n")
    except KeyboardInterrupt:
        progress.close()
        raise InstallCancelled("interrupted", "run the same command again; the download resumes") from None
    return 0


def cmd_serve(args: argparse.Namespace, paths: AppPaths) -> int:
    from inference.server.config import LiveLimits, ServerConfig, api_key_from
    from inference.server.run import serve

    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {args.threads}")
    config = ServerConfig(
        host=args.host,
        port=args.port,
        api_key=api_key_from(args.api_key),
        max_upload_bytes=int(args.max_upload_mb * 1024 * 1024),
        max_audio_s=args.max_audio_s,
        max_concurrent=args.max_concurrent,
        request_timeout_s=args.request_timeout_s,
        audio_dir=args.audio_dir,
        grace_s=args.grace_s,
        header_timeout_s=args.header_timeout_s,
        max_connections_per_client=args.max_connections_per_client,
        min_body_bytes_per_s=args.min_body_rate,
        body_window_s=args.body_window_s,
        send_timeout_s=args.send_timeout_s,
        allow_origins=tuple(args.allow_origin),
        live=LiveLimits(max_stream_s=args.live_max_s),
    )
    return serve(config, args.model, paths, backend=args.backend, threads=args.threads)


def _human_size(size: int, estimate: bool) -> str:
    if size <= 0:
        return "bundled"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            text = f"{value:.0f} {unit}" if unit in ("B", "KB") else f"{value:.1f} {unit}"
            return ("~" if estimate else "") + text
        value /= 1000
    return str(size)


def main(
    argv: Sequence[str] | None = None, out: IO[str] | None = None, stdin: IO[bytes] | None = None
) -> int:
    out = out or sys.stdout
    stdin = stdin or sys.stdin.buffer
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in argv or "-v" in argv
    paths = AppPaths.from_environment()
    try:
        from inference.logsetup import configure_logging

        configure_logging(paths, verbose=verbose, user_warnings=True)
        parser = build_parser()
        try:
            with contextlib.redirect_stdout(out):
                args = parser.parse_args(argv)
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
        if args.version:
            from inference.version_info import version_text

            out.write(version_text())
            return 0
        if args.command == "transcribe":
            return cmd_transcribe(args, paths, out, stdin)
        if args.command == "devices":
            return cmd_devices(out)
        if args.command == "models":
            return cmd_models(args, paths, out)
        if args.command == "serve":
            return cmd_serve(args, paths)
        if args.command in ("gui", "dictate"):  # only reached as `python -m inference.cli`
            raise UsageError(f"`{args.command}` runs in the app", f"run `captioneer {args.command}`")
        parser.print_help(out)
        return 0
    except CaptioneerError as exc:
        log.debug("command failed", exc_info=True)
        if verbose:
            traceback.print_exc(file=sys.stderr)
        sys.stderr.write(f"captioneer: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("captioneer: interrupted\n")
        return 130
    except MemoryError:
        sys.stderr.write("captioneer: error: out of memory (use a smaller model or weight type, e.g. q8_0)\n")
        return 1
    except Exception as exc:  # a runtime failure: one line, details with --verbose and in the log
        log.exception("unexpected failure")
        if verbose:
            traceback.print_exc(file=sys.stderr)
        sys.stderr.write(f"captioneer: error: {type(exc).__name__}: {exc} (run with --verbose for details)\n")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
