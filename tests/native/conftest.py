"""Shared fixtures for the native-layer tests: one CPU backend per session and a one-op runner."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

from inference.native import Backend, Graph, GraphBuilder, Tensor, open_backend

OpRunner = Callable[..., np.ndarray]


@pytest.fixture(scope="session")
def cpu_backend() -> Iterator[Backend]:
    backend = open_backend("cpu", threads=2)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def run_op(cpu_backend: Backend) -> OpRunner:
    """``run_op(op, *arrays)``: a graph with inputs ``arrays`` and the single output ``op(g, *inputs)``."""

    def run(op: Callable[..., Tensor], *arrays: np.ndarray) -> np.ndarray:
        def build(g: GraphBuilder) -> None:
            tensors = [g.input(f"in{i}", a.shape, a.dtype) for i, a in enumerate(arrays)]
            g.output("out", op(g, *tensors))

        with Graph(cpu_backend, build) as graph:
            return graph.run({f"in{i}": a for i, a in enumerate(arrays)})["out"]

    return run


@pytest.fixture
def hide_module(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """``hide_module(name)``: importing ``name`` raises ImportError for the rest of the test (a missing package)."""
    import builtins

    real_import = builtins.__import__

    def hide(name: str) -> None:
        def importing(module: str, *args: object, **kwargs: object) -> object:
            if module == name:
                raise ImportError(f"No module named {name!r}")
            return real_import(module, *args, **kwargs)

        monkeypatch.setattr(builtins, "__import__", importing)

    return hide
