"""Session fixtures of the synthesized environments, shared by tests/cdk and tests/security (whose conftests
import them): each is synthesized once per test process, in process, with cdk-nag on."""

from __future__ import annotations

import pytest
from cdk_support import OPTIONAL_FEATURES, Synth, shared_synth


@pytest.fixture(scope="session")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return shared_synth("dev", tmp_path_factory, "dev")


@pytest.fixture(scope="session")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return shared_synth("prod", tmp_path_factory, "prod")


@pytest.fixture(scope="session")
def variant(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """dev with every optional feature (pinned S3 model, VPC endpoints, data capture): cdk-nag must pass too."""
    return shared_synth("variant", tmp_path_factory, "dev", OPTIONAL_FEATURES)
