"""Launch alerts in the stack: the on-launch Lambda, the EventBridge rules that invoke it,
the forwarding of other regions' and member accounts' launches, and the hub bus's policy.

The rules' patterns are evaluated (moto's EventBridge matcher, with the recorded event
samples), not compared as strings; the roles are judged by what they may
do (tests/infra/iam_model.py), not by the statements they hold.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any, cast

import pytest

from costguard.adapters.launched import READS
from costguard.domain.org_roles import OrgRoles
from costguard.iam import Permission
from costguard_infra.config import ConfigError
from costguard_infra.launch_events import TARGET_RETRIES
from tests.infra.iam_model import ACCOUNT, REGION, World, as_list, role_may
from tests.infra.synth import ORG_ID
from tests.support.events import load_event

pytestmark = pytest.mark.infra

LAUNCH_HANDLER = "costguard.handlers.on_launch.handler"
HUB = "111111111111"
MEMBER = "222222222222"


@pytest.fixture(scope="module")
def single(body: dict[str, Any]) -> World:
    return World(body)


@pytest.fixture(scope="module")
def org(org_body: dict[str, Any]) -> World:
    return World(org_body)


def _launch_function(world: World) -> str:
    (logical,) = [
        k
        for k, f in world.resources("AWS::Lambda::Function").items()
        if f["Properties"]["Handler"] == LAUNCH_HANDLER
    ]
    return logical


def _rules(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        k: r["Properties"] for k, r in body["Resources"].items() if r["Type"] == "AWS::Events::Rule"
    }


def _rule(body: dict[str, Any], name: str) -> dict[str, Any]:
    (props,) = [p for k, p in _rules(body).items() if name in k]
    return props


class PatternTester:
    """EventBridge's matching as moto routes ``PutEvents`` to rules (moto's parser also
    refuses a malformed pattern). moto does not implement ``TestEventPattern`` (it answers
    nothing), so its router's matcher is asked directly."""

    def matches(self, pattern: dict[str, Any], event: dict[str, Any]) -> bool:
        from moto.events.models import EventPattern

        matcher = EventPattern.load(json.dumps(pattern))
        return bool(matcher.matches_event(cast("Any", event)))


@pytest.fixture(scope="module")
def eventbridge() -> PatternTester:
    return PatternTester()


# -- the rules' patterns ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "sample", "matched"),
    [
        ("Ec2StateChange", "ec2-instance-state-pending", True),
        ("Ec2StateChange", "ec2-instance-state-running", True),
        ("Ec2StateChange", "ec2-instance-state-stopped", False),
        ("NotebookInService", "sagemaker-notebook-inservice", True),
        ("EndpointInService", "sagemaker-endpoint-inservice", True),
        ("TrainingJobInProgress", "sagemaker-training-inprogress", True),
        ("RunAcceleratorInstances", "cloudtrail-runinstances", True),
        # A rule matches its own kind of event only.
        ("Ec2StateChange", "sagemaker-notebook-inservice", False),
        ("NotebookInService", "sagemaker-endpoint-inservice", False),
        ("RunAcceleratorInstances", "ec2-instance-state-running", False),
    ],
)
def test_each_rule_matches_the_recorded_launch_events_of_its_kind(
    body: dict[str, Any], eventbridge: PatternTester, rule: str, sample: str, matched: bool
) -> None:
    # GIVEN the synthesized rule's pattern and a recorded EventBridge event
    pattern = _rule(body, rule)["EventPattern"]
    # WHEN EventBridge tests it THEN it matches exactly the launch states of its kind
    assert eventbridge.matches(pattern, load_event(sample)) is matched


@pytest.mark.parametrize(
    ("rule", "field", "status", "matched"),
    [
        ("NotebookInService", "NotebookInstanceStatus", "Stopped", False),
        ("NotebookInService", "NotebookInstanceStatus", "Pending", False),
        ("EndpointInService", "EndpointStatus", "CREATING", False),
        ("EndpointInService", "EndpointStatus", "InService", True),  # DescribeEndpoint's spelling
        ("TrainingJobInProgress", "TrainingJobStatus", "Completed", False),
        ("TrainingJobInProgress", "TrainingJobStatus", "Stopped", False),
    ],
)
def test_sagemaker_rules_pass_only_the_states_that_start_spending(
    body: dict[str, Any],
    eventbridge: PatternTester,
    rule: str,
    field: str,
    status: str,
    matched: bool,
) -> None:
    sample = {
        "NotebookInService": "sagemaker-notebook-inservice",
        "EndpointInService": "sagemaker-endpoint-inservice",
        "TrainingJobInProgress": "sagemaker-training-inprogress",
    }[rule]
    event = load_event(sample, detail={field: status})
    assert eventbridge.matches(_rule(body, rule)["EventPattern"], event) is matched


