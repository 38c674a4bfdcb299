"""One CostGuard Lambda: code, layer, role from declared permissions, logs, tracing, DLQ."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from costguard_infra.bundling import ARCHITECTURE, RUNTIME
from costguard_infra.grants import grant_encrypted_queue_writes

if TYPE_CHECKING:
    from costguard.iam import Permission


def policy_statements(
    permissions: Iterable[Permission], stack: cdk.Stack
) -> list[iam.PolicyStatement]:
    """IAM statements from the adapters' declarations, with account and partition filled in."""
    statements = []
    for p in permissions:
        resources = [
            r.replace("{partition}", stack.partition).replace("{account}", stack.account)
            for r in p.resources
        ]
        statements.append(
            iam.PolicyStatement(
                sid=None,
                actions=list(p.actions),
                resources=resources,
                conditions=dict(p.conditions) or None,
            )
        )
    return statements


class GuardFunction(Construct):
    """A Lambda with everything a production function needs, and nothing it does not."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: str,
        code: lambda_.Code,
        layer: lambda_.ILayerVersion,
        key: kms.IKey,
        environment: Mapping[str, str],
        permissions: Iterable[Permission],
        description: str,
        memory_mb: int = 512,
        timeout: cdk.Duration | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.THREE_MONTHS,
        reserved_concurrency: int | None = None,
        role_name: str | None = None,
        function_name: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=log_retention,
            encryption_key=key,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"CostGuard {construct_id}: least privilege, derived from costguard.iam",
            # Named only where another account's trust policy names it (the hub's roles).
            role_name=role_name,
        )
        for statement in policy_statements(permissions, stack):
            self.role.add_to_policy(statement)
        self.log_group.grant_write(self.role)
        # Lambda writes failed asynchronous events to the DLQ with the function's role.
        grant_encrypted_queue_writes(self.dead_letter_queue, self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            # Named only where another resource must name it without referring to it (the
            # answer Lambda names the guards', which refer to its URL: no cycle).
            function_name=function_name,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler,
            code=code,
            layers=[layer],
            role=self.role,
            memory_size=memory_mb,
            timeout=timeout or cdk.Duration.minutes(5),
            environment=dict(environment),
            environment_encryption=key,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            dead_letter_queue=self.dead_letter_queue,
            retry_attempts=2,
            max_event_age=cdk.Duration.hours(1),
            reserved_concurrent_executions=reserved_concurrency,
        )
