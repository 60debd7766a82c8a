"""The decision endpoint's image: built FROM the llama.cpp DLC in CodeBuild, pushed to this stack's ECR repository.

Why CodeBuild and not a CDK Docker asset: the base image lives in the AWS DLC registry, which needs a
`docker login` that CDK's asset publishing cannot do (aws/aws-cdk#17268). The image tag is a hash of the
Docker build context (`container/`), of the base image URI (which holds `dlc_image.digest` when it is pinned)
and of the build args, so the image is rebuilt exactly when one of them changes, and never pushed twice under
a tag (the repository's tags are immutable). An unpinned `-v1` base can move under an unchanged tag: see the
README ("The decision image").
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import AssetHashType, CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct

from ..config.cuda_architectures import cuda_architectures
from ..config.image import ImageBuild
from ..config.instances import Accelerator, Architecture, describe_instance
from ..custom_resources.function import HandlerFunction
from ..operations.logs import LogSettings
from ..security.nag import accept_redundant_depends_on, acknowledge, acknowledge_provider
from .dlc import DlcRegistry

# The Docker build context: the repository's `container/` beside `stacks/`, or in an installed wheel the copy it
# ships beside `semif_sagemaker/cdk/` (`semif_sagemaker/container/`, the same files).
CONTAINER_DIR = Path(__file__).resolve().parents[2] / "container"  # stacks/image/ -> the repository
# Never part of the Docker build context's identity (caches and local build outputs).
EXCLUDED_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".venv", "node_modules"})
EXCLUDED_SUFFIXES = (".pyc", ".egg-info")
ASSET_EXCLUDES = [*(f"**/{name}" for name in sorted(EXCLUDED_DIRS)), *(f"**/*{end}" for end in EXCLUDED_SUFFIXES)]
QUERY_INTERVAL = Duration.seconds(30)
WAITER_MARGIN_MINUTES = 10  # queueing and provisioning of the build host, on top of the build timeout
KEPT_IMAGES = 20
# Added to by the configuration instead of replaced (CMake keeps the last -D of a name, so a configured
# -DCMAKE_CUDA_ARCHITECTURES=... still wins over the derived one).
APPENDED_BUILD_ARGS = frozenset({"LLAMA_CMAKE_ARGS"})
# The arm64 image's portable CPU flags, in place of the Dockerfile's x86-64-v3 ones: the Neoverse-V1 baseline the
# arm64 DLC targets (Armv8.4-A with SVE, int8 matrix multiply and bf16: Graviton3 and newer).
ARM64_PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8.4-a+sve+i8mm+bf16"
# The build host runs the image's architecture: docker builds natively, no emulation.
BUILD_IMAGES = {"x86_64": codebuild.LinuxBuildImage.STANDARD_7_0,
                "arm64": codebuild.LinuxArmBuildImage.AMAZON_LINUX_2023_STANDARD_3_0}
# A builder image in ECR (a mirror or pull-through cache of Docker Hub's): the build logs in and may pull it.
_ECR_IMAGE = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.(?P<domain>amazonaws\.com(?:\.cn)?)"
                        r"/(?P<repository>[^:@]+)")
COMPUTE_TYPES = {
    "small": codebuild.ComputeType.SMALL, "medium": codebuild.ComputeType.MEDIUM,
    "large": codebuild.ComputeType.LARGE, "xlarge": codebuild.ComputeType.X_LARGE,
    "2xlarge": codebuild.ComputeType.X2_LARGE,
}


def context_files(context_dir: Path) -> list[Path]:
    """The files of the Docker build context that define the image, in a stable order."""
    found: list[Path] = []
    for root, dirs, files in os.walk(context_dir):
        dirs[:] = sorted(d for d in dirs if d not in EXCLUDED_DIRS and not d.endswith(EXCLUDED_SUFFIXES))
        found.extend(Path(root) / name for name in sorted(files) if not name.endswith(EXCLUDED_SUFFIXES))
    return sorted(found, key=lambda p: p.relative_to(context_dir).as_posix())


def source_fingerprint(context_dir: Path) -> str:
    """sha256 over every context file's relative path and content (also the source asset's hash)."""
    if not context_dir.is_dir():
        raise FileNotFoundError(f"{context_dir}: Docker build context of the decision image does not exist")
    digest = hashlib.sha256()
    for path in context_files(context_dir):
        digest.update(path.relative_to(context_dir).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\0")
    return digest.hexdigest()


def build_args_for(build: ImageBuild, accelerator: Accelerator, instance_types: Sequence[str],
                   architecture: Architecture = "x86_64") -> dict[str, str]:
    """The `docker build --build-arg`s: the accelerator's (and arm64's) defaults, with the configured `build_args`
    added.

    GPU: the CUDA builder image and `-DGGML_CUDA=ON` for the CUDA architectures of the instance types the image
    serves (the Dockerfile always keeps its portable CPU flags in front of LLAMA_CMAKE_ARGS).
    """
    args: dict[str, str] = {}
    if architecture == "arm64":
        args = {"LLAMA_PORTABLE_CMAKE_ARGS": ARM64_PORTABLE_CMAKE_ARGS}
    if accelerator == "gpu":
        families = [describe_instance(instance_type).family for instance_type in instance_types]
        args = {"BUILDER_IMAGE": build.cuda_builder_image,
                "LLAMA_CMAKE_ARGS": f"-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES={cuda_architectures(families)}"}
    for key, value in build.build_args.items():
        args[key] = f"{args[key]} {value}" if key in APPENDED_BUILD_ARGS and key in args else value
    return dict(sorted(args.items()))


def image_tag(source_digest: str, base_image: str, accelerator: Accelerator,
              build_args: dict[str, str] | None = None, architecture: Architecture = "x86_64") -> str:
    """`cpu-<hash>` / `cuda-<hash>` (`arm64-cpu-<hash>` on Graviton): changes with the adapter source, base image
    or build args, nothing else."""
    args = json.dumps(build_args or {}, sort_keys=True)
    digest = hashlib.sha256(f"{source_digest}\0{base_image}\0{args}".encode()).hexdigest()
    prefix = "arm64-" if architecture == "arm64" else ""
    return f"{prefix}{'cuda' if accelerator == 'gpu' else 'cpu'}-{digest[:24]}"


# Writes one NUL-terminated `--build-arg=KEY=VALUE` per build arg (values may hold spaces and semicolons); refuses
# control characters, which config validation already refused, in case the variable was edited by hand.
BUILD_ARGS_PARSER = """\
import json, os, sys, unicodedata
for key, value in json.loads(os.environ["DOCKER_BUILD_ARGS_JSON"]).items():
    if any(unicodedata.category(char) == "Cc" for char in key + value):
        sys.exit(f"build arg {key!r}: control characters are refused")
    sys.stdout.write(f"--build-arg={key}={value}\\0")"""


def build_spec() -> codebuild.BuildSpec:
    """One script, so an early `exit 0` (image already there) ends the build successfully.

    The project has no CodeBuild source: the script fetches the context zip itself, so the role needs
    `s3:GetObject` on that one object instead of CDK's bucket-wide read grant. The build args are parsed into a
    file first: `set -e` does not see a failure inside `mapfile < <(...)`, but it does see this redirection.
    """
    script = "\n".join([
        "set -euo pipefail",
        'if aws ecr describe-images --repository-name "$REPOSITORY_NAME" --image-ids imageTag="$IMAGE_TAG" '
        '>/dev/null 2>&1; then echo "$REPOSITORY_URI:$IMAGE_TAG is already in ECR"; exit 0; fi',
        'work="$(mktemp -d)"',
        "python3 - > \"$work/build-args\" <<'PY'",
        BUILD_ARGS_PARSER,
        "PY",
        "mapfile -d '' -t build_args < \"$work/build-args\"",
        'aws s3 cp --only-show-errors "s3://$SOURCE_BUCKET/$SOURCE_KEY" "$work/context.zip"',
        'unzip -q "$work/context.zip" -d "$work/context" && cd "$work/context"',
        # The DLC registry, this stack's registry and an ECR builder image's (a Docker Hub mirror), if any.
        'for registry in "$DLC_REGISTRY" "${REPOSITORY_URI%%/*}" ${BUILDER_REGISTRY:-}; do',
        '  region="${registry#*.dkr.ecr.}"',
        '  aws ecr get-login-password --region "${region%%.*}" '
        '| docker login --username AWS --password-stdin "$registry"',
        "done",
        'docker build --pull --build-arg BASE_IMAGE="$BASE_IMAGE" "${build_args[@]}" '
        '--label org.opencontainers.image.base.name="$BASE_IMAGE" -t "$REPOSITORY_URI:$IMAGE_TAG" .',
        'docker push "$REPOSITORY_URI:$IMAGE_TAG"',
    ])
    return codebuild.BuildSpec.from_object({
        "version": "0.2",
        "env": {"shell": "bash"},
        "phases": {"build": {"commands": [script]}},
    })


class DecisionImage(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, context_dir: Path, registry: DlcRegistry,
                 accelerator: Accelerator, key: kms.IKey, build: ImageBuild,
                 log_settings: LogSettings, instance_types: Sequence[str],
                 architecture: Architecture = "x86_64") -> None:
        super().__init__(scope, construct_id)
        self.architecture = architecture
        self.base_image = registry.image_uri(accelerator, architecture)
        source_digest = source_fingerprint(context_dir)
        self.build_args = build_args_for(build, accelerator, instance_types, architecture)
        builder = _ECR_IMAGE.match(self.build_args.get("BUILDER_IMAGE", ""))
        self.tag = image_tag(source_digest, self.base_image, accelerator, self.build_args, architecture)

        self.repository = ecr.Repository(
            self, "Repository",
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            image_scan_on_push=True,
            encryption=ecr.RepositoryEncryption.KMS,
            encryption_key=key,
            lifecycle_rules=[ecr.LifecycleRule(
                description=f"keep the newest {KEPT_IMAGES} images (rollbacks); tags are content hashes",
                max_image_count=KEPT_IMAGES)],
            removal_policy=RemovalPolicy.RETAIN,
        )
        source = s3_assets.Asset(self, "Context", path=str(context_dir), exclude=ASSET_EXCLUDES,
                                 asset_hash=source_digest, asset_hash_type=AssetHashType.CUSTOM)
        self.build_logs = log_settings.log_group(self, "BuildLogs")
        self.project = codebuild.Project(
            self, "Build",
            description="Builds the SemIf decision image FROM the llama.cpp DLC and pushes it to ECR",
            build_spec=build_spec(),
            environment=codebuild.BuildEnvironment(
                build_image=BUILD_IMAGES[architecture],
                compute_type=COMPUTE_TYPES[build.compute_type],
                privileged=True,  # docker build needs the Docker daemon; this project does nothing else
            ),
            environment_variables={name: codebuild.BuildEnvironmentVariable(value=value) for name, value in {
                "REPOSITORY_URI": self.repository.repository_uri,
                "REPOSITORY_NAME": self.repository.repository_name,
                "DLC_REGISTRY": registry.host,
                "BASE_IMAGE": self.base_image,
                "IMAGE_TAG": self.tag,
                "DOCKER_BUILD_ARGS_JSON": json.dumps(self.build_args),
                "SOURCE_BUCKET": source.s3_bucket_name,
                "SOURCE_KEY": source.s3_object_key,
                **({"BUILDER_REGISTRY": builder[0].split("/")[0]} if builder else {}),
            }.items()},
            encryption_key=key,
            timeout=Duration.minutes(build.timeout_minutes),
            logging=codebuild.LoggingOptions(cloud_watch=codebuild.CloudWatchLoggingOptions(log_group=self.build_logs)),
        )
        self.repository.grant_pull_push(self.project)
        self.project.add_to_role_policy(iam.PolicyStatement(
            sid="ReadBuildContext", actions=["s3:GetObject"],
            resources=[Stack.of(self).format_arn(service="s3", region="", account="",
                                                 resource=source.s3_bucket_name,
                                                 resource_name=source.s3_object_key)]))
        self.project.add_to_role_policy(iam.PolicyStatement(
            sid="PullBaseImage",
            actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
            resources=[registry.repository_arn(architecture)]))
        self.project.add_to_role_policy(iam.PolicyStatement(
            sid="FindExistingImage", actions=["ecr:DescribeImages"], resources=[self.repository.repository_arn]))
        if builder:  # a pull-through cache also creates the repository and imports the image on the first pull
            builder_partition = "aws-cn" if builder["domain"].endswith(".cn") else "aws"
            self.project.add_to_role_policy(iam.PolicyStatement(
                sid="PullBuilderImage",
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability",
                         "ecr:BatchImportUpstreamImage", "ecr:CreateRepository"],
                resources=[f"arn:{builder_partition}:ecr:{builder['region']}:{builder['account']}:repository/"
                           f"{builder['repository']}"]))
        project_id = Stack.of(self).resolve(Stack.of(self).get_logical_id(
            self.project.node.default_child))  # type: ignore[arg-type]
        region, partition = registry.region, registry.partition
        acknowledge(self.project, {
            "AwsSolutions-CB3": "privileged mode is required to run docker build; the project only builds this "
                                "one image from this stack's source asset",
            "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]":
                "CDK's grant on the project's encryption key (this stack's key only): CodeBuild encrypts "
                "build data with data keys",
            "AwsSolutions-IAM5[Action::kms:ReEncrypt*]":
                "CDK's grant on the project's encryption key (this stack's key only)",
            "AwsSolutions-IAM5[Resource::*]":
                "ecr:GetAuthorizationToken (docker login) has no resource-level permissions",
            f"AwsSolutions-IAM5[Resource::arn:{partition}:logs:{region}:<AWS::AccountId>:log-group:/aws/codebuild/"
            f"<{project_id}>:*]":
                "CodeBuild's default log group of this project only (the build logs to its retained group)",
            f"AwsSolutions-IAM5[Resource::arn:{partition}:codebuild:{region}:<AWS::AccountId>:report-group/"
            f"<{project_id}>-*]":
                "CodeBuild's test-report groups of this project only (none are used; CDK adds the grant)",
        })

        self.resource = self._waiter(build, log_settings)
        self.image_uri = self.resource.get_att_string("ImageUri")

    def _waiter(self, build: ImageBuild, log_settings: LogSettings) -> CustomResource:
        """Custom resource that starts the build and completes only when the image is in ECR."""
        start_statement = iam.PolicyStatement(actions=["codebuild:StartBuild"], resources=[self.project.project_arn])
        # The check only reads the build: StartBuild (with a buildspec override) would be code execution in the
        # privileged project, which can push to ECR.
        check_statement = iam.PolicyStatement(actions=["codebuild:BatchGetBuilds"],
                                              resources=[self.project.project_arn])
        image_statement = iam.PolicyStatement(actions=["ecr:DescribeImages"],
                                              resources=[self.repository.repository_arn])
        on_event = HandlerFunction(self, "StartBuild", handler="image_build.on_event",
                                   description="decision image build starter",
                                   statements=[start_statement, image_statement],
                                   log_settings=log_settings)
        is_complete = HandlerFunction(self, "CheckBuild", handler="image_build.is_complete",
                                      description="decision image build waiter",
                                      statements=[check_statement], log_settings=log_settings)
        total = Duration.minutes(build.timeout_minutes + WAITER_MARGIN_MINUTES)
        provider = cr.Provider(
            self, "BuildWaiter",
            on_event_handler=on_event.function,
            is_complete_handler=is_complete.function,
            query_interval=QUERY_INTERVAL,
            total_timeout=total,
            log_group=log_settings.log_group(self, "BuildWaiterLogs"),
            disable_waiter_state_machine_logging=False,
            waiter_state_machine_log_options=cr.LogOptions(
                destination=log_settings.log_group(self, "BuildWaiterStateMachineLogs"),
                level=sfn.LogLevel.ALL, include_execution_data=False),
        )
        acknowledge_provider(provider, [on_event.function, is_complete.function])
        accept_redundant_depends_on(self)
        return CustomResource(
            self, "Image",
            service_token=provider.service_token,
            resource_type="Custom::DecisionImage",
            service_timeout=Duration.minutes(60),
            properties={
                "ProjectName": self.project.project_name,
                "RepositoryName": self.repository.repository_name,
                "RepositoryUri": self.repository.repository_uri,
                "ImageTag": self.tag,
                "BaseImage": self.base_image,
                "BuildArgs": json.dumps(self.build_args),
            },
        )
