"""Build and check `model.tar.gz`, the SageMaker model artifact.

Deterministic by construction (sorted members, zero mtimes, uid/gid 0, no
names, gzip header mtime 0), so the same model always gives the same bytes and
CDK asset hashes only change when the model does. Everything streams: the
model's and the tarball's sha256 are computed in the one pass that writes it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from ..engine.decision_types import DECISION_TYPES, DecisionType, UnsupportedDecisionTypeError, decision_type
from ..engine.gguf_header import (
    SYSTEMONE_TEMPLATE_KEY,
    ByteReader,
    GGUFHeaderError,
    GGUFInfo,
    read_gguf_info,
    require_complete,
)
from ..engine.model_files import (
    MAX_DEPTH,
    SHARD_PATTERN,
    ModelFileError,
    ModelLayout,
    is_projector,
    require_file,
    require_gguf_name,
    select_model,
)

CHUNK_BYTES = 4 * 1024 * 1024
GZIP_LEVEL = 1  # quantized weights barely compress; level 1 is several times faster than 9
ARTIFACT_FORMAT = "semif-model-tar-v1"  # bump when the member layout rules change

Progress = Callable[[int], None]


@dataclass(frozen=True)
class ArtifactReport:
    """What an operator checks before shipping: sizes, digests, model facts."""

    path: Path
    layout: ModelLayout
    info: GGUFInfo
    model_bytes: int
    model_sha256: str  # over the model file(s) in shard order
    tarball_bytes: int
    tarball_sha256: str

    def lines(self) -> list[str]:
        info = self.info
        return [
            f"artifact:      {self.path}",
            f"model:         {self.layout.model}"
            + (f" ({len(self.layout.files)} shards)" if len(self.layout.files) > 1 else ""),
            f"projector:     {self.layout.projector or '-'}",
            f"architecture:  {info.architecture or '?'}",
            f"quantization:  {info.quantization or '?'}",
            f"context:       {info.context_length or '?'} tokens",
            f"vocabulary:    {info.vocab_size or '?'} tokens",
            f"KV cache:      {_per_token(info.kv_bytes_per_token)}",
            f"chat template: {'in the GGUF' if info.has_chat_template else 'none'}",
            f"decisions:     {serving_path(info)}",
            *([f"decision head: {semantics}"] if (semantics := decision_semantics(info)) else []),
            f"model size:    {self.model_bytes:,} bytes",
            f"model sha256:  {self.model_sha256}",
            f"tarball size:  {self.tarball_bytes:,} bytes",
            f"tarball sha256: {self.tarball_sha256}",
        ]


def _per_token(kv_bytes: int | None) -> str:
    if kv_bytes is None:
        return "?"
    return f"{kv_bytes:,} bytes per context token ({kv_bytes * 8192 / 2**20:,.0f} MiB at 8192 tokens, f16)"


# What the chat endpoint does with a GGUF that has no template: measured with the pinned llama-server's
# /apply-template on Gemma 3 270M (README "Packaging a model"). common_chat_templates_init falls back to ChatML;
# with Jinja on (llama-server's default) a --chat-template value is the template's source, and only `chatml` is
# read as a name, so a bare built-in name such as `gemma` becomes the literal prompt "gemma" for every request.
CHAT_TEMPLATE_KEY = "SM_LLAMA_CPP_CHAT_TEMPLATE"
NO_JINJA_KEY = "SM_LLAMA_CPP_NO_JINJA"
DEFAULT_CHAT_FRAME = "ChatML (<|im_start|>role ... <|im_end|>)"


def chat_template_warning(has_chat_template: bool | None) -> str | None:
    """What the chat endpoint will do with a model whose GGUF carries no chat template, and how to change it."""
    if has_chat_template is not False:
        return None
    return (f"the model has no chat template (no tokenizer.chat_template in its GGUF): the chat endpoint "
            f"(llama-server; SageMaker's /invocations is its /v1/chat/completions) will frame every chat in its "
            f"default, {DEFAULT_CHAT_FRAME}, which a model without a template (a base model) was not trained on; "
            f"set {CHAT_TEMPLATE_KEY} to the model's own format, as a Jinja template, or as a llama.cpp built-in "
            f"name (e.g. gemma) together with {NO_JINJA_KEY}=true (with Jinja on, llama-server's default, a bare "
            f"name other than chatml is taken as the template's text)")


NATIVE_ENGINE = "llama.cpp's own decision engine"
OUR_ENGINE = "our engine"


def serving_path(info: GGUFInfo) -> str:
    """What the header makes of the model, and who scores it on the decision endpoint (SEMIF_DECISION_ENGINE=auto):
    `decision model: openjev (llama.cpp's own decision engine)` or `generic chat model: our engine`."""
    if info.decision_type is None:
        return f"generic chat model: {OUR_ENGINE}"
    return f"decision model: {info.decision_type} ({NATIVE_ENGINE})"


def decision_semantics(info: GGUFInfo) -> str | None:
    """What the declared type's head does that a caller should know (joint answers, sorted options, the cut),
    for `semif package` and `semif check`; None for a generic model or a type llama.cpp does not know."""
    found = DECISION_TYPES.get(info.decision_type or "")
    if found is None:
        return None
    head = f"{found.reads}; at most {found.option_limit} options; " + ", ".join(found.semantics())
    return head + (f" (max_head_tokens {info.max_head_tokens})" if found.truncates else "")


def require_servable(info: GGUFInfo, where: Path | str) -> DecisionType | None:
    """The model's decision type (None: a generic chat model); ModelFileError, naming the file and the header key,
    for a type the pinned llama.cpp does not serve (its model load would fail) or a decision model without the
    prompt template its head is asked through."""
    try:
        found = decision_type(info.decision_type, info.decision_type_key)
    except UnsupportedDecisionTypeError as error:
        raise ModelFileError(f"{where}: {error}") from None
    if found is not None and not info.has_systemone_template:
        raise ModelFileError(f"{where}: declares {info.decision_type_key} = {info.decision_type!r} but has no "
                             f"{SYSTEMONE_TEMPLATE_KEY}: llama.cpp's decision engine builds every prompt from it, "
                             "so it cannot ask this model anything")
    return found


class _Digesting(io.RawIOBase):
    """A pass-through stream that hashes (and reports) every byte it carries."""

    def __init__(self, inner: IO[bytes], digest: hashlib._Hash, progress: Progress | None) -> None:
        self._inner, self._digest, self._progress = inner, digest, progress
        self.count = 0

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        self._account(data)
        return data

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self._account(data)
        return self._inner.write(data)

    def _account(self, data: bytes) -> None:
        self._digest.update(data)
        self.count += len(data)
        if self._progress is not None:
            self._progress(len(data))


def model_files_for(model: Path, projector: Path | None = None) -> tuple[list[Path], ModelLayout]:
    """The files to package for a model path: all shards of a split model, plus a projector."""
    require_file(model, "a model file", "; give the .gguf file inside it (the first shard of a split model)")
    require_gguf_name(model)
    if projector is not None:
        require_file(projector, "a projector file")
        if not (is_projector(PurePosixPath(projector.name)) and projector.name.endswith(".gguf")):
            raise ModelFileError(f"{projector}: a projector file is named mmproj*.gguf (the rule that keeps the "
                                 "DLC from loading it as the model)")
    match = SHARD_PATTERN.match(model.name)
    if match:
        siblings = [p for p in model.parent.iterdir() if (m := SHARD_PATTERN.match(p.name)) and
                    m["stem"] == match["stem"] and m["count"] == match["count"]]
    else:
        siblings = [model]
    extra = [projector] if projector else []
    layout = select_model((PurePosixPath(p.name) for p in siblings + extra),
                          source=str(model.parent), allow_projector=projector is not None)
    by_name = {p.name: p for p in siblings + extra}
    ordered = [by_name[str(name)] for name in layout.files] + extra
    return ordered, layout


def build_tarball(
    model: Path,
    output: Path,
    *,
    projector: Path | None = None,
    progress: Progress | None = None,
) -> ArtifactReport:
    """Write a deterministic model.tar.gz holding the model at the top level."""
    files, layout = model_files_for(model, projector)
    infos = {}
    for path in files:
        with path.open("rb") as head:
            infos[path] = _read_info(head, path, path.stat().st_size)
    info = infos[files[0]]
    require_servable(info, files[0])
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    file_digests: dict[PurePosixPath, str] = {}
    tar_digest = hashlib.sha256()
    with partial.open("wb") as raw_out:
        counted_out = _Digesting(raw_out, tar_digest, None)
        with (gzip.GzipFile(fileobj=counted_out, mode="wb", mtime=0, filename="",
                            compresslevel=GZIP_LEVEL) as gz,
              tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar):
            for path in sorted(files, key=lambda p: p.name):
                digest = hashlib.sha256()
                with path.open("rb") as stream:
                    member = _fixed_member(path.name, path.stat().st_size)
                    tar.addfile(member, _Digesting(stream, digest, progress))
                file_digests[PurePosixPath(path.name)] = digest.hexdigest()
    os.replace(partial, output)
    return ArtifactReport(
        path=output, layout=layout, info=info,
        model_bytes=sum(p.stat().st_size for p in files if PurePosixPath(p.name) in layout.files),
        model_sha256=model_digest(layout, file_digests),
        tarball_bytes=counted_out.count, tarball_sha256=tar_digest.hexdigest(),
    )


def model_digest(layout: ModelLayout, file_digests: dict[PurePosixPath, str]) -> str:
    """sha256 of the model file; for a split model, sha256 over its shards' digests in order."""
    if len(layout.files) == 1:
        return file_digests[layout.model]
    joined = "".join(file_digests[p] for p in layout.files)
    return hashlib.sha256(joined.encode()).hexdigest()


