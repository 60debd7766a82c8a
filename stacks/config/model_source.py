"""Where the model comes from: the embedded one, a local GGUF, a local model.tar.gz, or a pinned object in S3."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from semif_adapter.deploy.quantize import ConversionError, require_type
from semif_adapter.engine.model_files import MAX_DEPTH, MODEL_SUFFIX, is_projector

from .strict import Strict


class _Convertible(Strict):
    """A local GGUF the stack packages; `convert` re-encodes it first with llama.cpp's quantizer (once, cached)."""

    convert: str | None = Field(None, description="e.g. Q8_0; see `semif package --convert`")

    @field_validator("convert")
    @classmethod
    def _convert(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return require_type(value)
        except ConversionError as error:
            raise ValueError(str(error)) from None


class EmbeddedModel(_Convertible):
    """The SmolLM2-135M GGUF shipped with the toolkit: deployable with no model of your own."""

    source: Literal["embedded"]


class GgufModel(_Convertible):
    """A local .gguf (first shard of a split model), packaged into model.tar.gz at synth."""

    source: Literal["gguf"]
    path: str = Field(min_length=1)


class TarballModel(Strict):
    """A local model.tar.gz made by `semif package` (checked against the packaging rules)."""

    source: Literal["tarball"]
    path: str = Field(min_length=1)


_S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>[^\s]+)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_VERSION_ID = re.compile(r"^[\x21-\x7e]{1,1024}$")


class S3Model(Strict):
    """An existing model.tar.gz in S3, pinned so that a new model is always a visible config change.

    Pinned by content (`sha256`, the model's digest as printed by the packaging script, which must appear in
    the object key: a content-addressed key cannot silently change) or by `version_id` (checked against the
    object's current version at deploy time, since SageMaker itself always reads the current version); a
    version pin may also give `sha256`. The digest, when given, is what every decision instance verifies
    before it loads the model. The bucket must belong to `bucket_owner` (default: the deploying account);
    the execution roles may read it only there, and the deployment checks it.
    """

    source: Literal["s3"]
    uri: str
    sha256: str | None = None
    version_id: str | None = None
    model_file: str = Field(description="path of the .gguf inside the tarball, e.g. model.gguf")
    model_bytes: int | None = Field(None, gt=0, description="size of the .gguf; sizes the start-up timeouts")
    context_length: int | None = Field(None, gt=0, description="the model's trained context (its GGUF header)")
    kms_key_arn: str | None = Field(None, pattern=r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[0-9a-f-]{36}$")
    bucket_owner: str | None = Field(None, pattern=r"^\d{12}$",
                                     description="account that owns the bucket, when it is not the deploying one")

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str) -> str:
        match = _S3_URI.fullmatch(value)
        if match is None or match["key"].endswith("/"):
            raise ValueError(f"{value!r} is not an s3://bucket/key URI of one object")
        return value

    @field_validator("model_file")
    @classmethod
    def _model_file(cls, value: str) -> str:
        parts = value.split("/")
        if (not value.endswith(MODEL_SUFFIX) or value.startswith("/") or ".." in parts or len(parts) > MAX_DEPTH
                or is_projector(PurePosixPath(value))):
            raise ValueError(f"{value!r} must be a relative .gguf path at most {MAX_DEPTH} levels deep, "
                             "not a projector")
        return value

    @model_validator(mode="after")
    def _pinned(self) -> S3Model:
        if self.sha256 is None and self.version_id is None:
            raise ValueError("an existing S3 object must be pinned: give sha256 (content-addressed key) "
                             "or version_id (versioned bucket)")
        if self.sha256 is not None:
            if not _SHA256.fullmatch(self.sha256):
                raise ValueError(f"sha256 {self.sha256!r} is not 64 lower-case hex digits")
            if self.version_id is None and self.sha256 not in self.key:
                raise ValueError(f"sha256 pinning needs a content-addressed key: {self.key!r} does not contain "
                                 f"{self.sha256}; upload to e.g. models/{self.sha256}/model.tar.gz")
        if self.version_id is not None and (not _VERSION_ID.fullmatch(self.version_id) or self.version_id == "null"):
            raise ValueError(f"version_id {self.version_id!r} is not an S3 version id (the bucket must be "
                             "versioned; 'null' means it is not)")
        return self

    @property
    def bucket(self) -> str:
        return _S3_URI.fullmatch(self.uri)["bucket"]  # type: ignore[index]

    @property
    def key(self) -> str:
        return _S3_URI.fullmatch(self.uri)["key"]  # type: ignore[index]

    @property
    def kms_key_region(self) -> str | None:
        return self.kms_key_arn.split(":")[3] if self.kms_key_arn else None


ModelSource = Annotated[EmbeddedModel | GgufModel | TarballModel | S3Model, Field(discriminator="source")]

