"""What the smoke script says before it reaches any endpoint: an environment cdk.json does not define, the
default port of `--local`, and `--local PORT` (fast: no endpoint, no AWS)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import smoke
from scripts.common import discovery
from scripts.common.command import parse

REPO = Path(__file__).resolve().parents[3]


def test_an_environment_cdk_json_does_not_define_is_named_with_the_ones_it_does() -> None:
    result = subprocess.run([sys.executable, "-m", "scripts.smoke", "decision", "--env", "staging"], cwd=REPO,
                            capture_output=True, text=True, timeout=60, check=False, env={"PATH": "/usr/bin"})
    defined = sorted(json.loads((REPO / "cdk.json").read_text())["context"]["semif"]["environments"])
    assert result.returncode == 1
    assert "'staging' is not defined in" in result.stderr and ", ".join(defined) in result.stderr, result.stderr
    assert "You must specify a region" not in result.stderr


def test_the_batch_cli_names_an_undefined_environment_too(tmp_path: Path) -> None:
    cases = REPO / "tests" / "data" / "decisions_small.jsonl"
    result = subprocess.run([sys.executable, "-m", "scripts.batch", str(cases), "-o", str(tmp_path / "out.jsonl"),
                             "--transform", "--env", "staging"], cwd=REPO, capture_output=True, text=True,
                            timeout=60, check=False, env={"PATH": "/usr/bin"})
    assert result.returncode == 2, result.stderr
    assert "'staging' is not defined in" in result.stderr and "You must specify a region" not in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_environment_region_reads_cdk_json_and_leaves_boto3_its_region_without_one(tmp_path: Path) -> None:
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(json.dumps({"context": {"semif": {"app_name": "acme", "environments": {
        "prod": {"region": "eu-west-1"}}}}}))
    assert discovery.environment_region("prod", cdk_json) == "eu-west-1"
    with pytest.raises(discovery.DiscoveryError,
                       match=r"environment 'dev' is not defined in .*\(environments: prod\)"):
        discovery.environment_region("dev", cdk_json)
    assert discovery.environment_region("dev", tmp_path / "missing.json") is None


def test_help_shows_the_local_default_port_and_local_takes_a_port() -> None:
    result = subprocess.run([sys.executable, "-m", "scripts.smoke", "--help"], cwd=REPO, capture_output=True,
                            text=True, timeout=60, check=True)
    flat = " ".join(result.stdout.split())
    assert f"--local [PORT] the local gateway (semif local) on 127.0.0.1:PORT (default port {discovery.LOCAL_PORT}" \
        in flat, result.stdout
    assert "examples:" in result.stdout
    given = parse(smoke, ["decision", "--local", "9123"])
    assert (given.local, given.port) == (True, 9123)
    default = parse(smoke, ["decision", "--local"])
    assert (default.local, default.port) == (True, discovery.LOCAL_PORT)
    assert not parse(smoke, ["decision", "--endpoint", "x"]).local
