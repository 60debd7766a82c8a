"""`serverless`: the decision model on a serverless endpoint (CPU only, memory and concurrency instead of
instances); the environment's `hosting` may say it only where there is no chat endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from semif_adapter.engine.prefix_cache import MIN_RESERVE_BYTES

from ..container_keys import MAX_BODY_KEY
from ..instances import MIB
from ..kinds import EndpointKind, HostingMode
from ..problems import Problems
from .mode import HostingRules, OwnBlock, ServingCapacity

if TYPE_CHECKING:
    from ..environment import EnvironmentSettings

SERVERLESS_MAX_BODY_BYTES = 4 * MIB  # SageMaker Serverless Inference: 4 MB request and response payloads


class Serverless(HostingRules):
    """SageMaker Serverless Inference: what it excludes, each with its reason, and its memory against the model."""

    name: ClassVar[HostingMode] = "serverless"
    block: ClassVar[OwnBlock | None] = OwnBlock(
        "serverless", required="required for serverless hosting: memory_mb (1024-6144) and max_concurrency",
        only="only serverless hosting takes a ServerlessConfig; set {kind}.hosting: serverless or remove it")
    refused: ClassVar[dict[str, str]] = {
        "instance_type": "a serverless endpoint has no instance type: SageMaker sizes it from serverless.memory_mb",
        "instance_pools": "a serverless endpoint has no instances: SageMaker sizes it from serverless.memory_mb",
        "instance_count": "a serverless endpoint has no instances: it scales by concurrency "
                          "(serverless.max_concurrency)",
        "autoscaling": "a serverless endpoint scales itself up to serverless.max_concurrency; there is no variant to "
                       "register with Application Auto Scaling",
        "data_capture": "SageMaker Serverless Inference does not support data capture (Model Monitor)",
    }
    chat_refusal: ClassVar[str | None] = ("serverless is offered for the decision endpoint only: the chat endpoint "
                                          "streams long answers (InvokeEndpointWithResponseStream) from llama-server")
    batch_refusal: ClassVar[str | None] = (
        "the decision model is built for Serverless Inference here (network isolation off, a 4 MB body limit) and "
        "this app runs Batch Transform only on an instance-based decision model: host the decision endpoint "
        "dedicated or shared to use batch_transform")
    body_limit: ClassVar[int | None] = SERVERLESS_MAX_BODY_BYTES

    def check(self, settings: EnvironmentSettings) -> Problems:
        decision = settings.decision
        problems: Problems = []
        if settings.accelerator == "gpu":
            problems.append(("decision.hosting", "SageMaker Serverless Inference runs on CPU only, and accelerator "
                                                 "is 'gpu' (the CUDA image for both models); use accelerator cpu or "
                                                 "host the decision endpoint dedicated or shared"))
        if settings.vpc is not None:
            problems.append(("decision.hosting", "SageMaker Serverless Inference does not support a VPC "
                                                 "configuration, and vpc is set (the decision model would get its "
                                                 "VpcConfig)"))
        if decision.network_isolation is not False:
            problems.append(("decision.network_isolation",
                             "SageMaker Serverless Inference does not support network isolation; set "
                             "decision.network_isolation: false to accept that the decision container may open "
                             "outbound connections (README, Hosting modes: the trade-off)"))
        body = decision.adapter_env.get(MAX_BODY_KEY)
        if body is not None and body.isdigit() and int(body) > SERVERLESS_MAX_BODY_BYTES:
            problems.append((f"decision.env.{MAX_BODY_KEY}",
                             f"{body} is above SageMaker Serverless Inference's payload limit of 4 MB "
                             f"({SERVERLESS_MAX_BODY_BYTES} bytes), which the stack sets when it is unset"))
        return problems

    def model_fit(self, settings: EnvironmentSettings, kind: EndpointKind, model_bytes: int) -> Problems:
        serverless = settings.endpoint(kind).serverless
        if serverless is None or model_bytes + MIN_RESERVE_BYTES <= serverless.memory_mb * MIB:
            return []
        return [(f"{kind}.serverless.memory_mb",
                 f"{serverless.memory_mb} MB does not hold the model ({model_bytes / MIB:,.0f} MB) and the "
                 f"adapter's own {MIN_RESERVE_BYTES // MIB} MB (Python, HTTP server, request bodies); the context's "
                 "KV cache comes on top; choose a larger memory_mb (at most 6144)")]

    def decision_capacities(self, settings: EnvironmentSettings) -> list[ServingCapacity]:
        serverless = settings.decision.serverless
        if serverless is None:
            return []
        key = "decision.serverless.memory_mb"
        return [ServingCapacity(key, key, "the serverless endpoint", serverless.memory_mb * MIB)]

    def endpoint_name(self, stack_name: str, kind: EndpointKind) -> str:
        """A new name: SageMaker cannot update an instance-based endpoint into a serverless one or back."""
        return f"{stack_name}-{kind}-serverless"
