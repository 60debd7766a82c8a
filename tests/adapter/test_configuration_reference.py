"""docs/configuration.md is generated from the settings model and the pinned flag list, and kept current."""

from __future__ import annotations

from pathlib import Path

from semif_adapter.deploy.llama_flags import key_for, known_flags
from semif_adapter.deploy.reference import COMMAND, render
from semif_adapter.settings import ENV_NAMES

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_committed_reference_is_what_the_generator_writes():
    assert REFERENCE.read_text() == render(), f"docs/configuration.md is not current: run `{COMMAND}`"


def test_the_reference_names_every_setting_and_every_flag():
    page = render()
    assert all(f"`{name}`" in page for names in ENV_NAMES.values() for name in names)
    assert all(f"| `{key_for(flag)}` | `{flag}` |" in page for flag in known_flags().flags
               if key_for(flag).removeprefix("SM_LLAMA_CPP_") not in {"MODEL", "PORT"})
