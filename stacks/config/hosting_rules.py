"""Hosting modes across keys: what each mode needs, what SageMaker refuses in it, and whether it fits.

- `dedicated`: one endpoint per model, on its own instances (the default).
- `shared`: both models on ONE endpoint as two inference components (one, the decision model's, in a
  decision-only environment: `chat: false`); the endpoint (`shared_endpoint`) has the instances, each model's
  `component` what one copy reserves of them (cores, memory, GPUs) and how many copies.
- `serverless`: the decision model on a serverless endpoint (CPU only, memory and concurrency instead of
  instances); the environment's `hosting` may say it only where there is no chat endpoint.

Each refusal names the key and gives SageMaker's reason (or ours, where it is a choice of this app), so that a
mode SageMaker cannot run fails `cdk synth`, not a deployment ten minutes in. Called by rules.py; whether the
model fits a component or a serverless endpoint is model_fit.py's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .container_keys import MAX_BODY_KEY
from .endpoint import Component
from .environment import EnvironmentSettings
from .instances import MIB, InstanceCapacity, instance_capacity, instance_problem
from .kinds import EndpointKind
from .problems import Problems

SERVERLESS_MAX_BODY_BYTES = 4 * MIB  # SageMaker Serverless Inference: 4 MB request and response payloads
# Batch Transform sends up to MaxPayloadInMB per request; the adapter's GET /execution-parameters asks for 1
# (container/semif_adapter/doors/http_app.py EXECUTION_PARAMETERS; a test keeps the two equal).
TRANSFORM_MAX_PAYLOAD_BYTES = 1 * MIB
# What the stack writes itself once a mode is chosen; a value in the config would fight it.
SERVERLESS_REFUSED = {
    "instance_type": "a serverless endpoint has no instance type: SageMaker sizes it from serverless.memory_mb",
    "instance_count": "a serverless endpoint has no instances: it scales by concurrency (serverless.max_concurrency)",
    "autoscaling": "a serverless endpoint scales itself up to serverless.max_concurrency; there is no variant to "
                   "register with Application Auto Scaling",
    "data_capture": "SageMaker Serverless Inference does not support data capture (Model Monitor)",
}
SHARED_REFUSED = {
    "instance_type": "in shared hosting the instances belong to shared_endpoint.instance_type",
    "instance_count": "in shared hosting the instances belong to shared_endpoint.instance_count",
    "autoscaling": "an endpoint with inference components does not scale its variant: each component scales its "
                   "copies (component.autoscaling) and the endpoint its instances "
                   "(shared_endpoint.managed_scaling)",
    "data_capture": "data capture is set on the endpoint config, which in shared hosting serves both models; this "
                    "app does not capture one component's traffic under the other's settings",
    "network_isolation": "the shared endpoint's config sets network isolation for every container on it: use the "
                         "environment's network_isolation",
}


def check_hosting(settings: EnvironmentSettings) -> Problems:
    """The rules of the chosen modes that need no facts about the model."""
    problems: Problems = []
    if settings.hosting == "serverless" and settings.chat is not None:
        problems.append(("hosting", "serverless hosts the decision endpoint only; set decision.hosting: serverless "
                                    "(and the chat endpoint stays dedicated or shared)"))
        return problems
    if settings.chat is not None and settings.chat.alarms.warning_rate is not None:
        problems.append(("chat.alarms.warning_rate", "the chat endpoint (the stock DLC) writes no decision metrics; "
                                                     "the warning-rate alarm watches the decision endpoint only"))
    modes = {kind: settings.hosting_of(kind) for kind in settings.kinds}
    if modes.get("chat") == "serverless":
        problems.append(("chat.hosting", "serverless is offered for the decision endpoint only: the chat endpoint "
                                         "streams long answers (InvokeEndpointWithResponseStream) from llama-server"))
    if "shared" in modes.values() and set(modes.values()) != {"shared"}:
        shared = [kind for kind, mode in modes.items() if mode == "shared"]
        problems.append((f"{shared[0]}.hosting", "shared hosting puts both models on one endpoint; set it for both "
                                                 "(the environment's hosting: shared) or for neither"))
        return problems
    for kind, mode in modes.items():
        problems += _check_mode_keys(settings, kind, mode)
    if settings.shared:
        problems += _check_shared(settings)
    elif settings.shared_endpoint is not None:
        problems.append(("shared_endpoint", "only shared hosting has a shared endpoint; set hosting: shared or "
                                            "remove it"))
    if modes["decision"] == "serverless":
        problems += _check_serverless(settings)
    problems += _check_batch_transform(settings, modes["decision"])
    return problems


def _check_mode_keys(settings: EnvironmentSettings, kind: EndpointKind, mode: str) -> Problems:
    """Keys that one mode needs and the others must not have."""
    endpoint = settings.endpoint(kind)
    given = endpoint.model_fields_set
    problems: Problems = []
    if mode == "dedicated" and endpoint.instance_type is None:
        problems.append((f"{kind}.instance_type", "required for dedicated hosting (the endpoint's own instances)"))
    refused = SHARED_REFUSED if mode == "shared" else SERVERLESS_REFUSED if mode == "serverless" else {}
    problems += [(f"{kind}.{key}", reason) for key, reason in refused.items() if key in given
                 and getattr(endpoint, key) is not None]
    if mode == "shared" and endpoint.component is None:
        problems.append((f"{kind}.component", "required for shared hosting: cpu_cores and memory_mb one copy of the "
                                              "model reserves on the shared instances"))
    if mode != "shared" and endpoint.component is not None:
        problems.append((f"{kind}.component", "only shared hosting has inference components; remove it"))
    if mode == "serverless" and endpoint.serverless is None:
        problems.append((f"{kind}.serverless", "required for serverless hosting: memory_mb (1024-6144) and "
                                               "max_concurrency"))
    if mode != "serverless" and endpoint.serverless is not None:
        problems.append((f"{kind}.serverless", "only serverless hosting takes a ServerlessConfig; set "
                                               f"{kind}.hosting: serverless or remove it"))
    if kind == "chat" and endpoint.batch_transform is not None:
        problems.append(("chat.batch_transform", "Batch Transform runs the decision model; the chat model answers "
                                                 "one conversation per request"))
    return problems


def _check_shared(settings: EnvironmentSettings) -> Problems:
    problems: Problems = []
    if settings.shared_endpoint is None:
        return [("shared_endpoint", "required for shared hosting: instance_type (and instance_count) of the one "
                                    "endpoint both components run on")]
    problem = instance_problem(settings.shared_endpoint.instance_type, settings.accelerator)
    if problem:
        return [("shared_endpoint.instance_type", problem)]
    for kind in settings.kinds:
        endpoint = settings.endpoint(kind)
        component = endpoint.component
        if component is None:
            continue
        at = f"{kind}.component"
        if settings.accelerator == "cpu" and component.accelerators:
            problems.append((f"{at}.accelerators", "accelerator is 'cpu' (the CPU image on CPU instances): a "
                                                   "component cannot reserve GPUs there; remove it"))
        if settings.accelerator == "gpu" and not component.accelerators:
            problems.append((f"{at}.accelerators", "accelerator is 'gpu' (the CUDA image): each copy needs at least "
                                                   "one GPU (NumberOfAcceleratorDevicesRequired >= 1)"))
        if endpoint.alarms.auto_rollback and component.copy_count < 2:
            problems.append((f"{kind}.alarms.auto_rollback",
                             "an inference component updates by rolling its copies, at most half of them at a time "
                             "(SageMaker: 5-50% of the copy count), with the alarms as rollback triggers; with "
                             f"copy_count {component.copy_count} nothing can roll: set component.copy_count >= 2 "
                             "or remove auto_rollback"))
    if any(key.endswith(".accelerators") for key, _ in problems):
        return problems  # the image and the instances disagree: placing copies would only repeat it
    return problems + _check_placement(settings)


@dataclass(frozen=True)
class _Copy:
    cores: float
    memory_mb: int
    gpus: int


def _copies(component: Component, count: int) -> list[_Copy]:
    return [_Copy(component.cpu_cores, component.memory_mb, component.accelerators)] * count


def _placeable(copies: Iterable[_Copy], capacity: InstanceCapacity, instances: int) -> bool:
    """First-fit decreasing of the copies onto `instances` instances: the placement SageMaker has to find."""
    free = [[float(capacity.vcpus), capacity.memory_mb, capacity.gpus] for _ in range(instances)]
    for copy in sorted(copies, key=lambda c: (c.gpus, c.memory_mb, c.cores), reverse=True):
        for slot in free:
            if copy.cores <= slot[0] and copy.memory_mb <= slot[1] and copy.gpus <= slot[2]:
                slot[0] -= copy.cores
                slot[1] -= copy.memory_mb
                slot[2] -= copy.gpus
                break
        else:
            return False
    return True


def _check_placement(settings: EnvironmentSettings) -> Problems:
    """Every copy fits one instance, the initial copies fit the initial instances, the most copies the most
    instances (from the instance table: vCPUs, memory, GPUs)."""
    shared = settings.shared_endpoint
    assert shared is not None
    capacity = instance_capacity(shared.instance_type)
    components = {kind: settings.endpoint(kind).component for kind in settings.kinds}
    if capacity is None or None in components.values():
        return []  # a type the table does not list (or a missing component, refused above): nothing to check
    problems: Problems = []
    for kind, component in components.items():
        assert component is not None
        one = _copies(component, 1)[0]
        at = f"{kind}.component"
        for key, needed, available, unit in (("cpu_cores", one.cores, capacity.vcpus, "vCPUs"),
                                             ("memory_mb", one.memory_mb, capacity.memory_mb, "MB of memory"),
                                             ("accelerators", one.gpus, capacity.gpus, "GPUs")):
            if needed > available:
                problems.append((f"{at}.{key}", f"one copy needs {needed:g} {unit}, but {shared.instance_type} has "
                                                f"{available:g}; it can never be placed"))
        if component.max_memory_mb is not None and component.max_memory_mb > capacity.memory_mb:
            problems.append((f"{at}.max_memory_mb", f"{component.max_memory_mb} MB is more than "
                                                    f"{shared.instance_type}'s {capacity.memory_mb} MB"))
    if problems:
        return problems
    initial = [c for kind, comp in components.items() if comp for c in _copies(comp, comp.copy_count)]
    if not _placeable(initial, capacity, shared.instance_count):
        problems.append(("shared_endpoint.instance_count",
                         f"{shared.instance_count} x {shared.instance_type} ({capacity.describe()} each) cannot hold "
                         f"the initial copies ({_summary(components, initial=True)}); add instances or reserve less"))
    most = [c for comp in components.values() if comp
            for c in _copies(comp, comp.autoscaling.max_copies if comp.autoscaling else comp.copy_count)]
    instances = shared.managed_scaling.max_instances if shared.managed_scaling else shared.instance_count
    if not problems and not _placeable(most, capacity, instances):
        where = "shared_endpoint.managed_scaling.max_instances" if shared.managed_scaling else \
            "shared_endpoint.managed_scaling"
        problems.append((where, f"at their autoscaling maximum the copies ({_summary(components, initial=False)}) do "
                                f"not fit {instances} x {shared.instance_type}; allow more instances or fewer copies"))
    return problems


def _summary(components: dict[EndpointKind, Component | None], *, initial: bool) -> str:
    parts = []
    for kind, comp in components.items():
        if comp is None:
            continue
        count = comp.copy_count if initial or comp.autoscaling is None else comp.autoscaling.max_copies
        parts.append(f"{count} x {kind}: {comp.cpu_cores:g} vCPU, {comp.memory_mb} MB"
                     + (f", {comp.accelerators} GPU" if comp.accelerators else ""))
    return "; ".join(parts)


def _check_serverless(settings: EnvironmentSettings) -> Problems:
    """SageMaker Serverless Inference's exclusions, each with its reason."""
    decision = settings.decision
    problems: Problems = []
    if settings.accelerator == "gpu":
        problems.append(("decision.hosting", "SageMaker Serverless Inference runs on CPU only, and accelerator is "
                                             "'gpu' (the CUDA image for both models); use accelerator cpu or host "
                                             "the decision endpoint dedicated or shared"))
    if settings.vpc is not None:
        problems.append(("decision.hosting", "SageMaker Serverless Inference does not support a VPC configuration, "
                                             "and vpc is set (the decision model would get its VpcConfig)"))
    if decision.network_isolation is not False:
        problems.append(("decision.network_isolation",
                         "SageMaker Serverless Inference does not support network isolation; set "
                         "decision.network_isolation: false to accept that the decision container may open outbound "
                         "connections (README, Hosting modes: the trade-off)"))
    body = decision.adapter_env.get(MAX_BODY_KEY)
    if body is not None and body.isdigit() and int(body) > SERVERLESS_MAX_BODY_BYTES:
        problems.append((f"decision.env.{MAX_BODY_KEY}",
                         f"{body} is above SageMaker Serverless Inference's payload limit of 4 MB "
                         f"({SERVERLESS_MAX_BODY_BYTES} bytes), which the stack sets when it is unset"))
    return problems


