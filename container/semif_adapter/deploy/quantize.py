"""Re-encode a GGUF in another type with llama.cpp's own quantizer (`llama_model_quantize`).

Why: the type decides which CPU kernels llama.cpp uses (`kernel_paths.py`), and with them most of a decision's
time; the embedded Q4_1, for one, has neither a repacked nor a tiled kernel on x86-64. Requantizing an already
quantized model (`allow_requantize`) cannot restore what the first quantization lost, so every conversion is
reported with its measured agreement with the original (`agreement.py`), never taken on trust.

Used by `semif package --convert TYPE` and by the CDK app (`model.convert`), so both convert alike.
"""

from __future__ import annotations

import ctypes
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ..engine.gguf_header import GGUFHeaderError, read_gguf_info
from ..engine.model_files import SHARD_PATTERN

# Types a model can be converted to without an importance matrix (llama.cpp refuses the IQ1/IQ2/IQ3_XXS types
# without one), by the name llama.cpp's quantize tool uses; each is `LLAMA_FTYPE_MOSTLY_<name>`.
CONVERT_TYPES = ("Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q5_0", "Q5_1", "Q4_K_M", "Q4_K_S", "Q4_0", "Q4_1",
                 "IQ4_NL", "IQ4_XS", "Q3_K_L", "Q3_K_M", "Q3_K_S", "Q2_K", "F16", "BF16")
SUMMARY_MARKERS = ("WARNING", "error", "failed")  # llama.cpp's quantizer lines worth showing (not per tensor)


class ConversionError(ValueError):
    """The model cannot be converted as asked; the message says why."""


@dataclass(frozen=True)
class Conversion:
    source: Path
    output: Path
    type_name: str
    source_type: str | None
    output_bytes: int
    seconds: float
    notes: tuple[str, ...]  # the quantizer's summary warnings (e.g. tensors that needed a fallback type)

    def lines(self) -> list[str]:
        return [f"converted:     {self.source.name} ({self.source_type or '?'}) -> {self.output.name} "
                f"({self.type_name}, {self.output_bytes:,} bytes) in {self.seconds:.1f} s",
                *(f"  quantizer:   {note}" for note in self.notes)]


def require_type(type_name: str) -> str:
    """The type name as llama.cpp spells it; ConversionError names the choices."""
    if type_name.upper() not in CONVERT_TYPES:
        raise ConversionError(f"{type_name!r} is not a type this toolkit converts to; one of "
                              f"{', '.join(CONVERT_TYPES)}")
    return type_name.upper()


def converted_name(source: Path, source_type: str | None, type_name: str) -> str:
    """`SmolLM2-135M-Instruct.Q4_1.gguf` -> `SmolLM2-135M-Instruct.Q8_0.gguf`; else `<stem>-<TYPE>.gguf`.

    A split model's shard suffix is dropped: the quantizer writes one file.
    """
    match = SHARD_PATTERN.match(source.name)
    stem = match["stem"] if match else source.name.removesuffix(".gguf")
    if source_type:
        replaced = re.sub(rf"(?i)([.\-_]){re.escape(source_type)}$", rf"\g<1>{type_name}", stem)
        if replaced != stem:
            return replaced + ".gguf"
    return f"{stem}-{type_name}.gguf"


def convert(source: Path, output_dir: Path, type_name: str, *, threads: int | None = None) -> Conversion:
    """Write `source` re-encoded as `type_name` into `output_dir`; the file appears only when complete."""
    import llama_cpp  # here, not at import: the CDK app imports this module for CONVERT_TYPES alone

    from ..engine.llama_runtime import FORWARD_NATIVE_LOG, load_backends

    type_name = require_type(type_name)
    try:
        with source.open("rb") as stream:
            source_type = read_gguf_info(stream).quantization
    except (OSError, GGUFHeaderError) as error:
        raise ConversionError(f"{source}: {error}") from None
    if source_type == type_name:
        raise ConversionError(f"{source.name} is already {type_name}; package it without converting")
    output = output_dir / converted_name(source, source_type, type_name)
    partial = output.with_name(f".{output.name}.partial")
    output_dir.mkdir(parents=True, exist_ok=True)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{type_name}")
    params.allow_requantize = True
    params.nthread = threads or len(os.sched_getaffinity(0))
    notes: list[str] = []

    def note(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
        line = text.decode("utf-8", errors="replace").strip()
        if level in (3, 4) and any(marker in line for marker in SUMMARY_MARKERS):
            notes.append(line.split(": ", 1)[-1] if line.startswith("llama_model_quantize") else line)

    collect = llama_cpp.llama_log_callback(note)  # alive until the log is pointed back below
    load_backends()
    started = time.perf_counter()
    llama_cpp.llama_log_set(collect, ctypes.c_void_p())
    try:
        status = llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), ctypes.byref(params))
    finally:
        llama_cpp.llama_log_set(FORWARD_NATIVE_LOG, ctypes.c_void_p())
    if status != 0:
        partial.unlink(missing_ok=True)
        detail = "; ".join(notes[-3:]) or "see llama.cpp's log"
        raise ConversionError(f"llama.cpp could not convert {source.name} to {type_name}: {detail}")
    os.replace(partial, output)
    return Conversion(source=source, output=output, type_name=type_name, source_type=source_type,
                      output_bytes=output.stat().st_size, seconds=time.perf_counter() - started,
                      notes=tuple(notes))
