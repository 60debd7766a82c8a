"""The DLC's `SM_LLAMA_CPP_*` -> llama-server flag mapping, and the flags that exist, with their value types.

The llama.cpp DLC turns every `SM_LLAMA_CPP_FOO_BAR=v` into `--foo-bar v`
(`true` = bare flag, `false` = dropped; MODEL, MODEL_DIR and PORT consumed).
An unknown flag or a value llama-server cannot parse makes it exit, and
SageMaker reports that only when the startup health check times out, ten
minutes or more later. This module is the one copy of the mapping (the local
chat front runs it, the CDK config check validates with it), of the list of
valid flags with each value's type (data taken from the pinned llama-server's
`--help` by `scripts/dev/update_llama_flags.py`), and of the flags refused because
they open files, sockets or remote backends, or break the endpoint (data
beside it, `llama_server_unsafe_flags.json`).
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import Any

from ..settings import LLAMA_PREFIX

PREFIX = LLAMA_PREFIX  # `SM_LLAMA_CPP_`: one spelling, the adapter settings' (this module's users name it PREFIX)
CONSUMED = frozenset({"MODEL", "MODEL_DIR", "PORT"})  # read by the entry point, never passed as flags
# Set by the DLC's entry point itself; a second value would break the nginx -> llama-server wiring.
RESERVED = frozenset({"--host", "--port"})
FLAGS_FILE = "llama_server_flags.json"
UNSAFE_FLAGS_FILE = "llama_server_unsafe_flags.json"
# The entry point turns the environment into llama-server's argument list; a control character (a newline
# above all) would cut a value apart or smuggle in another argument.
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")
INT_MIN = -1  # llama.cpp's integer flags use -1 ("auto", "unlimited", "disabled") as their only negative value
INT_MAX = 2**31 - 1  # std::stoi: a larger value throws and llama-server exits
UINT_MAX = 2**32 - 1  # std::stoul, for the seed
_KEY_PATTERN = re.compile(r"^[A-Z0-9]+(?:_[A-Z0-9]+)*$")
_NAME = r"--?[A-Za-z][^\s,]*"
_HELP_ENTRY = re.compile(rf"^(?P<names>{_NAME}(?:,\s+{_NAME})*)(?:\s(?P<arg>\S.*?))?(?:\s{{2,}}(?P<text>.*)|\s*$)")
_ENV_NOTE = re.compile(r"\s*\(env: [^)]*\)")  # which LLAMA_ARG_* variable also sets it: not part of the type
_CONTINUATION = re.compile(r"^\s{20,}(?P<text>\S.*)$")
_NUMERIC_METAVARS = frozenset({"N", "SECONDS", "INDEX", "SEED", "SIMILARITY", "P", "L"})
_INTEGER = re.compile(r"-?\d+")
_DECIMAL = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


class Arity(StrEnum):
    NONE = "none"  # a switch: only `true`/`false` make sense
    REQUIRED = "required"  # takes a value
    OPTIONAL = "optional"  # `--flag` alone or `--flag value`


class ValueType(StrEnum):
    NONE = "none"  # a switch
    STRING = "string"  # anything llama-server takes as text (paths, lists, templates)
    INT = "int"
    FLOAT = "float"
    NUMBER = "number"  # numeric, but `--help` does not say whether integer or not
    CHOICE = "choice"  # one of `choices` (or, with `multiple`, a comma-separated list of them)


class FlagError(ValueError):
    """An `SM_LLAMA_CPP_*` setting that would stop llama-server from starting, or that is refused."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True)
class Flag:
    """One long flag of llama-server: whether it takes a value, and of which type (from its `--help`)."""

    arity: Arity
    type: ValueType = ValueType.NONE
    choices: tuple[str, ...] = ()  # CHOICE: the values; INT/NUMBER: words accepted besides numbers ('auto')
    minimum: int | None = None
    maximum: int | None = None
    multiple: bool = False  # CHOICE: a comma-separated list of choices
    removed: str | None = None  # the flag is still listed but llama-server refuses it: its hint

    def to_json(self) -> dict[str, object]:
        """Only what differs from the defaults, so the committed list stays readable."""
        defaults = Flag(self.arity)
        document = {k: v for k, v in asdict(self).items() if v != getattr(defaults, k) or k == "arity"}
        return {k: (list(v) if isinstance(v, tuple) else str(v) if isinstance(v, StrEnum) else v)
                for k, v in document.items()}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Flag:
        return cls(Arity(document["arity"]), ValueType(document.get("type", ValueType.NONE)),
                   tuple(document.get("choices", ())), document.get("minimum"), document.get("maximum"),
                   bool(document.get("multiple", False)), document.get("removed"))


