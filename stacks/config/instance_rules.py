"""The instances each endpoint runs on, across keys: every pool checked as a single instance type is, and the two
DLC architectures (x86-64, arm64 on Graviton) never mixed under one model.

One model runs one image, and the DLC has one image per architecture, so an endpoint whose pools span x86-64 and
arm64 needs a model per image (`model_per_image`: each pool on the other image gets its own model through
`ModelNameOverride`) or is refused. The decision image is built once per environment, for one architecture, so the
decision endpoint's pools (and Batch Transform beside it) stay on that architecture.
"""

from __future__ import annotations

from .environment import EnvironmentSettings
from .instances import describe_instance, instance_problem
from .kinds import EndpointKind
from .problems import Problems

ARCHITECTURE_NAMES = {"x86_64": "x86-64", "arm64": "arm64 (Graviton)"}


def check_instances(settings: EnvironmentSettings) -> Problems:
    problems: Problems = []
    for kind in settings.kinds:
        problems += _check_pools(settings, kind)
    problems += _check_transform_architecture(settings)
    architectures = {describe_instance(instance_type).architecture for kind in settings.kinds
                     for _, instance_type in settings.mode_of(kind).instance_types(settings, kind)
                     if instance_problem(instance_type, settings.accelerator) is None}
    if settings.dlc_image.digest is not None and len(architectures) > 1:
        problems.append(("dlc_image.digest", "a digest pins one image, and this environment runs the DLC of both "
                                             "architectures (x86-64 and arm64): remove the digest or keep every "
                                             "endpoint on one architecture"))
    return problems


def _check_pools(settings: EnvironmentSettings, kind: EndpointKind) -> Problems:
    """Each pool like a single instance type (an instance_type is checked by rules.py), then their architectures."""
    endpoint = settings.endpoint(kind)
    problems: Problems = []
    valid: dict[str, list[str]] = {}
    for key, instance_type in settings.mode_of(kind).instance_types(settings, kind):
        if endpoint.instance_pools is None:
            continue
        problem = instance_problem(instance_type, settings.accelerator)
        if problem:
            problems.append((key, problem))
            continue
        facts = describe_instance(instance_type)
        if facts.burstable and endpoint.autoscaling is not None:
            problems.append((key, f"{instance_type} is burstable (ml.t*): Application Auto Scaling does not support "
                                  "it on a variant; remove autoscaling or this pool"))
        valid.setdefault(facts.architecture, []).append(instance_type)
    if len(valid) > 1:
        mix = " and ".join(f"{ARCHITECTURE_NAMES[arch]}: {', '.join(types)}" for arch, types in valid.items())
        if kind == "decision":
            problems.append(("decision.instance_pools",
                             f"the pools mix {mix}. The decision image is built once per environment, FROM the DLC of "
                             "one architecture (x86-64, or arm64 on an ARM CodeBuild host), so every decision pool "
                             "must run it: keep the decision endpoint's pools on one architecture"))
        elif not endpoint.model_per_image:
            problems.append((f"{kind}.instance_pools",
                             f"the pools mix {mix}. One model runs one image and the DLC has one per architecture: "
                             f"set {kind}.model_per_image: true (each pool on the other image gets its own model "
                             "through ModelNameOverride) or keep the pools on one architecture"))
    if kind == "decision" and endpoint.model_per_image:
        problems.append(("decision.model_per_image", "the decision image is built for one architecture per "
                                                     "environment: there is no second image to give a model"))
    return problems


def _check_transform_architecture(settings: EnvironmentSettings) -> Problems:
    batch = settings.decision.batch_transform
    if batch is None or settings.architecture_of("decision") == "x86_64":
        return []
    return [("decision.batch_transform.instance_type",
             f"{batch.instance_type} is x86-64 and the decision image is built for arm64 (the decision endpoint's "
             "Graviton instances); Batch Transform offers no Graviton instance: run it from an x86-64 environment")]