@pytest.mark.parametrize(
    ("instance_type", "matched"),
    [
        ("p5.48xlarge", True),
        ("g6.xlarge", True),
        ("p4d.24xlarge", True),
        ("trn1.32xlarge", True),
        ("inf2.xlarge", True),
        ("t3.micro", False),
        ("m5.large", False),
        ("p2.xlarge", False),  # not an accelerator family CostGuard prices
        ("c7g.large", False),
    ],
)
def test_the_cloudtrail_rule_passes_accelerator_types_only(
    body: dict[str, Any], eventbridge: PatternTester, instance_type: str, matched: bool
) -> None:
    # GIVEN a recorded RunInstances event for this type
    event = load_event("cloudtrail-runinstances")
    event["detail"]["requestParameters"]["instanceType"] = instance_type
    # WHEN EventBridge tests the synthesized pattern THEN only accelerator types pass
    pattern = _rule(body, "RunAcceleratorInstances")["EventPattern"]
    assert eventbridge.matches(pattern, event) is matched


def test_the_cloudtrail_rule_drops_a_failed_run_instances(
    body: dict[str, Any], eventbridge: PatternTester
) -> None:
    # GIVEN a RunInstances of a p5 that AWS refused (CloudTrail records the errorCode)
    event = load_event("cloudtrail-runinstances")
    event["detail"]["requestParameters"]["instanceType"] = "p5.48xlarge"
    failed = copy.deepcopy(event)
    failed["detail"]["errorCode"] = "Client.UnauthorizedOperation"
    pattern = _rule(body, "RunAcceleratorInstances")["EventPattern"]
    # THEN the rule passes the call that launched, not the one that did not
    assert eventbridge.matches(pattern, event)
    assert not eventbridge.matches(pattern, failed)


def test_the_accelerator_prefixes_come_from_the_guardrails_families() -> None:
    from costguard.cli.guardrails import sdk_instance_types
    from costguard.domain.guardrails import family
    from costguard_infra.launch_events import accelerator_type_prefixes

    prefixes = accelerator_type_prefixes()
    ec2_types, _ = sdk_instance_types()
    covered = {family(t) for t in ec2_types if t.startswith(prefixes)}
    # Every family the SDK names that a prefix covers is one the guardrails gate.
    assert {"p5", "p5e", "p5en", "g6", "g6e", "trn2", "inf2"} <= covered
    assert not covered & {"p2", "t3", "m5", "c7g", "g3", "g3s"}


# -- the on-launch Lambda -----------------------------------------------------------------------


def test_on_launch_lambda_has_reserved_concurrency_its_own_dlq_and_bounded_retries(
    single: World,
) -> None:
    fn = _launch_function(single)
    props = single.props(fn)
    assert props["ReservedConcurrentExecutions"] == 5  # onLaunchConcurrency's default
    assert (props["MemorySize"], props["Timeout"]) == (512, 60)
    assert props["Architectures"] == ["arm64"]
    assert props["TracingConfig"] == {"Mode": "Active"}
    dlq = single.logical_for(single.resolve(props["DeadLetterConfig"]["TargetArn"]))
    assert dlq is not None and single.resources()[dlq]["Type"] == "AWS::SQS::Queue"
    (config,) = [
        c["Properties"]
        for c in single.resources("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": fn}
    ]
    assert (config["MaximumRetryAttempts"], config["MaximumEventAgeInSeconds"]) == (2, 3600)
    # The function writes its failed events into its DLQ, with the queue's key.
    role = single.function_role(fn)
    queue = single.arn(dlq)
    assert role_may(single, role, "sqs:SendMessage", queue)
    key = single.key_arn_of(single.resolve(single.props(dlq)["KmsMasterKeyId"]))
    assert role_may(single, role, "kms:GenerateDataKey", key, {"kms:CallerAccount": ACCOUNT})