@dataclass(frozen=True)
class FlagTable:
    """Long flags of one llama-server build, and the ones this project refuses (flag -> reason)."""

    source: str
    flags: Mapping[str, Flag]
    unsafe: Mapping[str, str]


@cache
def known_flags() -> FlagTable:
    """The committed flag list of the pinned llama-server, and the committed list of refused flags."""
    package = resources.files(__package__)
    data = json.loads(package.joinpath(FLAGS_FILE).read_text())
    unsafe = json.loads(package.joinpath(UNSAFE_FLAGS_FILE).read_text())
    refused = {flag: group["reason"] for group in unsafe["groups"] for flag in group["flags"]}
    return FlagTable(source=data["source"], flags={k: Flag.from_json(v) for k, v in data["flags"].items()},
                     unsafe=refused)


def _help_entries(text: str) -> list[tuple[str, str | None, str]]:
    """(names, metavar, description with its continuation lines) of each option in `--help`."""
    entries: list[tuple[str, str | None, list[str]]] = []
    for line in text.splitlines():
        match = _HELP_ENTRY.match(line)
        if match:
            entries.append((match["names"], match["arg"], [match["text"] or ""]))
        elif entries and (continued := _CONTINUATION.match(line)):
            entries[-1][2].append(continued["text"])
    return [(names, arg, _ENV_NOTE.sub("", " ".join(part for part in text if part))) for names, arg, text in entries]


def _value_flag(arg: str, text: str) -> Flag:
    """The type of a flag's value, read from its metavar and description in `--help`."""
    optional = re.fullmatch(r"\[[^\]]*\]", arg) is not None
    arity = Arity.OPTIONAL if optional else Arity.REQUIRED
    inner = arg[1:-1] if optional else arg
    removed = re.search(r"the argument has been removed\.?\s*(.*)", text)
    hint = removed[1].strip() if removed else None
    if hint is not None:
        return Flag(arity, ValueType.STRING, removed=hint or "removed")
    if braces := re.fullmatch(r"\{([^}]*)\}", inner):  # {none,linear,yarn}
        return Flag(arity, ValueType.CHOICE, tuple(c.strip() for c in braces[1].split(",")))
    if re.fullmatch(r"[a-z0-9-]+(\|[a-z0-9-]+)+", inner):  # on|off|auto
        return Flag(arity, ValueType.CHOICE, tuple(inner.split("|")))
    if angle := re.fullmatch(r"<(\d+(?:\|\d+)+)>", inner):  # <0|1>
        return Flag(arity, ValueType.CHOICE, tuple(angle[1].split("|")))
    if span := re.fullmatch(r"<(-?\d+)\.\.\.(-?\d+)>", inner):  # <0...100>
        return Flag(arity, ValueType.INT, minimum=int(span[1]), maximum=int(span[2]))
    if re.fullmatch(r"[a-z0-9-]+(,[a-z0-9-]+)+", inner):  # none,draft-simple,... : a list of these
        return Flag(arity, ValueType.CHOICE, tuple(inner.split(",")), multiple=True)
    if inner in _NUMERIC_METAVARS:
        default = re.search(r"default: (-?\d+(?:\.\d+)?)(?![\d.])", text)
        words = tuple(re.findall(r"'([a-z]+)'", text)) if "exact number" in text else ()
        if default is None:
            return Flag(arity, ValueType.NUMBER, words)
        if "." in default[1]:
            return Flag(arity, ValueType.FLOAT)
        return Flag(arity, ValueType.INT, words, minimum=INT_MIN, maximum=UINT_MAX if inner == "SEED" else INT_MAX)
    if allowed := re.search(r"allowed values: ([a-z0-9_]+(?:, [a-z0-9_]+)*)", text):
        return Flag(arity, ValueType.CHOICE, tuple(allowed[1].split(", ")))
    if inner in ("MODE", "TYPE") and (bullets := re.findall(r"(?:^|\s)- ([a-z0-9+_-]+):", text)):
        return Flag(arity, ValueType.CHOICE, tuple(bullets))
    return Flag(arity, ValueType.STRING)


