"""The decision image, built from the committed Dockerfile on a stand-in DLC and run as SageMaker runs it.

`podman run IMAGE serve` with the model mounted at /opt/ml/model, published on loopback only: the ping
states, a decision bit-identical to the local process's, the native libraries the process maps, the image's
metadata and user, start-up refusals and SIGTERM under load (a decision-typed model, which the image's own
llama-server scores: test_native_engine_image.py). What the stand-in cannot show (dnf on Amazon
Linux 2023, CUDA, BuildKit) is listed in the README.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from decision_container import PODMAN, BuiltImage, Serving, inspect, ulimits
from standin_dlc import LLAMA_DIR
from support.admission import DRAIN_TIMING, wait_admitted

from bench.reliability.bodies import STATES, decision
from bench.reliability.rawhttp import connect, read_response, request_head
from semif_adapter.settings import SAGEMAKER_STOP_SECONDS

SITE = "/opt/semif/lib/python3.11/site-packages"
BINDINGS_LIB = f"{SITE}/llama_cpp/lib/"
USER = "10001:10001"


def run_in_image(image: BuiltImage, entrypoint: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PODMAN, "run", "--rm", *ulimits(), "--entrypoint", entrypoint, image.reference, *args],
                          capture_output=True, text=True, timeout=120, check=False)


def test_metadata_label_entry_point_and_user(decision_image: BuiltImage) -> None:
    config = inspect(decision_image.reference)["Config"]
    assert config["Labels"]["com.amazonaws.sagemaker.capabilities.accept-bind-to-port"] == "true"
    assert config["Labels"]["org.opencontainers.image.base.name"] == decision_image.base
    assert config["Entrypoint"] == ["/usr/local/bin/serve"] and config["Cmd"] == ["serve"]
    assert config["User"] == USER
    assert {"8080", "8080/tcp"} & set(config["ExposedPorts"])
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["PATH"].startswith("/opt/semif/bin:" + LLAMA_DIR), "the DLC's PATH is kept behind the venv"
    assert env["LD_LIBRARY_PATH"] == LLAMA_DIR + ":", "the DLC's loader path is untouched"
    assert env["SEMIF_LLAMA_SERVER"] == "/opt/semif/bin/llama-server", "the native engine's server is the image's"


def test_ping_is_503_while_loading_then_200(serving: Serving) -> None:
    pings = serving.pings
    assert pings[0] == 503, f"the first answer was {pings[0]}: the port must open before the model loads"
    assert pings[-1] == 200 and set(pings[:-1]) == {503}, pings


@pytest.mark.parametrize("request_body", [
    decision(),
    decision("case-2", state=STATES[4], options=4, debias="permute", temperature=0.5),
], ids=["plain", "permute"])
def test_a_decision_is_bit_identical_to_the_local_process(serving: Serving, local_adapter: str,
                                                         request_body: dict) -> None:
    image = httpx.post(serving.container.url + "/invocations", json=request_body, timeout=120)
    local = httpx.post(local_adapter + "/invocations", json=request_body, timeout=120)
    assert image.status_code == local.status_code == 200, image.text
    mine, theirs = image.json(), local.json()
    for answer in (mine, theirs):  # timing is the one field that differs by nature; its token counts do not
        answer["timing"] = {k: v for k, v in answer["timing"].items() if k.endswith("_tokens")}
    assert mine["probabilities"] == theirs["probabilities"]  # floats from JSON: equal means the same bits
    assert mine["option_logits"] == theirs["option_logits"]
    assert mine == theirs


def mapped_libraries(pid: int) -> set[str]:
    return {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines() if ".so" in line}


def test_mapped_native_libraries_are_the_images_own_one_copy_each(serving: Serving) -> None:
    mapped = mapped_libraries(serving.container.host_pid())
    llama = sorted(path for path in mapped if "/libllama" in path or "/libggml" in path)
    assert llama, f"no llama.cpp library mapped: {sorted(mapped)}"
    assert not [path for path in mapped if path.startswith(LLAMA_DIR)], "a library of the base image is mapped"
    assert all(path.startswith(BINDINGS_LIB) for path in llama), llama
    copies = collections.Counter(Path(path).name.split(".so")[0] for path in llama)
    assert copies["libggml"] == 1 and copies["libggml-base"] == 1 and copies["libllama"] == 1, copies
    assert set(copies.values()) == {1}, copies


def test_the_decoys_abort_if_the_loader_hands_them_out(decision_image: BuiltImage) -> None:
    """What the test above guards against is real: a lookup by name on the DLC's LD_LIBRARY_PATH finds them."""
    result = run_in_image(decision_image, "/opt/semif/bin/python", "-c",
                          "import ctypes; ctypes.CDLL('libggml.so.0')")
    assert result.returncode > 128, result  # killed by a signal (podman reports 128 + its number)
    assert "DECOY libggml.so of the stand-in DLC base was loaded" in result.stderr


