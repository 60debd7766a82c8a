"""Session fixtures of the synthesized environments, shared by tests/cdk and tests/security (whose conftests
import them): each is synthesized once per test process, in process, with cdk-nag on."""

from __future__ import annotations

from typing import Any

import pytest
from cdk_support import API_SERVERLESS, API_SHARED, OPTIONAL_FEATURES, SCALED_SHARING, Synth, shared_synth

# Each fixture's synth: the environment of cdk.json and the changes made to it.
SYNTHS: dict[str, tuple[str, dict[str, Any] | None]] = {
    "dev": ("dev", None), "prod": ("prod", None), "variant": ("dev", OPTIONAL_FEATURES), "shared": ("shared", None),
    "serverless": ("serverless", None), "scaled-sharing": ("shared", SCALED_SHARING), "api": ("api", None),
    "api-shared": ("shared", API_SHARED), "api-serverless": ("serverless", API_SERVERLESS),
    "decisions": ("decisions", None), "graviton": ("graviton", None), "pooled": ("pooled", None),
    "scaletozero": ("scaletozero", None)}


def synthesized(name: str, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The synth of the fixture `name` (dashes for underscores), for code that is not a fixture."""
    return shared_synth(name, tmp_path_factory, *SYNTHS[name])


@pytest.fixture(scope="session")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesized("dev", tmp_path_factory)


@pytest.fixture(scope="session")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesized("prod", tmp_path_factory)


@pytest.fixture(scope="session")
def variant(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """dev with every optional feature (pinned S3 model, VPC endpoints, data capture): cdk-nag must pass too."""
    return synthesized("variant", tmp_path_factory)


@pytest.fixture(scope="session")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The shipped `shared` environment: both models as inference components of one ml.m5.large endpoint."""
    return synthesized("shared", tmp_path_factory)


@pytest.fixture(scope="session")
def serverless(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The shipped `serverless` environment: chat dedicated, decision on a serverless endpoint."""
    return synthesized("serverless", tmp_path_factory)


@pytest.fixture(scope="session")
def scaled_sharing(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """`shared` with managed instance scaling, copy autoscaling and rolling updates with rollback alarms."""
    return synthesized("scaled-sharing", tmp_path_factory)


@pytest.fixture(scope="session")
def api(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The shipped `api` environment: dev's endpoints with the System One API in front (quota, WAF, per-key limits)."""
    return synthesized("api", tmp_path_factory)


@pytest.fixture(scope="session")
def decisions(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The shipped `decisions` environment: the decision endpoint alone (`"chat": false`), dedicated."""
    return synthesized("decisions", tmp_path_factory)


@pytest.fixture(scope="session")
def api_shared(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """`shared` with the System One API in front of the decision model's inference component."""
    return synthesized("api-shared", tmp_path_factory)


@pytest.fixture(scope="session")
def api_serverless(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """`serverless` with the System One API on a custom domain, no account logging role, WAF off."""
    return synthesized("api-serverless", tmp_path_factory)


@pytest.fixture(scope="session")
def graviton(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The shipped `graviton` environment: dev on ml.c7g.xlarge, both endpoints on the arm64 DLC."""
    return synthesized("graviton", tmp_path_factory)


@pytest.fixture(scope="session")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The shipped `pooled` environment: prod's GPU endpoints on ordered instance pools."""
    return synthesized("pooled", tmp_path_factory)


@pytest.fixture(scope="session")
def scaletozero(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The shipped `scaletozero` environment: shared hosting whose instances and copies scale to zero."""
    return synthesized("scaletozero", tmp_path_factory)