def parse_help(text: str) -> dict[str, Flag]:
    """Long flags, their arity and value type from `llama-server --help` output."""
    flags: dict[str, Flag] = {}
    for names, arg, description in _help_entries(text):
        flag = Flag(Arity.NONE) if arg is None else _value_flag(arg, description)
        for name in re.split(r",\s+", names):
            if name.startswith("--"):
                flags[name] = flag
    return dict(sorted(flags.items()))


def flag_for(key: str) -> str:
    """`SM_LLAMA_CPP_FOO_BAR` -> `--foo-bar`, exactly as the DLC's entry point spells it."""
    return "--" + key[len(PREFIX):].lower().replace("_", "-")


def key_for(flag: str) -> str:
    return PREFIX + flag.removeprefix("--").upper().replace("-", "_")


def check_setting(key: str, value: str, table: FlagTable | None = None) -> None:
    """Raise FlagError if this one variable would break llama-server's start, or is refused."""
    if not key.startswith(PREFIX):
        raise FlagError(key, f"not an {PREFIX}* variable")
    name = key[len(PREFIX):]
    if not _KEY_PATTERN.match(name):
        raise FlagError(key, "must be upper-case words joined by single underscores")
    if CONTROL_CHARACTER.search(value):
        raise FlagError(key, "contains a control character (newline, NUL, ...); the DLC's entry point turns the "
                             "environment into llama-server arguments, where it would cut the value apart or add "
                             "another argument")
    if name in CONSUMED:
        return
    table = table or known_flags()
    flag_name = flag_for(key)
    if flag_name in RESERVED:
        raise FlagError(key, f"{flag_name} is set by the DLC's entry point and must not be overridden")
    flag = table.flags.get(flag_name)
    if flag is None:
        close = difflib.get_close_matches(flag_name, list(table.flags), n=1)
        hint = f" (did you mean {key_for(close[0])}?)" if close else ""
        raise FlagError(key, f"llama-server has no flag {flag_name}{hint}; it would exit at start-up")
    if flag_name in table.unsafe and value.lower() != "false":
        raise FlagError(key, f"{flag_name} is refused: {table.unsafe[flag_name]}")
    if flag.removed is not None and value.lower() != "false":
        raise FlagError(key, f"llama-server no longer accepts {flag_name} and would exit at start-up "
                             f"(its --help: {flag.removed})")
    lowered = value.lower()
    if flag.arity is Arity.NONE:
        if lowered not in ("true", "false"):
            raise FlagError(key, f"{flag_name} is a switch: use 'true' or 'false', not {value!r}")
        return
    if flag.arity is Arity.REQUIRED and (lowered == "true" or value == ""):
        raise FlagError(key, f"{flag_name} needs a value, not {value!r}")
    if lowered in ("true", "false"):
        return  # an optional value left out (`true`), or the flag dropped (`false`)
    problem = value_problem(flag, value)
    if problem:
        raise FlagError(key, f"{flag_name} {problem}")


def value_problem(flag: Flag, value: str) -> str | None:
    """Why llama-server would not parse this value of the flag (None if it would), per its `--help` type."""
    if flag.type is ValueType.CHOICE:
        items = value.split(",") if flag.multiple else [value]
        wrong = [item for item in items if item not in flag.choices]
        if wrong:
            several = "a comma-separated list of " if flag.multiple else ""
            return f"takes {several}{', '.join(flag.choices)}; not {wrong[0]!r}"
        return None
    if flag.type not in (ValueType.INT, ValueType.FLOAT, ValueType.NUMBER) or value in flag.choices:
        return None
    words = f" or {', '.join(repr(w) for w in flag.choices)}" if flag.choices else ""
    if flag.type is ValueType.INT:
        if not _INTEGER.fullmatch(value):
            return f"takes an integer{words}, not {value!r}"
        number = int(value)
        low = INT_MIN if flag.minimum is None else flag.minimum
        high = INT_MAX if flag.maximum is None else flag.maximum
        if not low <= number <= high:
            return f"takes an integer from {low} to {high}, not {number}"
        return None
    if not _DECIMAL.fullmatch(value) or not math.isfinite(float(value)):
        return f"takes a number{words}, not {value!r}"
    if flag.type is ValueType.NUMBER and _INTEGER.fullmatch(value) and not INT_MIN <= int(value) <= INT_MAX:
        return f"takes a number from {INT_MIN} to {INT_MAX}, not {value}"
    return None


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
