"""docs/architecture.md stays the picture of the code: every path and every code name it writes in backticks exists
(no model, no network: the markdown and the sources' syntax trees).

A path (`core/service.py`, `config/hosting/`, `stacks/config/hosting/<mode>.py`) is found from the repository root,
under the adapter, stacks/, scripts/, bench/ or tests/, or, given bare, anywhere in the code. A name
(`DecisionService._decide`, `http_app.build_app(service)`, `.yes_no`) is an identifier the code defines or uses (a
value such as `native` may be a string the code holds), and `Class.member` is defined on that class or a base it
names."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
CODE_ROOTS = [ROOT / "container", ROOT / "stacks", ROOT / "scripts", ROOT / "semif_sagemaker", ROOT / "clients",
              ROOT / "bench"]
PATH_BASES = [ROOT, ROOT / "container", ROOT / "container" / "semif_adapter", ROOT / "stacks", ROOT / "scripts",
              ROOT / "bench", ROOT / "tests"]
FENCE = re.compile(r"^\s*(```|~~~)")
SPAN = re.compile(r"`([^`]+)`")
PATH = re.compile(r"^[\w.<>*-]+(/[\w.<>*-]*)*$")
NAME = re.compile(r"^\.?(?P<dotted>[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)(\(.*\))?$")
FILE_SUFFIXES = (".py", ".json", ".sh", ".yml", ".toml", ".md", ".txt")
GENERATED = {"cdk.out/"}  # what `cdk synth` writes, never in a checkout
ENV_PREFIXES = ("SEMIF_", "SM_LLAMA_CPP_")  # a variable's name is its prefix and a string the code holds
INSTALLED = (ROOT / "pyproject.toml").read_text()  # where the installed names (`semif_sagemaker.cdk`) are mapped


def spans(text: str) -> list[str]:
    """The inline code spans outside fenced blocks (the diagrams are pictures, not references)."""
    found, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            found += SPAN.findall(line)
    return found


def is_path(span: str) -> bool:
    return bool(PATH.match(span)) and ("/" in span or span.endswith(FILE_SUFFIXES))


def path_exists(span: str) -> bool:
    pattern = re.sub(r"<[^>]+>", "*", span.rstrip("/"))
    if any(list(base.glob(pattern)) for base in PATH_BASES):
        return True
    return "/" not in pattern and any(next(root.rglob(pattern), None) for root in CODE_ROOTS)


@cache
def code() -> tuple[frozenset[str], frozenset[str], dict[str, set[str]], dict[str, set[str]]]:
    """Every identifier the code defines or uses, every string it holds, and each class's members and bases."""
    names: set[str] = set()
    strings: set[str] = set()
    members: dict[str, set[str]] = {}
    bases: dict[str, set[str]] = {}
    for root in CODE_ROOTS:
        for path in root.rglob("*.py"):
            names.update(path.relative_to(ROOT).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Name):
                    names.add(node.id)
                elif isinstance(node, ast.Attribute):
                    names.add(node.attr)
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names.add(node.name)
                elif isinstance(node, ast.arg):
                    names.add(node.arg)
                elif isinstance(node, ast.alias):
                    names.update((node.asname or node.name).split("."))
                elif isinstance(node, ast.keyword) and node.arg:
                    names.add(node.arg)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    strings.add(node.value)
                if isinstance(node, ast.ClassDef):
                    members.setdefault(node.name, set()).update(_defined_in(node))
                    bases.setdefault(node.name, set()).update(ast.unparse(base).split(".")[-1] for base in node.bases)
    return frozenset(names), frozenset(strings), members, bases


def _defined_in(cls: ast.ClassDef) -> set[str]:
    found = set()
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
        elif isinstance(node, ast.Assign):
            found.update(target.id for target in ast.walk(node) if isinstance(target, ast.Name))
    return found


def _has_member(cls: str, member: str, seen: frozenset[str] = frozenset()) -> bool:
    _, _, members, bases = code()
    if member in members.get(cls, set()):
        return True
    return any(_has_member(base, member, seen | {cls}) for base in bases.get(cls, set()) - seen if base in members)


def name_exists(dotted: str) -> bool:
    names, strings, members, _ = code()
    parts = dotted.split(".")
    if len(parts) == 1 and (dotted in strings or any(dotted.startswith(prefix) and dotted[len(prefix):] in strings
                                                     for prefix in ENV_PREFIXES)):
        return True  # a value the code holds (`native`, `queue_full`), an environment variable it reads
    if (len(parts) == 1 and path_exists(dotted)) or f'"{dotted}' in INSTALLED:
        return True  # a file (`Dockerfile`), an installed package's name
    if not all(part in names for part in parts):
        return False
    owner, member = parts[-2:] if len(parts) > 1 else ("", "")
    return owner not in members or _has_member(owner, member)


def missing(text: str) -> list[str]:
    found = []
    for span in spans(text):
        if is_path(span):
            if not path_exists(span) and span not in GENERATED:
                found.append(span)
        elif (match := NAME.match(span)) and not name_exists(match["dotted"]):
            found.append(span)
    return sorted(set(found))


def test_every_path_and_name_in_the_architecture_page_exists_in_the_code() -> None:
    assert not missing(PAGE.read_text())


def test_a_stale_name_or_path_is_found() -> None:
    """The check itself: a function, a member, a module that are not in the code are reported; ones that are are
    not."""
    page = ("`DecisionService._score` `DecisionService.decide_all` `core/no_such.py` `core/service.py` "
            "`config/hosting/<mode>.py` `http_app.build_app(service)` `NoSuchClass` `SEMIF_QUEUE_SIZE=1`\n"
            "```\n`ignored_in_a_diagram`\n```\n")
    assert missing(page) == ["DecisionService._score", "NoSuchClass", "core/no_such.py"]
