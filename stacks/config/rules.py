"""The rules across keys of one environment, run before anything is built (`check_environment`).

Each block's own bounds are its model's (environment.py); what spans blocks is here, each family of rules in its
own module: the container maps (container_env_rules.py), the hosting modes (hosting_rules.py), instance pools and
architectures (instance_rules.py), the chat template (chat_template.py), the System One API
(https_api_rules.py). What needs the model's facts (its size, context, KV cache) runs once the artifact is known
(model_fit.py). Keys are relative to the environment.
"""

from __future__ import annotations

from aws_cdk.region_info import RegionInfo

from semif_adapter.deploy.artifact import CHAT_TEMPLATE_KEY

from .chat_template import check_chat_template
from .container_env_rules import adapter_setting_problem, check_adapter_settings, check_llama_env
from .cuda_architectures import CUDA_ARCHITECTURES
from .environment import EnvironmentSettings
from .hosting_rules import check_hosting
from .https_api_rules import check_https_api
from .instance_rules import check_instances
from .instances import describe_instance, inference_ami_versions, instance_problem
from .kinds import EndpointKind
from .model_source import S3Model
from .problems import Problems

# The CUDA 13 runtime in the DLC's CUDA image needs a driver newer than the default host AMI's.
CUDA13_AMI_VERSIONS = frozenset({"al2-ami-sagemaker-inference-gpu-3-1", "al2023-ami-sagemaker-inference-gpu-4-1"})
# The CUDA variant of the image compiles ggml's CUDA kernels with nvcc on top of the CPU build (which alone takes
# minutes on 2 cores: README, "The image test") and pulls two multi-GB CUDA images first. A floor, not a measurement
# of the CUDA build (no GPU build ran here).
GPU_BUILD_MIN_MINUTES = 30
GPU_BUILD_TOO_SMALL = {"small": "2 vCPUs and 4 GiB of memory"}


def check_environment(settings: EnvironmentSettings) -> Problems:
    """Rules that span several keys; returns (relative key, message) pairs."""
    problems: Problems = []
    if RegionInfo.get(settings.region).dlc_repository_account is None:
        problems.append(("region", f"CDK knows no Deep Learning Containers registry in {settings.region}"))
    problems += _check_accelerator(settings)
    problems += _check_model_source(settings)
    problems += _check_image_build(settings)
    for kind in settings.kinds:
        problems += _check_endpoint(settings, kind)
    problems += check_llama_env("llama_env", settings.llama_env)
    if not any(key.endswith(CHAT_TEMPLATE_KEY) for key, _ in problems):  # a value llama-server accepts as a flag
        problems += check_chat_template(settings)
    problems += check_hosting(settings)
    problems += check_instances(settings)
    problems += _check_notifications(settings)
    problems += check_https_api(settings)
    return problems


def _check_notifications(settings: EnvironmentSettings) -> Problems:
    region = settings.notifications.topic_region
    if region is not None and region != settings.region:
        return [("notifications.topic_arn", f"the topic is in {region}, the stack in {settings.region}: CloudWatch "
                                            "alarms notify SNS topics of their own region")]
    return []


def _check_model_source(settings: EnvironmentSettings) -> Problems:
    model = settings.model
    if isinstance(model, S3Model) and model.kms_key_region not in (None, settings.region):
        return [("model.kms_key_arn", f"the key is in {model.kms_key_region}, the stack in {settings.region}: S3 "
                                      "encrypts an object with a key of the bucket's region, and SageMaker reads "
                                      "model data in its own region; use a key of this region")]
    return []


