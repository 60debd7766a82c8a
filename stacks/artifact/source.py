"""Turn the configured model source into a model.tar.gz the stack can point SageMaker at.

Local models are packaged (or checked) with the shared `semif_adapter.deploy.artifact` rules at synth time, into a
content-addressed cache. Hashing a multi-GB GGUF takes minutes, so the digest is remembered against the file's
(resolved path, size, mtime_ns): an unchanged model costs one `stat` per synth, and the CDK asset hash is that
digest (plus the tarball format), never a re-hash of the tarball by CDK. A GGUF with `convert` is re-encoded
with llama.cpp's quantizer first (`semif_adapter.deploy.quantize`), its agreement with the original measured once
(`semif_adapter.deploy.agreement`); the index keeps it under (path, type), with the figures, so neither is redone.
The weight types of every packaged GGUF are remembered too: the stack warns when they have no fast kernel on
the endpoint's accelerator (`semif_adapter.deploy.kernel_paths`), and, from the header, whether the model has a chat
template (the chat endpoint's llama-server falls back to ChatML without one), its KV cache per token (counted
against the decision endpoint's memory, `stacks/config/decision_memory.py`) and its decision type (who scores it:
`stacks/config/decision_engine.py`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from semif_adapter.deploy.artifact import ARTIFACT_FORMAT, ArtifactReport, build_tarball, check_tarball
from semif_adapter.deploy.kernel_paths import weight_type_bytes
from semif_adapter.deploy.quantize import ConversionError, convert
from semif_adapter.engine.embedded_model import EmbeddedModelMissingError, embedded_model_path
from semif_adapter.engine.model_files import ModelFileError

from ..config.model_source import EmbeddedModel, GgufModel, S3Model, TarballModel
from ..config.problems import ConfigError

INDEX_FILE = "index.json"
INDEX_VERSION = 5  # 2: the trained context; 3: conversions, weight types, notes; 4: chat template, KV per token;
# 5: the decision type
MODEL_DIR = PurePosixPath("/opt/ml/model")  # where SageMaker unpacks model.tar.gz


@dataclass(frozen=True)
class LocalArtifact:
    """A tarball on this machine, uploaded as a CDK file asset."""

    tarball: Path
    asset_hash: str  # stable across synths; derived from the model digest, not from re-reading the file
    model_file: PurePosixPath  # relative to /opt/ml/model
    model_bytes: int
    tarball_bytes: int
    model_sha256: str
    context_length: int | None  # the model's trained context, from its GGUF header
    weight_types: tuple[tuple[str, int], ...] | None = None  # ggml type -> bytes; None: not known (a tarball)
    notes: tuple[str, ...] = ()  # what the conversion printed: the quantizer's summary, the agreement figures
    has_chat_template: bool | None = None  # from the GGUF header
    kv_bytes_per_token: int | None = None  # from the GGUF header (gguf_header.GGUFInfo)
    decision_type: str | None = None  # `<arch>.decision.type` (a type llama.cpp serves); None: a generic chat model
    decision_type_key: str | None = None  # that key, named by the rules; None: the header was not read


@dataclass(frozen=True)
class RemoteArtifact:
    """An existing, pinned object in S3."""

    bucket: str
    key: str
    model_file: PurePosixPath
    model_bytes: int | None
    model_sha256: str | None  # the config's digest (content pin), verified by every decision instance
    version_id: str | None
    kms_key_arn: str | None
    bucket_owner: str | None  # None: the deploying account
    context_length: int | None = None  # as declared in the config
    has_chat_template: bool | None = None  # the header is not read: not known
    kv_bytes_per_token: int | None = None
    decision_type: str | None = None  # not known: SEMIF_DECISION_ENGINE decides alone (decision_engine.py)
    decision_type_key: str | None = None


Artifact = LocalArtifact | RemoteArtifact


@dataclass(frozen=True)
class _Entry:
    """What the index remembers about one source file at one (path, size, mtime)."""

    size: int
    mtime_ns: int
    kind: str  # "gguf" (we built the tarball) or "tarball" (the user's, checked)
    model_sha256: str
    model_file: str
    model_bytes: int
    tarball_sha256: str
    tarball_bytes: int
    context_length: int | None
    convert: str | None = None
    weight_types: dict[str, int] | None = None
    notes: tuple[str, ...] = ()
    has_chat_template: bool | None = None
    kv_bytes_per_token: int | None = None
    decision_type: str | None = None
    decision_type_key: str | None = None


class ArtifactCache:
    """Content-addressed tarballs plus an index of file digests, under one directory (e.g. .cache/)."""

    def __init__(self, root: Path, agreement_decisions: int | None = None) -> None:
        self.root = root
        self.agreement_decisions = agreement_decisions  # None: the whole fixed set (semif_adapter.deploy.agreement)

    def _index_path(self) -> Path:
        return self.root / INDEX_FILE

    def _load(self) -> dict[str, dict[str, object]]:
        try:
            data = json.loads(self._index_path().read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != INDEX_VERSION:
            return {}
        entries = data.get("entries")
        return entries if isinstance(entries, dict) else {}

    def _lookup(self, source: Path, kind: str, convert: str | None = None) -> _Entry | None:
        raw = self._load().get(_index_key(source, convert))
        if not isinstance(raw, dict):
            return None
        try:
            entry = _Entry(**{**raw, "notes": tuple(raw.get("notes", ()))})  # type: ignore[arg-type]
        except TypeError:
            return None
        stat = source.stat()
        if (entry.size, entry.mtime_ns, entry.kind, entry.convert) != (stat.st_size, stat.st_mtime_ns, kind, convert):
            return None
        return entry

    def _remember(self, source: Path, entry: _Entry) -> None:
        """Add one entry; written atomically so a concurrent synth never reads half a file."""
        self.root.mkdir(parents=True, exist_ok=True)
        entries = self._load()
        entries[_index_key(source, entry.convert)] = asdict(entry)
        temporary = self.root / f".{INDEX_FILE}.{uuid.uuid4().hex}"
        temporary.write_text(json.dumps({"version": INDEX_VERSION, "entries": entries}, indent=1, sort_keys=True))
        os.replace(temporary, self._index_path())

    def tarball_for(self, model_sha256: str) -> Path:
        return self.root / f"{model_sha256}-{ARTIFACT_FORMAT}" / "model.tar.gz"

    def packaged(self, gguf: Path, convert: str | None = None) -> LocalArtifact:
        """model.tar.gz for a GGUF (re-encoded as `convert` first): from the cache when the file is unchanged,
        else built (and hashed, converted, measured) once."""
        source = gguf.resolve()
        entry = self._lookup(source, "gguf", convert)
        if entry is not None:
            tarball = self.tarball_for(entry.model_sha256)
            if tarball.is_file() and tarball.stat().st_size == entry.tarball_bytes:
                return _local(tarball, entry)
        stat = source.stat()
        staging = self.root / f".build-{uuid.uuid4().hex}" / "model.tar.gz"
        try:
            model, notes = (source, ()) if convert is None else self._converted(source, staging.parent, convert)
            report = build_tarball(model, staging)
            types = _weight_types(model)
            tarball = self.tarball_for(report.model_sha256)
            tarball.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging, tarball)
        finally:
            shutil.rmtree(staging.parent, ignore_errors=True)
        entry = _entry(report, stat, "gguf", convert=convert, weight_types=types, notes=notes)
        self._remember(source, entry)
        return _local(tarball, entry)

    def _converted(self, source: Path, scratch: Path, type_name: str) -> tuple[Path, tuple[str, ...]]:
        """The re-encoded GGUF in `scratch`, and the figures to show (printed now: this runs once per model)."""
        from semif_adapter.deploy.agreement import measure  # loads llama.cpp: only when converting
        from semif_adapter.deploy.agreement_cases import DECISIONS

        conversion = convert(source, scratch, type_name)
        agreement = measure(source, conversion.output, decisions=DECISIONS[:self.agreement_decisions])
        notes = (*conversion.lines(), *agreement.lines())
        print("\n".join(notes), file=sys.stderr, flush=True)
        return conversion.output, notes

    def checked(self, tarball: Path) -> LocalArtifact:
        """A prepared model.tar.gz, validated against the packaging rules once per (path, size, mtime)."""
        source = tarball.resolve()
        entry = self._lookup(source, "tarball")
        if entry is None:
            stat = source.stat()
            entry = _entry(check_tarball(source), stat, "tarball")
            self._remember(source, entry)
        return _local(source, entry)


def _index_key(source: Path, convert: str | None) -> str:
    return str(source) if convert is None else f"{source}#convert={convert}"


def _weight_types(model: Path) -> dict[str, int] | None:
    """The packaged GGUF's weight types; None when ggml cannot say (the packaging rules passed: advice only)."""
    try:
        return weight_type_bytes(model)
    except ValueError:
        return None


