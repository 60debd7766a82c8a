"""S3 locations and IAM for SageMaker Batch Transform on the decision model (issue 14), when configured.

A transform job runs the decision model's container on its own instances and acts with the model's execution
role: SageMaker reads the input objects, splits them by line, posts mini-batches to the container and writes the
assembled output, all with that role. So the role gets, beside what the endpoint already needs: list and read
`input/`, write `output/`, the data key that encrypts both, and the log group and metric namespace SageMaker
uses for transform jobs. The container itself never touches S3, so network isolation stays on.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from ..config.endpoint import BatchTransform
from ..security.nag import acknowledge, logical_id
from .data_bucket import BATCH, DataBucket

INPUT_PREFIX = "input/"
OUTPUT_PREFIX = "output/"
TRANSFORM_LOG_GROUP = "/aws/sagemaker/TransformJobs"  # SageMaker's own, shared by every transform job of the account
TRANSFORM_METRICS_NAMESPACE = "/aws/sagemaker/TransformJobs"


class BatchLocations(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, key: kms.Key, settings: BatchTransform) -> None:
        super().__init__(scope, construct_id)
        self.key = key
        self.settings = settings
        self.storage = DataBucket(self, "Data", key=key, holding=BATCH, expire_days=settings.expire_days)
        self.bucket = self.storage.bucket
        self.input_uri = self.bucket.s3_url_for_object(INPUT_PREFIX)
        self.output_uri = self.bucket.s3_url_for_object(OUTPUT_PREFIX)

    def statements(self) -> list[iam.PolicyStatement]:
        stack = Stack.of(self)
        log_group = stack.format_arn(service="logs", resource="log-group", resource_name=f"{TRANSFORM_LOG_GROUP}:*",
                                     arn_format=ArnFormat.COLON_RESOURCE_NAME)
        return [
            iam.PolicyStatement(sid="ListBatchInput", actions=["s3:ListBucket"], resources=[self.bucket.bucket_arn],
                                conditions={"StringLike": {"s3:prefix": f"{INPUT_PREFIX}*"}}),
            iam.PolicyStatement(sid="ReadBatchInput", actions=["s3:GetObject"],
                                resources=[self.bucket.arn_for_objects(f"{INPUT_PREFIX}*")]),
            iam.PolicyStatement(sid="WriteBatchOutput", actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                                resources=[self.bucket.arn_for_objects(f"{OUTPUT_PREFIX}*")]),
            iam.PolicyStatement(sid="UseTheBatchDataKey", actions=["kms:Decrypt", "kms:GenerateDataKey"],
                                resources=[self.key.key_arn]),
            iam.PolicyStatement(sid="WriteTransformLogs",
                                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
                                         "logs:DescribeLogStreams"], resources=[log_group]),
            iam.PolicyStatement(sid="PutTransformMetrics", actions=["cloudwatch:PutMetricData"], resources=["*"],
                                conditions={"StringEquals": {"cloudwatch:namespace": TRANSFORM_METRICS_NAMESPACE}}),
        ]

    def grant(self, policy: iam.Policy) -> None:
        """Give the decision model's execution policy what its transform jobs need, each wildcard acknowledged."""
        policy.add_statements(*self.statements())
        bucket = logical_id(self.bucket)
        stack = Stack.of(self)
        partition, region = stack.resolve(stack.partition), stack.resolve(stack.region)
        acknowledge(policy, {
            f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/{INPUT_PREFIX}*]":
                "a transform job reads every object of the input prefix it is given; the names are the user's",
            f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/{OUTPUT_PREFIX}*]":
                "a transform job writes one output object per input object under the output prefix it is given",
            f"AwsSolutions-IAM5[Resource::arn:{partition}:logs:{region}:<AWS::AccountId>:log-group:"
            f"{TRANSFORM_LOG_GROUP}:*]":
                "SageMaker writes transform job logs to its own log group, one stream per job and instance, named "
                "when the job starts",
        })
