"""The Organization hub: a FIFO work queue, the fan-out that fills it, the consumers that
scan one account-region per message, the act queue and consumer that run one guard in one
member account per message, and the hub's only ways into member accounts.

Deployed only with ``orgAccounts`` (a single-account stack holds none of it). The design is
fixed by the contract with the handlers (``costguard.handlers.org``):

- the fan-out runs on the scan's schedule, plans the scheduled time and sends one message
  per (account, region) to the FIFO queue: ``MessageGroupId`` per account (capped
  concurrency per account), ``MessageDeduplicationId`` from the producer (time, account,
  region), so content-based deduplication is off;
- the consumers read it through an event source with partial-batch failures and a
  maximum concurrency (the overall cap), and a message that failed ``orgMaxReceives``
  times moves to the dead-letter queue, which alarms;
- the consumer role has a fixed name (``costguard-hub-scan``), which the member stack's
  trust policy names, and may assume the member read role inside the Organization only;
- the guards (``costguard.handlers.org_act``): each guard's schedule invokes the fan-out
  with ``{"guard": name}``, which sends one message per guarded account to a second FIFO
  queue (the act queue); the act consumer (role ``costguard-hub-act``, also named in the
  member trust) takes one message per invocation and may assume the member act role, and
  no other, inside the Organization only. No guard has a Lambda of its own in the hub.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from costguard.domain.org_roles import OrgRoles
from costguard.env import Env
from costguard.guards import SPECS, guard_ledger_actions
from costguard.iam import (
    FINDINGS_LEDGER_ACTIONS,
    LEDGER_ACTIONS,
    hub_act_permissions,
    hub_assume_permissions,
    org_discovery_permissions,
)
from costguard.telemetry import Metrics
from costguard_infra.grants import grant_encrypted_queue_writes
from costguard_infra.guard_function import GuardFunction
from costguard_infra.schedules import GuardSchedule

if TYPE_CHECKING:
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_logs as logs
    from aws_cdk import aws_sns as sns

    from costguard_infra.config import CostGuardConfig

#: Handlers of ``costguard.handlers.org`` (names fixed by the contract).
FANOUT_HANDLER = "costguard.handlers.org.fanout_handler"
CONSUMER_HANDLER = "costguard.handlers.org.consumer_handler"
ACT_HANDLER = "costguard.handlers.org_act.handler"
#: SQS's largest batch for a FIFO event source.
BATCH_SIZE = 10
#: AWS recommends a queue's visibility timeout of at least six times the function's
#: timeout: Lambda may retry a throttled batch while its messages are still invisible.
VISIBILITY_PER_TIMEOUT = 6
#: A work item is worth nothing a day later: each scheduled time's slices are superseded
#: by the next ones (accrual runs from the watermark, so nothing is lost), and a backlog
#: after an outage stays bounded. The dead letters are kept for inspection and redrive.
WORK_RETENTION = cdk.Duration.days(1)
DEAD_LETTER_RETENTION = cdk.Duration.days(14)
#: The fan-out sends batches of ten (``SendMessageBatch`` is authorized as SendMessage).
SEND_ACTIONS = ("sqs:SendMessage",)
#: One guard in one account per invocation: each run has the Lambda's whole time (the
#: stale-object sweep stops itself before the timeout and resumes next run).
ACT_BATCH_SIZE = 1
#: Under the executor's 15-minute claim lease (``services.executor.ACTION_LEASE``), as the
#: single-account stale-objects guard: a run never outlives the claims it took.
ACT_TIMEOUT_MINUTES = 10


def act_ledger_actions() -> tuple[str, ...]:
    """What the act consumer may do on the ledger table: what any guard it runs may do
    (``guard_ledger_actions``), and the findings' actions, which it needs itself to
    record an account it cannot enter, whatever guards ship."""
    actions = list(guard_ledger_actions())
    actions += [a for a in FINDINGS_LEDGER_ACTIONS if a not in actions]
    return tuple(actions)


def fifo_work_queue(
    scope: Construct,
    name: str,
    *,
    key: kms.IKey,
    visibility: cdk.Duration,
    max_receives: int,
) -> tuple[sqs.Queue, sqs.Queue]:
    """A FIFO queue of work items (``name``) and its FIFO dead-letter queue
    (``<name>DeadLetters``): the stack key, TLS only, producer-set deduplication ids, a
    day's retention (the next scheduled time supersedes an item), dead letters kept 14
    days for inspection and redrive."""
    dead_letters = sqs.Queue(
        scope,
        f"{name}DeadLetters",
        fifo=True,
        encryption=sqs.QueueEncryption.KMS,
        encryption_master_key=key,
        enforce_ssl=True,
        retention_period=DEAD_LETTER_RETENTION,
    )
    queue = sqs.Queue(
        scope,
        name,
        fifo=True,
        content_based_deduplication=False,
        encryption=sqs.QueueEncryption.KMS,
        encryption_master_key=key,
        enforce_ssl=True,
        visibility_timeout=visibility,
        retention_period=WORK_RETENTION,
        dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=max_receives, queue=dead_letters),
    )
    return queue, dead_letters


def hub_acknowledgements(config: CostGuardConfig) -> dict[str, str]:
    """The cdk-nag findings the hub adds, and why (tests/infra/test_hub_stack.py proves
    each is needed in Organization mode; none applies to a single-account stack)."""
    if not config.org_mode:
        return {}
    found = {
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::*:role/{config.org_member_role}]": (
            f"the hub's scan consumers (role {OrgRoles.HUB_SCAN}) assume the member read role "
            f"`{config.org_member_role}` in whichever account a work item names, and only in "
            f"the Organization {config.org_id} (aws:ResourceOrgID condition)"
        ),
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::*:role/{OrgRoles.MEMBER_ACT}]": (
            f"the hub's act consumers (role {OrgRoles.HUB_ACT}) assume the member act role "
            f"`{OrgRoles.MEMBER_ACT}` (tag-conditioned actions only) in whichever account a "
            f"guard run names, and only in the Organization {config.org_id} "
            "(aws:ResourceOrgID condition)"
        ),
    }
    if config.org_discover:
        resource = f"arn:<AWS::Partition>:organizations::*:account/{config.org_id}/*"
        found[f"AwsSolutions-IAM5[Resource::{resource}]"] = (
            "the fan-out reads the opt-out tag of the Organization's accounts, whose ARNs "
            "name the management account, which the hub need not be (read-only)"
        )
    return found


class OrgHub(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: CostGuardConfig,
        code: lambda_.Code,
        layer: lambda_.ILayerVersion,
        key: kms.IKey,
        table: dynamodb.ITable,
        topic: sns.ITopic,
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        timeout = cdk.Duration.seconds(config.scan_timeout_seconds)
        # The producer sets MessageDeduplicationId (time/account/region): two work items
        # with the same body for different times must both be delivered.
        self.queue, self.dead_letters = fifo_work_queue(
            self,
            "Work",
            key=key,
            visibility=cdk.Duration.seconds(VISIBILITY_PER_TIMEOUT * config.scan_timeout_seconds),
            max_receives=config.org_max_receives,
        )
        hub_environment = {**environment, **config.org_environment()}
        self.consumer = GuardFunction(
            self,
            "Consumer",
            description="CostGuard hub consumer: one account-region per work item, exactly once",
            handler=CONSUMER_HANDLER,
            code=code,
            layer=layer,
            key=key,
            environment={**hub_environment, Env.SERVICE_NAME: Metrics.ORG_CONSUMER_SERVICE},
            permissions=hub_assume_permissions(config.org_member_role, config.org_id),
            memory_mb=config.scan_memory_mb,
            timeout=timeout,
            log_retention=log_retention,
            role_name=OrgRoles.HUB_SCAN,
        )
        self.consumer.function.add_event_source(
            event_sources.SqsEventSource(
                self.queue,
                batch_size=BATCH_SIZE,
                report_batch_item_failures=True,
                max_concurrency=config.org_max_concurrency,
            )
        )
        self._act(
            config=config,
            code=code,
            layer=layer,
            key=key,
            environment=hub_environment,
            log_retention=log_retention,
        )
        self.fanout = GuardFunction(
            self,
            "Fanout",
            description="CostGuard hub fan-out: one work item per account-region per scheduled "
            "time, one guard run per account per guard's scheduled time",
            handler=FANOUT_HANDLER,
            code=code,
            layer=layer,
            key=key,
            environment={
                **hub_environment,
                Env.QUEUE_URL: self.queue.queue_url,
                Env.ACT_QUEUE_URL: self.act_queue.queue_url,
                Env.SERVICE_NAME: Metrics.ORG_FANOUT_SERVICE,
            },
            permissions=org_discovery_permissions(config.org_id) if config.org_discover else (),
            memory_mb=config.scan_memory_mb,
            timeout=timeout,
            log_retention=log_retention,
        )
        # Exactly the send (no purge, no receive) to both queues, and the queues' key's
        # data keys for it.
        self.fanout.role.add_to_policy(
            iam.PolicyStatement(
                actions=list(SEND_ACTIONS),
                resources=[self.queue.queue_arn, self.act_queue.queue_arn],
            )
        )
        grant_encrypted_queue_writes(self.queue, self.fanout.role)
        grant_encrypted_queue_writes(self.act_queue, self.fanout.role)
        # SQS moves a work item to the dead-letter queue when the consumers receive it once
        # too often, in their receive: their role must be able to use the dead-letter
        # queue's key, not only by way of another grant on the same key (the topic's).
        grant_encrypted_queue_writes(self.dead_letters, self.consumer.role)
        # Both read and commit the ledger (slices, plans, aggregation) and publish alerts.
        for fn in (self.consumer, self.fanout):
            table.grant(fn.role, *LEDGER_ACTIONS)
            topic.grant_publish(fn.role)
        # The guards' claims, warnings, audit trail, sweep state and findings are kept in
        # the hub's ledger (under each account's scope); their warnings go to its topic.
        table.grant(self.act_consumer.role, *act_ledger_actions())
        topic.grant_publish(self.act_consumer.role)
        # The scan ticks' schedule alone in its group: the guards' schedules invoke the
        # fan-out too, so its invocations no longer tell that the scan is running; the
        # group's invocation attempts do (Monitoring's heartbeat).
        self.scan_schedules = scheduler.ScheduleGroup(
            self, "ScanScheduleGroup", removal_policy=cdk.RemovalPolicy.DESTROY
        )
        self.schedule = GuardSchedule(
            self,
            "FanoutSchedule",
            function=self.fanout.function,
            every_minutes=config.scan_rate_minutes,
            dead_letter_queue=self.fanout.dead_letter_queue,
            key=key,
            description=f"CostGuard Organization fan-out every {config.scan_rate}",
            group=self.scan_schedules,
        )
        cdk.CfnOutput(self, "WorkQueueUrl", value=self.queue.queue_url)
        cdk.CfnOutput(self, "WorkDeadLetterQueueUrl", value=self.dead_letters.queue_url)
        cdk.CfnOutput(
            self,
            "HubScanRoleArn",
            description="The role member accounts trust (costguard-member-read)",
            value=self.consumer.role.role_arn,
        )
        cdk.CfnOutput(self, "ActQueueUrl", value=self.act_queue.queue_url)
        cdk.CfnOutput(self, "ActDeadLetterQueueUrl", value=self.act_dead_letters.queue_url)
        cdk.CfnOutput(
            self,
            "HubActRoleArn",
            description=f"The role member accounts trust ({OrgRoles.MEMBER_ACT})",
            value=self.act_consumer.role.role_arn,
        )

    def _act(
        self,
        *,
        config: CostGuardConfig,
        code: lambda_.Code,
        layer: lambda_.ILayerVersion,
        key: kms.IKey,
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
    ) -> None:
        """The guards' queue and its consumer: one guard in one member account per message,
        acting through the member act role."""
        # The producer sets MessageDeduplicationId (time/account/act/guard).
        self.act_queue, self.act_dead_letters = fifo_work_queue(
            self,
            "Act",
            key=key,
            visibility=cdk.Duration.minutes(VISIBILITY_PER_TIMEOUT * ACT_TIMEOUT_MINUTES),
            max_receives=config.org_max_receives,
        )
        self.act_consumer = GuardFunction(
            self,
            "ActConsumer",
            description="CostGuard hub guards: one guard in one member account per message, "
            "through its act role",
            handler=ACT_HANDLER,
            code=code,
            layer=layer,
            key=key,
            environment={**environment, Env.SERVICE_NAME: Metrics.ORG_ACT_SERVICE},
            permissions=hub_act_permissions(config.org_id),
            # Whichever guard a message names runs here: the largest any guard needs.
            memory_mb=max(spec.memory_mb for spec in SPECS.values()),
            timeout=cdk.Duration.minutes(ACT_TIMEOUT_MINUTES),
            log_retention=log_retention,
            role_name=OrgRoles.HUB_ACT,
        )
        self.act_consumer.function.add_event_source(
            event_sources.SqsEventSource(
                self.act_queue,
                batch_size=ACT_BATCH_SIZE,
                report_batch_item_failures=True,
                max_concurrency=config.org_max_concurrency,
            )
        )
        # SQS moves a failed guard run to the dead-letter queue in the consumer's receive.
        grant_encrypted_queue_writes(self.act_dead_letters, self.act_consumer.role)
