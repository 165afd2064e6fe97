"""What the R2T2 tower benchmarks share: their options and a full-size random engine to time the tower on."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench_r2t2_stream import SHAPES
from r2t2_random_checkpoint import build


def tower_bench_parser(description: str | None, size: str) -> argparse.ArgumentParser:
    """The options every tower benchmark takes: ``--size`` (default ``size``), ``--work``, ``--tower-type``,
    ``--threads``."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", default=size, choices=sorted(SHAPES))
    parser.add_argument("--work", type=Path, default=Path("/tmp/r2t2-live"))
    parser.add_argument("--tower-type", default="q8_0")
    parser.add_argument("--threads", type=int, default=2)
    return parser


def open_random_engine(args: argparse.Namespace) -> Any:
    """An R2T2 engine on the full-size random checkpoint of ``--size`` (built under ``--work`` once)."""
    from inference.engine import EngineRequest
    from inference.families.confucius4_r2t2.engine import create_engine

    model = build(args.work / f"model-{args.size}", SHAPES[args.size])
    session = {"thinker_weight_type": "q4_k", "tower_weight_type": args.tower_type}
    return create_engine(EngineRequest(model, "confucius4_r2t2", session, "cpu", args.threads))
