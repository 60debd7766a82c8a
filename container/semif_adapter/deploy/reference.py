"""The configuration reference, generated: `python -m semif_adapter.deploy.reference --write docs/`.

Written from the two sources the code itself obeys, so the pages cannot drift from them (a test compares the
committed pages with this output): the adapter's settings model (`semif_adapter.settings.Settings`: every variable,
its type, default, bounds and description) and the pinned llama-server flag list with the refused flags
(`llama_server_flags.json`, `llama_server_unsafe_flags.json`: which `SM_LLAMA_CPP_*` reach llama-server on the
chat endpoint, and which of them the decision adapter reads too).

One page per task, each small enough to read (the docs' ~25 KB rule) and opening with whom it is for: the decision
adapter's variables, the flags passed to llama-server, and the refused flags. Which page serves which task is said
once, in the written guide to an environment's settings (docs/configuring.md, "Container settings").
`--print PAGE` writes one page to stdout instead.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pydantic.fields import FieldInfo

from ..settings import ENV_NAMES, LLAMA_PREFIX, SHOWN_DEFAULT, Settings
from .llama_flags import CONSUMED, RESERVED, Arity, Flag, FlagTable, ValueType, key_for, known_flags

COMMAND = "python -m semif_adapter.deploy.reference --write docs/"
GUIDE_PAGE = "configuring.md"  # written: which of these pages serves which task
GUIDE = f"{GUIDE_PAGE}#container-settings-llama_env-decisionenv"
ADAPTER = "configuration-adapter.md"
LLAMA_SERVER = "configuration-llama-server.md"
REFUSED = "configuration-refused-flags.md"
PAGES = (ADAPTER, LLAMA_SERVER, REFUSED)
SOURCES = """the adapter's settings model (`container/semif_adapter/settings.py`) and the pinned llama-server flag
list (`container/semif_adapter/deploy/llama_server_flags.json`, the refused flags in
`llama_server_unsafe_flags.json`); a test fails when a page is not current. Edit those, then regenerate."""


class Row(NamedTuple):
    """One `SM_LLAMA_CPP_*` variable of the chat endpoint."""

    variable: str
    flag: str  # the llama-server flag it becomes, in words
    value: str  # the values `cdk synth` accepts, in words
    refusal: str  # why the chat endpoint refuses it; empty when it is accepted


def _value_type(schema: dict[str, Any]) -> str:
    """A field's accepted values in words, from its JSON Schema (null, i.e. unset, left out)."""
    options = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    words = []
    for option in options:
        if "enum" in option:
            words.append(", ".join(f"`{value}`" for value in option["enum"]))
        elif "pattern" in option:
            words.append(f"text matching `{option['pattern']}`")
        else:
            words.append({"integer": "integer", "string": "text"}.get(option.get("type", ""), "text"))
    return " or ".join(words)


def _bounds(field: FieldInfo) -> str:
    low = next((m.ge for m in field.metadata if hasattr(m, "ge")), None)
    high = next((m.le for m in field.metadata if hasattr(m, "le")), None)
    if low is not None and high is not None:
        return f"{low} to {high}"
    if low is not None:
        return f"at least {low}"
    return f"at most {high}" if high is not None else ""


