"""The real CDK CLI, offline and without credentials, for every shipped environment (one of each hosting mode, and
`api` with the System One API); then cfn-lint on the templates.

This is the one place where aws-cdk-lib's built-in CloudFormation validation stays on (it catches bad instance
types and counts against the resource schemas), exactly as `cdk synth` / `cdk deploy` run it for users.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import background

from stacks.cdk_app import REPO_ROOT

CDK = REPO_ROOT / "node_modules" / ".bin" / "cdk"
ENVIRONMENTS = ("dev", "prod", "shared", "serverless", "api", "decisions", "graviton", "pooled", "scaletozero")
# each hosting mode, the System One API, a decision-only environment, Graviton, instance pools and scale to zero
SYNTH_TIMEOUT_S = 300
BACKGROUND_TIMEOUT_S = 3600  # at the idle priority a synth gets only idle CPU until its test waits for it


def cli_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CDK_VALIDATION" and not k.startswith("AWS_")}
    env.update(CDK_DISABLE_CLI_TELEMETRY="true", JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
               AWS_EC2_METADATA_DISABLED="true",  # no credentials here: do not wait for instance metadata
               AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    return env


def cdk_synth(env_name: str, outdir: Path, priority: Callable[[], tuple[str, ...]] = tuple,
              timeout_s: float = SYNTH_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*priority(), str(CDK), "synth", "--no-notices", "--quiet", "-c", f"env={env_name}", "-o", str(outdir)],
        cwd=REPO_ROOT, env=cli_environment(), capture_output=True, text=True, timeout=timeout_s, check=False)


def output_directories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One per environment, made in the calling thread (pytest's temporary directories are not thread-safe)."""
    return {env_name: tmp_path_factory.mktemp(f"cli-{env_name}") for env_name in ENVIRONMENTS}


def synth_every_environment(outdirs: dict[str, Path], priority: Callable[[], tuple[str, ...]] = tuple,
                            timeout_s: float = SYNTH_TIMEOUT_S) -> dict[str, Path]:
    """Each environment's template, each synthesized into its own output directory."""
    def synth(env_name: str) -> Path:
        started = time.monotonic()
        result = cdk_synth(env_name, outdirs[env_name], priority, timeout_s)
        assert result.returncode == 0, f"cdk synth -c env={env_name} failed:\n{result.stderr[-4000:]}"
        print(f"cdk synth -c env={env_name}: {time.monotonic() - started:.1f} s -> {outdirs[env_name]}",
              file=sys.stderr)
        return outdirs[env_name] / f"semif-{env_name}.template.json"

    # Two at a time: a synth is one Python and one Node process taking turns, so two overlap on 2 cores (measured:
    # 28 s for the four instead of 40 one at a time).
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(ENVIRONMENTS, pool.map(synth, ENVIRONMENTS), strict=True))


@dataclass(frozen=True)
class CliRuns:
    templates: dict[str, Path]
    lint: subprocess.CompletedProcess[str]  # cfn-lint on every template


def synth_and_lint(outdirs: dict[str, Path], priority: Callable[[], tuple[str, ...]] = tuple,
                   timeout_s: float = SYNTH_TIMEOUT_S) -> CliRuns:
    templates = synth_every_environment(outdirs, priority, timeout_s)
    lint = subprocess.run([*priority(), str(Path(sys.executable).parent / "cfn-lint"), *map(str, templates.values())],
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    return CliRuns(templates, lint)


def begin_in_background(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The synths and cfn-lint begin with the session, at the lowest priority (tests/support/background.py): the
    same CLI runs, only earlier, on the core the model tests leave idle."""
    if CDK.exists():
        outdirs = output_directories(tmp_path_factory)
        background.begin("cdk-cli", lambda: synth_and_lint(outdirs, background.priority, BACKGROUND_TIMEOUT_S))


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> CliRuns:
    if not CDK.exists():
        pytest.fail(f"{CDK} is missing: run `make bootstrap` (npm ci installs the pinned CDK CLI)")
    # Waiting, this process leaves the machine to the synths: they end within one foreground run's time.
    runs: CliRuns = background.take("cdk-cli", lambda: synth_and_lint(output_directories(tmp_path_factory)),
                                    timeout_s=SYNTH_TIMEOUT_S)
    return runs


@pytest.fixture(scope="module")
def templates(cli: CliRuns) -> dict[str, Path]:
    return cli.templates


EXPECTED_ENDPOINTS = {
    "dev": {"semif-dev-chat", "semif-dev-decision"},
    "prod": {"semif-prod-chat", "semif-prod-decision"},
    "shared": {"semif-shared-models"},
    "serverless": {"semif-serverless-chat", "semif-serverless-decision-serverless"},
    "api": {"semif-api-chat", "semif-api-decision"},
    "decisions": {"semif-decisions-decision"},
    "graviton": {"semif-graviton-chat", "semif-graviton-decision"},
    "pooled": {"semif-pooled-chat", "semif-pooled-decision"},
    "scaletozero": {"semif-scaletozero-models"},
}


def test_cli_synthesizes_every_environment_offline(templates: dict[str, Path]) -> None:
    for env_name, path in templates.items():
        template = json.loads(path.read_text())
        names = {r["Properties"]["EndpointName"] for r in template["Resources"].values()
                 if r["Type"] == "AWS::SageMaker::Endpoint"}
        assert names == EXPECTED_ENDPOINTS[env_name]
        # The CLI's validation report (cdk-nag and CloudFormation schema checks) lists no violation.
        report = json.loads((path.parent / "validation-report.json").read_text())
        assert [v for plugin in report["pluginReports"] for v in plugin["violations"]] == []


def test_cfn_lint_is_clean_on_every_template(cli: CliRuns) -> None:
    result = cli.lint
    assert result.returncode == 0, f"cfn-lint findings:\n{result.stdout}{result.stderr}"
    assert result.stdout.strip() == ""


def test_cli_refuses_an_unknown_environment_by_name(tmp_path: Path) -> None:
    result = cdk_synth("staging", tmp_path)
    assert result.returncode != 0
    assert ("env: unknown environment 'staging'; cdk.json defines "
            "['api', 'decisions', 'dev', 'graviton', 'pooled', 'prod', 'scaletozero', 'serverless', 'shared']"
            in result.stderr)
