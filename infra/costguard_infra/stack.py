"""The CostGuard stack: it composes constructs and wires grants, nothing else."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as sns_subscriptions

from costguard.adapters.launched import READS as LAUNCH_READS
from costguard.config_spec import BY_NAME, rate_minutes
from costguard.domain.alerts import AlertKind
from costguard.domain.idle import Heartbeat
from costguard.domain.org_roles import OrgRoles
from costguard.env import Env
from costguard.guards import SPECS
from costguard.iam import (
    CATALOG_PARTITION,
    CATALOG_STORE_ACTIONS,
    LAUNCH_LEDGER_ACTIONS,
    LEDGER_ACTIONS,
    exempt_tag_permissions,
    hub_assume_permissions,
    refresh_permissions,
    scan_permissions,
)
from costguard.services.answers import SLACK_REQUESTS, USED_LINKS
from costguard.telemetry import Metrics
from costguard_agent.lifecycle import on_start_content
from costguard_infra.alerts import Alerts
from costguard_infra.bundling import lambda_code, powertools_layer
from costguard_infra.dashboard import Dashboard
from costguard_infra.guard_function import GuardFunction
from costguard_infra.hub import OrgHub
from costguard_infra.launch_events import (
    LaunchRules,
    default_bus_arn,
    encrypted_dead_letters,
    lambda_target,
)
from costguard_infra.ledger import Ledger
from costguard_infra.monitoring import Monitoring
from costguard_infra.schedules import GuardSchedule

if TYPE_CHECKING:
    from constructs import Construct

    from costguard_infra.config import CostGuardConfig

#: How the deployed scan reads SageMaker tags and whether it lists Studio apps: one value
#: for the Lambda's environment and for the permissions it is granted.
SAGEMAKER_TAGS: str = BY_NAME["sagemaker_tags"].default
SAGEMAKER_STUDIO: bool = BY_NAME["sagemaker_studio"].default
#: Alert kinds posted to Slack (all of them; a filter policy keeps the door open to routing).
SLACK_KINDS = tuple(k.value for k in AlertKind)
FUNCTIONS_DIR = Path(__file__).resolve().parents[2] / "functions"
LAUNCH_HANDLER = "costguard.handlers.on_launch.handler"
ANSWER_HANDLER = "costguard.handlers.answer.handler"
#: What the answer endpoint does on the ledger: once-only records (``put_once``) and their
#: status (``status``), in its two partitions only (``ONCE#<namespace>``).
#: Slack requests are recorded once (a conditional put: a replay fails it); a used link is
#: also read, before its answer is handed on.
ANSWER_LEDGER_ACTIONS = {
    f"ONCE#{SLACK_REQUESTS}": ("dynamodb:PutItem",),
    f"ONCE#{USED_LINKS}": ("dynamodb:GetItem", "dynamodb:PutItem"),
}
#: Why the answer endpoint's Function URL is public (``AuthType: NONE``).
PUBLIC_URL_REASON = (
    "Slack's interactivity requests and mail clients cannot sign AWS requests (SigV4); every "
    "request is verified by the handler instead: Slack's HMAC-SHA256 signature over "
    "v0:timestamp:body (5-minute window, replays refused), or the e-mail link's HMAC token "
    "(24 hours at most, single use); reserved concurrency bounds a flood"
)


class CostGuardStack(cdk.Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: CostGuardConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description="CostGuard: serverless cost guard for ML teams",
            **kwargs,
        )
        self.config = config
        self.key = kms.Key(
            self,
            "Key",
            alias="alias/costguard",
            description="CostGuard: ledger, alert topic, queues, logs and secrets",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        self._allow_services_to_use_key()
        self.ledger = Ledger(self, "Ledger", key=self.key)
        self.alerts = Alerts(
            self,
            "Alerts",
            key=self.key,
            emails=config.alert_emails,
            slack_secret_name=config.slack_webhook_secret_name,
        )
        code = lambda_code(FUNCTIONS_DIR)
        layer = powertools_layer(self, "Powertools")
        # One account: the scan Lambda. An Organization: the hub's fan-out and consumers
        # instead, which scan every account-region (the hub's own account too, through its
        # member read role) and roll the projects up across accounts.
        self.scan: GuardFunction | None = None
        self.hub: OrgHub | None = None
        #: The Lambdas that write the projects' figures (the dashboard reads their logs).
        scanners: list[tuple[str, GuardFunction]]
        if not config.org_mode:
            self.scan = GuardFunction(
                self,
                "Scan",
                description="CostGuard scan: inventory, price, attribute, ledger, budgets",
                handler="costguard.handlers.scan.handler",
                code=code,
                layer=layer,
                key=self.key,
                environment=self.scan_environment(),
                permissions=scan_permissions(
                    cost_explorer=config.cost_explorer,
                    sagemaker_tags=SAGEMAKER_TAGS,
                    sagemaker_studio=SAGEMAKER_STUDIO,
                ),
                memory_mb=config.scan_memory_mb,
                timeout=cdk.Duration.seconds(config.scan_timeout_seconds),
                log_retention=_retention(config.log_retention_days),
            )
            self.ledger.table.grant(self.scan.role, *LEDGER_ACTIONS)
            self.alerts.topic.grant_publish(self.scan.role)
            scanners = [("Scan", self.scan)]
        else:
            self.hub = OrgHub(
                self,
                "OrgHub",
                config=config,
                code=code,
                layer=layer,
                key=self.key,
                table=self.ledger.table,
                topic=self.alerts.topic,
                environment=self.scan_environment(),
                log_retention=_retention(config.log_retention_days),
            )
            scanners = [("OrgFanout", self.hub.fanout), ("OrgConsumer", self.hub.consumer)]
        self.slack = GuardFunction(
            self,
            "SlackNotifier",
            description="CostGuard Slack notifier: alert topic -> Block Kit -> incoming webhook",
            handler="costguard.handlers.slack_notifier.handler",
            code=code,
            layer=layer,
            key=self.key,
            environment={
                Env.SLACK_SECRET_NAME: self.alerts.slack_webhook.secret_name,
                Env.SERVICE_NAME: "costguard-slack",
            },
            permissions=(),
            memory_mb=256,
            timeout=cdk.Duration.minutes(3),
            log_retention=_retention(config.log_retention_days),
        )
        self.alerts.slack_webhook.grant_read(self.slack.role)
        self.slack_signing: secretsmanager.Secret | None = None
        if config.answers:
            # Created with a random placeholder, like the webhook: the Slack app's signing
            # secret is put in afterwards (docs/deploy.md), never in a template or context.
            self.slack_signing = secretsmanager.Secret(
                self,
                "SlackSigningSecret",
                secret_name=config.slack_signing_secret_name,
                description="CostGuard: the Slack app's signing secret (replace the placeholder)",
                encryption_key=self.key,
            )
            self.slack_signing.grant_read(self.slack.role)
            self.slack.function.add_environment(
                Env.SLACK_SIGNING_SECRET, self.slack_signing.secret_name
            )
        self.alerts.topic.add_subscription(
            sns_subscriptions.LambdaSubscription(
                self.slack.function,
                dead_letter_queue=self.slack.dead_letter_queue,
                filter_policy={
                    "kind": sns.SubscriptionFilter.string_filter(allowlist=list(SLACK_KINDS))
                },
            )
        )
        # One account: one actuator Lambda per guard, its own role built only from that
        # guard's declarations (its reads, and its actuators' tag-conditioned mutations),
        # never the scan's, and a schedule that invokes it by name. An Organization: no
        # guard Lambda in the hub; each guard's schedule (same rate, same name) invokes
        # the fan-out, which sends one run per member account to the hub's act consumer,
        # which acts through each account's member act role (the hub's own account too,
        # when it is listed).
        self.guards: dict[str, GuardFunction] = {}
        #: With answers, each guard Lambda's name, fixed here (see guard_function_name).
        self.guard_names: dict[str, str] = {}
        for spec in SPECS.values():
            every = (
                rate_minutes(getattr(config, spec.rate_setting))
                if spec.rate_setting
                else spec.every_minutes
            )
            if self.hub is not None:
                GuardSchedule(
                    self,
                    f"Guard{spec.construct_id}Schedule",
                    function=self.hub.fanout.function,
                    every_minutes=every,
                    dead_letter_queue=self.hub.fanout.dead_letter_queue,
                    key=self.key,
                    description=(
                        f"CostGuard {spec.name} in every member account every {every} minutes"
                    ),
                    payload={"guard": spec.name},
                )
                continue
            if config.answers:
                self.guard_names[spec.name] = guard_function_name(self.stack_name, spec.name)
            fn = GuardFunction(
                self,
                f"Guard{spec.construct_id}",
                function_name=self.guard_names.get(spec.name),
                description=f"CostGuard {spec.name}: {spec.description}",
                handler="costguard.handlers.act.handler",
                code=code,
                layer=layer,
                key=self.key,
                environment={
                    **self.scan_environment(),
                    **self.answer_variables(),
                    Env.GUARD: spec.name,
                    Env.SERVICE_NAME: f"costguard-{spec.name}",
                },
                # With answers, keep and exempt write costguard:exempt (and no other new
                # tag) where the guard's actuators write their warning tag.
                permissions=(
                    *spec.permissions(),
                    *(exempt_tag_permissions(spec.permissions()) if config.answers else ()),
                ),
                memory_mb=spec.memory_mb,
                timeout=cdk.Duration.minutes(spec.timeout_minutes),
                log_retention=_retention(config.log_retention_days),
            )
            self.ledger.table.grant(fn.role, *spec.ledger_actions())
            self.alerts.topic.grant_publish(fn.role)
            GuardSchedule(
                self,
                f"Guard{spec.construct_id}Schedule",
                function=fn.function,
                every_minutes=every,
                dead_letter_queue=fn.dead_letter_queue,
                key=self.key,
                description=f"CostGuard {spec.name} every {every} minutes",
                payload={"guard": spec.name},
            )
            self.guards[spec.name] = fn
        # The weekly price refresh: the only role that may call the Price List API, and it
        # may touch only the catalog's items of the ledger table.
        self.refresh = GuardFunction(
            self,
            "PriceRefresh",
            description="CostGuard price refresh: AWS Price List API -> the stored price catalog",
            handler="costguard.handlers.refresh.handler",
            code=code,
            layer=layer,
            key=self.key,
            environment={**self.scan_environment(), Env.SERVICE_NAME: Metrics.REFRESH_SERVICE},
            permissions=refresh_permissions(),
            memory_mb=256,
            timeout=cdk.Duration.minutes(10),
            log_retention=_retention(config.log_retention_days),
        )
        self.refresh.role.add_to_policy(
            iam.PolicyStatement(
                actions=list(CATALOG_STORE_ACTIONS),
                resources=[self.ledger.table.table_arn],
                conditions={
                    "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [CATALOG_PARTITION]}
                },
            )
        )
        self.key.grant(self.refresh.role, "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*")
        GuardSchedule(
            self,
            "PriceRefreshSchedule",
            function=self.refresh.function,
            every_minutes=config.price_refresh_minutes,
            dead_letter_queue=self.refresh.dead_letter_queue,
            key=self.key,
            description=f"CostGuard price refresh every {config.price_refresh_rate}",
        )
        if self.scan is not None:
            GuardSchedule(
                self,
                "ScanSchedule",
                function=self.scan.function,
                every_minutes=config.scan_rate_minutes,
                dead_letter_queue=self.scan.dead_letter_queue,
                key=self.key,
                description=f"CostGuard scan every {config.scan_rate}",
            )
        self.on_launch: GuardFunction | None = None
        if config.launch_alerts:
            self._launch_alerts(code, layer)
        self.answer: GuardFunction | None = None
        if config.answers:
            self._answers(code, layer)
        guard_lambdas = [(f"Guard{SPECS[n].construct_id}", f) for n, f in self.guards.items()]
        #: The Lambdas that act (the dashboard reads their savings from their logs).
        actors: list[tuple[str, GuardFunction]] = (
            [("OrgActConsumer", self.hub.act_consumer)] if self.hub is not None else []
        )
        Monitoring(
            self,
            "Monitoring",
            functions=[
                *scanners,
                ("SlackNotifier", self.slack),
                ("PriceRefresh", self.refresh),
                *guard_lambdas,
                *actors,
                *([("OnLaunch", self.on_launch)] if self.on_launch is not None else []),
                *([("Answer", self.answer)] if self.answer is not None else []),
            ],
            topic=self.alerts.topic,
            scan_every_minutes=config.scan_rate_minutes,
            scan_schedules=self.hub.scan_schedules if self.hub is not None else None,
            dead_letter_queues=[
                *(
                    [
                        (
                            "LaunchEventsUndelivered",
                            self.launch_dead_letters,
                            "CostGuard: launch events EventBridge could not deliver to the "
                            "on-launch Lambda; see the dead-letter queue",
                        )
                    ]
                    if self.on_launch is not None
                    else []
                ),
                *(
                    [
                        (
                            "OrgWorkDeadLetters",
                            self.hub.dead_letters,
                            "CostGuard hub: work items failed orgMaxReceives times (an account "
                            "or region is not being scanned); see the dead-letter queue",
                        ),
                        (
                            "OrgActDeadLetters",
                            self.hub.act_dead_letters,
                            "CostGuard hub: guard runs failed orgMaxReceives times (a guard did "
                            "not act in a member account); see the act dead-letter queue",
                        ),
                    ]
                    if self.hub is not None
                    else []
                ),
            ],
        )
        dashboard = Dashboard(
            self,
            "Dashboard",
            projects=sorted(config.projects),
            scan_logs=[fn.log_group for _name, fn in scanners],
            action_logs=[fn.log_group for _name, fn in (*guard_lambdas, *actors)],
            price_catalog_max_age_days=config.price_catalog_max_age_days,
        )
        if self.hub is not None:
            dashboard.add_org_widgets(
                queue=self.hub.queue,
                dead_letters=self.hub.dead_letters,
                consumer=self.hub.consumer.function,
            )
            dashboard.add_act_widgets(
                queue=self.hub.act_queue,
                dead_letters=self.hub.act_dead_letters,
                consumer=self.hub.act_consumer.function,
            )
        self._notebook_heartbeat()
        cdk.CfnOutput(self, "LedgerTable", value=self.ledger.table.table_name)
        cdk.CfnOutput(self, "AlertTopic", value=self.alerts.topic.topic_arn)
        cdk.CfnOutput(self, "SlackWebhookSecret", value=self.alerts.slack_webhook.secret_name)

    def _launch_alerts(self, code: lambda_.Code, layer: lambda_.ILayerVersion) -> None:
        """The on-launch Lambda and the rules that invoke it (docs/launch-alerts.md).

        Read-only on the launched resource (``adapters.launched.READS``), publish to the
        alert topic, and on the ledger only what one launch's alerts need. In an
        Organization hub it also enters member accounts through their read role (named
        ``costguard-hub-launch``, which the member read role trusts), and the default bus
        admits the Organization's forwarded launch events.
        """
        config = self.config
        org = self.hub is not None
        environment = {
            **self.scan_environment(),
            **(config.org_environment() if org else {}),
            Env.SERVICE_NAME: Metrics.LAUNCH_SERVICE,
        }
        permissions = (
            *LAUNCH_READS,
            *(hub_assume_permissions(config.org_member_role, config.org_id) if org else ()),
        )
        self.on_launch = GuardFunction(
            self,
            "OnLaunch",
            description="CostGuard on-launch: one accelerator launch judged within a minute",
            handler=LAUNCH_HANDLER,
            code=code,
            layer=layer,
            key=self.key,
            environment=environment,
            permissions=permissions,
            memory_mb=512,
            timeout=cdk.Duration.seconds(60),
            log_retention=_retention(config.log_retention_days),
            reserved_concurrency=config.on_launch_concurrency,
            role_name=OrgRoles.HUB_LAUNCH if org else None,
        )
        self.ledger.table.grant(self.on_launch.role, *LAUNCH_LEDGER_ACTIONS)
        self.alerts.topic.grant_publish(self.on_launch.role)
        # EventBridge writes what it cannot deliver into this queue, encrypted with the
        # stack's key: the key policy lets EventBridge use it, for this account only.
        self.launch_dead_letters = encrypted_dead_letters(self, "LaunchEventsUndelivered", self.key)
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": self.account}},
            )
        )
        self.launch_rules = LaunchRules(
            self,
            "LaunchRules",
            target=lambda_target(self.on_launch.function, self.launch_dead_letters),
            what="the on-launch Lambda",
        )
        if org:
            # Member accounts' forwarding rules put their launch events on this bus: only
            # principals of the Organization may (their forwarding role), nobody else.
            self.launch_bus_policy = events.CfnEventBusPolicy(
                self,
                "OrgLaunchEvents",
                statement_id="CostGuardOrgLaunchEvents",
                event_bus_name="default",
                statement={
                    "Sid": "CostGuardOrgLaunchEvents",
                    "Effect": "Allow",
                    "Principal": "*",
                    "Action": "events:PutEvents",
                    "Resource": default_bus_arn(self, account=self.account, region=self.region),
                    "Condition": {"StringEquals": {"aws:PrincipalOrgID": config.org_id}},
                },
            )
        cdk.CfnOutput(
            self,
            "OnLaunchDeadLetterQueueUrl",
            description="Launch events EventBridge could not deliver to the on-launch Lambda",
            value=self.launch_dead_letters.queue_url,
        )

    def _answers(self, code: lambda_.Code, layer: lambda_.ILayerVersion) -> None:
        """The answer endpoint (docs/deploy.md, docs/security.md): a Lambda Function URL that
        Slack's buttons and the e-mails' signed links reach.

        Its role reads its three secrets, records once-only requests and used links in their
        two ledger partitions, and invokes the guards' own Lambdas (asynchronously): it
        cannot stop, delete or tag anything itself. Reserved concurrency keeps a flood of
        requests from starving the scan and the guards.
        """
        config = self.config
        assert self.slack_signing is not None
        self.link_secret = secretsmanager.Secret(
            self,
            "AnswerLinkSecret",
            description="CostGuard: the key that signs the answer links in e-mailed warnings",
            encryption_key=self.key,
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
        )
        # Like the signing secret: a random placeholder until the Slack app's bot token is put
        # in (docs/deploy.md). Only the answer Lambda reads it (the Exempt… dialog).
        self.slack_bot_token = secretsmanager.Secret(
            self,
            "SlackBotToken",
            secret_name=config.slack_bot_token_secret_name,
            description="CostGuard: the Slack app's bot token (replace the placeholder)",
            encryption_key=self.key,
        )
        # The guards by the names the stack gave them, not by reference: the guards refer
        # to this Lambda's URL (their links' address), so a reference back would be a cycle.
        guards = dict(self.guard_names)
        self.answer = GuardFunction(
            self,
            "Answer",
            description="CostGuard answers: Slack buttons and e-mail links -> the guard's Lambda",
            handler=ANSWER_HANDLER,
            code=code,
            layer=layer,
            key=self.key,
            environment={
                **self.answer_variables(),
                Env.TABLE_NAME: self.ledger.table.table_name,
                Env.SCOPE: self.account,
                Env.SLACK_SIGNING_SECRET: self.slack_signing.secret_name,
                Env.SLACK_BOT_TOKEN: self.slack_bot_token.secret_name,
                # Its full ARN: a generated secret's name carries no suffix to look it up by.
                Env.LINK_SECRET: self.link_secret.secret_arn,
                Env.GUARD_FUNCTIONS: json.dumps(guards, sort_keys=True),
                Env.SERVICE_NAME: "costguard-answer",
                Env.METRICS_NAMESPACE: Metrics.NAMESPACE,
            },
            permissions=(),
            memory_mb=512,
            timeout=cdk.Duration.seconds(10),
            log_retention=_retention(config.log_retention_days),
            reserved_concurrency=config.answer_concurrency,
        )
        role = self.answer.role
        self.slack_signing.grant_read(role)
        self.slack_bot_token.grant_read(role)
        self.link_secret.grant_read(role)
        # The guards' own Lambdas, unqualified: no version, no alias, no other function.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["lambda:InvokeFunction"],
                resources=[
                    self.format_arn(
                        service="lambda",
                        resource="function",
                        resource_name=name,
                        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                    )
                    for name in guards.values()
                ],
            )
        )
        for partition, actions in ANSWER_LEDGER_ACTIONS.items():
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=list(actions),
                    resources=[self.ledger.table.table_arn],
                    conditions={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [partition]}},
                )
            )
        self.key.grant(role, "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*")
        # Public on purpose: Slack and mail clients cannot sign AWS requests. Every request
        # is verified by the handler (Slack's HMAC signature, or the link's HMAC token).
        self.answer_url = self.answer.function.add_function_url(
            auth_type=lambda_.FunctionUrlAuthType.NONE
        )
        # cdk-nag's rule for it (LambdaFunctionUrlAuth) is in no pack CostGuard runs (the
        # AwsSolutions pack has none): the acknowledgement is kept on the resource, in
        # cdk-nag's own form, so that a pack that checks it reads the reason.
        url = self.answer_url.node.default_child
        assert isinstance(url, cdk.CfnResource)
        url.add_metadata(
            "cdk_nag",
            {"rules_to_suppress": [{"id": "LambdaFunctionUrlAuth", "reason": PUBLIC_URL_REASON}]},
        )
        # The guards sign their warnings' e-mailed links: the link key (read, nothing else
        # of it) and the endpoint's address, the links' base.
        for fn in self.guards.values():
            self.link_secret.grant_read(fn.role)
            fn.function.add_environment(Env.LINK_SECRET, self.link_secret.secret_arn)
            fn.function.add_environment(Env.ANSWER_URL, self.answer_url.url)
        cdk.CfnOutput(
            self,
            "AnswerUrl",
            description="The Slack app's interactivity URL, and the base of e-mail answer links",
            value=self.answer_url.url,
        )
        cdk.CfnOutput(self, "SlackSigningSecretName", value=self.slack_signing.secret_name)
        cdk.CfnOutput(
            self,
            "SlackBotTokenSecretName",
            description="Put the Slack app's bot token (xoxb-…) here: the Exempt… dialog",
            value=self.slack_bot_token.secret_name,
        )

    def _notebook_heartbeat(self) -> None:
        """The lifecycle configuration users attach to notebook instances, and the policy
        their execution role needs to publish the heartbeat (and nothing else)."""
        self.notebook_lifecycle = sagemaker.CfnNotebookInstanceLifecycleConfig(
            self,
            "NotebookHeartbeat",
            # Built at synth from costguard_agent's files: the script the tests run.
            on_start=[
                sagemaker.CfnNotebookInstanceLifecycleConfig.NotebookInstanceLifecycleHookProperty(
                    content=on_start_content()
                )
            ],
        )
        self.heartbeat_policy = iam.ManagedPolicy(
            self,
            "NotebookHeartbeatPolicy",
            description="Attach to a notebook's execution role: publish CostGuard's heartbeat",
            statements=[
                iam.PolicyStatement(
                    actions=["cloudwatch:PutMetricData"],
                    # PutMetricData has no resource-level permissions; the namespace
                    # condition keeps the role to CostGuard's heartbeat metrics.
                    resources=["*"],
                    conditions={"StringEquals": {"cloudwatch:namespace": Heartbeat.NAMESPACE}},
                )
            ],
        )
        cdk.CfnOutput(
            self,
            "NotebookLifecycleConfig",
            description="Attach to notebook instances to publish CostGuard's heartbeat",
            value=self.notebook_lifecycle.attr_notebook_instance_lifecycle_config_name,
        )
        cdk.CfnOutput(
            self,
            "NotebookHeartbeatPolicyArn",
            description="Attach to the notebook execution role (cloudwatch:PutMetricData)",
            value=self.heartbeat_policy.managed_policy_arn,
        )

    def answer_variables(self) -> dict[str, str]:
        """What the Lambdas that take answers (the answer endpoint, the guards' own) get on
        top of the rest, with ``answers`` on: the admins. Never every Lambda's: their 4 KB is
        nearly full (tests/infra/test_hub_stack.py)."""
        if not self.config.answers:
            return {}
        return {
            Env.ANSWER_ADMINS: ",".join(self.config.answer_admins),
            # The zone of "tomorrow 09:00", and of the time an answer is told in.
            Env.TIME_ZONE: self.config.time_zone,
        }

    def scan_environment(self) -> dict[str, str]:
        """The settings from context (``config.environment()``), and what only the stack knows."""
        return {
            **self.config.environment(),
            Env.TABLE_NAME: self.ledger.table.table_name,
            Env.SCOPE: self.account,
            Env.SAGEMAKER_TAGS: SAGEMAKER_TAGS,
            Env.SAGEMAKER_STUDIO: BY_NAME["sagemaker_studio"].to_env(SAGEMAKER_STUDIO),
            Env.TOPIC_ARN: self.alerts.topic.topic_arn,
            Env.SERVICE_NAME: Metrics.SCAN_SERVICE,
            Env.METRICS_NAMESPACE: Metrics.NAMESPACE,
        }

    def _allow_services_to_use_key(self) -> None:
        """Services that use CostGuard's key on its behalf need the key policy: CloudWatch
        alarms publish to the encrypted topic, SNS writes to encrypted dead-letter
        queues and CloudWatch Logs encrypts the log groups."""
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": self.account}},
            )
        )
        # SNS moves undeliverable Slack notifications into the encrypted dead-letter queue.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                principals=[iam.ServicePrincipal("sns.amazonaws.com")],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": self.account}},
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                principals=[iam.ServicePrincipal(f"logs.{self.region}.amazonaws.com")],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": f"arn:{self.partition}:logs:{self.region}:{self.account}:*"
                    }
                },
            )
        )


#: AWS Lambda's longest function name.
LAMBDA_NAME_CHARS = 64


def guard_function_name(stack_name: str, guard: str) -> str:
    """A guard Lambda's physical name with answers on: ``<stack>-guard-<guard>``, unique per
    stack in an account and region; a stack name too long for Lambda's 64 characters is cut
    and followed by 8 characters of its hash (two long names never meet)."""
    suffix = f"-guard-{guard}"
    name = stack_name + suffix
    if len(name) <= LAMBDA_NAME_CHARS:
        return name
    digest = hashlib.sha256(stack_name.encode()).hexdigest()[:8]
    room = LAMBDA_NAME_CHARS - len(suffix) - len(digest) - 1
    if room < 1:
        raise ValueError(f"the guard name {guard!r} is too long for a Lambda name")
    return f"{stack_name[:room]}-{digest}{suffix}"


_RETENTION_NAMES = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
    2192: "SIX_YEARS",
    2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS",
    3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}


def _retention(days: int) -> logs.RetentionDays:
    value: logs.RetentionDays = getattr(logs.RetentionDays, _RETENTION_NAMES[days])
    return value
