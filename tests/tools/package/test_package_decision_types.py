"""`semif package` and `semif check` on decision-typed GGUFs: what they print about who scores the model, and the
decision types and templates they refuse (issue 42, "Detection, early")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.gguf_files import declaring, tarball_of, write_gguf

from scripts.dev.decision_models import decision_model
from semif_adapter.engine.decision_types import DECISION_TYPES, PINNED_LLAMA_CPP

SUPPORTED = ", ".join(DECISION_TYPES)


def run_cli(command: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`semif package|check ARGS`: the venv's `semif`, running the checkout's tools."""
    return subprocess.run([str(Path(sys.executable).with_name("semif")), command, *args], capture_output=True,
                          text=True, check=False, timeout=120)




def test_a_decision_model_is_named_with_its_type_and_llama_cpps_engine_by_package_and_check(tmp_path: Path) -> None:
    out = tmp_path / "model.tar.gz"
    built = run_cli("package", str(decision_model("openjev", tiny=True)), "-o", str(out))
    assert built.returncode == 0, built.stderr
    line = "decisions:     decision model: openjev (llama.cpp's own decision engine)"
    assert line in built.stdout.splitlines()
    checked = run_cli("check", str(out))
    assert checked.returncode == 0, checked.stderr
    assert line in checked.stdout.splitlines()


def test_a_generic_model_is_named_with_our_engine(tmp_path: Path) -> None:
    out = tmp_path / "model.tar.gz"
    built = run_cli("package", str(write_gguf(tmp_path / "plain.gguf")), "-o", str(out))
    assert built.returncode == 0, built.stderr
    assert "decisions:     generic chat model: our engine" in built.stdout.splitlines()
    checked = run_cli("check", str(out))
    assert "decisions:     generic chat model: our engine" in checked.stdout.splitlines()


@pytest.mark.parametrize("command", ["package", "check"])
def test_an_unknown_decision_type_is_refused_naming_the_key_and_the_supported_types(tmp_path: Path,
                                                                                     command: str) -> None:
    model = declaring(tmp_path / "frob.gguf", "frob")
    target = str(model) if command == "package" else str(tarball_of(model))
    result = run_cli(command, target, *(["-o", str(tmp_path / "out.tar.gz")] if command == "package" else []))
    assert result.returncode == 2, result.stdout
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"llama.decision.type = 'frob' is not a decision type llama.cpp {PINNED_LLAMA_CPP} serves " \
           f"(supported: {SUPPORTED})" in result.stderr
    assert result.stderr.startswith("package_model: refused: ") and "frob.gguf" in result.stderr
    assert not (tmp_path / "out.tar.gz").exists()


@pytest.mark.parametrize("declared", ["kev", "laya", "clef"])
def test_a_head_that_reads_the_embeddings_is_packaged_with_what_it_does(tmp_path: Path, declared: str) -> None:
    """The facts name the type's head and what a caller must know of it (joint answers, sorted options, the cut)."""
    out = tmp_path / "model.tar.gz"
    built = run_cli("package", str(decision_model(declared, tiny=True)), "-o", str(out))
    assert built.returncode == 0, built.stderr
    lines = built.stdout.splitlines()
    assert f"decisions:     decision model: {declared} (llama.cpp's own decision engine)" in lines
    head = next(line for line in lines if line.startswith("decision head: "))
    assert head == "decision head: " + DECISION_TYPES[declared].reads + "; at most 255 options; " + ", ".join(
        DECISION_TYPES[declared].semantics()) + (" (max_head_tokens 128)" if declared == "laya" else "")
    assert head in run_cli("check", str(out)).stdout.splitlines()


def test_a_type_of_a_newer_llama_cpp_is_refused_naming_the_build(tmp_path: Path) -> None:
    result = run_cli("package", str(declaring(tmp_path / "d1.gguf", "lfm2-d1")), "-o", str(tmp_path / "out.tar.gz"))
    assert result.returncode == 2, result.stdout
    assert f"llama.decision.type = 'lfm2-d1' is not a decision type llama.cpp {PINNED_LLAMA_CPP} serves" \
           in result.stderr
    assert "it is served by llama.cpp's stable releases (v1.0.0, 2026-11-13, and later)" in result.stderr
    assert not (tmp_path / "out.tar.gz").exists()


@pytest.mark.parametrize("command", ["package", "check"])
def test_a_decision_model_without_its_systemone_template_is_refused(tmp_path: Path, command: str) -> None:
    model = declaring(tmp_path / "bare.gguf", "lev", systemone=False)
    target = str(model) if command == "package" else str(tarball_of(model))
    result = run_cli(command, target, *(["-o", str(tmp_path / "out.tar.gz")] if command == "package" else []))
    assert result.returncode == 2, result.stdout
    assert "declares llama.decision.type = 'lev' but has no tokenizer.chat_template.systemone" in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


def test_a_decision_model_with_its_template_packages(tmp_path: Path) -> None:
    built = run_cli("package", str(declaring(tmp_path / "lev.gguf", "lev")), "-o", str(tmp_path / "out.tar.gz"))
    assert built.returncode == 0, built.stderr
    assert "decisions:     decision model: lev (llama.cpp's own decision engine)" in built.stdout.splitlines()
