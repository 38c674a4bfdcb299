"""The alert topic (KMS, SSL only, e-mail subscriptions) and the Slack webhook secret."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct


class Alerts(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: kms.IKey,
        emails: Sequence[str],
        slack_secret_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(
            self, "Topic", display_name="CostGuard alerts", master_key=key, enforce_ssl=True
        )
        # enforce_ssl leaves a topic policy holding only its Deny, which replaces SNS's
        # default policy: without this Allow no CloudWatch alarm could publish here. Only
        # alarms of this account may (the confused-deputy guard AWS recommends).
        stack = cdk.Stack.of(self)
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsOfThisAccountToPublish",
                actions=["sns:Publish"],
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                resources=[self.topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": (
                            f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:*"
                        )
                    },
                },
            )
        )
        for email in emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        # Created with a random placeholder: the webhook URL is put in afterwards
        # (see the README), so it never appears in a template, a context value or a log.
        self.slack_webhook = secretsmanager.Secret(
            self,
            "SlackWebhook",
            secret_name=slack_secret_name,
            description="CostGuard: Slack incoming-webhook URL (replace the placeholder value)",
            encryption_key=key,
        )
