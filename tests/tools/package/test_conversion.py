"""Converting a model (llama.cpp's quantizer), the kernel check of its weight types, and the agreement figures."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import gguf
import numpy as np
import pytest
from support.models import MATRIX, MatrixModel

from semif_adapter.deploy.agreement import DECISIONS, measure
from semif_adapter.deploy.kernel_paths import KernelReport, kernel_report, weight_type_bytes
from semif_adapter.deploy.quantize import ConversionError, convert, converted_name, require_type
from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.engine.gguf_header import read_gguf_info

Q4_1_BLOCK = (32, 20)  # elements, bytes


def write_typed_gguf(path: Path) -> Path:
    """Embeddings, a norm, an F16 and a Q4_1 matrix: what the kernel check must tell apart."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_file_type(3)
    writer.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(32, dtype=np.float32))
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((8, 32), dtype=np.float16))
    rows, (elements, size) = 64, Q4_1_BLOCK
    writer.add_tensor("blk.0.ffn_up.weight", np.zeros((rows, 32 // elements * size), dtype=np.uint8),
                      raw_dtype=gguf.GGMLQuantizationType.Q4_1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_weight_types_leave_out_embeddings_and_norms_and_are_read_by_ggml(tmp_path: Path) -> None:
    types = weight_type_bytes(write_typed_gguf(tmp_path / "typed.gguf"))
    assert types == {"f16": 8 * 32 * 2, "q4_1": 64 * 20}


def test_the_kernel_warning_names_the_slow_types_per_accelerator(tmp_path: Path) -> None:
    path = write_typed_gguf(tmp_path / "typed.gguf")
    cpu = kernel_report(path, "cpu")
    assert cpu.slow_bytes == {"q4_1": 1280} and cpu.slow_share == pytest.approx(1280 / (1280 + 512))
    warning = cpu.warning()
    assert warning is not None and "71% of the weights (Q4_1" in warning and "Q8_0, Q4_0 or IQ4_NL" in warning
    assert kernel_report(path, "gpu").warning() is None  # CUDA has quantized kernels for Q4_1
    assert KernelReport("cpu", {"q8_0": 900, "q6_K": 100}).warning() is None  # a small odd share is no reason
    assert KernelReport("gpu", {"tq2_0": 10}).warning() is not None
    with pytest.raises(ValueError, match="expected cpu or gpu"):
        kernel_report(path, "tpu")
    with pytest.raises(ValueError, match="ggml could not read"):
        weight_type_bytes(tmp_path / "missing.gguf")


def test_converted_names_replace_the_type_or_append_it() -> None:
    assert converted_name(Path("SmolLM2-135M-Instruct.Q4_1.gguf"), "Q4_1", "Q8_0") == "SmolLM2-135M-Instruct.Q8_0.gguf"
    assert converted_name(Path("qwen-q4_k_m.gguf"), "Q4_K_M", "Q4_0") == "qwen-Q4_0.gguf"
    assert converted_name(Path("model.gguf"), "F16", "Q8_0") == "model-Q8_0.gguf"
    assert converted_name(Path("big-00001-of-00003.gguf"), None, "Q8_0") == "big-Q8_0.gguf"


def test_unknown_or_pointless_conversions_are_refused(tmp_path: Path) -> None:
    assert require_type("q8_0") == "Q8_0"
    with pytest.raises(ConversionError, match="'IQ2_XXS' is not a type this toolkit converts to"):
        require_type("IQ2_XXS")  # needs an importance matrix
    with pytest.raises(ConversionError, match="already Q4_1"):
        convert(embedded_model_path(), tmp_path, "Q4_1")
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_a_model_agrees_with_itself_exactly() -> None:
    """The figures come from the engine's numbers: the same file twice must give 0 difference, not about 0."""
    model = embedded_model_path()
    agreement = measure(model, model, decisions=DECISIONS[:1])
    assert [m.method for m in agreement.methods] == ["letters", "likelihood", "pmi"]
    for method in agreement.methods:
        assert (method.decisions, method.same_top, method.max_abs_dp, method.mean_abs_dp) == (1, 1, 0.0, 0.0)


def run_cli(*args: str, command: str = "package") -> subprocess.CompletedProcess[str]:
    """`semif package ARGS` (or another command): the venv's `semif`, running the checkout's tools."""
    return subprocess.run([str(Path(sys.executable).with_name("semif")), command, *args], capture_output=True,
                          text=True, check=False)


CONVERTED_NAMES = {"smollm2": "SmolLM2-135M-Instruct.Q8_0.gguf", "gemma3": "gemma-3-270m-Q8_0.gguf"}


@pytest.mark.slow
@pytest.mark.parametrize("model", MATRIX)
def test_cli_converts_prints_the_agreement_and_packages_the_converted_model(tmp_path: Path,
                                                                           model: MatrixModel) -> None:
    out, converted = tmp_path / "model.tar.gz", CONVERTED_NAMES[model.name]
    result = run_cli(str(model.path), "-o", str(out), "--convert", "q8_0", "--agreement", "1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("converted:") and f"({model.quantization}) -> {converted} (Q8_0" in line
               for line in lines)
    assert any(line.startswith("agreement:") and "1 fixed decisions" in line for line in lines)
    for method in ("letters", "likelihood", "pmi"):
        (line,) = [line for line in lines if line.strip().startswith(method)]
        assert "same top option" in line and "/1, max |dp| " in line
    assert "quantization:  Q8_0" in result.stdout
    assert "kernels (cpu): every large weight type has a fast kernel" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("package_model: warning:")]
    assert [("no chat template" in line) for line in warnings] == ([] if model.has_chat_template else [True])
    with tarfile.open(out) as tar:
        (member,) = tar.getmembers()
        stream = tar.extractfile(member)
        assert stream is not None and read_gguf_info(stream).quantization == "Q8_0"
    assert member.name == converted
    assert [p.name for p in tmp_path.iterdir()] == ["model.tar.gz"]  # the scratch copy is gone


def test_cli_refuses_conversions_in_one_line(tmp_path: Path) -> None:
    same = run_cli(str(embedded_model_path()), "-o", str(tmp_path / "m.tar.gz"), "--convert", "Q4_1")
    assert same.returncode == 2 and same.stderr.count("\n") == 1 and "already Q4_1" in same.stderr
    unknown = run_cli(str(embedded_model_path()), "--convert", "Q9_9")
    assert unknown.returncode == 2 and "invalid choice: 'Q9_9'" in unknown.stderr
    check = run_cli(str(tmp_path / "m.tar.gz"), "--convert", "Q8_0", command="check")
    assert check.returncode == 2 and "unrecognized arguments: --convert Q8_0" in check.stderr  # a MODEL.gguf's
    assert not (tmp_path / "m.tar.gz").exists()
