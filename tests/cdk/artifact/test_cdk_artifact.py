"""Model artifact preparation: packaged once, cached by (path, size, mtime), refused with the key named."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Match, Template
from cdk_support import load
from support.models import MATRIX, MatrixModel

from semif_adapter.engine.gguf_header import read_gguf_info
from stacks.artifact import source as artifact_source
from stacks.artifact.model_artifact import ModelArtifact
from stacks.artifact.source import ArtifactCache, LocalArtifact, RemoteArtifact, container_model_path, prepare_artifact
from stacks.config import ConfigError, EmbeddedModel, GgufModel, S3Model, TarballModel
from stacks.operations.logs import LogSettings
from stacks.prepare import model_warnings

SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
KEY = "environments.dev.model"


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Records every real packaging run (each one hashes the whole model)."""
    calls: list[Path] = []
    real = artifact_source.build_tarball

    def counting(model: Path, output: Path, **kwargs: object):  # type: ignore[no-untyped-def]
        calls.append(model)
        return real(model, output, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(artifact_source, "build_tarball", counting)
    return calls


def test_a_gguf_is_packaged_once_and_then_served_from_the_cache(
        tmp_path: Path, make_gguf: Callable[[str], Path], builds: list[Path]) -> None:
    model = make_gguf("models/tiny.gguf")
    cache = ArtifactCache(tmp_path / "cache")
    first = prepare_artifact(GgufModel(source="gguf", path="models/tiny.gguf"), key=KEY, base_dir=tmp_path,
                             cache=cache)
    assert isinstance(first, LocalArtifact)
    assert first.model_sha256 == hashlib.sha256(model.read_bytes()).hexdigest()
    assert first.asset_hash == f"semif-model-tar-v1:{first.model_sha256}"
    assert first.tarball.is_file() and first.tarball.stat().st_size == first.tarball_bytes
    assert str(first.model_file) == "tiny.gguf" and container_model_path(first) == "/opt/ml/model/tiny.gguf"
    with tarfile.open(first.tarball) as tar:
        assert tar.getnames() == ["tiny.gguf"]

    second = cache.packaged(model)
    assert second == first
    assert len(builds) == 1, "an unchanged model must not be hashed or packaged again"

    os.utime(model, ns=(model.stat().st_atime_ns, model.stat().st_mtime_ns + 1_000_000))
    third = cache.packaged(model)
    assert len(builds) == 2, "a touched model is re-hashed"
    assert third.asset_hash == first.asset_hash, "same bytes, same asset: nothing to upload again"


def test_a_deleted_cached_tarball_is_rebuilt(tmp_path: Path, make_gguf: Callable[[str], Path],
                                             builds: list[Path]) -> None:
    model = make_gguf("tiny.gguf")
    cache = ArtifactCache(tmp_path / "cache")
    first = cache.packaged(model)
    first.tarball.unlink()
    again = cache.packaged(model)
    assert again.tarball.is_file() and len(builds) == 2


def test_a_prepared_tarball_is_checked_and_its_model_path_found(
        tmp_path: Path, make_gguf: Callable[[str], Path]) -> None:
    model = make_gguf("src/weights.gguf")
    tarball = tmp_path / "model.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(model, arcname="llm/weights.gguf")
    artifact = prepare_artifact(TarballModel(source="tarball", path=str(tarball)), key=KEY, base_dir=tmp_path,
                                cache=ArtifactCache(tmp_path / "cache"))
    assert isinstance(artifact, LocalArtifact)
    assert container_model_path(artifact) == "/opt/ml/model/llm/weights.gguf"
    assert artifact.tarball == tarball.resolve()
    assert artifact.asset_hash == f"tarball:{hashlib.sha256(tarball.read_bytes()).hexdigest()}"


def test_a_tarball_breaking_the_packaging_rules_fails_with_the_key(
        tmp_path: Path, make_gguf: Callable[[str], Path]) -> None:
    one, two = make_gguf("a.gguf"), make_gguf("b.gguf")
    tarball = tmp_path / "two-models.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(one, arcname="a.gguf")
        tar.add(two, arcname="b.gguf")
    with pytest.raises(ConfigError) as caught:
        prepare_artifact(TarballModel(source="tarball", path=str(tarball)), key=KEY, base_dir=tmp_path,
                         cache=ArtifactCache(tmp_path / "cache"))
    ((where, message),) = caught.value.problems
    assert where == "environments.dev.model.path"
    assert "2 models found" in message and "two-models.tar.gz" in message


def test_a_tarball_with_a_link_is_refused(tmp_path: Path) -> None:
    tarball = tmp_path / "link.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        info = tarfile.TarInfo("model.gguf")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(ConfigError, match="is a link"):
        prepare_artifact(TarballModel(source="tarball", path=str(tarball)), key=KEY, base_dir=tmp_path,
                         cache=ArtifactCache(tmp_path / "cache"))


def test_a_missing_or_non_gguf_model_fails_with_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        prepare_artifact(GgufModel(source="gguf", path="nope.gguf"), key=KEY, base_dir=tmp_path,
                         cache=ArtifactCache(tmp_path / "cache"))
    assert caught.value.keys == ["environments.dev.model.path"]
    (tmp_path / "fake.gguf").write_bytes(b"not a gguf at all")
    with pytest.raises(ConfigError, match="GGUF"):
        prepare_artifact(GgufModel(source="gguf", path="fake.gguf"), key=KEY, base_dir=tmp_path,
                         cache=ArtifactCache(tmp_path / "cache"))
    assert not list((tmp_path / "cache").glob(".build-*")), "a failed build leaves no staging directory"


def test_the_embedded_model_is_the_default_artifact(tmp_path: Path) -> None:
    artifact = prepare_artifact(EmbeddedModel(source="embedded"), key=KEY, base_dir=tmp_path,
                                cache=ArtifactCache(Path(__file__).resolve().parents[3] / ".cache" / "model-artifacts"))
    assert isinstance(artifact, LocalArtifact)
    assert str(artifact.model_file) == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert artifact.model_bytes > 90_000_000


def test_an_s3_source_is_used_as_given(tmp_path: Path) -> None:
    source = S3Model(source="s3", uri=f"s3://models-bucket/{SHA}/model.tar.gz", sha256=SHA, model_file="m/q4.gguf",
                     model_bytes=4_000_000_000)
    artifact = prepare_artifact(source, key=KEY, base_dir=tmp_path, cache=ArtifactCache(tmp_path / "cache"))
    assert isinstance(artifact, RemoteArtifact)
    assert (artifact.bucket, artifact.key) == ("models-bucket", f"{SHA}/model.tar.gz")
    assert container_model_path(artifact) == "/opt/ml/model/m/q4.gguf"
    assert not (tmp_path / "cache").exists(), "nothing is downloaded or packaged for an S3 source"


def test_a_foreign_bucket_is_read_only_when_its_owner_is_configured(tmp_path: Path) -> None:
    """Default: the deploying account (tests/security); a configured owner replaces it in the role's condition
    and in the deploy-time check."""
    source = S3Model(source="s3", uri=f"s3://their-bucket/{SHA}/model.tar.gz", sha256=SHA, model_file="m.gguf",
                     bucket_owner="210987654321")
    stack = Stack(App(), "Owner")
    settings = LogSettings(logs.RetentionDays.ONE_WEEK, kms.Key(stack, "Key"))
    remote = prepare_artifact(source, key=KEY, base_dir=tmp_path, cache=ArtifactCache(tmp_path / "cache"))
    artifact = ModelArtifact(stack, "ModelArtifact", artifact=remote, log_settings=settings)
    (read,) = [statement.to_statement_json() for statement in artifact.read_statements()]
    assert read["Condition"] == {"StringEquals": {"s3:ResourceAccount": "210987654321"}}
    template = Template.from_stack(stack)
    template.has_resource_properties("Custom::ModelArtifactPin", {
        "Bucket": "their-bucket", "ExpectedBucketOwner": "210987654321", "VersionId": ""})
    template.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Action": "s3:GetObject",
                           "Condition": {"StringEquals": {"s3:ResourceAccount": "210987654321"}}})])}})


