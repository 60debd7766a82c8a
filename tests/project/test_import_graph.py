"""The house's shape: no import circles between our modules, and no module beyond the size a reader can hold.

Imports are read from the source (module level and inside functions; `if TYPE_CHECKING:` blocks left out, as they
never run), so a circle is found before it bites at import time in one order and not another."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"stacks": ROOT / "stacks", "scripts": ROOT / "scripts", "bench": ROOT / "bench",
            "semif_adapter": ROOT / "container" / "semif_adapter",
            "semif_decision_client": ROOT / "clients" / "python" / "semif_decision_client"}
MAX_LINES = 450


def modules() -> dict[str, Path]:
    found = {}
    for package, directory in PACKAGES.items():
        for path in directory.rglob("*.py"):
            parts = [package, *path.relative_to(directory).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    skipped = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
               and "TYPE_CHECKING" in ast.unparse(block.test) for node in ast.walk(block)}
    return [node for node in ast.walk(tree) if id(node) not in skipped]


def imports_of(name: str, source: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of `known` that `name` imports (`from pkg import sub` is the submodule, not the package)."""
    package = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else node.module or ""
            names = [f"{base}.{alias.name}" for alias in node.names]
            found.update(names)
            if any(full not in known for full in names):
                found.add(base)
    return {target for target in found if target in known and target != name}


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    return {name: imports_of(name, text, is_package, set(sources)) for name, (text, is_package) in sources.items()}


def test_no_import_circles() -> None:
    sources = {name: (path.read_text(), path.name == "__init__.py") for name, path in modules().items()}
    assert len(sources) > 150  # every package was found
    try:
        tuple(graphlib.TopologicalSorter(import_graph(sources)).static_order())
    except graphlib.CycleError as error:
        pytest.fail(f"import circle: {' -> '.join(error.args[1])}")


def test_a_circle_through_a_package_is_found_and_a_submodule_import_is_not_one() -> None:
    """The check itself: a package importing from its submodule, which imports a name of the package back, is a
    circle; a package's `from . import sub` is not an import of itself."""
    circle = {"pkg": ("from .a import thing\n", True), "pkg.a": ("from . import SETTING\n", False)}
    with pytest.raises(graphlib.CycleError):
        tuple(graphlib.TopologicalSorter(import_graph(circle)).static_order())
    fine = {"pkg": ("from .a import thing\n", True), "pkg.a": ("from . import b\n", False), "pkg.b": ("", False)}
    assert import_graph(fine) == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": set()}


def test_no_module_is_too_long_to_read() -> None:
    long = {name: lines for name, path in modules().items()
            if (lines := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, long


# The adapter's layers, top to bottom: a module imports only from its own layer or the ones below it. The process
# (the server, its entry points and the deploy-time tools) reads the settings; the settings are read and validated
# in one place that imports the layers below it for the types it checks (a calibration, the frames, llama.cpp's
# flash-attention values); each layer is handed what it needs (`core/service_settings.py`,
# `engine/llama_settings.py`); `errors` (the failures every layer raises) is the floor. Every module has a layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("semif_adapter", "semif_adapter.__main__", "semif_adapter.server", "semif_adapter.deploy"),
    ("semif_adapter.settings",),
    ("semif_adapter.doors",),
    ("semif_adapter.core",),
    ("semif_adapter.engine",),
    ("semif_adapter.errors",),
)


def _layer(module: str) -> int | None:
    """The rank of a module's layer (0 the top); the most specific prefix wins (`semif_adapter` is the package)."""
    ranks = [(len(prefix), rank) for rank, prefixes in enumerate(LAYERS) for prefix in prefixes
             if module == prefix or (prefix != "semif_adapter" and module.startswith(prefix + "."))]
    return max(ranks)[1] if ranks else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import that points up the layers (an engine module importing the core or the settings, ...)."""
    found = []
    for name, targets in graph.items():
        rank = _layer(name)
        if rank is None:
            continue
        found += [f"{name} -> {target}" for target in sorted(targets)
                  if (target_rank := _layer(target)) is not None and target_rank < rank]
    return found


def test_the_adapter_imports_only_downward_process_settings_doors_core_engine_errors() -> None:
    sources = {name: (path.read_text(), path.name == "__init__.py") for name, path in modules().items()
               if name.startswith("semif_adapter")}
    graph = import_graph(sources)
    assert not [name for name in graph if _layer(name) is None]  # every module has a layer
    assert {_layer(name) for name in graph} == set(range(len(LAYERS)))  # every layer was found
    upward = upward_imports(graph)
    assert len(upward) == 0, upward


def test_an_upward_import_is_found() -> None:
    """The check itself: the engine importing the core or the settings, the settings the server, are reported;
    downward (the settings a core module, a door the engine) is not."""
    graph = {"semif_adapter.engine.tokens": {"semif_adapter.core.prompt", "semif_adapter.settings",
                                             "semif_adapter.errors"},
             "semif_adapter.settings": {"semif_adapter.core.calibration", "semif_adapter.server"},
             "semif_adapter.doors.http_app": {"semif_adapter.core.service", "semif_adapter.engine.tokens"},
             "semif_adapter.server": {"semif_adapter.settings", "semif_adapter.deploy.reference"}}
    assert upward_imports(graph) == ["semif_adapter.engine.tokens -> semif_adapter.core.prompt",
                                     "semif_adapter.engine.tokens -> semif_adapter.settings",
                                     "semif_adapter.settings -> semif_adapter.server"]
