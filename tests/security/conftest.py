"""The security tests read the same synthesized environments as tests/cdk (one synth per process, see
tests/cdk/cdk_fixtures.py); tests/cdk is not a package, so its directory is put on the import path here."""

from __future__ import annotations

import sys
from pathlib import Path

CDK_TESTS = Path(__file__).resolve().parent.parent / "cdk"
if str(CDK_TESTS) not in sys.path:
    sys.path.insert(0, str(CDK_TESTS))

from cdk_fixtures import (  # noqa: E402
    api,
    dev,
    graviton,
    pooled,
    prod,
    scaletozero,
    serverless,
    shared,
    variant,
)

__all__ = ["api", "dev", "graviton", "pooled", "prod", "scaletozero", "serverless", "shared", "variant"]
