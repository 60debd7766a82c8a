"""Every packaging rule, with real tarballs made here, and the CLI's refusals."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support.models import MATRIX, MatrixModel

from semif_adapter.deploy.artifact import build_tarball, check_tarball
from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.engine.model_files import ModelFileError, resolve_model_path, scan_model_dir


def gguf_bytes(make_gguf, name: str = "m.gguf", **kwargs) -> bytes:
    return make_gguf(f"src/{name}", **kwargs).read_bytes()


def test_good_tarball_passes_and_reports_metadata(make_gguf, make_tarball):
    content = gguf_bytes(make_gguf, context=2048, file_type=15)
    report = check_tarball(make_tarball([("model.gguf", content), ("README.txt", b"notes")]))
    assert str(report.layout.model) == "model.gguf"
    assert (report.info.architecture, report.info.quantization, report.info.context_length) == \
        ("llama", "Q4_K_M", 2048)
    assert report.model_sha256 == hashlib.sha256(content).hexdigest()
    assert report.model_bytes == len(content)


def test_two_models_are_refused(make_gguf, make_tarball):
    tarball = make_tarball([("a.gguf", gguf_bytes(make_gguf, "a.gguf")), ("b.gguf", gguf_bytes(make_gguf, "b.gguf"))])
    with pytest.raises(ModelFileError, match=r"2 models found \(a.gguf, b.gguf\); exactly one"):
        check_tarball(tarball)


def test_no_model_is_refused(make_tarball):
    with pytest.raises(ModelFileError, match=r"no model \.gguf file"):
        check_tarball(make_tarball([("config.json", b"{}")]))


@pytest.mark.parametrize("name, rule", [
    ("../evil.gguf", "climbs out"),
    ("/etc/evil.gguf", "absolute path"),
    ("a/b/deep.gguf", "3 levels deep"),
])
def test_unsafe_member_paths_are_refused(make_gguf, make_tarball, name, rule):
    with pytest.raises(ModelFileError, match=rule) as caught:
        check_tarball(make_tarball([(name, gguf_bytes(make_gguf))]))
    assert name in str(caught.value)


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
def test_links_and_special_files_are_refused(make_gguf, make_tarball, kind):
    members = [("model.gguf", gguf_bytes(make_gguf)), ("other.gguf", (kind, "model.gguf"))]
    with pytest.raises(ModelFileError, match=r"link|special file") as caught:
        check_tarball(make_tarball(members))
    assert "other.gguf" in str(caught.value)


def test_bad_magic_is_refused(make_tarball):
    with pytest.raises(ModelFileError, match="GGUF magic") as caught:
        check_tarball(make_tarball([("model.gguf", b"PK\x03\x04 not a model")]))
    assert "model.gguf" in str(caught.value)


def test_projector_refused_unless_asked(make_gguf, make_tarball):
    members = [("model.gguf", gguf_bytes(make_gguf)), ("mmproj-model-f16.gguf", gguf_bytes(make_gguf, "p.gguf"))]
    with pytest.raises(ModelFileError, match="projector"):
        check_tarball(make_tarball(members))
    report = check_tarball(make_tarball(members, "allowed.tar.gz"), allow_projector=True)
    assert str(report.layout.projector) == "mmproj-model-f16.gguf"
    assert str(report.layout.model) == "model.gguf"


def test_complete_split_model_counts_as_one(make_gguf, make_tarball):
    shards = [(f"big-0000{i}-of-00003.gguf", gguf_bytes(make_gguf, f"s{i}.gguf")) for i in (1, 2, 3)]
    report = check_tarball(make_tarball(list(reversed(shards))))
    assert str(report.layout.model) == "big-00001-of-00003.gguf"
    assert [str(p) for p in report.layout.files] == [name for name, _ in shards]


def test_incomplete_split_model_is_refused(make_gguf, make_tarball):
    shards = [(f"big-0000{i}-of-00003.gguf", gguf_bytes(make_gguf, f"s{i}.gguf")) for i in (1, 3)]
    with pytest.raises(ModelFileError, match=r"incomplete: missing shard\(s\) \[2\] of 3"):
        check_tarball(make_tarball(shards))


def test_corrupt_archive_is_refused(tmp_path):
    broken = tmp_path / "model.tar.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(ModelFileError, match=r"not a readable tar\.gz"):
        check_tarball(broken)


@pytest.mark.slow  # packages the embedded model's 95 MB twice
def test_build_is_byte_identical_and_passes_its_own_check(tmp_path):
    model = embedded_model_path()
    first = build_tarball(model, tmp_path / "one" / "model.tar.gz")
    second = build_tarball(model, tmp_path / "two" / "model.tar.gz")
    assert first.path.read_bytes() == second.path.read_bytes()
    assert first.tarball_sha256 == hashlib.sha256(first.path.read_bytes()).hexdigest()
    checked = check_tarball(first.path)
    assert (checked.model_sha256, checked.tarball_sha256) == (first.model_sha256, first.tarball_sha256)
    with tarfile.open(first.path) as tar:
        (member,) = tar.getmembers()
    assert (member.name, member.mtime, member.uid, member.gid, member.uname) == (model.name, 0, 0, 0, "")
    assert first.path.read_bytes()[4:8] == b"\x00\x00\x00\x00"  # gzip header mtime


def test_build_packages_every_shard_of_a_split_model(make_gguf, tmp_path):
    for i in (1, 2):
        make_gguf(f"split/big-0000{i}-of-00002.gguf")
    report = build_tarball(tmp_path / "split" / "big-00001-of-00002.gguf", tmp_path / "out.tar.gz")
    assert [str(p) for p in report.layout.files] == ["big-00001-of-00002.gguf", "big-00002-of-00002.gguf"]
    assert check_tarball(report.path).model_sha256 == report.model_sha256


def test_directory_discovery_is_strict(make_gguf, tmp_path):
    make_gguf("dir/sub/model.gguf")
    assert resolve_model_path(None, tmp_path / "dir").name == "model.gguf"
    make_gguf("dir/other.gguf")
    with pytest.raises(ModelFileError, match="2 models found"):
        scan_model_dir(tmp_path / "dir")
    make_gguf("deep/a/b/model.gguf")  # deeper than the DLC looks: not found
    with pytest.raises(ModelFileError, match="no model"):
        scan_model_dir(tmp_path / "deep")


def run_cli(*args: str, command: str = "package") -> subprocess.CompletedProcess[str]:
    """`semif package ARGS` (or another command): the venv's `semif`, running the checkout's tools."""
    return subprocess.run([str(Path(sys.executable).with_name("semif")), command, *args], capture_output=True,
                          text=True, check=False)


# What packaging prints about each matrix model's weights (bytes per type, read by ggml) and the kernel warning.
WEIGHT_TYPES = {"smollm2": "Q4_1 63.3 MiB", "gemma3": "Q4_K 12.7 MiB, Q5_0 41.6 MiB, Q6_K 9.2 MiB, Q8_0 1.5 MiB"}
KERNEL_WARNINGS = {"smollm2": "package_model: warning: 100% of the weights (Q4_1 63 MiB) are in types with no "
                              "tiled CPU kernel",
                   "gemma3": "package_model: warning: 34% of the weights (Q4_K 13 MiB, Q6_K 9 MiB) are in types with "
                             "no tiled CPU kernel"}


@pytest.mark.slow  # packages each matrix model (up to 241 MB) and checks it
@pytest.mark.parametrize("model", MATRIX)
def test_cli_packages_then_checks(tmp_path, model: MatrixModel):
    out = tmp_path / "model.tar.gz"
    built = run_cli(str(model.path), "-o", str(out))
    assert built.returncode == 0, built.stderr
    for line in (f"architecture:  {model.architecture}", f"quantization:  {model.quantization}",
                 f"context:       {model.context_length} tokens", f"vocabulary:    {model.vocab_size} tokens",
                 f"KV cache:      {model.kv_bytes_per_token:,} bytes per context token",
                 f"chat template: {'in the GGUF' if model.has_chat_template else 'none'}",
                 f"weight types:  {WEIGHT_TYPES[model.name]}"):
        assert line in built.stdout, line
    kernels = [line for line in built.stderr.splitlines() if "kernel" in line]
    assert [line.startswith(KERNEL_WARNINGS[model.name] or "") for line in kernels] == \
        ([True] if KERNEL_WARNINGS[model.name] else [])
    checked = run_cli(str(out), command="check")
    assert checked.returncode == 0, checked.stderr
    sha_line = next(line for line in built.stdout.splitlines() if line.startswith("tarball sha256"))
    assert sha_line in checked.stdout
    for result in (built, checked):  # the template warning needs only the header: --check says it too
        templates = [line for line in result.stderr.splitlines() if "no chat template" in line]
        assert len(templates) == (0 if model.has_chat_template else 1)
        for line in templates:
            assert line.startswith("package_model: warning: the model has no chat template (no "
                                   "tokenizer.chat_template in its GGUF): the chat endpoint (llama-server")
            assert "default, ChatML" in line and "set SM_LLAMA_CPP_CHAT_TEMPLATE" in line
            assert "SM_LLAMA_CPP_NO_JINJA=true" in line


def test_cli_refusal_is_one_line_with_file_and_rule(make_gguf, make_tarball):
    tarball = make_tarball([("a.gguf", gguf_bytes(make_gguf, "a.gguf")), ("b.gguf", gguf_bytes(make_gguf, "b.gguf"))])
    result = run_cli(str(tarball), command="check")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert str(tarball) in result.stderr and "exactly one is allowed" in result.stderr


@pytest.mark.slow  # reads and packs half of the embedded model three times
def test_a_truncated_gguf_is_refused_when_packaging_checking_and_by_the_cli(tmp_path, make_tarball):
    """The model cut to half its size used to package with exit 0 and fail only on the endpoint."""
    half = embedded_model_path().read_bytes()[: embedded_model_path().stat().st_size // 2]
    model = tmp_path / "half.gguf"
    model.write_bytes(half)
    with pytest.raises(ModelFileError, match=r"half\.gguf: truncated: the header describes 272 tensors ending "
                                             r"at byte 98,362,432, but the file has 49,181,216 bytes"):
        build_tarball(model, tmp_path / "out.tar.gz")
    assert not (tmp_path / "out.tar.gz").exists()
    with pytest.raises(ModelFileError, match=r"model\.tar\.gz:model\.gguf: truncated"):
        check_tarball(make_tarball([("model.gguf", half)]))
    result = run_cli(str(model), "-o", str(tmp_path / "cli.tar.gz"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "half.gguf: truncated" in result.stderr


def test_a_truncated_shard_is_refused(make_gguf, tmp_path):
    first = make_gguf("split/big-00001-of-00002.gguf")
    second = make_gguf("split/big-00002-of-00002.gguf")
    second.write_bytes(second.read_bytes()[:-16])
    with pytest.raises(ModelFileError, match=r"big-00002-of-00002\.gguf: truncated"):
        build_tarball(first, tmp_path / "out.tar.gz")


def test_a_directory_is_called_a_directory_not_a_missing_file(tmp_path):
    (tmp_path / "models").mkdir()
    result = run_cli(str(tmp_path / "models"), "-o", str(tmp_path / "out.tar.gz"))
    assert result.returncode == 2
    assert "models: is a directory, not a model file; give the .gguf file inside it" in result.stderr
    checked = run_cli(str(tmp_path / "models"), command="check")
    assert checked.returncode == 2 and "is a directory, not a model.tar.gz" in checked.stderr
    with pytest.raises(ModelFileError, match="is a directory, not a model file"):
        resolve_model_path(str(tmp_path / "models"), tmp_path)
    missing = run_cli(str(tmp_path / "absent.gguf"), "-o", str(tmp_path / "out.tar.gz"))
    assert "absent.gguf: a model file does not exist" in missing.stderr


def test_a_gguf_without_the_gguf_suffix_is_told_to_be_renamed(tmp_path):
    model = tmp_path / "model.bin"
    model.write_bytes(embedded_model_path().read_bytes()[:4096])
    result = run_cli(str(model), "-o", str(tmp_path / "out.tar.gz"))
    assert result.returncode == 2
    assert "model.bin: the model file name must end in .gguf" in result.stderr
    assert "no model .gguf file" not in result.stderr


def test_a_projector_must_be_named_like_one(make_gguf, tmp_path):
    model, projector = make_gguf("m.gguf"), make_gguf("vision.gguf")
    with pytest.raises(ModelFileError, match=r"vision\.gguf: a projector file is named mmproj\*\.gguf"):
        build_tarball(model, tmp_path / "out.tar.gz", projector=projector)