def _fixed_member(name: str, size: int) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.size, member.mtime, member.mode = size, 0, 0o644
    member.uid = member.gid = 0
    member.uname = member.gname = ""
    return member


def _read_info(stream: ByteReader, where: Path | str, file_bytes: int) -> GGUFInfo:
    """The header of one GGUF file, refused when unreadable or when the file is shorter than its tensor data."""
    try:
        info = read_gguf_info(stream)
        require_complete(info, file_bytes)
    except GGUFHeaderError as error:
        raise ModelFileError(f"{where}: {error}") from error
    return info


def check_tarball(tarball: Path, *, allow_projector: bool = False,
                  progress: Progress | None = None) -> ArtifactReport:
    """Validate an existing artifact against every packaging rule, streaming it once."""
    require_file(tarball, "a model.tar.gz")
    names: list[PurePosixPath] = []
    infos: dict[PurePosixPath, GGUFInfo] = {}
    sizes: dict[PurePosixPath, int] = {}
    file_digests: dict[PurePosixPath, str] = {}
    tar_digest = hashlib.sha256()
    with tarball.open("rb") as raw:
        counted = _Digesting(raw, tar_digest, progress)
        try:
            with tarfile.open(fileobj=counted, mode="r|*") as tar:
                for member in tar:
                    name = _member_path(tarball, member)
                    if member.isdir():
                        continue
                    names.append(name)
                    if not name.name.endswith(".gguf"):
                        continue
                    stream = tar.extractfile(member)
                    assert stream is not None  # regular files always have a stream
                    digest = hashlib.sha256()
                    hashing = _Digesting(stream, digest, None)
                    infos[name] = _read_info(hashing, f"{tarball}:{name}", member.size)
                    while hashing.read(CHUNK_BYTES):
                        pass
                    file_digests[name], sizes[name] = digest.hexdigest(), member.size
        except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as error:
            raise ModelFileError(f"{tarball}: not a readable tar.gz archive ({error})") from error
    layout = select_model(names, source=str(tarball), allow_projector=allow_projector)
    require_servable(infos[layout.model], f"{tarball}:{layout.model}")
    return ArtifactReport(
        path=tarball, layout=layout, info=infos[layout.model],
        model_bytes=sum(sizes[p] for p in layout.files), model_sha256=model_digest(layout, file_digests),
        tarball_bytes=counted.count, tarball_sha256=tar_digest.hexdigest(),
    )


def _member_path(tarball: Path, member: tarfile.TarInfo) -> PurePosixPath:
    """Apply the member rules: relative, no `..`, regular files and dirs only, shallow."""
    raw = member.name
    where = f"{tarball}: member {raw!r}"
    if raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
        raise ModelFileError(f"{where} has an absolute path")
    path = PurePosixPath(raw)
    if ".." in path.parts:
        raise ModelFileError(f"{where} climbs out of the model directory with '..'")
    if member.issym() or member.islnk():
        raise ModelFileError(f"{where} is a link (links are refused)")
    if not (member.isfile() or member.isdir()):
        raise ModelFileError(f"{where} is a device, fifo or other special file")
    parts = [part for part in path.parts if part != "."]
    if member.isfile() and len(parts) > MAX_DEPTH:
        raise ModelFileError(f"{where} is {len(parts)} levels deep (at most {MAX_DEPTH})")
    return PurePosixPath(*parts) if parts else PurePosixPath(".")
