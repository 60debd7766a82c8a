"""The built wheels, installed as a user installs them: each into a fresh venv, used from outside the repository
against the session's local gateway (slow: builds two wheels and two venvs once per session).

The toolkit's wheel: `semif --help` and every subcommand's, `semif smoke decision --local PORT`, the package data,
and no generic top-level packages; a foreign CDK app on it builds the decision image from the build context
the wheel ships. The decision client's wheel: boto3 and the client alone, real answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import background

from semif_sagemaker.cli import commands

REPO = Path(__file__).resolve().parents[2]
PIP_TIMEOUT_S = 600
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Venv:
    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def site_packages(self) -> Path:
        return Path(sysconfig.get_path("purelib", vars={"base": str(self.root), "platbase": str(self.root)}))

    def run(self, argv: Sequence[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """A command of this venv, from `cwd`, with nothing of the repository's environment on the path."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '')}", AWS_ACCESS_KEY_ID="local",
                   AWS_SECRET_ACCESS_KEY="local", AWS_DEFAULT_REGION="us-east-1")
        return subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                              check=False)


def pip(*args: str | Path, priority: Sequence[str] = ()) -> None:
    result = subprocess.run([*priority, sys.executable, "-m", "pip", "--disable-pip-version-check", *map(str, args)],
                            capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def fresh_venv(root: Path, *requirements: str | Path, priority: Sequence[str] = ()) -> Venv:
    subprocess.run([*priority, sys.executable, "-m", "venv", str(root)], check=True, timeout=PIP_TIMEOUT_S)
    venv = Venv(root)
    result = venv.run([*priority, str(venv.bin / "pip"), "install", "--quiet", "--disable-pip-version-check",
                       *map(str, requirements)], cwd=root, timeout=PIP_TIMEOUT_S)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return venv


@dataclass(frozen=True)
class Installed:
    wheels: dict[str, Path]
    venvs: dict[str, Venv]


def wheels_and_venvs(out: Path, priority: Callable[[], tuple[str, ...]] = tuple) -> Installed:
    """Both wheels, built offline with this venv's setuptools, then the toolkit's venv and the client's alone (with
    boto3). Two at a time: each pip is one process on one core."""
    wheel_dir = out / "wheels"
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda project: pip("wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", wheel_dir,
                                          project, priority=priority()),
                      (REPO, REPO / "clients" / "python")))
        found = {path.name.split("-")[0]: path for path in wheel_dir.glob("*.whl")}
        assert set(found) == {"semif_sagemaker", "semif_decision_client"}, found
        made = {"toolkit": (out / "toolkit-venv", found["semif_sagemaker"]),
                "client": (out / "client-venv", "boto3", found["semif_decision_client"])}
        futures = {name: pool.submit(lambda args: fresh_venv(*args, priority=priority()), args)
                   for name, args in made.items()}
        return Installed(found, {name: future.result() for name, future in futures.items()})