def _check_batch_transform(settings: EnvironmentSettings, decision_mode: str) -> Problems:
    batch = settings.decision.batch_transform
    if batch is None:
        return []
    problems: Problems = []
    problem = instance_problem(batch.instance_type, settings.accelerator, transform=True)
    if problem:
        problems.append(("decision.batch_transform.instance_type", problem))
    if decision_mode == "serverless":
        problems.append(("decision.batch_transform",
                         "the decision model is built for Serverless Inference here (network isolation off, a 4 MB "
                         "body limit) and this app runs Batch Transform only on an instance-based decision model: "
                         "host the decision endpoint dedicated or shared to use batch_transform"))
    if settings.accelerator == "gpu":
        problems.append(("decision.batch_transform.instance_type",
                         "Batch Transform instances offer NVIDIA drivers up to 535 (TransformAmiVersion "
                         "al2-ami-sagemaker-batch-gpu-535), and the DLC's CUDA 13 image needs 580: a GPU transform "
                         "job cannot start it; run Batch Transform from a cpu environment"))
    body = settings.decision.adapter_env.get(MAX_BODY_KEY)
    if body is not None and body.isdigit() and int(body) < TRANSFORM_MAX_PAYLOAD_BYTES:
        problems.append((f"decision.env.{MAX_BODY_KEY}",
                         f"{body} bytes is below the {TRANSFORM_MAX_PAYLOAD_BYTES} bytes (MaxPayloadInMB 1, from the "
                         "adapter's GET /execution-parameters) Batch Transform packs into one request; every full "
                         "mini-batch would be refused with 413"))
    return problems