def _entry(report: ArtifactReport, stat: os.stat_result, kind: str, *, convert: str | None = None,
           weight_types: dict[str, int] | None = None, notes: tuple[str, ...] = ()) -> _Entry:
    return _Entry(size=stat.st_size, mtime_ns=stat.st_mtime_ns, kind=kind, model_sha256=report.model_sha256,
                  model_file=str(report.layout.model), model_bytes=report.model_bytes,
                  tarball_sha256=report.tarball_sha256, tarball_bytes=report.tarball_bytes,
                  context_length=report.info.context_length, convert=convert, weight_types=weight_types,
                  notes=notes, has_chat_template=report.info.has_chat_template,
                  kv_bytes_per_token=report.info.kv_bytes_per_token, decision_type=report.info.decision_type,
                  decision_type_key=report.info.decision_type_key)


def _local(tarball: Path, entry: _Entry) -> LocalArtifact:
    """The asset hash follows what defines the bytes: our packaging format and the model, or the user's tarball."""
    asset_hash = (f"{ARTIFACT_FORMAT}:{entry.model_sha256}" if entry.kind == "gguf"
                  else f"tarball:{entry.tarball_sha256}")
    types = tuple(sorted(entry.weight_types.items())) if entry.weight_types is not None else None
    return LocalArtifact(tarball=tarball, asset_hash=asset_hash, model_file=PurePosixPath(entry.model_file),
                         model_bytes=entry.model_bytes, tarball_bytes=entry.tarball_bytes,
                         model_sha256=entry.model_sha256, context_length=entry.context_length,
                         weight_types=types, notes=entry.notes, has_chat_template=entry.has_chat_template,
                         kv_bytes_per_token=entry.kv_bytes_per_token, decision_type=entry.decision_type,
                         decision_type_key=entry.decision_type_key)


