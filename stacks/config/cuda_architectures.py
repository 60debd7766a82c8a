"""The CUDA compute capability of each GPU instance family: what the decision image's CUDA build compiles for.

ggml's CUDA kernels are compiled once per architecture, the longest part of the CUDA build; compiling for the
GPU the decision endpoint runs on, instead of a fixed list of five, cuts that part to one. The architecture is
part of the build args, so changing the instance family changes the image tag and rebuilds the image.
The CUDA 13 runtime of the DLC supports compute capability 7.5 and newer (no K80, P100 or V100; see instances.py).
"""

from __future__ import annotations

from collections.abc import Iterable

# family -> CMAKE_CUDA_ARCHITECTURES value (compute capability without the dot), by the family's GPU.
CUDA_ARCHITECTURES = {
    "g4dn": "75",  # NVIDIA T4
    "g5": "86",  # A10G
    "g6": "89",  # L4
    "g6e": "89",  # L40S
    "g7": "120",  # RTX PRO 4500 Blackwell Server Edition
    "g7e": "120",  # RTX PRO 6000 Blackwell Server Edition
    "p4d": "80", "p4de": "80",  # A100
    "p5": "90", "p5e": "90", "p5en": "90",  # H100, H200
    "p6-b200": "100",  # B200
    "p6-b300": "103",  # B300
}


class UnknownGpuFamilyError(ValueError):
    """A GPU family whose CUDA architecture this app does not know."""


def cuda_architectures(families: Iterable[str]) -> str:
    """`CMAKE_CUDA_ARCHITECTURES` for the given GPU families: each architecture once, in order."""
    found = set()
    for family in families:
        if family not in CUDA_ARCHITECTURES:
            raise UnknownGpuFamilyError(f"no CUDA architecture is known for instance family {family!r}")
        found.add(CUDA_ARCHITECTURES[family])
    return ";".join(sorted(found, key=int))