def _check_accelerator(settings: EnvironmentSettings) -> Problems:
    ami = settings.inference_ami_version
    if settings.accelerator == "cpu":
        if ami is not None:
            return [("inference_ami_version", "only GPU endpoints take an InferenceAmiVersion; remove it for cpu")]
        return []
    if ami is None:
        return [("inference_ami_version", "required for accelerator gpu: the DLC's CUDA 13 image needs a recent "
                                          f"driver, one of {sorted(CUDA13_AMI_VERSIONS)}")]
    if ami not in inference_ami_versions():
        return [("inference_ami_version", f"{ami!r} is not an InferenceAmiVersion "
                                          f"SageMaker knows ({sorted(inference_ami_versions())})")]
    if ami not in CUDA13_AMI_VERSIONS:
        return [("inference_ami_version", f"{ami} has a driver too old for the DLC's "
                                          f"CUDA 13 image; use one of {sorted(CUDA13_AMI_VERSIONS)}")]
    return []


def _check_image_build(settings: EnvironmentSettings) -> Problems:
    """A CUDA image build that cannot finish in its CodeBuild project is refused before anything is deployed."""
    if settings.accelerator != "gpu":
        return []
    build = settings.image_build
    problems: Problems = []
    if build.compute_type in GPU_BUILD_TOO_SMALL:
        problems.append(("image_build.compute_type",
                         f"{build.compute_type} ({GPU_BUILD_TOO_SMALL[build.compute_type]}) cannot build the CUDA "
                         "image: nvcc compiles ggml's CUDA kernels on top of the CPU build, which alone takes "
                         "minutes on 2 cores, and parallel nvcc jobs need more memory than that; use large (the "
                         "default) or bigger"))
    if build.timeout_minutes < GPU_BUILD_MIN_MINUTES:
        problems.append(("image_build.timeout_minutes",
                         f"{build.timeout_minutes} minutes is too short for the CUDA image: the build pulls the CUDA "
                         "builder and the CUDA DLC (several GB each) and compiles the CUDA kernels; CodeBuild stops it "
                         f"at the timeout and the deployment fails; use at least {GPU_BUILD_MIN_MINUTES}"))
    for key, instance_type in settings.mode_of("decision").instance_types(settings, "decision"):
        if instance_problem(instance_type, settings.accelerator):
            continue  # reported under the instance type's own key
        family = describe_instance(instance_type).family
        if family not in CUDA_ARCHITECTURES:
            problems.append((key, f"no CUDA architecture is known for instance family {family!r} "
                                  "(stacks/config/cuda_architectures.py), so the image cannot be built for it"))
    return problems


def _check_endpoint(settings: EnvironmentSettings, kind: EndpointKind) -> Problems:
    endpoint = settings.endpoint(kind)
    problems: Problems = []
    if endpoint.instance_type is not None:
        problem = instance_problem(endpoint.instance_type, settings.accelerator)
        if problem:
            problems.append((f"{kind}.instance_type", problem))
        elif describe_instance(endpoint.instance_type).burstable and endpoint.autoscaling is not None:
            problems.append((f"{kind}.autoscaling", f"{endpoint.instance_type} is burstable (ml.t*): Application "
                                                    "Auto Scaling does not support it; remove autoscaling or "
                                                    "pick another instance type"))
    scaling = endpoint.autoscaling
    if scaling and not scaling.min_instances <= endpoint.instance_count <= scaling.max_instances:
        problems.append((f"{kind}.instance_count", f"{endpoint.instance_count} is outside autoscaling bounds "
                                                   f"{scaling.min_instances}..{scaling.max_instances}"))
    problems += check_llama_env(f"{kind}.llama_env", endpoint.llama_env)
    if kind == "chat" and endpoint.calibration is not None:
        problems.append(("chat.calibration", "only the decision endpoint scores options; remove it"))
    if kind == "chat" and endpoint.adapter_env:
        problems.append(("chat.env", "the chat container (stock DLC) reads only SM_LLAMA_CPP_*; put those in "
                                     "llama_env"))
    for key, value in sorted(endpoint.adapter_env.items()):
        problem = adapter_setting_problem(key, value)
        if problem:
            problems.append((f"{kind}.env.{key}", problem))
    if kind == "decision" and not problems:
        problems += check_adapter_settings(settings)
    return problems