def prepare_artifact(source: EmbeddedModel | GgufModel | TarballModel | S3Model, *, key: str, base_dir: Path,
                     cache: ArtifactCache) -> Artifact:
    """Resolve the configured source; packaging-rule violations become ConfigError naming `key`."""
    if isinstance(source, S3Model):
        return RemoteArtifact(bucket=source.bucket, key=source.key, model_file=PurePosixPath(source.model_file),
                              model_bytes=source.model_bytes, model_sha256=source.sha256,
                              version_id=source.version_id, kms_key_arn=source.kms_key_arn,
                              bucket_owner=source.bucket_owner, context_length=source.context_length)
    try:
        if isinstance(source, EmbeddedModel):
            return cache.packaged(embedded_model_path(), source.convert)
        path = base_dir / source.path  # an absolute path replaces base_dir
        if isinstance(source, GgufModel):
            return cache.packaged(path, source.convert)
        return cache.checked(path)
    except (ModelFileError, EmbeddedModelMissingError) as error:
        where = key if isinstance(source, EmbeddedModel) else f"{key}.path"
        raise ConfigError([(where, str(error))]) from None
    except ConversionError as error:
        raise ConfigError([(f"{key}.convert", str(error))]) from None
    except OSError as error:
        raise ConfigError([(f"{key}.path", f"{error.filename}: {error.strerror}")]) from None


def container_model_path(artifact: Artifact) -> str:
    """The model file as the container sees it: pinned explicitly, never left to the DLC's first-match."""
    return str(MODEL_DIR / artifact.model_file)
