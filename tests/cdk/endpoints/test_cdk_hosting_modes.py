"""Each hosting mode is one class in stacks/config/hosting/ and its twin in stacks/endpoints/modes/; the rest of
stacks/ asks the mode and never compares its name (issue 54)."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

from stacks.config.hosting import MODES
from stacks.config.kinds import HostingMode
from stacks.endpoints.modes import SERVING

STACKS = Path(__file__).resolve().parents[3] / "stacks"
# Where a mode's name may be written: its own modules, the schema that lists the names, and the default.
MODE_HOMES = ("config/hosting/", "endpoints/modes/", "config/kinds.py", "config/environment.py")


def test_every_mode_of_the_schema_has_its_config_rules_and_its_resources() -> None:
    names = set(typing.get_args(HostingMode))
    assert set(MODES) == names == set(SERVING)
    assert all(MODES[name].name == SERVING[name].name == name for name in names)


def mode_names_outside_their_modules() -> list[str]:
    names = set(typing.get_args(HostingMode))
    found = []
    for path in STACKS.rglob("*.py"):
        relative = path.relative_to(STACKS).as_posix()
        if relative.startswith(MODE_HOMES):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{relative}:{node.lineno}: {node.value!r}")
    return found


def test_no_module_outside_the_modes_compares_a_mode_by_its_name() -> None:
    assert mode_names_outside_their_modules() == []