def test_on_launch_lambda_reads_the_scans_settings(single: World) -> None:
    from costguard.env import Env
    from costguard.telemetry import Metrics

    variables = single.props(_launch_function(single))["Environment"]["Variables"]
    scan = next(
        f["Properties"]["Environment"]["Variables"]
        for f in single.resources("AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "costguard.handlers.scan.handler"
    )
    different = {k for k in set(scan) | set(variables) if scan.get(k) != variables.get(k)}
    # The scan's environment, but its service name (it reads the one resource's tags with
    # sagemaker:ListTags whatever sagemakerTags says: see wiring/launch.py)
    assert different == {Env.SERVICE_NAME}
    assert variables[Env.SERVICE_NAME] == Metrics.LAUNCH_SERVICE


def test_every_rule_targets_the_on_launch_lambda_with_retries_and_an_encrypted_dlq(
    body: dict[str, Any], single: World
) -> None:
    from costguard_infra.launch_events import launch_patterns

    fn = _launch_function(single)
    rules = _rules(body)
    assert len(rules) == len(launch_patterns())
    dead_letters = set()
    for rule in rules.values():
        assert rule["State"] == "ENABLED" and "EventBusName" not in rule  # the default bus
        (target,) = rule["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [fn, "Arn"]}
        assert target["RetryPolicy"] == {
            "MaximumRetryAttempts": TARGET_RETRIES,
            "MaximumEventAgeInSeconds": 3600,
        }
        dead_letters.add(single.logical_for(single.resolve(target["DeadLetterConfig"]["Arn"])))
    (queue,) = dead_letters
    assert queue is not None and "KmsMasterKeyId" in single.props(queue)
    # EventBridge may invoke the function, from these rules only.
    permissions = [
        p["Properties"]
        for p in single.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert {json.dumps(p["SourceArn"]) for p in permissions} == {
        json.dumps({"Fn::GetAtt": [r, "Arn"]}) for r in single.resources("AWS::Events::Rule")
    }
    # Undelivered events alarm the alert topic.
    assert any(
        a["Properties"].get("Dimensions", [{}])[0].get("Value")
        == {"Fn::GetAtt": [queue, "QueueName"]}
        for a in single.resources("AWS::CloudWatch::Alarm").values()
    )


def test_on_launch_role_reads_publishes_to_the_topic_and_changes_no_user_resource(
    single: World,
) -> None:
    role = single.function_role(_launch_function(single))
    (topic,) = single.resources("AWS::SNS::Topic")
    (table,) = single.resources("AWS::DynamoDB::Table")
    # GIVEN the role WHEN it asks for what the adapter declares THEN each is granted
    for permission in READS:
        for action in permission.actions:
            resource = "*" if permission.resources == ("*",) else _sample_arn(action)
            assert role_may(single, role, action, resource), action
    # AND it publishes to the alert topic, and to no other topic
    assert role_may(single, role, "sns:Publish", single.physical[topic]["TopicArn"])
    assert not role_may(
        single, role, "sns:Publish", f"arn:aws:sns:{REGION}:{ACCOUNT}:someone-elses-topic"
    )
    # AND on the ledger only reads, claims and the alert log: no delete, no scan
    for action in ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"):
        assert role_may(single, role, action, single.arn(table)), action
    for action in ("dynamodb:DeleteItem", "dynamodb:Scan", "dynamodb:BatchWriteItem"):
        assert not role_may(single, role, action, single.arn(table)), action
    # AND no mutating EC2, SageMaker or EKS action, on anything
    granted = {a for s in single.role_statements(role) for a in as_list(s["Action"])}
    mutating = {
        a
        for a in granted
        if a.split(":")[0] in {"ec2", "sagemaker", "eks"} and Permission((a,), "").mutating
    }
    assert mutating == set()
    for action in (
        "ec2:TerminateInstances",
        "ec2:StopInstances",
        "ec2:CreateTags",
        "sagemaker:StopNotebookInstance",
        "sagemaker:StopTrainingJob",
        "eks:UpdateNodegroupConfig",
    ):
        assert not role_may(single, role, action, "*"), action


def _sample_arn(action: str) -> str:
    if action.startswith("eks:"):
        return f"arn:aws:eks:{REGION}:{ACCOUNT}:nodegroup/c/g/0"
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:notebook-instance/nb"


def test_launch_alerts_off_deploys_no_rule_no_function_and_no_forwarding() -> None:
    # GIVEN launchAlerts=false, with a known home region and a second scanned region
    app, stack = _build(
        {"launchAlerts": "false", "region": "us-east-1", "regions": "us-east-1,us-west-2"}
    )
    body = _body(app, stack.stack_name)
    # THEN there is no rule, no on-launch Lambda, no bus policy and no forwarding stack
    kinds = [r["Type"] for r in body["Resources"].values()]
    assert "AWS::Events::Rule" not in kinds and "AWS::Events::EventBusPolicy" not in kinds
    assert LAUNCH_HANDLER not in json.dumps(body)
    assert [s.stack_name for s in app.node.children if hasattr(s, "stack_name")] == ["CostGuard"]


# -- other regions: forwarding stacks -----------------------------------------------------------


def _build(extra: dict[str, Any]) -> tuple[Any, Any]:
    from costguard_infra.app_builder import build_app
    from tests.infra.synth import CONTEXT, with_toy_guard

    with with_toy_guard():
        app, stack = build_app(
            {**CONTEXT, **extra, "aws:cdk:bundling-stacks": []},
            outdir=tempfile.mkdtemp(prefix="costguard-launch-"),
        )
        app.synth()  # cdk-nag: any unacknowledged finding in any stack raises here
    return app, stack


def _body(app: Any, name: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads((Path(app.outdir) / f"{name}.template.json").read_text())
    return parsed


def test_each_other_scanned_region_forwards_its_launches_to_the_home_regions_bus() -> None:
    # GIVEN a home region and three scanned regions
    app, _stack = _build({"region": "us-east-1", "regions": "us-east-1,us-west-2,eu-west-1"})
    stacks = sorted(s.stack_name for s in app.node.children if hasattr(s, "stack_name"))
    # THEN each other region has a forwarding stack, deployed to that region
    assert stacks == [
        "CostGuard",
        "CostGuardLaunchEvents-eu-west-1",
        "CostGuardLaunchEvents-us-west-2",
    ]
    forwarding = app.node.find_child("CostGuardLaunchEvents-us-west-2")
    assert forwarding.region == "us-west-2"
    body = _body(app, "CostGuardLaunchEvents-us-west-2")
    # ... which needs no bootstrap there (no asset, no bootstrap version check)
    assert "BootstrapVersion" not in body.get("Parameters", {})
    world = World(body, region="us-west-2")
    home_bus = f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/default"
    _assert_forwards_only_to(world, home_bus)


def test_an_environment_agnostic_synth_deploys_the_home_rules_alone(body: dict[str, Any]) -> None:
    from costguard_infra.launch_events import forwarded_regions

    # The session's synth names no region: the home stack's rules exist, no forwarding.
    assert _rules(body)
    assert forwarded_regions(None, ("us-east-1", "us-west-2")) == []
    assert forwarded_regions("us-east-1", ("us-east-1", "us-west-2", "us-west-2")) == ["us-west-2"]


def _assert_forwards_only_to(world: World, bus: str) -> None:
    rules = world.resources("AWS::Events::Rule")
    assert len(rules) == 5
    roles = set()
    for rule in rules.values():
        (target,) = world.resolve(rule["Properties"]["Targets"])
        assert target["Arn"] == bus
        assert target["DeadLetterConfig"]["Arn"]
        roles.add(world.role_by_arn(target["RoleArn"]))
    (role,) = roles
    # EventBridge alone may assume the role, for this account's rules
    trust = world.resolve(world.props(role)["AssumeRolePolicyDocument"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": world.account}}
    # ... and it may put events on that one bus, and do nothing else
    assert role_may(world, role, "events:PutEvents", bus)
    other_bus = bus.replace(":event-bus/default", ":event-bus/other")
    assert not role_may(world, role, "events:PutEvents", other_bus)
    granted = {a for s in world.role_statements(role) for a in as_list(s["Action"])}
    assert granted == {"events:PutEvents"}


# -- Organization mode --------------------------------------------------------------------------


def test_the_hubs_default_bus_admits_put_events_from_the_organization_only(org: World) -> None:
    (policy,) = org.resources("AWS::Events::EventBusPolicy").values()
    props = org.resolve(policy["Properties"])
    assert props["EventBusName"] == "default"
    statement = props["Statement"]
    assert statement["Effect"] == "Allow" and statement["Principal"] == "*"
    assert statement["Action"] == "events:PutEvents"
    assert statement["Resource"] == f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default"
    assert statement["Condition"] == {"StringEquals": {"aws:PrincipalOrgID": ORG_ID}}


def test_no_single_account_stack_opens_its_bus(body: dict[str, Any]) -> None:
    assert not [r for r in body["Resources"].values() if r["Type"] == "AWS::Events::EventBusPolicy"]


def test_the_hubs_on_launch_role_is_named_for_the_member_trust_and_reads_members_in_the_org_only(
    org: World,
) -> None:
    fn = _launch_function(org)
    role = org.function_role(fn)
    assert org.props(role)["RoleName"] == OrgRoles.HUB_LAUNCH
    read = f"arn:aws:iam::{MEMBER}:role/{OrgRoles.MEMBER_READ}"
    act = f"arn:aws:iam::{MEMBER}:role/{OrgRoles.MEMBER_ACT}"
    assert role_may(org, role, "sts:AssumeRole", read, {"aws:ResourceOrgID": ORG_ID})
    assert not role_may(org, role, "sts:AssumeRole", read, {"aws:ResourceOrgID": "o-zzzzzzzzzz"})
    assert not role_may(org, role, "sts:AssumeRole", act, {"aws:ResourceOrgID": ORG_ID})
    # It judges member accounts' events: the hub's Organization settings reach it.
    from costguard.env import Env

    variables = org.props(fn)["Environment"]["Variables"]
    assert variables[Env.ORG_ACCOUNTS] == "discover" and variables[Env.ORG_ID] == ORG_ID


def _member_app(context: dict[str, Any]) -> Any:
    from costguard_infra.member import build_member_app

    app, _stack = build_member_app(
        context, outdir=tempfile.mkdtemp(prefix="costguard-member-launch-")
    )
    app.synth()  # cdk-nag on both stacks
    return app


def test_member_launch_events_stack_forwards_to_the_hubs_bus_with_a_put_events_only_role() -> None:
    # GIVEN the member app with the hub's region
    app = _member_app({"hubAccount": HUB, "orgId": ORG_ID, "hubRegion": "eu-west-1"})
    body = _body(app, "CostGuardMemberLaunchEvents")
    # THEN, deployed in a member account, its rules target the hub's default bus
    world = World(body, account=MEMBER, region="us-west-2")
    _assert_forwards_only_to(world, f"arn:aws:events:eu-west-1:{HUB}:event-bus/default")
    # AND in the hub's own account and region it creates nothing but a placeholder
    # (the hub's own rules see those events; forwarding them to the same bus repeats them)
    condition = body["Conditions"]["NotTheHubsOwnBus"]
    assert condition == {
        "Fn::Not": [
            {
                "Fn::And": [
                    {"Fn::Equals": [{"Ref": "AWS::AccountId"}, HUB]},
                    {"Fn::Equals": [{"Ref": "AWS::Region"}, "eu-west-1"]},
                ]
            }
        ]
    }
    unconditioned = [
        r["Type"] for r in body["Resources"].values() if r.get("Condition") != "NotTheHubsOwnBus"
    ]
    assert unconditioned == ["AWS::CloudFormation::WaitConditionHandle"]
    # AND it needs no bootstrap, asset or Lambda (a StackSet template)
    assert "Parameters" not in body or "BootstrapVersion" not in body["Parameters"]
    assert not [r for r in body["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]


def test_member_app_without_the_hub_region_builds_no_launch_events_stack() -> None:
    app = _member_app({"hubAccount": HUB, "orgId": ORG_ID})
    assert [c.node.id for c in app.node.children if hasattr(c, "stack_name")] == ["CostGuardMember"]


@pytest.mark.parametrize("region", ["eu-west", "EU-WEST-1", "eu-west-1; rm", "1"])
def test_a_bad_hub_region_is_a_clear_error(region: str) -> None:
    from costguard_infra.member import build_member_app

    with pytest.raises(ConfigError, match="hubRegion must be a region like us-east-1"):
        build_member_app({"hubAccount": HUB, "orgId": ORG_ID, "hubRegion": region})


def test_member_read_role_grants_what_the_hubs_launch_check_reads() -> None:
    app = _member_app({"hubAccount": HUB, "orgId": ORG_ID})
    world = World(_body(app, "CostGuardMember"), account=MEMBER)
    (role,) = [
        k
        for k, r in world.resources("AWS::IAM::Role").items()
        if r["Properties"]["RoleName"] == OrgRoles.MEMBER_READ
    ]
    for permission in READS:
        for action in permission.actions:
            resource = "*" if permission.resources == ("*",) else _member_arn(action)
            assert role_may(world, role, action, resource), action


def _member_arn(action: str) -> str:
    return _sample_arn(action).replace(ACCOUNT, MEMBER)


def test_the_forwarding_templates_pass_cfn_lint_without_errors() -> None:
    import subprocess
    import sys

    # GIVEN a regional forwarding stack and the member launch-events stack
    app, _stack = _build({"region": "us-east-1", "regions": "us-east-1,us-west-2"})
    member = _member_app({"hubAccount": HUB, "orgId": ORG_ID, "hubRegion": "us-east-1"})
    files = [
        Path(app.outdir) / "CostGuardLaunchEvents-us-west-2.template.json",
        Path(member.outdir) / "CostGuardMemberLaunchEvents.template.json",
    ]
    # WHEN cfn-lint reads them THEN it finds no error
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("cfn-lint")),
            "--format",
            "parseable",
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert [line for line in done.stdout.splitlines() if ":E" in line] == [], done.stdout
    assert done.returncode in (0, 4), done.stdout + done.stderr  # 4 = warnings only
