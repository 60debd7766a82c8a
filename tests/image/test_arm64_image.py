"""The decision image for Graviton, built for linux/arm64 and run here under the qemu-user emulator.

The committed Dockerfile, unmodified, with the build args the CDK app passes for an arm64 environment (the Neoverse-V1
flags of `ARM64_PORTABLE_CMAKE_ARGS`), FROM an arm64 stand-in of the DLC (tests/image/standin_dlc.py): its RUN
steps run emulated by qemu-user, as the ARM CodeBuild host runs them natively, except llama.cpp's compile, which
the Dockerfile's `llama` stage does on this machine's platform with an aarch64 cross compiler (LLAMA_BUILDER_IMAGE:
an emulated compile is about 20 times slower). Then the adapter in the image, run emulated, answers decisions on
the embedded model through the SemIf door (/invocations) and the System One door (/v1/systemone), published on
loopback only.

Not in `make test` (docs/image-tests.md, "The arm64 image", has its times): the `arm64` marker is deselected unless
`-m` names it; `make test-arm64` runs it. Where the emulator is not registered the test fails and says how to
register it; it never skips.
"""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest
from conftest import LLAMA_ENV
from decision_container import (
    PODMAN,
    BuiltImage,
    Container,
    build_decision_image,
    emulator_problem,
    inspect,
    missing_tools,
    run_container,
    ulimits,
)

from bench.reliability.bodies import decision
from semif_adapter.engine.embedded_model import embedded_model_path
from stacks.image.decision_image import ARM64_PORTABLE_CMAKE_ARGS

pytestmark = [pytest.mark.slow, pytest.mark.arm64]

# Everything emulated: the start (load, exactness probes, warm-up) and each decode are hundreds of times slower
# than native (measured: image-tests.md, "The arm64 image"), so the deadlines are far above the x86-64 image's 120 s.
START_TIMEOUT_S = 1800.0
ANSWER_TIMEOUT_S = 900.0
AARCH64 = 183  # e_machine of an aarch64 ELF file
STATE = "Customer: my parcel arrived today and the laptop screen is cracked."
QUESTIONS = {"refund": {"type": "noul", "instructions": "Should support refund the order?"}}


@pytest.fixture(scope="module")
def arm64_image() -> BuiltImage:
    missing = missing_tools("arm64")
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: `make test-arm64` installs them (scripts/dev/bootstrap.sh "
                    "arm64)")
    problem = emulator_problem()
    if problem:
        pytest.fail(f"this machine cannot run arm64 programs, which the linux/arm64 build and run need: {problem}")
    return build_decision_image("arm64")


@pytest.fixture(scope="module")
def arm64_serving(arm64_image: BuiltImage) -> Iterator[Container]:
    """A container of the arm64 image on the embedded model, polled on /ping until it answers 200."""
    path = embedded_model_path()
    container = run_container(arm64_image.reference, {path.name: path}, LLAMA_ENV, arch="arm64")
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            try:
                if httpx.get(container.url + "/ping", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the arm64 image never answered /ping 200 in {START_TIMEOUT_S:.0f} s\n{container.logs()}")
            time.sleep(0.5)
        yield container
    finally:
        container.remove()


def run_in(image: BuiltImage, entrypoint: str, *args: str) -> str:
    command = [*PODMAN, "run", "--rm", "--arch", "arm64", *ulimits(), "--entrypoint", entrypoint, image.reference]
    result = subprocess.run([*command, *args], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result
    return result.stdout


def test_the_image_is_arm64_with_the_graviton_flags(arm64_image: BuiltImage) -> None:
    assert inspect(arm64_image.reference)["Architecture"] == "arm64"
    assert arm64_image.build_args["LLAMA_PORTABLE_CMAKE_ARGS"] == ARM64_PORTABLE_CMAKE_ARGS
    flags = run_in(arm64_image, "/bin/cat", "/opt/semif/llama-cmake-args").split()
    assert flags[:2] == ARM64_PORTABLE_CMAKE_ARGS.split(), flags
    assert not [flag for flag in flags if "AVX" in flag or "FMA" in flag], flags  # none of x86-64's
    # The adapter's libraries and llama-server are aarch64 ELF files (e_machine at byte 18, little-endian).
    machines = run_in(arm64_image, "/opt/semif/bin/python", "-c", (
        "import glob, sys; files = ['/opt/semif/bin/llama-server', "
        "*glob.glob('/opt/semif/lib/python3.11/site-packages/llama_cpp/lib/lib*.so*')]; "
        "print(*sorted({int.from_bytes(open(f, 'rb').read(20)[18:20], 'little') for f in files}))"))
    assert machines.split() == [str(AARCH64)], machines


def test_a_decision_on_the_embedded_model(arm64_serving: Container) -> None:
    body = decision("arm64-1", state=STATE, question="What should support do next?",
                    options=[("refund", "Refund the order in full"), ("replace", "Ship a replacement laptop")])
    response = httpx.post(arm64_serving.url + "/invocations", json=body, timeout=ANSWER_TIMEOUT_S)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["option_ids"] == ["refund", "replace"], answer
    assert math.isclose(sum(answer["probabilities"]), 1.0, abs_tol=1e-6), answer
    assert all(math.isfinite(logit) for logit in answer["option_logits"]), answer
    assert answer["model"]["file"] == embedded_model_path().name and answer["model"]["quantization"] == "Q4_1", answer


def test_a_system_one_decision(arm64_serving: Container) -> None:
    response = httpx.post(arm64_serving.url + "/v1/systemone", json={"state": STATE, "questions": QUESTIONS},
                          timeout=ANSWER_TIMEOUT_S)
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    assert list(answers) == ["refund"] and 0.0 <= answers["refund"]["noul"] <= 1.0, answers
