"""The DLC's `SM_LLAMA_CPP_*` -> llama-server flag mapping, and the flags that exist.

The llama.cpp DLC turns every `SM_LLAMA_CPP_FOO_BAR=v` into `--foo-bar v`
(`true` = bare flag, `false` = dropped; MODEL, MODEL_DIR and PORT consumed).
An unknown flag makes llama-server exit, and SageMaker reports that only when
the startup health check times out, ten minutes or more later. This module is
the one copy of the mapping (the local chat front runs it, the CDK config
check validates with it) and of the list of valid flags, which is data taken
from the pinned llama-server's `--help` (`scripts/update_llama_flags.py`).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources

PREFIX = "SM_LLAMA_CPP_"
CONSUMED = frozenset({"MODEL", "MODEL_DIR", "PORT"})  # read by the entry point, never passed as flags
# Set by the DLC's entry point itself; a second value would break the nginx -> llama-server wiring.
RESERVED = frozenset({"--host", "--port"})
FLAGS_FILE = "llama_server_flags.json"
_KEY_PATTERN = re.compile(r"^[A-Z0-9]+(?:_[A-Z0-9]+)*$")
_HELP_ENTRY = re.compile(r"^(?P<names>-[^\s,]+(?:,\s+-[^\s,]+)*)(?:\s(?P<arg>\S+))?(?:\s{2,}|$)")


class Arity(StrEnum):
    NONE = "none"  # a switch: only `true`/`false` make sense
    REQUIRED = "required"  # takes a value
    OPTIONAL = "optional"  # `--flag` alone or `--flag value`


class FlagError(ValueError):
    """An `SM_LLAMA_CPP_*` setting that would stop llama-server from starting."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True)
class FlagTable:
    """Long flags of one llama-server build, with whether each takes a value."""

    source: str
    flags: Mapping[str, Arity]


@cache
def known_flags() -> FlagTable:
    """The committed flag list of the pinned llama-server."""
    data = json.loads(resources.files(__package__).joinpath(FLAGS_FILE).read_text())
    return FlagTable(source=data["source"], flags={k: Arity(v) for k, v in data["flags"].items()})


def parse_help(text: str) -> dict[str, Arity]:
    """Long flags and their arity from `llama-server --help` output."""
    flags: dict[str, Arity] = {}
    for line in text.splitlines():
        match = _HELP_ENTRY.match(line)
        if not match:
            continue
        arg = match["arg"]
        if arg is None:
            arity = Arity.NONE
        elif re.fullmatch(r"\[[^\]]*\]", arg):
            arity = Arity.OPTIONAL
        else:
            arity = Arity.REQUIRED
        for name in re.split(r",\s+", match["names"]):
            if name.startswith("--"):
                flags[name] = arity
    return dict(sorted(flags.items()))


def flag_for(key: str) -> str:
    """`SM_LLAMA_CPP_FOO_BAR` -> `--foo-bar`, exactly as the DLC's entry point spells it."""
    return "--" + key[len(PREFIX):].lower().replace("_", "-")


def key_for(flag: str) -> str:
    return PREFIX + flag.removeprefix("--").upper().replace("-", "_")


def check_setting(key: str, value: str, table: FlagTable | None = None) -> None:
    """Raise FlagError if this one variable would break llama-server's start."""
    if not key.startswith(PREFIX):
        raise FlagError(key, f"not an {PREFIX}* variable")
    name = key[len(PREFIX):]
    if not _KEY_PATTERN.match(name):
        raise FlagError(key, "must be upper-case words joined by single underscores")
    if name in CONSUMED:
        return
    table = table or known_flags()
    flag = flag_for(key)
    if flag in RESERVED:
        raise FlagError(key, f"{flag} is set by the DLC's entry point and must not be overridden")
    arity = table.flags.get(flag)
    if arity is None:
        close = difflib.get_close_matches(flag, list(table.flags), n=1)
        hint = f" (did you mean {key_for(close[0])}?)" if close else ""
        raise FlagError(key, f"llama-server has no flag {flag}{hint}; it would exit at start-up")
    lowered = value.lower()
    if arity is Arity.NONE and lowered not in ("true", "false"):
        raise FlagError(key, f"{flag} is a switch: use 'true' or 'false', not {value!r}")
    if arity is Arity.REQUIRED and (lowered == "true" or value == ""):
        raise FlagError(key, f"{flag} needs a value, not {value!r}")


def check_environment(env: Mapping[str, str], table: FlagTable | None = None) -> None:
    """Validate every `SM_LLAMA_CPP_*` entry of an environment map."""
    for key in sorted(env):
        if key.startswith(PREFIX):
            check_setting(key, env[key], table)


def server_args(env: Mapping[str, str]) -> list[str]:
    """The llama-server arguments the DLC's entry point builds from these variables."""
    args: list[str] = []
    for key in sorted(k for k in env if k.startswith(PREFIX)):
        if key[len(PREFIX):] in CONSUMED:
            continue
        value = env[key]
        lowered = value.lower()
        if lowered == "false":
            continue
        args.append(flag_for(key))
        if lowered != "true" and value:
            args.append(value)
    return args
