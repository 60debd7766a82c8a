"""The configuration reference (docs/configuration*.md) is generated from the settings model and the pinned flag
list, and kept current: every page the generator writes is committed as written, and no stale page is left."""

from __future__ import annotations

from pathlib import Path

import pytest

from semif_adapter.deploy.llama_flags import key_for, known_flags
from semif_adapter.deploy.reference import ADAPTER, COMMAND, GUIDE, GUIDE_PAGE, LLAMA_SERVER, REFUSED, main, pages
from semif_adapter.settings import ENV_NAMES

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("name", sorted(pages()))
def test_the_committed_page_is_what_the_generator_writes(name: str) -> None:
    assert (DOCS / name).read_text() == pages()[name], f"docs/{name} is not current: run `{COMMAND}`"


def test_no_configuration_page_is_left_over_from_an_earlier_split() -> None:
    assert {path.name for path in DOCS.glob("configuration*.md")} == set(pages()), f"run `{COMMAND}`"


def test_the_written_guide_links_every_page_and_every_page_links_it() -> None:
    guide = (DOCS / GUIDE_PAGE).read_text()
    assert all(f"]({name})" in guide for name in pages())
    assert all(f"]({GUIDE})" in page for page in pages().values())


def test_the_reference_names_every_setting_and_every_flag() -> None:
    written = pages()
    assert all(f"`{name}`" in written[ADAPTER] for names in ENV_NAMES.values() for name in names)
    flags = written[LLAMA_SERVER] + written[REFUSED]
    assert all(f"| `{key_for(flag)}` | `{flag}` |" in flags for flag in known_flags().flags
               if key_for(flag).removeprefix("SM_LLAMA_CPP_") not in {"MODEL", "PORT"})


def test_write_puts_every_page_in_the_directory(tmp_path: Path) -> None:
    main(["--write", str(tmp_path)])
    assert {path.name: path.read_text() for path in tmp_path.iterdir()} == pages()


def test_print_writes_one_page(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--print", REFUSED])
    assert capsys.readouterr().out == pages()[REFUSED]
