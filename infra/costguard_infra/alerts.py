"""The alert topic (KMS, SSL only, e-mail subscriptions) and the Slack webhook secret."""

from __future__ import annotations

from collections.abc import Sequence

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
