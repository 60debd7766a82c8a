"""Endpoint start-up timeouts derived from the model's size.

SageMaker's defaults fail large models silently late (the download or the load outlives the timeout and the
endpoint creation fails only then), while the maximum for every model makes a broken small model take an
hour to report. So both timeouts grow with size from a floor: the DLC's documentation asks for at least 600 s
of start-up health check, and the rates below are deliberately pessimistic.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_SECONDS = 60  # SageMaker's bounds for both settings
MAX_SECONDS = 3600
STARTUP_FLOOR_SECONDS = 600  # the llama.cpp DLC's documented minimum for the health-check timeout
DOWNLOAD_FLOOR_SECONDS = 300
DOWNLOAD_BYTES_PER_SECOND = 25 * 1024 * 1024  # S3 to the instance, incl. unpacking the tarball
LOAD_BYTES_PER_SECOND = 50 * 1024 * 1024  # reading (mmap) the weights and, on GPU, copying them over


@dataclass(frozen=True)
class StartupTimeouts:
    model_data_download_s: int
    container_startup_health_check_s: int


def _bounded(seconds: float) -> int:
    rounded = -(-int(seconds) // 60) * 60  # whole minutes, rounded up: easier to read in the console
    return max(MIN_SECONDS, min(MAX_SECONDS, rounded))


def derive_timeouts(model_bytes: int | None, tarball_bytes: int | None = None) -> StartupTimeouts:
    """Timeouts for a model of this size; the maximum when the size is unknown (an existing S3 object)."""
    if model_bytes is None:
        return StartupTimeouts(MAX_SECONDS, MAX_SECONDS)
    download_bytes = tarball_bytes if tarball_bytes is not None else model_bytes
    return StartupTimeouts(
        model_data_download_s=_bounded(DOWNLOAD_FLOOR_SECONDS + download_bytes / DOWNLOAD_BYTES_PER_SECOND),
        container_startup_health_check_s=_bounded(STARTUP_FLOOR_SECONDS + model_bytes / LOAD_BYTES_PER_SECOND),
    )
