"""The measurement behind partial reuse: which split decodes give the whole decode's logits bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.harness.bench import split_classes

pytestmark = pytest.mark.slow


def test_splits_within_a_kernel_class_are_exact_and_across_are_not(tmp_path: Path) -> None:
    out = tmp_path / "splits.json"
    assert split_classes.main(["--step", "25", "--json", str(out)]) == 0
    auto, off = (json.loads(out.read_text())[setting]["classes"] for setting in ("auto", "off"))
    assert auto["tiled+tiled"]["splits"] >= 2 and auto["tiled+tiled"]["bit_identical"] == auto["tiled+tiled"]["splits"]
    assert auto["row+tiled"]["bit_identical"] < auto["row+tiled"]["splits"]  # flash attention's two kernels
    assert off["row+tiled"]["bit_identical"] == off["row+tiled"]["splits"]  # one kernel for every size above one