def test_runs_as_the_user_the_image_declares(serving: Serving) -> None:
    status = Path(f"/proc/{serving.container.host_pid()}/status").read_text().splitlines()
    ids = {line.split(":")[0]: line.split()[1:] for line in status if line.startswith(("Uid:", "Gid:"))}
    uid, gid = USER.split(":")
    assert ids == {"Uid": [uid] * 4, "Gid": [gid] * 4}, ids  # real, effective, saved and filesystem ids
    assert uid != "0"


def test_bindings_are_built_with_the_portable_cpu_flags(decision_image: BuiltImage) -> None:
    result = run_in_image(decision_image, "/bin/cat", "/opt/semif/llama-cmake-args")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:2] == ["-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON"], result.stdout
    assert "-DGGML_OPENMP=OFF" in result.stdout.split(), result.stdout  # ggml's own thread pool, as in the tests
    features = run_in_image(decision_image, "/opt/semif/bin/python", "-c",
                            "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())")
    assert features.returncode == 0 and "AVX2 = 1" in features.stdout, features
    assert "OPENMP" not in features.stdout, features.stdout


def _normalized(requirement: str) -> str:
    """`name==version` with the name as PEP 503 compares names (backports.zstd is backports-zstd)."""
    name, _, version = requirement.partition("==")
    return f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}"


def test_the_python_tree_is_the_lock(decision_image: BuiltImage) -> None:
    lock = (Path(__file__).resolve().parents[2] / "container" / "requirements.lock").read_text()
    locked = {_normalized(line.split(" ")[0]) for line in lock.splitlines() if "==" in line}
    result = run_in_image(decision_image, "/opt/semif/bin/pip", "list", "--format", "json", "--exclude-editable")
    assert result.returncode == 0, result.stderr
    installed = {_normalized(f"{p['name']}=={p['version']}") for p in json.loads(result.stdout)}
    venv_tools = {p for p in installed if p.split("==")[0] in ("pip", "setuptools")}  # from the venv itself
    assert installed - venv_tools == locked


@pytest.mark.parametrize(("files", "reason"), [
    ("two-models", "2 models found"),
    ("not-gguf", "does not start with the GGUF magic bytes"),
])
def test_a_bad_model_directory_exits_1_with_one_log_line(start_container, model: dict[str, Path],
                                                         tmp_path: Path, files: str, reason: str) -> None:
    if files == "two-models":
        (path,) = model.values()
        models = {"a.gguf": path, "b.gguf": path}
    else:
        junk = tmp_path / "model.gguf"
        junk.write_bytes(b"PK\x03\x04 this is a zip archive, not a model")
        junk.chmod(0o644)
        models = {"model.gguf": junk}
    container = start_container(models)
    assert container.wait_exit(60) == 1
    lines = [line for line in container.logs().splitlines() if line.strip()]
    assert len(lines) == 1 and reason in lines[0], lines


def test_sigterm_under_load_drains_and_exits_0(start_container, model: dict[str, Path]) -> None:
    container = start_container(model, env=DRAIN_TIMING)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(container.url + "/ping", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    else:
        pytest.fail(f"not ready\n{container.logs()}")
    sockets = []
    for index in range(3):
        body = json.dumps(decision(state=f"Evidence {index}: " + "the shipment was delayed. " * 8)).encode()
        sock = connect(container.url, timeout_s=60)
        sock.sendall(request_head(container.url, "/invocations", len(body)) + body)
        sockets.append(sock)
    wait_admitted(container.url)  # every decision is in before the signal, however busy the machine
    started = time.monotonic()
    container.send_signal("TERM")
    responses = [read_response(sock, 60) for sock in sockets]
    for sock in sockets:
        sock.close()
    code = container.wait_exit(40)
    seconds = time.monotonic() - started
    assert code == 0, container.logs()
    assert seconds < SAGEMAKER_STOP_SECONDS, f"exited {seconds:.1f} s after SIGTERM: SageMaker kills at 30 s"
    assert [r.status if r else None for r in responses] == [200, 200, 200], container.logs()
