"""Which weight types have a fast kernel on the accelerator a model is deployed to, for the pinned llama.cpp.

A decision is prompt processing (a batch of tokens per `llama_decode`), so what matters is the matrix-matrix
path. In the pinned llama.cpp (llama-cpp-python 0.3.36's vendored copy), on x86-64 with AVX2, which every CPU
instance family this toolkit deploys to has (the DLC's CPU image dispatches its build variant at run time):

- `ggml-cpu/repack.cpp` re-lays weights at load into interleaved blocks for Q4_0, Q4_K, IQ4_NL and MXFP4
  (tensors whose row count is a multiple of 8; Q2_K too, with AVX-512). Q8_0, Q5_K and Q6_K are repacked only
  on arm64 (NEON dot-product / i8mm), which the DLC images this toolkit deploys are not. The decision adapter
  loads with repacking off (`use_extra_bufts`): the repacked GEMM and its GEMV tail round differently, so a
  token's numbers would depend on its place in the batch. Only the tiled types count as fast for it.
- `ggml-cpu/llamafile/sgemm.cpp` (tinyBLAS, on by default) tiles batches of two or more tokens for F32, F16,
  BF16, Q8_0, Q4_0, Q5_0 and IQ4_NL.
- Every other type (Q4_1, Q5_1, Q2_K..Q6_K, Q4_K included with repacking off, IQ4_XS, the IQ1-IQ3 types) runs the
  generic row-by-row dot products: still SIMD, but measured 1.7x slower than Q8_0 for the embedded model (README).

On CUDA every quantized type llama.cpp has an MMQ kernel for (`ggml-cuda/mmq.cu`, `ggml_cuda_should_use_mmq`:
Q1_0..Q8_0, the K types, the IQ types, MXFP4, NVFP4) and F16/BF16/F32 (cuBLAS) run on the GPU's own kernels:
there the type is a question of size and accuracy, not of a missing kernel.

The tensor types are read with ggml's own GGUF reader (`gguf_init_from_file`), the one llama.cpp loads with.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache
from pathlib import Path

# tinyBLAS-tiled; the repacked types are not fast for the adapter, which does not repack (see above)
CPU_FAST = frozenset({"f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "iq4_nl"})
GPU_FAST = frozenset({"q1_0", "q2_0", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K",
                      "q6_K", "iq1_s", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_xs", "iq4_nl",
                      "mxfp4", "nvfp4", "f32", "f16", "bf16"})
FAST = {"cpu": CPU_FAST, "gpu": GPU_FAST}
SLOW_SHARE_WARNING = 0.25  # of the weight bytes: below this, a few odd tensors (e.g. a Q6_K output) do not matter
EMBEDDINGS = "token_embd.weight"  # read row by row (get_rows), not multiplied: no matmul kernel applies


class _GgufInitParams(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]


@cache
def _ggml() -> ctypes.CDLL:
    import llama_cpp  # the bindings' library directory holds the libggml-base the model is loaded with

    library = ctypes.CDLL(str(Path(llama_cpp.llama_cpp._base_path) / "libggml-base.so"))
    library.gguf_init_from_file.argtypes = [ctypes.c_char_p, _GgufInitParams]
    library.gguf_init_from_file.restype = ctypes.c_void_p
    library.gguf_get_n_tensors.argtypes = [ctypes.c_void_p]
    library.gguf_get_n_tensors.restype = ctypes.c_int64
    library.gguf_get_tensor_name.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    library.gguf_get_tensor_name.restype = ctypes.c_char_p
    library.gguf_get_tensor_type.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    library.gguf_get_tensor_type.restype = ctypes.c_int
    library.gguf_get_tensor_size.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    library.gguf_get_tensor_size.restype = ctypes.c_size_t
    library.ggml_type_name.argtypes = [ctypes.c_int]
    library.ggml_type_name.restype = ctypes.c_char_p
    library.gguf_free.argtypes = [ctypes.c_void_p]
    return library


def weight_type_bytes(path: Path) -> dict[str, int]:
    """Bytes per ggml type of the multiplied weights (norms and other 1-D F32 tensors excluded, embeddings too).

    Raises ValueError when ggml cannot read the file's header. Only the first shard of a split model is read:
    the shards share their types.
    """
    ggml = _ggml()
    context = ggml.gguf_init_from_file(str(path).encode(), _GgufInitParams(True, None))
    if not context:
        raise ValueError(f"{path}: ggml could not read its GGUF header")
    found: dict[str, int] = {}
    try:
        for index in range(ggml.gguf_get_n_tensors(context)):
            name = ggml.gguf_get_tensor_name(context, index).decode("utf-8", errors="replace")
            type_name = ggml.ggml_type_name(ggml.gguf_get_tensor_type(context, index)).decode()
            if name == EMBEDDINGS or not name.endswith(".weight") or (type_name == "f32" and "norm" in name):
                continue
            found[type_name] = found.get(type_name, 0) + int(ggml.gguf_get_tensor_size(context, index))
    finally:
        ggml.gguf_free(context)
    return found


@dataclass(frozen=True)
class KernelReport:
    accelerator: str
    type_bytes: dict[str, int]

    @property
    def slow_bytes(self) -> dict[str, int]:
        return {name: size for name, size in self.type_bytes.items() if name not in FAST[self.accelerator]}

    @property
    def slow_share(self) -> float:
        total = sum(self.type_bytes.values())
        return sum(self.slow_bytes.values()) / total if total else 0.0

    def warning(self) -> str | None:
        """One line when a large share of the weights has no fast kernel on this accelerator, else None."""
        if self.slow_share < SLOW_SHARE_WARNING:
            return None
        types = ", ".join(f"{name.upper()} {size / 2**20:.0f} MiB" for name, size in sorted(self.slow_bytes.items()))
        if self.accelerator == "cpu":
            return (f"{self.slow_share:.0%} of the weights ({types}) are in types with no tiled CPU kernel in this "
                    "llama.cpp on x86-64 (the decision adapter does not repack); Q8_0, Q4_0 or IQ4_NL have one "
                    "(convert with --convert TYPE / model.convert, and check the agreement it prints)")
        return (f"{self.slow_share:.0%} of the weights ({types}) are in types llama.cpp's CUDA backend has no "
                "quantized kernel for")

    def lines(self) -> list[str]:
        shares = ", ".join(f"{name.upper()} {size / 2**20:.1f} MiB" for name, size in sorted(self.type_bytes.items()))
        warning = self.warning()
        return [f"weight types:  {shares or '-'}",
                f"kernels ({self.accelerator}): "
                + (f"WARNING: {warning}" if warning else "every large weight type has a fast kernel")]


def kernel_report(path: Path, accelerator: str) -> KernelReport:
    if accelerator not in FAST:
        raise ValueError(f"accelerator {accelerator!r}: expected cpu or gpu")
    return KernelReport(accelerator=accelerator, type_bytes=weight_type_bytes(path))
