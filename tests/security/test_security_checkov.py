"""checkov, a second scanner independent of cdk-nag, on the synthesized templates of dev, prod and the
optional-features variant: no finding that is not skipped with a reason in the resource's Metadata, no stale
skip, and not one network attempt (checkov phones home by default; this machine has no internet)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cdk_fixtures import synthesized
from cdk_support import acknowledgements
from support import background

from stacks.cdk_app import REPO_ROOT

CHECKOV = REPO_ROOT / ".venv-checkov" / "bin" / "checkov"
GUARD = Path(__file__).resolve().parent / "offline_guard"
SECURITY_DOC = REPO_ROOT / "docs" / "security.md"
FRAMEWORKS = ("cloudformation", "secrets")
# The switches that keep checkov local (found in checkov 3.3's source): no platform mapping or run config
# (BC_SKIP_MAPPING, --skip-download), no PyPI version check (CKV_SKIP_PACKAGE_UPDATE_CHECK), no API key.
OFFLINE = {"BC_SKIP_MAPPING": "TRUE", "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true"}
SCANNED = ("dev", "prod", "shared", "serverless", "variant", "api", "graviton", "pooled", "scaletozero")
TIMEOUT_S = 300
BACKGROUND_TIMEOUT_S = 3600  # at the idle priority a scan gets only idle CPU until its test waits for it
PLANTED_KEY = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example access key id
# Lines the `secrets` framework reports that hold no secret, each with its reason (docs/security.md): its keyword
# detector reads a key naming an API key as a secret's name.
NOT_SECRETS = {
    ("CKV_SECRET_6", '"ApiKeySourceType": "AUTHORIZER",'):
        "CloudFormation's own property of the System One API: API Gateway takes each call's usage-plan key from the "
        "authorizer (no key is in the template)",
}


@dataclass(frozen=True)
class Scan:
    reports: list[dict[str, Any]]
    refused: list[str]

    def results(self, file_name: str, outcome: str) -> list[dict[str, Any]]:
        """Checks of one scanned file with an outcome: passed, failed or skipped."""
        return [check for report in self.reports for check in report["results"][f"{outcome}_checks"]
                if Path(check["file_abs_path"]).name == file_name]

    def found(self, file_name: str, outcome: str) -> set[tuple[str, str]]:
        return {(c["check_id"], c["resource"]) for c in self.results(file_name, outcome)}

    def failures(self, file_name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The failed checks of a file, and the ones among them that are known not to be secrets (`NOT_SECRETS`)."""
        failed = self.results(file_name, "failed")
        known = [c for c in failed if (c["check_id"], flagged_line(c)) in NOT_SECRETS]
        return [c for c in failed if c not in known], known


def flagged_line(check: dict[str, Any]) -> str:
    """The scanned file's line a check points at (checkov masks the value in its own report)."""
    lines = Path(check["file_abs_path"]).read_text().splitlines()
    return lines[check["file_line_range"][0] - 1].strip()


def without_skips(template: dict[str, Any]) -> dict[str, Any]:
    bare = json.loads(json.dumps(template))
    for resource in bare["Resources"].values():
        resource.get("Metadata", {}).pop("checkov", None)
    return bare


def with_planted_key(template: dict[str, Any]) -> dict[str, Any]:
    planted = json.loads(json.dumps(template))
    model = next(r for r in planted["Resources"].values() if r["Type"] == "AWS::SageMaker::Model")
    model["Properties"]["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_ALIAS"] = PLANTED_KEY
    return planted


def checkov_environment(workdir: Path, guard_log: Path) -> dict[str, str]:
    """Nothing inherited but PATH: no BC_API_KEY or PRISMA_* can switch the platform on; a fresh HOME, so no
    cached version check can hide a lookup."""
    home = workdir / "home"
    home.mkdir()
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
            "PYTHONPATH": str(GUARD), "OFFLINE_GUARD_LOG": str(guard_log), **OFFLINE}


def scanned_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """The templates checkov reads, each beside a copy without its skips, then dev with a planted key."""
    workdir = tmp_path_factory.mktemp("checkov")
    files = []
    for name in SCANNED:
        synth = synthesized(name, tmp_path_factory)  # the session's own (tests/cdk/cdk_fixtures.py)
        template = Path(synth.app.outdir) / synth.stack.template_file  # the file `cdk synth` writes
        files.append(shutil.copyfile(template, workdir / f"{name}.template.json"))
        files.append(workdir / f"{name}-bare.template.json")
        files[-1].write_text(json.dumps(without_skips(json.loads(template.read_text())), indent=1))
    files.append(workdir / "planted.template.json")
    files[-1].write_text(json.dumps(with_planted_key(synthesized("dev", tmp_path_factory).json), indent=1))
    return workdir, files


def scan_files(workdir: Path, files: list[Path], priority: Callable[[], tuple[str, ...]] = tuple,
               timeout_s: float = TIMEOUT_S) -> Scan:
    # Two checkov processes side by side, one on the templates and the planted one, one on the bare copies: a checkov
    # is one Python on one core.
    with ThreadPoolExecutor(max_workers=2) as pool:
        scans = list(pool.map(lambda where, some: run_checkov(where, some, priority, timeout_s),
                              (workdir / "with-skips", workdir / "bare"), (files[0::2], files[1::2])))
    return Scan(reports=[report for scan in scans for report in scan.reports],
                refused=[line for scan in scans for line in scan.refused])