REPO_CACHE = Path(__file__).resolve().parents[3] / ".cache" / "model-artifacts"  # packaged once, then by stat
KERNEL_WARNINGS = {"smollm2": "100% of the weights (Q4_1 63 MiB) are in types with no tiled CPU kernel",
                   "gemma3": "34% of the weights (Q4_K 13 MiB, Q6_K 9 MiB) are in types with no tiled CPU kernel"}


@pytest.mark.parametrize("model", MATRIX)
def test_synth_warns_about_slow_kernels_and_a_chat_endpoint_without_a_template(model: MatrixModel,
                                                                              tmp_path: Path) -> None:
    """Kernels per accelerator; a model without a chat template until the chat endpoint is given one (llama-server
    would frame its chats in ChatML); a remote model is not read."""
    source = GgufModel(source="gguf", path=str(model.path))  # an absolute path replaces the base directory
    artifact = prepare_artifact(source, key=KEY, base_dir=tmp_path, cache=ArtifactCache(REPO_CACHE))
    assert isinstance(artifact, LocalArtifact)
    assert (artifact.has_chat_template, artifact.kv_bytes_per_token) == \
        (model.has_chat_template, model.kv_bytes_per_token)
    warnings = model_warnings(artifact, load("dev").settings, KEY)
    assert all(warning.startswith(f"{KEY}: ") for warning in warnings)
    kernels = [warning for warning in warnings if "kernel" in warning]
    templates = [warning for warning in warnings if "no chat template" in warning]
    expected = KERNEL_WARNINGS[model.name]
    assert [expected in warning for warning in kernels] == ([True] if expected else [])
    assert len(templates) == (0 if model.has_chat_template else 1) and len(warnings) == len(kernels) + len(templates)
    for warning in templates:
        assert "frame every chat in its default, ChatML" in warning and "SM_LLAMA_CPP_CHAT_TEMPLATE" in warning
        assert "SM_LLAMA_CPP_NO_JINJA=true" in warning and warning.endswith("(cdk.json: chat.llama_env)")
    assert not [warning for warning in model_warnings(artifact, load("prod").settings, KEY) if "kernel" in warning]
    given = load("dev", {"chat": {"llama_env": {"SM_LLAMA_CPP_CHAT_TEMPLATE": "gemma",
                                                "SM_LLAMA_CPP_NO_JINJA": "true"}}})
    assert model_warnings(artifact, given.settings, KEY) == kernels
    source = S3Model(source="s3", uri=f"s3://models-bucket/{SHA}/model.tar.gz", sha256=SHA, model_file="m.gguf")
    remote = prepare_artifact(source, key=KEY, base_dir=tmp_path, cache=ArtifactCache(tmp_path / "cache"))
    assert model_warnings(remote, load("dev").settings, KEY) == []