def begin_in_background(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The wheels and venvs begin with the session, at the lowest priority (tests/support/background.py): the same
    pip runs, only earlier, on the core the model tests leave idle. In the checkout they write only setuptools' build/
    and *.egg-info (ignored by git), which no other test builds or reads."""
    out = tmp_path_factory.mktemp("installed")
    background.begin("installed-wheels", lambda: wheels_and_venvs(out, background.priority))


@pytest.fixture(scope="session")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory with nothing of the repository in it."""
    return tmp_path_factory.mktemp("elsewhere")


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    made: Installed = background.take(
        "installed-wheels", lambda: wheels_and_venvs(tmp_path_factory.mktemp("installed")), timeout_s=PIP_TIMEOUT_S)
    return made


@pytest.fixture(scope="session")
def wheels(installed: Installed) -> dict[str, Path]:
    return installed.wheels


@pytest.fixture(scope="session")
def venvs(installed: Installed) -> dict[str, Venv]:
    return installed.venvs


@pytest.fixture(scope="session")
def toolkit(venvs: dict[str, Venv]) -> Venv:
    return venvs["toolkit"]


@pytest.fixture(scope="session")
def client_only(venvs: dict[str, Venv]) -> Venv:
    return venvs["client"]


def test_toolkit_installs_under_its_own_names_with_its_data(toolkit: Venv) -> None:
    top_level = {path.name for path in toolkit.site_packages.iterdir()}
    assert not top_level & {"scripts", "stacks", "tests", "container", "bench"}, sorted(top_level)
    for data in ("semif_sagemaker/tools/payloads/decision.json", "semif_sagemaker/tools/payloads/chat.json",
                 "semif_sagemaker/cdk/config/instance_memory.json",
                 "semif_sagemaker/cdk/custom_resources/handlers/image_build.py",
                 "semif_adapter/deploy/llama_server_flags.json", "semif_sagemaker/py.typed",
                 "semif_decision_client/py.typed"):
        assert (toolkit.site_packages / data).is_file(), data


def test_semif_help_and_every_subcommand_help(toolkit: Venv, outside: Path) -> None:
    top = toolkit.run(["semif", "--help"], outside)
    assert top.returncode == 0, top.stderr
    names = list(commands().owners)
    with ThreadPoolExecutor(max_workers=2) as pool:  # each is one Python starting on one core
        helps = list(pool.map(lambda name: toolkit.run(["semif", name, "--help"], outside), names))
    for name, result in zip(names, helps, strict=True):
        assert f"  {name} " in top.stdout, name
        assert result.returncode == 0, f"semif {name} --help: {result.stderr}"
        assert result.stdout.startswith(f"usage: semif {name}"), result.stdout[:200]
        assert "examples:" in result.stdout and f"semif {name} " in result.stdout.split("examples:")[1], name


def test_semif_smoke_decision_against_the_local_gateway(toolkit: Venv, outside: Path, local_endpoints: Any) -> None:
    result = toolkit.run(["semif", "smoke", "decision", "--local", str(local_endpoints.port)], outside)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("smoke decision: OK: local-decision:"), result.stdout


def test_repository_only_command_says_so_in_one_line(toolkit: Venv, outside: Path) -> None:
    result = toolkit.run(["semif", "demo"], outside)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "runs only in a clone of the semif-sagemaker repository" in \
        result.stderr, result.stderr


CLIENT_SCRIPT = """
import importlib.util, json, sys
import semif_decision_client
from semif_decision_client import DecisionClient, DecisionRejectedError, DecisionRequest, Policy

client = DecisionClient("local-decision", endpoint_url=sys.argv[1], region_name="us-east-1")
decision = client.decide(DecisionRequest.build(
    id="t-1", state="The parcel arrived and the screen is cracked.", question="What should support do next?",
    options={"refund": "Refund the order", "replace": "Send a replacement", "escalate": "Ask a human"},
    scoring="letters"))
try:
    client.decide({"decision": {"id": "t-2", "state": 42, "question": "q",
                                "options": [{"id": "a", "description": "A"}, {"id": "b", "description": "B"}]}})
    refused = None
except DecisionRejectedError as error:
    refused = {"status": error.status, "code": error.code, "field": error.field, "message": error.message}
print(json.dumps({
    "module": semif_decision_client.__file__,
    "adapter_importable": importlib.util.find_spec("semif_adapter") is not None,
    "ids": list(decision.option_ids), "probabilities": dict(decision.probabilities), "scoring": decision.scoring,
    "choice": decision.choose(Policy(threshold=0.0, fallback="escalate")), "best": decision.best, "refused": refused}))
"""


def test_client_wheel_alone_decides_from_outside_the_repository(client_only: Venv, outside: Path,
                                                                 local_endpoints: Any) -> None:
    script = outside / "use_client.py"
    script.write_text(CLIENT_SCRIPT)
    result = client_only.run(["python", str(script), local_endpoints.url], outside)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert Path(seen["module"]).is_relative_to(client_only.root), seen["module"]
    assert not seen["adapter_importable"], "the client venv must not hold the adapter"
    assert seen["ids"] == ["refund", "replace", "escalate"] and seen["scoring"] == "letters"
    assert abs(sum(seen["probabilities"].values()) - 1) < 1e-3
    assert seen["choice"] == seen["best"] == max(seen["probabilities"], key=seen["probabilities"].get)
    assert seen["refused"]["status"] == 400 and seen["refused"]["code"] == "invalid_request"
    assert seen["refused"]["field"] == "decision.state"
    assert "object or array" in seen["refused"]["message"] and "Value error" not in seen["refused"]["message"]


FOREIGN_APP_SCRIPT = """
import json, sys
from pathlib import Path
from aws_cdk import App, Environment, Stack
from semif_sagemaker.cdk.image import decision_image
from semif_sagemaker.cdk.config import Alarms, EmbeddedModel, Endpoint
from semif_sagemaker.cdk.config import EnvironmentSettings as Settings
from semif_sagemaker.cdk.pair import DecisionEndpointPair, DecisionEndpointPairProps

app = App(outdir=sys.argv[1], analytics_reporting=False)
stack = Stack(app, "CheckoutService", env=Environment(account="123456789012", region="eu-west-1"))
settings = Settings(region="eu-west-1", accelerator="cpu", model=EmbeddedModel(source="embedded"),
                    chat=Endpoint(instance_type="ml.m5.large", alarms=Alarms(latency_p90_ms=30_000)),
                    decision=Endpoint(instance_type="ml.c5.xlarge", alarms=Alarms(latency_p90_ms=5_000)))
pair = DecisionEndpointPair(stack, "Decisions", DecisionEndpointPairProps.build(
    app_name="checkout", environment_name="live", settings=settings, cache_dir=Path(sys.argv[2])))
app.synth()
print(json.dumps({"module": decision_image.__file__, "context": str(decision_image.CONTAINER_DIR),
                  "tag": pair.image.tag, "base": pair.image.base_image, "build_args": pair.image.build_args}))
"""


def test_constructs_from_the_wheel_build_the_image_from_the_context_it_ships(
        wheels: dict[str, Path], outside: Path, tmp_path: Path) -> None:
    """A foreign CDK app outside any checkout: the wheel's own copy of `container/` is the default context, the
    same files as the checkout's (so the same image tag), staged with `serve` still executable."""
    from stacks.image.decision_image import CONTAINER_DIR, image_tag, source_fingerprint

    installed = tmp_path / "site"
    pip("install", "--quiet", "--no-deps", "--target", installed, wheels["semif_sagemaker"])
    # The wheel's packages first; aws-cdk-lib and the rest from this venv (its .pth files, the checkout's
    # editable install among them, are not read from a PYTHONPATH entry).
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PYTHONPATH"] = str(installed)
    script = outside / "foreign_app.py"
    script.write_text(FOREIGN_APP_SCRIPT)
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "cdk.out"), str(tmp_path / "models")],
                            cwd=outside, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    shipped, checkout = installed / "semif_sagemaker" / "container", source_fingerprint(CONTAINER_DIR)
    assert Path(seen["module"]).is_relative_to(installed), seen["module"]
    assert Path(seen["context"]) == shipped
    assert source_fingerprint(shipped) == checkout
    assert seen["tag"] == image_tag(checkout, seen["base"], "cpu", seen["build_args"])
    (staged,) = (path for path in (tmp_path / "cdk.out").glob("asset.*") if (path / "Dockerfile").is_file())
    assert source_fingerprint(staged) == checkout  # what CodeBuild will receive
    assert os.access(staged / "serve", os.X_OK)