def _default(schema: dict[str, Any]) -> str:
    if SHOWN_DEFAULT in schema:
        return str(schema[SHOWN_DEFAULT])
    value = schema.get("default")
    return "unset" if value is None else f"`{value}`"


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def settings_table() -> list[str]:
    properties = Settings.model_json_schema()["properties"]
    lines = ["| variable | value | default | bounds | meaning |", "|---|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        names = ENV_NAMES[name]
        schema = properties[names[0]]
        variable = " or ".join(f"`{n}`" for n in names)
        lines.append(_line((variable, _value_type(schema), _default(schema), _bounds(field), field.description or "")))
    return lines


def _flag_value(flag: Flag) -> str:
    if flag.arity is Arity.NONE:
        return "switch (`true` / `false`)"
    optional = " (or `true` alone)" if flag.arity is Arity.OPTIONAL else ""
    words = ", ".join(f"`{c}`" for c in flag.choices)
    if flag.type is ValueType.CHOICE:
        listed = "a comma-separated list of " if flag.multiple else "one of "
        return f"{listed}{words}{optional}"
    if flag.type is ValueType.INT:
        extra = f" or {words}" if words else ""
        return f"integer {flag.minimum} to {flag.maximum}{extra}{optional}"
    if flag.type in (ValueType.FLOAT, ValueType.NUMBER):
        extra = f" or {words}" if words else ""
        return f"number{extra}{optional}"
    return f"text{optional}"


def _reasons(table: FlagTable) -> dict[str, int]:
    """Each refusal reason, numbered in the order of the unsafe list."""
    numbers: dict[str, int] = {}
    for reason in table.unsafe.values():
        numbers.setdefault(reason, len(numbers) + 1)
    return numbers


def _refusal(name: str, flag: Flag, table: FlagTable, reasons: dict[str, int]) -> str:
    if name in RESERVED:
        return "set by the DLC's entry point: refused"
    if name in table.unsafe:
        return f"refused ({reasons[table.unsafe[name]]}) unless `false`"
    if flag.removed is not None:
        return f"removed from llama-server: refused ({flag.removed})"
    return ""


def flag_rows(table: FlagTable) -> list[Row]:
    """Every `SM_LLAMA_CPP_*` variable the chat endpoint knows, sorted: the flags and those the entry point reads."""
    reasons = _reasons(table)
    rows = [Row(LLAMA_PREFIX + name, "none: consumed by the DLC's entry point", "", "") for name in CONSUMED]
    rows += [Row(key_for(name), f"`{name}`", _flag_value(flag), _refusal(name, flag, table, reasons))
             for name, flag in table.flags.items() if key_for(name).removeprefix(LLAMA_PREFIX) not in CONSUMED]
    return sorted(rows)


def passed_table(rows: list[Row]) -> list[str]:
    adapter = {n for names in ENV_NAMES.values() for n in names if n.startswith(LLAMA_PREFIX)}
    lines = ["| variable | llama-server flag | value | decision adapter |", "|---|---|---|---|"]
    lines += [_line((f"`{row.variable}`", row.flag, row.value, "reads it too" if row.variable in adapter else ""))
              for row in rows if not row.refusal]
    return lines


def refused_table(rows: list[Row], table: FlagTable) -> list[str]:
    lines = ["| variable | llama-server flag | value | chat endpoint |", "|---|---|---|---|"]
    lines += [_line((f"`{row.variable}`", row.flag, row.value, row.refusal)) for row in rows if row.refusal]
    lines += ["", "Refused flags, by reason (set to `false`, which the entry point drops, they are accepted):", ""]
    return lines + [f"{number}. {reason}" for reason, number in _reasons(table).items()]


def _prose(text: str) -> str:
    """One paragraph, wrapped as the written pages are (the source strings are wrapped for the code, not the page)."""
    return textwrap.fill(" ".join(text.split()), 116, break_long_words=False, break_on_hyphens=False)


def _page(title: str, *paragraphs: str, heading: str = "", body: Sequence[str] = ()) -> str:
    """A title, its opening paragraph (whom the page is for and what they can do after it), prose, then the table."""
    blocks = [f"# {title}", *(_prose(p) for p in paragraphs), *([f"## {heading}"] if heading else [])]
    return "\n\n".join(blocks) + "\n\n" + "".join(line + "\n" for line in body)


def pages() -> dict[str, str]:
    """Every page of the reference by file name, as written under docs/."""
    table = known_flags()
    rows = flag_rows(table)
    generated = f"Generated by `{COMMAND}` from {SOURCES} Which page serves which task: [{GUIDE_PAGE}]({GUIDE})."
    flag_list = [f"Flag list: {table.source}; {len(table.flags)} long flags.", ""]
    adapter = _page(
        "Configuration: the decision adapter's variables",
        """For whoever runs or tunes the decision endpoint: after this page you know every variable the decision
        adapter reads (its own `SEMIF_*` settings and the `SM_LLAMA_CPP_*` variables that matter for scoring),
        what values each takes, its default and its bounds.""",
        generated,
        """An empty value counts as unset. A bad value stops the adapter at start-up with the variable named;
        `cdk synth` runs the same checks on the decision endpoint's environment and refuses a `SEMIF_*` key the
        adapter does not read (with the closest one it does). A variable that is also a llama-server flag means
        what llama-server means by it.""",
        heading="Decision adapter settings", body=settings_table())
    llama_server = _page(
        "Configuration: the chat endpoint's llama-server flags",
        """For whoever runs or tunes the chat endpoint: after this page you know which `SM_LLAMA_CPP_*` variable
        sets which llama-server flag, what value `cdk synth` accepts for it, and which of them the decision adapter
        reads too.""",
        generated,
        f"""The chat endpoint (the stock llama.cpp DLC) turns each `SM_LLAMA_CPP_FOO_BAR=v` into `--foo-bar v` for
        llama-server (`true` = bare flag, `false` = dropped). A variable the decision adapter reads too has its
        adapter default and bounds in [{ADAPTER}]({ADAPTER}). The flags that are refused, and why:
        [{REFUSED}]({REFUSED}).""",
        heading="`SM_LLAMA_CPP_*` passed to llama-server", body=[*flag_list, *passed_table(rows)])
    refused = _page(
        "Configuration: refused `SM_LLAMA_CPP_*` variables",
        """For whoever met a refused `SM_LLAMA_CPP_*` variable in `cdk synth` or the local chat front: after this
        page you know why each refused llama-server flag is refused and, for a flag removed from llama-server, what
        to set instead.""",
        generated,
        f"""`cdk synth` checks every `SM_LLAMA_CPP_*` value against the pinned flag list; the flags below open
        files, sockets or remote backends, break the endpoint behind the DLC's nginx, are set by the DLC's entry
        point itself, or no longer exist. Every variable that does reach llama-server:
        [{LLAMA_SERVER}]({LLAMA_SERVER}).""",
        heading="Refused flags", body=[*flag_list, *refused_table(rows, table)])
    return {ADAPTER: adapter, LLAMA_SERVER: llama_server, REFUSED: refused}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m semif_adapter.deploy.reference", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--write", type=Path, metavar="DIR", help="write every page into DIR (docs/)")
    where.add_argument("--print", choices=PAGES, metavar="PAGE", help=f"print one page: {', '.join(PAGES)}")
    args = parser.parse_args(argv)
    written = pages()
    if args.print:
        sys.stdout.write(written[args.print])
        return
    for name, text in written.items():
        (args.write / name).write_text(text)


if __name__ == "__main__":
    main()
