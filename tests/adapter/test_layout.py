"""How the adapter's modules depend on each other: the rules a newcomer can rely on, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "container" / "semif_adapter"
MAX_MODULE_LINES = 450  # one job per module (issue 27)


def _modules() -> dict[str, ast.Module]:
    """Every module of the package by dotted name relative to it (`service`, `deploy.artifact`)."""
    return {".".join(path.relative_to(PACKAGE).with_suffix("").parts): ast.parse(path.read_text())
            for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, tree: ast.Module) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) of each import of the package's own modules, made absolute."""
    package = name.split(".")[:-1]
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - node.level + 1]
            target = ".".join([*base, *([node.module] if node.module else [])])
            if node.module:
                found.append((target, [alias.name for alias in node.names]))
            else:  # `from . import metrics`: each name is a module
                found += [(".".join([*base, alias.name]), []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("semif_adapter."):
            found.append(((node.module or "").removeprefix("semif_adapter."), [alias.name for alias in node.names]))
    return found


def test_runtime_modules_never_import_the_deploy_tools():
    for name, tree in _modules().items():
        if not name.startswith("deploy"):
            imported = [target for target, _ in _imports(name, tree) if target.startswith("deploy")]
            assert not imported, f"{name} imports {imported}: deploy tools import the runtime, not the reverse"


def test_metrics_need_no_service_and_http_no_prompt():
    modules = _modules()
    assert "core.service" not in {target for target, _ in _imports("core.metrics", modules["core.metrics"])}
    assert "core.prompt" not in {target for target, _ in _imports("doors.http_app", modules["doors.http_app"])}


def test_no_private_name_is_imported_from_another_module():
    for name, tree in _modules().items():
        for target, names in _imports(name, tree):
            private = [n for n in names if n.startswith("_")]
            assert not private, f"{name} imports {private} from {target}"


def test_every_import_of_the_package_names_a_module_that_exists():
    modules = _modules()
    for name, tree in modules.items():
        for target, _ in _imports(name, tree):
            assert target in modules or f"{target}.__init__" in modules, f"{name} imports {target}"


def test_modules_stay_small():
    sizes = {path.name: len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert max(sizes.values()) <= MAX_MODULE_LINES, sorted(sizes.items(), key=lambda item: -item[1])[:3]
