"""The answer path runs with exactly the permissions the stack grants, IAM enforced.

The stack synthesized with answers on (``tests/infra/synth.py``: ``synthesize_answers``) is
"deployed" once for this module onto moto's HTTP server by the IAM-enforced harness
(``tests/support/iam_enforced.py``): the ledger, key, topic, its three secrets (the Slack
webhook, the Slack app's signing secret and the link secret, each holding a value the test
knows), and the roles of the answer Lambda, the Slack notifier and the idle guard's Lambda.
Each handler runs with its environment from the template and its role's assumed
credentials while moto enforces IAM; every call is recorded and judged against the
synthesized policies by ``iam_model`` (action, ARN, ``dynamodb:LeadingKeys``, tag
conditions, key use).

What is stubbed, and why: moto's Lambda cannot run CostGuard's code (it would need Docker,
and the code needs its own role, not moto's). Every guard's Lambda is created in moto's
Lambda with Docker off, so the answer Lambda's asynchronous ``Invoke`` reaches moto, which
authorizes it against the answer role (moto names the action ``lambda:Invoke``) and answers
202 without running anything; the recorded call is judged by ``iam_model`` on the
function's ARN, and its payload is then handed to the guard's handler (``act.handler``)
under the guard role's credentials, as Lambda's asynchronous invocation would.

moto evaluates neither a statement's resource nor its conditions: the refusals that depend
on them (another Lambda, another ledger partition, another tag key) are shown by
``iam_model`` and said so; the refusals of actions the role lacks are shown by both.

Slack is the stand-in: the notifier posts to it, and "Exempt…" is pressed in it as Slack
does (signed, to the answer Lambda behind a loopback Function URL), which opens the dialog
through its Web API (views.open, with the bot token the answer role reads) and submits it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.domain.answers import Answer
from costguard.domain.signatures import LinkClaims, sign_link
from costguard.domain.tags import Tags
from costguard.env import Env
from costguard_demo.slack_standin import STANDIN_BOT_TOKEN
from tests.infra.iam_model import ACCOUNT, REGION, as_list, role_may
from tests.support.answers import (
    block_actions,
    confirm_form,
    function_url_event,
    link_get,
    link_post,
    slack_post,
)
from tests.support.clock import MIDDAY
from tests.support.iam_enforced import (
    INSTANCE_TAGS,
    MOTO_OVERRIDES,
    Call,
    Deployment,
    Recorder,
    check_calls,
    denied_by_policy,
    deploy,
    drain_alerts,
    find_function,
    function_environment,
    moto_lambda_runs_docker,
    refused_by_moto,
    run_as,
    unused_grants,
    unused_statements,
)

pytestmark = [pytest.mark.e2e, pytest.mark.infra]

#: What the deployed secrets hold: the Slack app's signing secret and the link key.
SIGNING = "8f742231b10e8888abcd99yyyzzz85a5"
LINKS = "link-key-0123456789abcdef0123456789abcdef0123456789abcdef01234567"
#: A notebook's owner (a Slack member) and an instance's (an e-mail address).
MARIA = "U0MARIA001"
ALICE = "alice@example.com"
#: In the deployment's answerAdmins (tests/infra/synth.py: ANSWERS_CONTEXT).
ADMIN = "U024BE7LH"
IDLE = "idle-notebooks"
#: The functions this module runs, by the name the tests give them.
FUNCTIONS: dict[str, tuple[str, str | None]] = {
    "answer": ("answer.handler", None),
    "slack": ("slack_notifier.handler", None),
    "idle": ("act.handler", IDLE),
}

#: Grants of the answer role the run leaves unused, each with its reason: one line each,
#: ``fnmatch`` over ``str(Grant)`` ("<action> on <resource> [<key>=<value>]"). A grant that
#: lands before the code that uses it goes here, with why, until a run here uses it.
ANSWER_ROLE_UNUSED: dict[str, str] = {
    "secretsmanager:DescribeSecret on *": "CDK's grant_read adds it; the handler reads values only",
    "kms:Encrypt on *": "the ledger's key, granted whole (Decrypt, Encrypt, GenerateDataKey*): "
    "DynamoDB encrypts with its table key, which the model checks as kms:Decrypt",
}
#: The same, by action (``unused_grants``).
ANSWER_ROLE_UNUSED_ACTIONS = {
    g.split(" on ", 1)[0] for g in ANSWER_ROLE_UNUSED if g.endswith(" on *")
}
#: What answers add to a guard's role that no run here can use, each with its reason.
GUARD_ANSWER_UNUSED: dict[str, str] = {
    "sagemaker:AddTags on arn:aws:sagemaker:*:*:app/*": "Studio apps: not in moto, so the "
    "idle guard runs with Studio off here (tests/functional/test_studio.py stubs them)",
    "secretsmanager:DescribeSecret on *": "CDK's grant_read adds it; values are read only",
}
#: The same for the Slack notifier's role (answers on: it also reads the signing secret).
NOTIFIER_UNUSED: dict[str, str] = {
    "secretsmanager:DescribeSecret on *": "CDK's grant_read adds it; values are read only",
}


def added_by_answers(world: Any) -> Any:
    """Which statements of a guard's role answers add: writing ``costguard:exempt`` and no
    other tag (``iam.exempt_tag_permissions``), and reading a secret of the answers (any
    but the Slack webhook's: the link key, once guards sign e-mail links)."""
    secrets = {
        world.physical[logical]["Ref"]
        for logical in world.resources("AWS::SecretsManager::Secret")
        if "SlackWebhook" not in logical
    }

    def added(statement: dict[str, Any]) -> bool:
        condition = statement.get("Condition", {}).get("ForAllValues:StringEquals", {})
        if condition.get("aws:TagKeys") in (Tags.EXEMPT, [Tags.EXEMPT]):
            return True
        return bool(secrets & set(as_list(statement.get("Resource"))))

    return added


# -- one deployment for the module ---------------------------------------------------------------


@pytest.fixture(scope="module")
def answers_body() -> dict[str, Any]:
    from tests.infra.synth import synthesize_answers

    return synthesize_answers()


@pytest.fixture(scope="module")
def module_aws(_moto_server_url: str) -> Iterator[str]:
    """The worker's moto server, reset once: the module's tests share one deployment."""
    from tests.support.moto_server import reset_aws

    with reset_aws(_moto_server_url) as url:
        yield url


@pytest.fixture(scope="module")
def module_slack() -> Iterator[Any]:
    from costguard_demo.slack_standin import SlackStandIn

    with SlackStandIn() as stand_in:
        yield stand_in


@pytest.fixture(scope="module")
def deployment(
    module_aws: str, answers_body: dict[str, Any], module_slack: Any
) -> Iterator[Deployment]:
    from tests.infra.iam_model import World

    world = World(answers_body)
    guards = [
        logical
        for logical, fn in world.resources("AWS::Lambda::Function").items()
        if Env.GUARD in fn["Properties"].get("Environment", {}).get("Variables", {})
    ]
    scan = find_function(world, "scan.handler")
    deployed = deploy(
        answers_body,
        module_slack,
        functions=FUNCTIONS,
        secrets={"SlackSigning": SIGNING, "AnswerLink": LINKS, "SlackBot": STANDIN_BOT_TOKEN},
        # the guards (the answer's targets) and one that is not a guard (refused)
        lambdas=[*guards, scan],
    )
    yield deployed
    moto_lambda_runs_docker()


@pytest.fixture(autouse=True)
def _on_moto(_fake_aws: None, module_aws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """boto3 pointed at the module's server for each test (``_fake_aws`` clears it)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", module_aws)
    monkeypatch.setitem(MOTO_OVERRIDES, Env.DRY_RUN, "false")
    monkeypatch.setitem(MOTO_OVERRIDES, Env.REGIONS, REGION)
    # moto does not evaluate SEARCH: the guard lists the GPU series first (ListMetrics)
    monkeypatch.setitem(MOTO_OVERRIDES, Env.IDLE_GPU_DISCOVERY, "list")


# -- helpers -----------------------------------------------------------------------------------


@dataclass
class Answered:
    status: int
    body: str
    invoked: list[Call]


def answer(
    deployed: Deployment,
    request: Any,
    at: datetime,
    monkeypatch: pytest.MonkeyPatch,
    recorder: Recorder,
) -> Answered:
    """The request through the Function URL to the answer Lambda, with its role."""
    start = len(recorder.calls)
    out = run_as(deployed, "answer", function_url_event(request), monkeypatch, recorder, at=at)
    invoked = [c for c in recorder.calls[start:] if c.operation == "Invoke"]
    return Answered(out["statusCode"], out["body"], invoked)


def hand_to_guard(
    deployed: Deployment,
    invoke: Call,
    at: datetime,
    monkeypatch: pytest.MonkeyPatch,
    recorder: Recorder,
) -> dict[str, Any]:
    """What Lambda does with an asynchronous invocation of the idle guard: its handler run
    with the payload, under the guard's own role."""
    idle = deployed.functions["idle"]
    assert invoke.params["FunctionName"] == deployed.world.physical[idle]["Ref"], invoke.params
    assert invoke.params["InvocationType"] == "Event"
    assert invoke.status == 202, (invoke.status, invoke.error)
    event = json.loads(invoke.params["Payload"])
    result: dict[str, Any] = run_as(deployed, "idle", event, monkeypatch, recorder, at=at)
    return result


def warn(deployed: Deployment, at: datetime, monkeypatch: Any, recorder: Recorder) -> Any:
    """The idle guard's scheduled run at ``at``, with its role."""
    event = {"time": at.isoformat(), "guard": IDLE}
    return run_as(deployed, "idle", event, monkeypatch, recorder)


def warnings_for(deployed: Deployment, *resources: str) -> dict[str, dict[str, Any]]:
    """The action warnings published about ``resources`` (by the end of their key)."""
    found: dict[str, dict[str, Any]] = {}
    for alert in drain_alerts(deployed):
        to = alert.get("answer_to") or {}
        for resource in resources:
            if alert.get("kind") == "action-warning" and str(to.get("resource", "")).endswith(
                "/" + resource
            ):
                found[resource] = alert
    assert set(found) == set(resources), found
    return found


def notebook(deployed: Deployment, name: str, owner: str, at: datetime) -> str:
    """An InService SageMaker notebook instance of a project, created at ``at``: its ARN."""
    from costguard_demo.fleet import backdate_sagemaker

    sm = deployed.session.client("sagemaker", region_name=REGION)
    sm.create_notebook_instance(
        NotebookInstanceName=name,
        InstanceType="ml.p3.2xlarge",
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/sagemaker",
        Tags=[
            {"Key": Tags.PROJECT, "Value": "vision"},
            {"Key": Tags.OWNER, "Value": owner},
        ],
    )
    backdate_sagemaker(REGION, {name: at}, {})
    return str(sm.describe_notebook_instance(NotebookInstanceName=name)["NotebookInstanceArn"])


def idle_instance(deployed: Deployment, owner: str, at: datetime) -> str:
    """A running GPU notebook instance on EC2, idle since ``at`` (its metrics say so)."""
    from tests.support.idle_fleet import launch, notebook_tags, publish_ec2

    (instance,) = launch(deployed.session, notebook_tags(**{Tags.OWNER: owner}), at=at)
    publish_ec2(deployed.session, instance, at + timedelta(hours=1), MIDDAY + timedelta(hours=6))
    return instance


def remember_tags(
    deployed: Deployment, monkeypatch: Any, instances: list[str], arns: list[str]
) -> None:
    """The resources' tags before the run's writes, for the conditions ``iam_model`` checks
    (``aws:ResourceTag/...``): the warning tag and the exemption are what the run wrote."""
    ec2 = deployed.session.client("ec2", region_name=REGION)
    sm = deployed.session.client("sagemaker", region_name=REGION)
    written = {Tags.ACTION_AFTER, Tags.EXEMPT}
    for reservation in (
        ec2.describe_instances(InstanceIds=instances)["Reservations"] if instances else []
    ):
        for i in reservation["Instances"]:
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", []) if t["Key"] not in written}
            monkeypatch.setitem(INSTANCE_TAGS, i["InstanceId"], tags)
    for arn in arns:
        tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
        monkeypatch.setitem(INSTANCE_TAGS, arn, {k: v for k, v in tags.items() if k not in written})


def emailed_link(deployed: Deployment, resource: str, label: str) -> str:
    """The token of the link ``label`` in the e-mail of the latest warning about
    ``resource`` (the e-mail text SNS sent its e-mail subscribers)."""
    import re
    from urllib.parse import parse_qs, urlsplit

    from moto.sns import sns_backends

    topic = function_environment(deployed.world, deployed.functions["idle"])[Env.TOPIC_ARN]
    mails = [
        json.loads(message)["email"]
        for _id, message, *_ in sns_backends[ACCOUNT][REGION].topics[topic].sent_notifications
        if resource in json.loads(message)["email"]
    ]
    assert mails, f"no e-mail about {resource}"
    (url,) = re.findall(rf"{re.escape(label)}: (\S+)", mails[-1])
    return parse_qs(urlsplit(url).query)["t"][0]


def as_role(deployed: Deployment, function: str) -> Any:
    """A boto3 session signed with the function's role (created after the recorder is in)."""
    import boto3

    creds = deployed.credentials[deployed.world.function_role(deployed.functions[function])]
    return boto3.Session(
        aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=creds["AWS_SESSION_TOKEN"],
        region_name=REGION,
    )


def instance_state(deployed: Deployment, instance: str) -> tuple[str, dict[str, str]]:
    ec2 = deployed.session.client("ec2", region_name=REGION)
    (i,) = ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"]
    return i["State"]["Name"], {t["Key"]: t["Value"] for t in i.get("Tags", [])}


def notebook_state(deployed: Deployment, name: str) -> tuple[str, dict[str, str]]:
    sm = deployed.session.client("sagemaker", region_name=REGION)
    described = sm.describe_notebook_instance(NotebookInstanceName=name)
    tags = sm.list_tags(ResourceArn=described["NotebookInstanceArn"])["Tags"]
    return described["NotebookInstanceStatus"], {t["Key"]: t["Value"] for t in tags}


def audit_answers(deployed: Deployment) -> set[tuple[str, str, str]]:
    """(action, resource's last part, who) of every answer in the audit trail."""
    from costguard.adapters.dynamodb import DynamoDbLedger

    table = function_environment(deployed.world, deployed.functions["idle"])[Env.TABLE_NAME]
    ledger = DynamoDbLedger(deployed.session.client("dynamodb", region_name=REGION), table)
    return {
        (e.action, e.resource.rsplit("/", 1)[-1], e.details["by"])
        for e in ledger.audit_trail(ACCOUNT, f"{MIDDAY:%Y-%m}")
        if e.action.startswith("answer-")
    }


# -- the tests ---------------------------------------------------------------------------------


def test_a_slack_press_is_taken_with_only_the_permissions_the_stack_grants(
    deployment: Deployment, module_slack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN two idle notebook instances owned by maria (a Slack member) and an idle GPU
    # instance owned by alice, all warned by the idle guard's scheduled run (its role)
    nb_arn = notebook(deployment, "answer-nb", MARIA, MIDDAY - timedelta(hours=30))
    exempt_arn = notebook(deployment, "answer-nb-exempt", MARIA, MIDDAY - timedelta(hours=30))
    instance = idle_instance(deployment, ALICE, MIDDAY - timedelta(hours=5))
    recorder = Recorder()
    recorder.install(monkeypatch)
    remember_tags(deployment, monkeypatch, [instance], [nb_arn, exempt_arn])
    first = warn(deployment, MIDDAY, monkeypatch, recorder)
    assert first["counts"].get("warned", 0) >= 3, first
    # ... and posted to Slack by the notifier (its role), buttons signed with the signing
    # secret it reads
    from costguard_demo.slack_standin import sns_event

    warned = warnings_for(deployment, "answer-nb", "answer-nb-exempt", instance)
    buttons: dict[str, dict[str, str]] = {}
    messages: dict[str, dict[str, Any]] = {}
    for name, alert in warned.items():
        message = json.dumps(alert, ensure_ascii=False, sort_keys=True)
        run_as(deployment, "slack", sns_event(message), monkeypatch, recorder, at=MIDDAY)
        messages[name] = module_slack.received[-1]
        buttons[name] = {
            element["action_id"]: element["value"]
            for block in module_slack.received[-1]["blocks"]
            if block["type"] == "actions"
            for element in block["elements"]
        }
    assert set(buttons["answer-nb"]) == {"keep-4h", "keep-until-tomorrow", "act-now", "exempt"}
    values = {"answer-nb": buttons["answer-nb"]["keep-4h"], instance: buttons[instance]["act-now"]}
    # WHEN maria presses "Keep 4 hours" ten minutes later (Slack signs the request)
    at = MIDDAY + timedelta(minutes=10)
    # (the stand-in plays Slack: the response URL is under its origin, as the notifier's
    # webhook is)
    url = module_slack.origin + "/actions/T0001/1/abc"
    keep = block_actions(MARIA, "keep-4h", values["answer-nb"], response_url=url)
    press = slack_post(SIGNING.encode(), keep, at)
    kept = answer(deployment, press, at, monkeypatch, recorder)
    # THEN the endpoint answers at once and hands the answer to the idle guard's Lambda
    assert kept.status == 200, kept.body
    (invoke,) = kept.invoked
    # AND Slack's retry of the same request is refused: it was claimed once
    again = answer(deployment, press, at + timedelta(seconds=3), monkeypatch, recorder)
    assert again.status == 401 and not again.invoked, again
    # WHEN the guard's Lambda takes it (its role)
    taken = hand_to_guard(deployment, invoke, at, monkeypatch, recorder)
    # THEN the notebook carries costguard:exempt for 4 hours, and the message says so
    assert taken["answer"] == "kept", taken
    _status, tags = notebook_state(deployment, "answer-nb")
    assert tags[Tags.EXEMPT] == "2026-11-20T16:10:00Z", tags
    assert module_slack.responses[-1][1]["text"].endswith("by @maria"), module_slack.responses
    # WHEN maria presses "Exempt…" on the other notebook's warning, in Slack: the stand-in
    # presses as Slack does, to the answer Lambda behind a loopback Function URL (its role);
    # the dialog opens (views.open, with the bot token the answer role reads), and she
    # submits a reason and an end date, the 1st of next month
    from costguard_demo.function_url import FunctionUrlServer
    from costguard_demo.slack_standin import SlackUser

    def endpoint(event: dict[str, Any]) -> Any:
        return run_as(deployment, "answer", event, monkeypatch, recorder, at=at)

    with FunctionUrlServer(endpoint) as function_url:
        module_slack.interactivity(function_url.url + "/slack", SIGNING.encode(), lambda: at)
        start = len(recorder.calls)
        pressed = module_slack.press(
            messages["answer-nb-exempt"], "exempt", SlackUser(MARIA, "maria")
        )
        assert pressed.status == 200, pressed.text
        assert module_slack.api_calls[-1] == ("views.open", "ok"), module_slack.api_calls
        submitted = module_slack.submit_view({"reason": "training run", "until": "2026-12-01"})
    assert submitted.status == 200, submitted.text
    (invoke,) = [c for c in recorder.calls[start:] if c.operation == "Invoke"]
    exempted = hand_to_guard(deployment, invoke, at, monkeypatch, recorder)
    # THEN it carries costguard:exempt through that day, written by the guard's role
    assert exempted["answer"] == "exempted", exempted
    assert notebook_state(deployment, "answer-nb-exempt")[1][Tags.EXEMPT].startswith(
        "2026-12-02T00:00:00Z"
    )
    # WHEN an admin presses "Act now" on the instance's warning (after Slack's dialog)
    act = block_actions(ADMIN, "act-now", values[instance], username="ops", response_url=url)
    acted = answer(deployment, slack_post(SIGNING.encode(), act, at), at, monkeypatch, recorder)
    assert acted.status == 200, acted.body
    (invoke,) = acted.invoked
    stopped = hand_to_guard(deployment, invoke, at, monkeypatch, recorder)
    # THEN the guard stops it at once, 50 minutes before its deadline
    assert stopped["answer"] == "act-now", stopped
    assert instance_state(deployment, instance)[0] in {"stopping", "stopped"}
    # AND at the deadline the kept notebook is not stopped
    later = warn(deployment, MIDDAY + timedelta(minutes=61), monkeypatch, recorder)
    assert "answer-nb" not in json.dumps(
        [a for a in later["actions"] if a.get("outcome") == "acted"]
    ), later
    assert notebook_state(deployment, "answer-nb")[0] == "InService"
    # AND the audit names who answered, each time
    assert {
        ("answer-keep-4h", "answer-nb", MARIA),
        ("answer-exempt", "answer-nb-exempt", MARIA),
        ("answer-act-now", instance, ADMIN),
    } <= audit_answers(deployment)
    # AND every call of each role was allowed by its synthesized policy, moto enforcing it
    answer_used = check_calls(deployment, "answer", recorder.calls_of(deployment, "answer"))
    assert {"secretsmanager:GetSecretValue", "dynamodb:PutItem", "lambda:InvokeFunction"} <= (
        answer_used
    )
    check_calls(deployment, "slack", recorder.calls_of(deployment, "slack"))
    idle_used = check_calls(deployment, "idle", recorder.calls_of(deployment, "idle"))
    assert {"sagemaker:AddTags", "ec2:StopInstances"} <= idle_used
    # AND the guard wrote no tag but its warning tag and costguard:exempt
    written = {
        t["Key"]
        for c in recorder.calls_of(deployment, "idle")
        if c.operation in ("CreateTags", "AddTags")
        for t in c.params["Tags"]
    }
    assert written == {Tags.ACTION_AFTER, Tags.EXEMPT}, written
    # AND what answers add to the guard's role was used: costguard:exempt (and no other
    # tag) on notebooks allowed the keep (on instances: the e-mail test's)
    unused = unused_statements(
        deployment,
        "idle",
        recorder.calls_of(deployment, "idle"),
        waived=GUARD_ANSWER_UNUSED,
        only=added_by_answers(deployment.world),
    )
    assert {str(g) for g in unused if g.action != "ec2:CreateTags"} == set(), unused
    # AND every grant of the notifier's role was used (the webhook, the signing secret)
    notified = recorder.calls_of(deployment, "slack")
    assert not unused_statements(deployment, "slack", notified, waived=NOTIFIER_UNUSED)


def test_an_email_link_is_taken_with_only_the_permissions_the_stack_grants(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an idle GPU instance owned by alice, warned by the idle guard (its role): the
    # warning's e-mail carries its answer links, signed with the link key the guard read
    instance = idle_instance(deployment, ALICE, MIDDAY - timedelta(hours=5))
    recorder = Recorder()
    recorder.install(monkeypatch)
    remember_tags(deployment, monkeypatch, [instance], [])
    warn(deployment, MIDDAY, monkeypatch, recorder)
    warnings_for(deployment, instance)
    token = emailed_link(deployment, instance, "Keep 4 hours")
    at = MIDDAY + timedelta(minutes=10)
    # WHEN the link is opened (a mail scanner would do the same)
    start = len(recorder.calls)
    page = answer(deployment, link_get(token), at, monkeypatch, recorder)
    # THEN a confirmation page is shown, and nothing is acted on, claimed or handed on: the
    # GET read the link key and whether the link was used (a used one says so), and wrote
    # nothing
    assert page.status == 200 and "<form" in page.body, page.body
    assert not page.invoked
    assert {(c.service, c.operation) for c in recorder.calls[start:]} == {
        ("secretsmanager", "GetSecretValue"),
        ("dynamodb", "GetItem"),
    }
    assert Tags.EXEMPT not in instance_state(deployment, instance)[1]
    # WHEN alice confirms it (the form's POST, with its CSRF token)
    form = confirm_form(page.body)
    assert set(form) == {"t", "csrf"}, form
    confirmed = answer(deployment, link_post(form), at, monkeypatch, recorder)
    # THEN the answer is handed to the idle guard's Lambda, once: the link is used up
    assert confirmed.status == 200, confirmed.body
    (invoke,) = confirmed.invoked
    reused = answer(deployment, link_post(form), at + timedelta(minutes=1), monkeypatch, recorder)
    assert reused.status == 409 and not reused.invoked, reused
    # WHEN the guard's Lambda takes it (its role) THEN the instance is kept for 4 hours
    taken = hand_to_guard(deployment, invoke, at, monkeypatch, recorder)
    assert taken["answer"] == "kept", taken
    assert instance_state(deployment, instance)[1][Tags.EXEMPT] == "2026-11-20T16:10:00Z"
    assert ("answer-keep-4h", instance, ALICE) in audit_answers(deployment)
    # AND every call of both roles was allowed by its synthesized policy
    answer_used = check_calls(deployment, "answer", recorder.calls_of(deployment, "answer"))
    assert {"dynamodb:GetItem", "dynamodb:PutItem", "lambda:InvokeFunction"} <= answer_used
    check_calls(deployment, "idle", recorder.calls_of(deployment, "idle"))
    # AND what answers add to the guard's role was used: costguard:exempt (and no other
    # tag) on instances allowed the keep (on notebooks: the Slack test's)
    unused = unused_statements(
        deployment,
        "idle",
        recorder.calls_of(deployment, "idle"),
        waived=GUARD_ANSWER_UNUSED,
        only=added_by_answers(deployment.world),
    )
    assert {str(g) for g in unused if g.action != "sagemaker:AddTags"} == set(), unused


def test_every_grant_of_the_answer_role_is_used(
    deployment: Deployment, module_slack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the guards' Lambdas the answer Lambda may hand answers to (its environment)
    from costguard.domain.signatures import ButtonClaims, sign_button

    env = function_environment(deployment.world, deployment.functions["answer"])
    guards: dict[str, str] = json.loads(env[Env.GUARD_FUNCTIONS])
    assert IDLE in guards and len(guards) >= 4, guards
    recorder = Recorder()
    recorder.install(monkeypatch)
    at = MIDDAY + timedelta(hours=2)
    # WHEN an admin answers a warning of each guard from Slack
    for n, guard in enumerate(sorted(guards)):
        resource = f"{ACCOUNT}/{REGION}/ec2-instance/i-{n:017x}"
        value = sign_button(SIGNING.encode(), ButtonClaims(guard, resource, (MARIA,)))
        press = slack_post(SIGNING.encode(), block_actions(ADMIN, "keep-4h", value), at)
        pressed = answer(deployment, press, at, monkeypatch, recorder)
        # THEN each is handed to that guard's own Lambda (the map and the grant agree)
        assert pressed.status == 200, (guard, pressed.body)
        (invoke,) = pressed.invoked
        assert invoke.params["FunctionName"] == guards[guard]
        assert invoke.status == 202, (guard, invoke.error)
    # ... and presses "Exempt…" in Slack, which opens its dialog with the bot token
    from costguard_demo.function_url import FunctionUrlServer
    from costguard_demo.slack_standin import SlackUser

    exempt = sign_button(SIGNING.encode(), ButtonClaims(IDLE, f"{ACCOUNT}/{REGION}/x/y", (MARIA,)))
    message = {
        "blocks": [
            {
                "type": "actions",
                "block_id": "costguard-answers",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "exempt",
                        "text": {"type": "plain_text", "text": "Exempt…"},
                        "value": exempt,
                    }
                ],
            }
        ]
    }

    def endpoint(event: dict[str, Any]) -> Any:
        return run_as(deployment, "answer", event, monkeypatch, recorder, at=at)

    with FunctionUrlServer(endpoint) as function_url:
        module_slack.interactivity(function_url.url + "/slack", SIGNING.encode(), lambda: at)
        assert module_slack.press(message, "exempt", SlackUser(ADMIN, "ops")).status == 200
    assert module_slack.api_calls[-1] == ("views.open", "ok"), module_slack.api_calls
    # ... and alice answers an e-mail link (its page, then its form)
    link = LinkClaims(
        f"{ACCOUNT}/{REGION}/ec2-instance/i-0f00",
        Answer.KEEP_UNTIL_TOMORROW,
        at + timedelta(hours=24),
        "n-grants",
        ALICE,
        IDLE,
    )
    page = answer(
        deployment, link_get(sign_link(LINKS.encode(), link, at)), at, monkeypatch, recorder
    )
    posted = answer(deployment, link_post(confirm_form(page.body)), at, monkeypatch, recorder)
    assert (page.status, posted.status) == (200, 200), posted.body
    # THEN every call was allowed, and every grant of the role was needed: each secret, each
    # guard's Lambda, each of its two ledger partitions (finer than by action: a grant of a
    # third secret or partition that nothing uses fails here)
    calls = recorder.calls_of(deployment, "answer")
    used = check_calls(deployment, "answer", calls)
    unused = unused_statements(deployment, "answer", calls, waived=ANSWER_ROLE_UNUSED)
    assert not unused, "granted but never used:\n" + "\n".join(sorted(map(str, unused)))
    by_action = unused_grants(deployment, "answer", used) - ANSWER_ROLE_UNUSED_ACTIONS
    assert not by_action, f"granted but never called: {sorted(by_action)}"


def test_the_answer_role_cannot_stop_delete_tag_or_write_elsewhere(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a running instance and an InService notebook of a project, an object in a
    # bucket, and a session signed with the answer Lambda's role while moto enforces IAM
    from botocore.exceptions import ClientError
    from moto.core.authorization import enable_iam_authentication
    from moto.iam.access_control import IAMRequest

    instance = idle_instance(deployment, ALICE, MIDDAY - timedelta(hours=5))
    nb_arn = notebook(deployment, "answer-nb-2", MARIA, MIDDAY - timedelta(hours=30))
    remember_tags(deployment, monkeypatch, [instance], [nb_arn])
    s3 = deployment.session.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="vision-data")
    s3.put_object(Bucket="vision-data", Key="weights.bin", Body=b"x")
    world = deployment.world
    role = world.function_role(deployment.functions["answer"])
    table = function_environment(world, deployment.functions["answer"])[Env.TABLE_NAME]
    scan = world.physical[find_function(world, "scan.handler")]["Ref"]
    recorder = Recorder()
    recorder.install(monkeypatch)
    me = as_role(deployment, "answer")
    monkeypatch.setattr(IAMRequest, "check_signature", lambda self: None)

    def attempt(call: Any) -> tuple[int, Call]:
        start = len(recorder.calls)
        try:
            call()
        except ClientError as exc:
            status = int(exc.response["ResponseMetadata"]["HTTPStatusCode"])
        else:
            status = 200
        (made,) = recorder.calls[start:]
        return status, made

    def item(pk: str) -> dict[str, Any]:
        return {"pk": {"S": pk}, "sk": {"S": "probe"}}

    with enable_iam_authentication():
        # WHEN it tries to stop, tag or delete (actions it is not granted at all)
        mutations = {
            "stop the notebook": lambda: me.client("sagemaker").stop_notebook_instance(
                NotebookInstanceName="answer-nb-2"
            ),
            "stop the instance": lambda: me.client("ec2").stop_instances(InstanceIds=[instance]),
            "tag the instance": lambda: me.client("ec2").create_tags(
                Resources=[instance], Tags=[{"Key": Tags.EXEMPT, "Value": "forever"}]
            ),
            "tag the notebook": lambda: me.client("sagemaker").add_tags(
                ResourceArn=nb_arn, Tags=[{"Key": Tags.EXEMPT, "Value": "forever"}]
            ),
            "delete the object": lambda: me.client("s3").delete_object(
                Bucket="vision-data", Key="weights.bin"
            ),
            "update its own record": lambda: me.client("dynamodb").update_item(
                TableName=table,
                Key=item("ONCE#slack-request"),
                UpdateExpression="SET #s = :s",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":s": {"S": "done"}},
            ),
        }
        refused = {what: attempt(call) for what, call in mutations.items()}
        # ... or to reach past its grants' resources and conditions: a Lambda that is not a
        # guard, a ledger partition that is not one of its two
        reaches = {
            "invoke the scan": lambda: me.client("lambda").invoke(
                FunctionName=scan, InvocationType="Event", Payload=b"{}"
            ),
            "write a claim of the guards": lambda: me.client("dynamodb").put_item(
                TableName=table, Item=item("ONCE#answered")
            ),
            "write the audit": lambda: me.client("dynamodb").put_item(
                TableName=table, Item=item(f"SCOPE#{ACCOUNT}#AUDIT#2026-11")
            ),
            "read a project's figures": lambda: me.client("dynamodb").get_item(
                TableName=table, Key=item(f"SCOPE#{ACCOUNT}#PROJECT#vision")
            ),
        }
        reached = {what: attempt(call) for what, call in reaches.items()}
        # (and, for contrast, what it may do: a record in its own partition)
        allowed = attempt(
            lambda: me.client("dynamodb").put_item(TableName=table, Item=item("ONCE#answer-link"))
        )
    # THEN moto refuses every mutation (403), and so does the synthesized policy
    for what, (status, call) in refused.items():
        assert status == 403, (what, status, call.error)
        assert refused_by_moto([call]), what
        assert denied_by_policy(world, role, [call]), what
    # AND the reaches past its resources and conditions are refused by the policy: moto lets
    # them through (it evaluates no resource and no condition), IAM would not
    for what, (_status, call) in reached.items():
        assert denied_by_policy(world, role, [call]), what
    # AND the one write it is meant to make is allowed by both
    status, call = allowed
    assert status == 200 and not denied_by_policy(world, role, [call]), call
    # (nothing was stopped, tagged or deleted)
    assert instance_state(deployment, instance)[0] == "running"
    assert Tags.EXEMPT not in instance_state(deployment, instance)[1]
    status, tags = notebook_state(deployment, "answer-nb-2")
    assert status == "InService" and Tags.EXEMPT not in tags
    assert s3.get_object(Bucket="vision-data", Key="weights.bin")["Body"].read() == b"x"
    assert role_may(world, role, "lambda:InvokeFunction", world.arn(deployment.functions["idle"]))


def test_a_guard_role_writes_no_other_tag_through_the_answer_path(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a project's instance and notebook, an instance without a project tag, and a
    # session signed with the idle guard's role while moto enforces IAM
    from botocore.exceptions import ClientError
    from moto.core.authorization import enable_iam_authentication

    warning_tag = Tags.ACTION_AFTER  # the idle guard's (max-lifetime warns with its own)
    project = idle_instance(deployment, ALICE, MIDDAY - timedelta(hours=5))
    nb_arn = notebook(deployment, "answer-nb-3", MARIA, MIDDAY - timedelta(hours=30))
    ec2 = deployment.session.client("ec2", region_name=REGION)
    stray = ec2.run_instances(
        ImageId="ami-12345678", InstanceType="g5.xlarge", MinCount=1, MaxCount=1
    )["Instances"][0]["InstanceId"]
    remember_tags(deployment, monkeypatch, [project, stray], [nb_arn])
    world = deployment.world
    role = world.function_role(deployment.functions["idle"])
    recorder = Recorder()
    recorder.install(monkeypatch)
    guard = as_role(deployment, "idle")

    def tag(resource: str, key: str) -> None:
        with enable_iam_authentication(), contextlib.suppress(ClientError):
            if resource.startswith("arn:"):
                guard.client("sagemaker").add_tags(
                    ResourceArn=resource, Tags=[{"Key": key, "Value": "x"}]
                )
            else:
                guard.client("ec2").create_tags(
                    Resources=[resource], Tags=[{"Key": key, "Value": "x"}]
                )

    # WHEN it writes costguard:exempt and its warning tag where the answer path writes them
    for resource in (project, nb_arn):
        for key in (Tags.EXEMPT, warning_tag):
            tag(resource, key)
    allowed = list(recorder.calls)
    # ... and any other tag, or costguard:exempt on a resource of no project
    for resource in (project, nb_arn):
        for key in (Tags.OWNER, Tags.PROJECT, "Name"):
            tag(resource, key)
    tag(stray, Tags.EXEMPT)
    refused = recorder.calls[len(allowed) :]
    # THEN the first are allowed by the synthesized policy, and each other one is refused
    assert not denied_by_policy(world, role, allowed), denied_by_policy(world, role, allowed)
    assert len(refused) == 7
    for call in refused:
        assert denied_by_policy(world, role, [call]), call.params


def test_an_answer_role_without_the_invoke_grant_is_refused_by_the_enforced_run(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the answer role's policy without lambda:InvokeFunction (a grant that drifted)
    from costguard.domain.signatures import ButtonClaims, sign_button
    from tests.support.iam_enforced import moto_dialect

    world = deployment.world
    role = world.physical[world.function_role(deployment.functions["answer"])]["Ref"]
    iam = deployment.session.client("iam")
    granted = moto_dialect(
        world.policy_document(world.function_role(deployment.functions["answer"]))
    )
    drifted = {
        **granted,
        "Statement": [
            s for s in granted["Statement"] if "lambda:InvokeFunction" not in s["Action"]
        ],
    }
    iam.put_role_policy(RoleName=role, PolicyName="synthesized", PolicyDocument=json.dumps(drifted))
    recorder = Recorder()
    recorder.install(monkeypatch)
    at = MIDDAY + timedelta(hours=3)
    value = sign_button(
        SIGNING.encode(), ButtonClaims(IDLE, f"{ACCOUNT}/{REGION}/ec2-instance/i-0abc", (MARIA,))
    )
    try:
        # WHEN maria presses "Keep 4 hours"
        press = slack_post(SIGNING.encode(), block_actions(MARIA, "keep-4h", value), at)
        pressed = answer(deployment, press, at, monkeypatch, recorder)
    finally:
        iam.put_role_policy(
            RoleName=role, PolicyName="synthesized", PolicyDocument=json.dumps(granted)
        )
    # THEN moto refuses the hand-off (enforcement, and moto's name for the action, are
    # real), and the endpoint says it could not hand the answer on, rather than "done"
    (invoke,) = pressed.invoked
    assert invoke.status == 403, (invoke.status, invoke.error)
    assert pressed.status == 503, pressed.body
