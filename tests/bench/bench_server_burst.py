"""A burst of clients against a busy model: how many of 32 simultaneous `openai` clients (default settings: two
retries that honour ``retry-after-ms``) get their transcription when the model takes ``--max-concurrent``
requests at once and nobody asked to wait (no ``busy_timeout_ms``).

    .venv/bin/python tests/bench/bench_server_burst.py [--clients 32] [--max-concurrent 2] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> None:
    import openai

    from inference.models.spec import load_family_spec
    from inference.server.config import ServerConfig
    from inference.server.registry import ModelRegistry, ServedModel
    from tests.bench.machine import machine_header
    from tests.server.harness import DEMO_MODEL, SAMPLE_1, running_server

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--max-concurrent", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(machine_header(args.threads))
    demo = ServedModel(
        "demo", DEMO_MODEL, "parakeet_tdt", load_family_spec("parakeet_tdt"), ("en",), args.max_concurrent
    )
    registry = ModelRegistry([demo])
    registry.start(threads=args.threads)
    audio = SAMPLE_1.read_bytes()
    try:
        with running_server(ServerConfig(max_concurrent=args.max_concurrent), registry) as url:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
            client.audio.transcriptions.create(
                model="demo", file=("s.wav", audio)
            )  # warm up, and a first duration
            outcomes: list[str] = []
            gate = threading.Barrier(args.clients)

            def one() -> None:
                gate.wait()
                try:
                    client.audio.transcriptions.create(model="demo", file=("s.wav", audio))
                    outcomes.append("ok")
                except openai.RateLimitError:
                    outcomes.append("429")

            started = time.monotonic()
            threads = [threading.Thread(target=one) for _ in range(args.clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            took = time.monotonic() - started
    finally:
        registry.close()
    print(
        f"{args.clients} clients, --max-concurrent {args.max_concurrent}: {outcomes.count('ok')} answered, "
        f"{outcomes.count('429')} gave up after the client's retries (RateLimitError), in {took:.1f} s"
    )


if __name__ == "__main__":
    main()