def begin_in_background(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The synths now, in this process (the session's, which tests/cdk reads too: the same work, earlier); the scans
    in the background, at the lowest priority (tests/support/background.py)."""
    if CHECKOV.exists():
        workdir, files = scanned_files(tmp_path_factory)  # in this thread: the CDK's jsii runtime is not thread-safe
        background.begin("checkov", lambda: scan_files(workdir, files, background.priority, BACKGROUND_TIMEOUT_S))


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory) -> Scan:
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: run `make bootstrap` (it installs requirements-security.txt)")
    found: Scan = background.take("checkov", lambda: scan_files(*scanned_files(tmp_path_factory)), timeout_s=TIMEOUT_S)
    return found


def run_checkov(workdir: Path, files: list[Path], priority: Callable[[], tuple[str, ...]] = tuple,
                timeout_s: float = TIMEOUT_S) -> Scan:
    """One checkov on some files, offline, guarded: its reports and the network attempts it made."""
    workdir.mkdir()
    guard_log = workdir / "refused.log"
    command = [*priority(), str(CHECKOV), "--framework", *FRAMEWORKS, "--skip-download", "--output", "json",
               *(arg for path in files for arg in ("--file", str(path)))]
    result = subprocess.run(command, cwd=workdir, env=checkov_environment(workdir, guard_log), capture_output=True,
                            text=True, timeout=timeout_s, check=False)
    assert result.returncode in (0, 1), f"checkov crashed ({result.returncode}):\n{result.stderr[-4000:]}"
    reports = json.loads(result.stdout)
    refused = guard_log.read_text().splitlines() if guard_log.exists() else []
    return Scan(reports=reports if isinstance(reports, list) else [reports], refused=refused)


def test_checkov_ran_offline_and_read_every_template(scan: Scan) -> None:
    assert scan.refused == [], "checkov tried to reach the network"
    assert {r["check_type"] for r in scan.reports} == set(FRAMEWORKS)  # the planted key makes secrets report
    assert all(r["summary"]["parsing_errors"] == 0 for r in scan.reports)
    for name in SCANNED:
        assert len(scan.results(f"{name}.template.json", "passed")) > 100, name


@pytest.mark.parametrize("name", SCANNED)
def test_the_templates_pass_with_only_reasoned_skips(scan: Scan, name: str) -> None:
    file_name = f"{name}.template.json"
    failures, not_secrets = scan.failures(file_name)
    failed = [f"{c['check_id']} {c['resource']}: {c['check_name']}" for c in failures]
    assert failed == []
    assert len(not_secrets) == (1 if name == "api" else 0)  # the one API's ApiKeySourceType: no stale exception
    skipped = scan.results(file_name, "skipped")
    assert skipped, "the shipped stack has acknowledged findings; none skipped means the skips were not read"
    for check in skipped:
        comment = check["check_result"]["suppress_comment"]
        assert len(comment) >= 20 and comment != "No comment provided", (check["check_id"], check["resource"])
    print(f"checkov {name}: {len(scan.results(file_name, 'passed'))} passed, {len(failed)} failed, "
          f"{len(skipped)} skipped", file=sys.stderr)


@pytest.mark.parametrize("name", SCANNED)
def test_every_skip_hides_a_finding_checkov_really_reports(scan: Scan, name: str) -> None:
    """No stale skip: without the Metadata skips, checkov fails exactly the checks that were skipped."""
    bare = {(c["check_id"], c["resource"]) for c in scan.failures(f"{name}-bare.template.json")[0]}
    assert bare == scan.found(f"{name}.template.json", "skipped")


def test_checkov_finds_an_access_key_planted_in_a_template(scan: Scan) -> None:
    failed = scan.results("planted.template.json", "failed")
    assert [c["check_id"] for c in failed if c["check_id"].startswith("CKV_SECRET")] == ["CKV_SECRET_2"]


def test_the_security_doc_states_each_scanner_result_and_acknowledgement(scan: Scan,
                                                                          request: pytest.FixtureRequest) -> None:
    doc = SECURITY_DOC.read_text()
    for name in SCANNED:
        file_name = f"{name}.template.json"
        counts = [len(scan.results(file_name, "passed")), len(scan.failures(file_name)[0]),
                  len(scan.results(file_name, "skipped"))]
        row = rf"\|\s*{name}\s*\|\s*{counts[0]}\s*\|\s*{counts[1]}\s*\|\s*{counts[2]}\s*\|"
        assert re.search(row, doc), f"docs/security.md: no checkov row '| {name} | {counts} |'"
        for check_id, _ in scan.found(file_name, "skipped"):
            assert check_id in doc, f"docs/security.md does not explain the skip of {check_id}"
    for check_id, line in NOT_SECRETS:
        assert check_id in doc and line.rstrip(",") in doc, f"docs/security.md does not explain {check_id} on {line}"
    for name in SCANNED:
        for construct in request.getfixturevalue(name).stack.node.find_all():
            for finding in acknowledgements(construct):
                rule = finding.split("[")[0]
                assert rule in doc, f"docs/security.md does not explain the acknowledgement of {rule}"
