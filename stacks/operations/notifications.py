"""Where the alarms go: one SNS topic per environment, encrypted with the stack's data key, as every alarm's action.

Subscriptions come from the config (`notifications.emails`; each address confirms by mail), and an existing topic
(`notifications.topic_arn`, e.g. your paging integration) becomes a second action of every alarm. Publishing to
an encrypted topic needs CloudWatch to use the key: the key policy lets the CloudWatch service principal do so
only for alarms of this stack (aws:SourceAccount and aws:SourceArn, as AWS documents for encrypted topics), and
the topic policy lets it publish under the same conditions.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from ..config.notifications import Notifications

CLOUDWATCH = "cloudwatch.amazonaws.com"
# What SNS asks KMS for when it stores a message published to an encrypted topic.
TOPIC_KEY_ACTIONS = ["kms:Decrypt", "kms:GenerateDataKey"]


class AlarmTopic(Construct):
    """The environment's alarm topic; `notify(alarm)` makes it (and the configured topic) the alarm's actions."""

    def __init__(self, scope: Construct, construct_id: str, *, stack_name: str, key: kms.Key,
                 notifications: Notifications) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        # A fixed name, so that the key policy can name the topic without a reference (the topic refers to the key).
        self.topic_name = f"{stack_name}-alarms"
        self.topic = sns.Topic(self, "Topic", topic_name=self.topic_name, display_name=f"{stack_name} alarms",
                               master_key=key, enforce_ssl=True)
        for address in notifications.emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(address))
        alarms = stack.format_arn(service="cloudwatch", resource="alarm", resource_name=f"{stack_name}-*",
                                  arn_format=ArnFormat.COLON_RESOURCE_NAME)
        from_our_alarms = {"StringEquals": {"aws:SourceAccount": stack.account}, "ArnLike": {"aws:SourceArn": alarms}}
        key.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsPublishToTheAlarmTopic", principals=[iam.ServicePrincipal(CLOUDWATCH)],
            actions=TOPIC_KEY_ACTIONS, resources=["*"], conditions={
                **from_our_alarms,
                "StringEquals": {"aws:SourceAccount": stack.account,
                                 "kms:EncryptionContext:aws:sns:topicArn": stack.format_arn(
                                     service="sns", resource=self.topic_name,
                                     arn_format=ArnFormat.NO_RESOURCE_NAME)}}))
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsOfThisStack", principals=[iam.ServicePrincipal(CLOUDWATCH)], actions=["sns:Publish"],
            resources=[self.topic.topic_arn], conditions=from_our_alarms))
        self.actions: list[cloudwatch.IAlarmAction] = [actions.SnsAction(self.topic)]
        if notifications.topic_arn:
            existing = sns.Topic.from_topic_arn(self, "ConfiguredTopic", notifications.topic_arn)
            self.actions.append(actions.SnsAction(existing))

    def notify(self, alarm: cloudwatch.Alarm) -> None:
        alarm.add_alarm_action(*self.actions)
