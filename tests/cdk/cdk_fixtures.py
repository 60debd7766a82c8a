"""Session fixtures of the synthesized environments, shared by tests/cdk and tests/security (whose conftests
import them): each is synthesized once per test process, in process, with cdk-nag on."""

from __future__ import annotations

import pytest
from cdk_support import API_SERVERLESS, API_SHARED, OPTIONAL_FEATURES, SCALED_SHARING, Synth, shared_synth


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


@pytest.fixture(scope="session")
def api(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The shipped `api` environment: dev's endpoints with the System One API in front (quota, WAF, per-key limits)."""
    return shared_synth("api", tmp_path_factory, "api")


@pytest.fixture(scope="session")
def api_shared(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """`shared` with the System One API in front of the decision model's inference component."""
    return shared_synth("api-shared", tmp_path_factory, "shared", API_SHARED)


@pytest.fixture(scope="session")
def api_serverless(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """`serverless` with the System One API on a custom domain, no account logging role, WAF off."""
    return shared_synth("api-serverless", tmp_path_factory, "serverless", API_SERVERLESS)
