"""The import graph of app/ and inference/ has no cycles, every module imports only its own layer and those below
(``LAYERS``, docs/architecture.md §1), and inference/ stays free of app/ and Qt.

Every import counts: module level, inside functions and under TYPE_CHECKING, because a cycle
dodged by a late import is still a cycle for whoever reads the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "inference")
QT_PACKAGES = ("PySide6", "PyQt5", "PyQt6", "shiboken6")

# Top to bottom: a module imports modules of its own layer or of the layers below it, never above. An entry
# "pkg.*" is the package and everything in it, any other entry one module; a module in no layer fails the test
# until it is given its place. The family registry sits above the families, which sit above the store: the
# store receives what it needs of the families as parameters (inference.models.conversion, source_import).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the app", ("app.*",)),
    (
        "the CLI",
        ("inference.cli", "inference.cli_meeting", "inference.cli_signals", "inference.app_commands"),
    ),
    ("the server", ("inference.server.*",)),
    ("the client", ("inference.client.*", "inference.replay", "inference.continuity")),
    ("the worker", ("inference.worker", "inference.protocol")),
    ("the engine loader", ("inference.engine",)),
    ("the family registry", ("inference.registry",)),
    ("the families", ("inference.families.*",)),
    ("the family interface", ("inference.family",)),
    ("the model store and catalog", ("inference.models.*",)),
    (
        "the foundation",
        (
            "inference",
            "inference.streaming",
            "inference.streaming_windows",
            "inference.offline_jobs",
            "inference.heard",
            "inference.speakers",
            "inference.audio.*",
            "inference.native.*",
            "inference.contract",
            "inference.resume_state",
            "inference.errors",
            "inference.paths",
            "inference.languages",
            "inference.formats",
            "inference.logsetup",
            "inference.native_stderr",
            "inference.version_info",
        ),
    ),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    return {
        _module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
    }


def _imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name imported by the module, relative imports resolved."""
    is_package = path.name == "__init__.py"
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                drop = node.level - 1 if is_package else node.level
                anchor = anchor[: len(anchor) - drop]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            # `from package import submodule` imports the submodule too.
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _import_graph() -> dict[str, set[str]]:
    sources = _sources()
    graph: dict[str, set[str]] = {}
    for module, path in sources.items():
        edges: set[str] = set()
        for name in _imported_names(module, path):
            # The module itself, or the closest package that is one of ours.
            while name and name not in sources:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                edges.add(name)
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def test_the_graph_sees_the_packages() -> None:
    graph = _import_graph()
    assert "inference.native.ops" in graph
    assert "inference.native.tensor" in graph["inference.native.ops"]


def test_the_cycle_finder_names_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_app_and_inference_have_no_import_cycles() -> None:
    cycles = _cycles(_import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(cycle) for cycle in cycles)


def test_inference_imports_neither_app_nor_qt() -> None:
    sources = _sources()
    offenders = []
    for module, path in sources.items():
        if not module.startswith("inference"):
            continue
        for name in _imported_names(module, path):
            top = name.split(".")[0]
            if top == "app" or top in QT_PACKAGES:
                offenders.append(f"{module} imports {name}")
    assert not offenders, "\n".join(sorted(offenders))


def _layer_of(module: str) -> int | None:
    """The index in ``LAYERS`` (0 is the top) of the most specific entry naming ``module``."""
    best: tuple[int, int] | None = None  # (entry length, layer)
    for rank, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            package = entry.removesuffix(".*")
            named = module == package or (entry.endswith(".*") and module.startswith(package + "."))
            if named and (best is None or len(package) > best[0]):
                best = (len(package), rank)
    return None if best is None else best[1]


def _layer_violations(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for module in sorted(graph):
        rank = _layer_of(module)
        if rank is None:
            problems.append(f"{module} is in no layer: give it its place in LAYERS")
            continue
        for imported in sorted(graph[module]):
            below = _layer_of(imported)
            if below is not None and below < rank:
                problems.append(
                    f"{module} ({LAYERS[rank][0]}) imports {imported} ({LAYERS[below][0]}), a layer above"
                )
    return problems


def _family_crossings(graph: dict[str, set[str]]) -> list[str]:
    """Imports from one family folder into another (what two families share belongs below them)."""

    def family(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if len(parts) > 2 and parts[:2] == ["inference", "families"] else None

    return sorted(
        f"{module} imports {imported}"
        for module, edges in graph.items()
        for imported in edges
        if family(module) is not None and family(imported) not in (None, family(module))
    )


def test_the_layer_check_names_an_import_from_above() -> None:
    graph = {
        "inference.models.store": {"inference.families.parakeet_tdt.install", "inference.errors"},
        "inference.families.parakeet_tdt.install": {"inference.models.spec"},
        "inference.models.spec": set(),
        "inference.errors": set(),
        "inference.unplaced": set(),
    }
    assert _layer_violations(graph) == [
        "inference.models.store (the model store and catalog) imports inference.families.parakeet_tdt.install "
        "(the families), a layer above",
        "inference.unplaced is in no layer: give it its place in LAYERS",
    ]


def test_every_module_imports_only_its_layer_and_those_below() -> None:
    problems = _layer_violations(_import_graph())
    assert not problems, "\n".join(problems)


def test_no_family_imports_another() -> None:
    crossings = _family_crossings(_import_graph())
    assert not crossings, "\n".join(crossings)


def test_the_app_imports_no_family_folder_native_code_or_engine() -> None:
    """The app loads models through the client only (docs/architecture.md §1); the descriptors it reads come
    from the registry."""
    graph = _import_graph()
    off_limits = ("inference.families", "inference.native", "inference.engine", "inference.worker")
    offenders = sorted(
        f"{module} imports {imported}"
        for module, edges in graph.items()
        if module.startswith("app")
        for imported in edges
        if imported.startswith(off_limits)
    )
    assert not offenders, "\n".join(offenders)
