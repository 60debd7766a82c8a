"""Session fixtures of the synthesized environments, shared by tests/cdk and tests/security (whose conftests
import them): each is synthesized once per test process, in process, with cdk-nag on."""

from __future__ import annotations

import pytest
from cdk_support import OPTIONAL_FEATURES, SCALED_SHARING, Synth, shared_synth


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


@pytest.fixture(scope="session")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The shipped `shared` environment: both models as inference components of one ml.m5.large endpoint."""
    return shared_synth("shared", tmp_path_factory, "shared")


@pytest.fixture(scope="session")
def serverless(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The shipped `serverless` environment: chat dedicated, decision on a serverless endpoint."""
    return shared_synth("serverless", tmp_path_factory, "serverless")


@pytest.fixture(scope="session")
def scaled_sharing(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """`shared` with managed instance scaling, copy autoscaling and rolling updates with rollback alarms."""
    return shared_synth("scaled-sharing", tmp_path_factory, "shared", SCALED_SHARING)