def test_the_weight_types_are_remembered_with_the_digest(tmp_path: Path, builds: list[Path]) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    first = prepare_artifact(EmbeddedModel(source="embedded"), key=KEY, base_dir=tmp_path, cache=cache)
    again = prepare_artifact(EmbeddedModel(source="embedded"), key=KEY, base_dir=tmp_path, cache=cache)
    assert isinstance(first, LocalArtifact) and again == first and len(builds) == 1
    assert first.weight_types == (("q4_1", 66_355_200),) and first.notes == ()


@pytest.mark.slow
def test_convert_is_applied_once_and_the_cache_is_keyed_on_it(tmp_path: Path, builds: list[Path]) -> None:
    cache = ArtifactCache(tmp_path / "cache", agreement_decisions=1)
    source = EmbeddedModel(source="embedded", convert="q8_0")
    converted = prepare_artifact(source, key=KEY, base_dir=tmp_path, cache=cache)
    assert isinstance(converted, LocalArtifact)
    assert str(converted.model_file) == "SmolLM2-135M-Instruct.Q8_0.gguf"
    assert converted.weight_types is not None and [name for name, _ in converted.weight_types] == ["q8_0"]
    assert converted.notes[0].startswith("converted:") and "agreement:" in converted.notes[-4]
    assert [note.split()[0] for note in converted.notes[-3:]] == ["letters", "likelihood", "pmi"]
    with tarfile.open(converted.tarball) as tar:
        stream = tar.extractfile("SmolLM2-135M-Instruct.Q8_0.gguf")
        assert stream is not None and read_gguf_info(stream).quantization == "Q8_0"
    assert prepare_artifact(source, key=KEY, base_dir=tmp_path, cache=cache) == converted
    assert len(builds) == 1, "an unchanged model is not converted, measured or packaged again"
    plain = prepare_artifact(EmbeddedModel(source="embedded"), key=KEY, base_dir=tmp_path, cache=cache)
    assert len(builds) == 2 and plain.model_sha256 != converted.model_sha256
    assert plain.asset_hash != converted.asset_hash and str(plain.model_file).endswith("Q4_1.gguf")
    assert not list((tmp_path / "cache").glob(".build-*")), "the scratch copy of the converted model is gone"


def test_a_conversion_llama_cpp_refuses_fails_with_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        prepare_artifact(EmbeddedModel(source="embedded", convert="Q4_1"), key=KEY, base_dir=tmp_path,
                         cache=ArtifactCache(tmp_path / "cache"))
    ((where, message),) = caught.value.problems
    assert where == "environments.dev.model.convert" and "already Q4_1" in message
