"""Fixtures of the CDK app tests: the synthesized environments (cdk_fixtures.py) and small GGUF files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cdk_fixtures import (
    api,
    api_serverless,
    api_shared,
    decisions,
    dev,
    graviton,
    pooled,
    prod,
    scaled_sharing,
    scaletozero,
    serverless,
    shared,
    variant,
)
from support.gguf_files import write_gguf

__all__ = ["api", "api_serverless", "api_shared", "decisions", "dev", "graviton", "make_gguf", "pooled", "prod",
           "scaled_sharing", "scaletozero", "serverless", "shared", "variant"]


@pytest.fixture
def make_gguf(tmp_path: Path) -> Callable[[str], Path]:
    return lambda name: write_gguf(tmp_path / name, context=2048)
