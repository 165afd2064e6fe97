"""One peer runtime in its own process and virtual environment, serving bench_peers.py.

    PEER_VENV/bin/python tests/bench/peers/worker.py --peer onnx-asr --precision int8 --model EXPORT_DIR --threads 2

Protocol (the same as bench_parakeet.py's workers): one JSON line ``{"ready": true, "threads": {...}}`` after
loading, then for every clip path read on stdin one JSON line with the wall and CPU seconds of the call, the
greedy token ids and the process's peak RSS so far. Only the stdlib, numpy and the peer's own package are
imported (``tests.bench.machine`` is stdlib-only), so the peer's venv needs nothing from the app.

Token ids: the peers return token *pieces*; they map back to ids through the export's vocabulary, whose pieces
are unique and hold no spaces (``common.pieces`` checks this when exporting).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tests.bench import machine  # noqa: E402

SR = 16000
Runner = Callable[[np.ndarray], list[int]]


def piece_ids(vocab_file: Path) -> dict[str, int]:
    ids: dict[str, int] = {}
    for line in vocab_file.read_text(encoding="utf-8").splitlines():
        piece, index = line.rsplit(" ", 1)
        ids[piece] = int(index)
        ids.setdefault(piece.replace("\u2581", " "), int(index))  # onnx-asr hands pieces back with "▁" as " "
    return ids


def onnx_asr_runner(model: Path, precision: str, threads: int) -> tuple[Runner, dict]:
    import onnx_asr
    import onnxruntime as rt

    options = rt.SessionOptions()
    options.intra_op_num_threads = threads  # ORT counts the calling thread in this pool
    options.inter_op_num_threads = 1  # sequential execution mode: the inter-op pool is unused
    asr = onnx_asr.load_model(
        "nemo-conformer-tdt",
        model,
        quantization=None if precision == "fp32" else precision,
        sess_options=options,
        providers=["CPUExecutionProvider"],
    ).with_timestamps()
    ids = piece_ids(model / "vocab.txt")
    inner = asr.asr if hasattr(asr, "asr") else None
    sessions = [
        getattr(inner, name)
        for name in ("_encoder", "_decoder_joint")
        if inner is not None and hasattr(inner, name)
    ]
    effective = {
        "ort_intra_op_threads": sessions[0].get_session_options().intra_op_num_threads
        if sessions
        else threads,
        "ort": rt.__version__,
        "onnx_asr": getattr(onnx_asr, "__version__", "?"),
        "intra_op_spinning": "ORT default (spins while waiting)",
        "pools": machine.blas_threads(),
    }

    def run(audio: np.ndarray) -> list[int]:
        return [ids[piece] for piece in asr.recognize(audio, sample_rate=SR).tokens or []]

    return run, effective


def sherpa_onnx_runner(model: Path, precision: str, threads: int) -> tuple[Runner, dict]:
    import sherpa_onnx

    suffix = "" if precision == "fp32" else f".{precision}"
    recognizer = sherpa_onnx.OfflineRecognizer.from_transducer(
        encoder=str(model / f"encoder{suffix}.onnx"),
        decoder=str(model / f"decoder{suffix}.onnx"),
        joiner=str(model / f"joiner{suffix}.onnx"),
        tokens=str(model / "tokens.txt"),
        num_threads=threads,
        sample_rate=SR,
        feature_dim=128,
        decoding_method="greedy_search",
        model_type="nemo_transducer",
    )
    ids = piece_ids(model / "tokens.txt")
    version = getattr(sherpa_onnx, "__version__", "?")
    effective = {"sherpa_num_threads": threads, "sherpa_onnx": version, "pools": machine.blas_threads()}

    def run(audio: np.ndarray) -> list[int]:
        stream = recognizer.create_stream()
        stream.accept_waveform(SR, audio)
        recognizer.decode_stream(stream)
        return [ids[piece] for piece in stream.result.tokens]

    return run, effective


def crispasr_runner(model: Path, precision: str, threads: int) -> tuple[Runner, dict]:
    import crispasr

    # CrispASR's own converter writes f16 (default) or quantized linear weights; no f32 GGUF.
    net = crispasr.Parakeet(str(model / f"crispasr-{precision}.gguf"), n_threads=threads)
    ids = piece_ids(model / "vocab.txt")
    effective = {
        "ggml_n_threads": threads,
        "crispasr": getattr(crispasr, "__version__", "?"),
        "pools": machine.blas_threads(),
    }

    def token_id(text: str) -> int:
        # Word-initial pieces may come back as "▁x", " x" or "x" after its detokeniser.
        for candidate in (text, "\u2581" + text.lstrip(" "), text.lstrip(" ")):
            if candidate in ids:
                return ids[candidate]
        return -1

    def run(audio: np.ndarray) -> list[int]:
        return [token_id(token[0]) for token in net.transcribe(audio)["tokens"]]

    return run, effective


def transcribe_cpp_runner(model: Path, precision: str, threads: int) -> tuple[Runner, dict]:
    import transcribe_cpp

    # Its converter writes f32 only (quantising needs its C++ tool); the folder name is the variant.
    net = transcribe_cpp.Model(str(model / "parakeet-tdt-0.6b-v3" / f"transcribe-cpp-{precision}.gguf"))
    session = net.session(n_threads=threads)
    effective = {
        "ggml_n_threads": threads,
        "transcribe_cpp": transcribe_cpp.native_version(),
        "pools": machine.blas_threads(),
    }

    def run(audio: np.ndarray) -> list[int]:
        return [token.id for token in session.run(audio, timestamps="token").tokens]

    return run, effective


RUNNERS: dict[str, Callable[[Path, str, int], tuple[Runner, dict]]] = {
    "onnx-asr": onnx_asr_runner,
    "sherpa-onnx": sherpa_onnx_runner,
    "crispasr": crispasr_runner,
    "transcribe-cpp": transcribe_cpp_runner,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--peer", choices=sorted(RUNNERS), required=True)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    run, effective = RUNNERS[args.peer](args.model, args.precision, args.threads)
    machine.serve_timed_runs(effective, lambda path: np.load(path).astype(np.float32), run)


if __name__ == "__main__":
    main()
