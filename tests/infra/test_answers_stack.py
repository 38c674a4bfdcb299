"""Answers in the stack (issue 23): with `answers` on, the answer endpoint (a public Lambda
Function URL), its two secrets, the Slack notifier's signing secret and the guards' right to
write `costguard:exempt`; with it off (the default), none of it.

The roles are judged by what they may do (tests/infra/iam_model.py), their conditions
evaluated, not by the statements they hold.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from costguard.env import Env
from costguard.guards import SPECS
from costguard.iam import Permission
from costguard_infra.config import ConfigError, CostGuardConfig
from costguard_infra.stack import ANSWER_HANDLER, PUBLIC_URL_REASON
from tests.infra.iam_model import ACCOUNT, REGION, World, as_list, role_may
from tests.infra.synth import ANSWERS_CONTEXT, ORG_ID, synthesize_answers

pytestmark = pytest.mark.infra

ANSWERS = ANSWERS_CONTEXT
PROJECT = {"aws:ResourceTag/costguard:project": "llm-pretraining"}
INSTANCE = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-0123456789abcdef0"
NOTEBOOK = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:notebook-instance/nb"
VOLUME = f"arn:aws:ec2:{REGION}:{ACCOUNT}:volume/vol-0123456789abcdef0"


@pytest.fixture(scope="module")
def on() -> World:
    return World(synthesize_answers())


@pytest.fixture(scope="module")
def off(body: dict[str, Any]) -> World:
    return World(body)


def _function(world: World, handler: str) -> str:
    (logical,) = [
        k
        for k, f in world.resources("AWS::Lambda::Function").items()
        if f["Properties"]["Handler"] == handler
    ]
    return logical


def _guards(world: World) -> dict[str, str]:
    """Guard name -> its Lambda's logical id."""
    return {
        f["Properties"]["Environment"]["Variables"][Env.GUARD]: k
        for k, f in world.resources("AWS::Lambda::Function").items()
        if Env.GUARD in f["Properties"].get("Environment", {}).get("Variables", {})
    }


def _variables(world: World, logical: str) -> dict[str, Any]:
    variables: dict[str, Any] = world.props(logical).get("Environment", {}).get("Variables", {})
    return variables


def _secret(world: World, needle: str) -> str:
    (logical,) = [k for k in world.resources("AWS::SecretsManager::Secret") if needle in k]
    return world.physical[logical]["Ref"]


def _exempt(tag_keys: str = "costguard:exempt") -> dict[str, str]:
    return {**PROJECT, "aws:TagKeys": tag_keys}


# -- off (the default) -----------------------------------------------------------------------


def test_answers_off_deploys_no_endpoint_no_secret_and_no_exempt_tagging(off: World) -> None:
    # GIVEN the default context (answers off)
    # THEN there is no Function URL and no answer Lambda
    assert off.resources("AWS::Lambda::Url") == {}
    handlers = {f["Properties"]["Handler"] for f in off.resources("AWS::Lambda::Function").values()}
    assert ANSWER_HANDLER not in handlers
    # AND the only secret is the Slack webhook's
    assert [k for k in off.resources("AWS::SecretsManager::Secret")] == [
        k for k in off.resources("AWS::SecretsManager::Secret") if "SlackWebhook" in k
    ]
    assert len(off.resources("AWS::SecretsManager::Secret")) == 1
    # AND no Lambda gets an answer variable, the Slack notifier signs nothing
    answer_variables = {
        Env.ANSWER_ADMINS,
        Env.SLACK_SIGNING_SECRET,
        Env.LINK_SECRET,
        Env.GUARD_FUNCTIONS,
        Env.TIME_ZONE,
        Env.ANSWER_URL,
    }
    for logical in off.resources("AWS::Lambda::Function"):
        assert answer_variables.isdisjoint(_variables(off, logical)), logical
    # AND the guards' Lambdas keep the names CloudFormation generates (nothing is renamed)
    for name, logical in _guards(off).items():
        assert "FunctionName" not in off.props(logical), name
    # AND no guard role may write costguard:exempt
    for name, logical in _guards(off).items():
        role = off.function_role(logical)
        for arn in (INSTANCE, NOTEBOOK, VOLUME):
            for action in ("ec2:CreateTags", "sagemaker:AddTags"):
                assert not role_may(off, role, action, arn, _exempt()), (name, action, arn)


# -- on ---------------------------------------------------------------------------------------


def test_the_answer_endpoint_is_a_public_function_url_with_its_reason(on: World) -> None:
    # GIVEN answers on
    fn = _function(on, ANSWER_HANDLER)
    # THEN one Function URL, with no AWS auth (Slack and mail clients cannot sign), targets
    # the answer Lambda
    ((logical, url),) = on.resources("AWS::Lambda::Url").items()
    assert url["Properties"]["AuthType"] == "NONE"
    assert on.resolve(url["Properties"]["TargetFunctionArn"]) == on.arn(fn)
    # AND the acknowledgement names why, in cdk-nag's form, on the resource
    rules = url["Metadata"]["cdk_nag"]["rules_to_suppress"]
    assert rules == [{"id": "LambdaFunctionUrlAuth", "reason": PUBLIC_URL_REASON}]
    assert "HMAC" in PUBLIC_URL_REASON
    # AND the public may invoke it through its URL only: InvokeFunctionUrl, and
    # InvokeFunction only when invoked via the Function URL (AWS's two-permission model)
    permissions = {
        p["Properties"]["Action"]: p["Properties"]
        for p in on.resources("AWS::Lambda::Permission").values()
        if on.resolve(p["Properties"]["FunctionName"]) in {on.arn(fn), fn}
    }
    assert set(permissions) == {"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"}, logical
    assert permissions["lambda:InvokeFunctionUrl"]["FunctionUrlAuthType"] == "NONE"
    assert permissions["lambda:InvokeFunction"]["InvokedViaFunctionUrl"] is True


def test_the_answer_endpoint_has_reserved_concurrency(on: World) -> None:
    # GIVEN answerConcurrency=7
    # THEN a flood of requests queues at 7, and never starves the guards
    assert on.props(_function(on, ANSWER_HANDLER))["ReservedConcurrentExecutions"] == 7


def test_the_answer_role_invokes_only_the_guards_and_reads_only_its_two_secrets(
    on: World,
) -> None:
    # GIVEN the answer Lambda's role
    fn = _function(on, ANSWER_HANDLER)
    role = on.function_role(fn)
    guards = _guards(on)
    assert set(guards) == set(SPECS) | {"toy"}
    # THEN it may invoke each guard's own Lambda
    for logical in guards.values():
        assert role_may(on, role, "lambda:InvokeFunction", on.arn(logical))
    # AND no other Lambda (itself, the scan, the notifier), nor a guard's version
    others = set(on.resources("AWS::Lambda::Function")) - set(guards.values())
    assert others
    for logical in others:
        assert not role_may(on, role, "lambda:InvokeFunction", on.arn(logical)), logical
    some_guard = on.arn(next(iter(guards.values())))
    assert not role_may(on, role, "lambda:InvokeFunction", f"{some_guard}:1")
    # AND it reads the Slack signing secret and the link secret, and not the webhook
    signing, link = _secret(on, "SlackSigning"), _secret(on, "AnswerLink")
    assert role_may(on, role, "secretsmanager:GetSecretValue", signing)
    assert role_may(on, role, "secretsmanager:GetSecretValue", link)
    webhook = _secret(on, "SlackWebhook")
    assert not role_may(on, role, "secretsmanager:GetSecretValue", webhook)
    # AND its variables name them, the guards' Lambdas and the time zone
    variables = _variables(on, fn)
    assert on.resolve(variables[Env.SLACK_SIGNING_SECRET]) == "costguard/slack-signing-secret"
    assert on.resolve(variables[Env.LINK_SECRET]) == link
    mapping = json.loads(on.resolve(variables[Env.GUARD_FUNCTIONS]))
    assert mapping == {name: on.physical[logical]["Ref"] for name, logical in guards.items()}
    assert variables[Env.TIME_ZONE] == "Europe/Paris"
    assert variables[Env.ANSWER_ADMINS] == "U024BE7LH,ops@example.com"


def test_the_answer_role_writes_only_its_two_ledger_partitions(on: World) -> None:
    # GIVEN the answer Lambda's role and the ledger
    role = on.function_role(_function(on, ANSWER_HANDLER))
    (table,) = on.resources("AWS::DynamoDB::Table")
    arn = on.arn(table)
    # THEN Slack requests may be recorded once (a conditional put), and used links recorded
    # and read
    for partition, action in (
        ("ONCE#slack-request", "dynamodb:PutItem"),
        ("ONCE#answer-link", "dynamodb:PutItem"),
        ("ONCE#answer-link", "dynamodb:GetItem"),
    ):
        assert role_may(on, role, action, arn, {"dynamodb:LeadingKeys": partition})
    # AND a Slack request is never read back (found by the IAM-enforced run: unused)
    assert not role_may(
        on, role, "dynamodb:GetItem", arn, {"dynamodb:LeadingKeys": "ONCE#slack-request"}
    )
    # AND nothing else of the ledger: not the guards' claims, not the audit, not the figures
    for partition in ("ONCE#answered", "ONCE#warning", f"SCOPE#{ACCOUNT}#AUDIT#2026-12"):
        assert not role_may(on, role, "dynamodb:PutItem", arn, {"dynamodb:LeadingKeys": partition})
    for action in ("dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:Query", "dynamodb:Scan"):
        assert not role_may(
            on, role, action, arn, {"dynamodb:LeadingKeys": "ONCE#slack-request"}
        ), action


def test_the_answer_role_cannot_stop_delete_or_tag_anything(on: World) -> None:
    # GIVEN the answer Lambda's role
    role = on.function_role(_function(on, ANSWER_HANDLER))
    # THEN it holds no mutating EC2, SageMaker, S3 or EKS action at all
    granted = {a for s in on.role_statements(role) for a in as_list(s["Action"])}
    mutating = {
        a
        for a in granted
        if a.split(":")[0] in {"ec2", "sagemaker", "s3", "eks"} and Permission((a,), "").mutating
    }
    assert mutating == set()
    # AND, asked directly, may not stop, delete or tag a project's resources
    for action, arn in (
        ("ec2:StopInstances", INSTANCE),
        ("ec2:CreateTags", INSTANCE),
        ("ec2:DeleteVolume", VOLUME),
        ("sagemaker:StopNotebookInstance", NOTEBOOK),
        ("sagemaker:AddTags", NOTEBOOK),
        ("s3:DeleteObject", "arn:aws:s3:::data/key"),
    ):
        assert not role_may(on, role, action, arn, _exempt()), action


def test_guard_roles_may_write_costguard_exempt_and_no_other_new_tag(on: World) -> None:
    # GIVEN answers on, and the guards whose actuators tag what they warn
    guards = _guards(on)
    cases = {
        "idle-notebooks": (("ec2:CreateTags", INSTANCE), ("sagemaker:AddTags", NOTEBOOK)),
        "max-lifetime": (("ec2:CreateTags", INSTANCE), ("sagemaker:AddTags", NOTEBOOK)),
        "stale-volumes": (("ec2:CreateTags", VOLUME),),
    }
    for name, requests in cases.items():
        role = on.function_role(guards[name])
        for action, arn in requests:
            # THEN costguard:exempt may be written on a resource tagged with a project
            assert role_may(on, role, action, arn, _exempt()), (name, action)
            # AND not on a resource without a project tag
            assert not role_may(on, role, action, arn, {"aws:TagKeys": "costguard:exempt"})
            # AND no other key, alone or alongside it, and not a request naming no key
            for keys in ("costguard:owner", "costguard:project", "costguard:exempt,Name"):
                assert not role_may(on, role, action, arn, _exempt(keys)), (name, keys)
            assert not role_may(on, role, action, arn, PROJECT), (name, "no key")
            # AND the tag is never removed through it
            delete = "ec2:DeleteTags" if action.startswith("ec2") else "sagemaker:DeleteTags"
            assert not role_may(on, role, delete, arn, _exempt()), (name, delete)


def test_answer_variables_go_only_to_the_lambdas_that_take_answers(on: World) -> None:
    # GIVEN answers on
    answer = _function(on, ANSWER_HANDLER)
    guards = set(_guards(on).values())
    for logical in on.resources("AWS::Lambda::Function"):
        variables = _variables(on, logical)
        # THEN the admins and the time zone reach the answer and guard Lambdas only (the
        # hub's 4 KB is full)
        for taking in (Env.ANSWER_ADMINS, Env.TIME_ZONE):
            assert (taking in variables) == (logical in guards | {answer}), (logical, taking)
        # AND the guards' map, the answer Lambda only
        for only_answer in (Env.GUARD_FUNCTIONS,):
            assert (only_answer in variables) == (logical == answer), (logical, only_answer)
        # AND the link key, the answer Lambda (which checks links) and the guards' (which
        # sign them); the endpoint's address, the guards' only (their links' base)
        assert (Env.LINK_SECRET in variables) == (logical in guards | {answer}), logical
        assert (Env.ANSWER_URL in variables) == (logical in guards), logical


def test_guard_roles_read_the_link_key_to_sign_their_links_and_no_other_new_secret(
    on: World,
) -> None:
    # GIVEN answers on, and the link key and the endpoint's URL
    link = _secret(on, "AnswerLink")
    ((url_logical, _),) = on.resources("AWS::Lambda::Url").items()
    url = on.physical[url_logical]["FunctionUrl"]
    for name, logical in _guards(on).items():
        role = on.function_role(logical)
        variables = on.resolve(_variables(on, logical))
        # THEN each guard is told the link key and the endpoint's address
        assert variables[Env.LINK_SECRET] == link, name
        assert variables[Env.ANSWER_URL] == url, name
        # AND may read the link key, and decrypt it through Secrets Manager only
        assert role_may(on, role, "secretsmanager:GetSecretValue", link), name
        # AND no other secret: not the Slack signing secret, the bot token or the webhook
        for other in ("SlackSigning", "SlackBotToken", "SlackWebhook"):
            secret = _secret(on, other)
            assert not role_may(on, role, "secretsmanager:GetSecretValue", secret), (name, other)
        # AND nothing but reading it: no write, no rotation, no deletion
        for action in (
            "secretsmanager:PutSecretValue",
            "secretsmanager:UpdateSecret",
            "secretsmanager:RotateSecret",
            "secretsmanager:DeleteSecret",
        ):
            assert not role_may(on, role, action, link), (name, action)


def test_guards_with_answers_have_fixed_names_the_answer_side_names_without_a_cycle(
    on: World,
) -> None:
    from costguard_infra.stack import guard_function_name

    # GIVEN answers on: the guards refer to the answer Lambda's URL (their links' address)
    guards = _guards(on)
    answer = _function(on, ANSWER_HANDLER)
    # THEN the template was built (Template.from_stack refuses one whose resources wait,
    # through others, for themselves: "Template is undeployable ... dependency cycle", as
    # it did when the answer side referred to the guards)
    assert on.resources("AWS::Lambda::Url")
    # AND each guard's Lambda has its name from the stack's name
    for name, logical in guards.items():
        assert on.props(logical)["FunctionName"] == f"CostGuard-guard-{name}"
    # AND the answer side (its Lambda, its role's policies) names them by those strings,
    # never by a reference to the guards' resources: a reference back would be a cycle
    guard_ids = set(guards.values())
    role = on.function_role(answer)
    answer_side = [on.template["Resources"][answer]] + [
        r
        for r in on.resources("AWS::IAM::Policy").values()
        if {x.get("Ref") for x in r["Properties"].get("Roles", [])} == {role}
    ]
    mentioned = json.dumps(answer_side)
    assert not [g for g in guard_ids if f'"{g}"' in mentioned]
    # AND a stack name too long for Lambda's 64 characters still gives distinct valid names
    long_a, long_b = "A" * 120 + "x", "A" * 120 + "y"
    names = {guard_function_name(stack, g) for stack in (long_a, long_b) for g in guards}
    assert len(names) == 2 * len(guards)
    assert all(len(n) <= 64 for n in names)


def test_what_the_stack_adds_to_a_guards_variables_fits_the_room_kept_for_it() -> None:
    # The context's settings (and the admins) may take all of Lambda's 4 KB but
    # STACK_VARIABLES_BYTES: what the stack adds to a guard's, the link key's ARN and the
    # endpoint's URL included, must fit the rest, with names as long as AWS makes them.
    from costguard.config_spec import STACK_VARIABLES_BYTES

    body = synthesize_answers()
    config = CostGuardConfig.from_context({k: v for k, v in ANSWERS.items() if ":" not in k})
    from_context = {**config.environment(), Env.ANSWER_ADMINS: ""}
    region = "ap-southeast-2"
    long: dict[str, dict[str, str]] = {}
    for logical, resource in body["Resources"].items():
        name = f"CostGuard-{logical[:36]}-ABCDEFGHIJKLM"
        if resource["Type"] == "AWS::SecretsManager::Secret":
            arn = f"arn:aws-us-gov:secretsmanager:{region}:{ACCOUNT}:secret:{name}-AbCdEf"
            long[logical] = {"Ref": arn}
        elif resource["Type"] == "AWS::Lambda::Url":
            long[logical] = {"FunctionUrl": f"https://{'x' * 32}.lambda-url.{region}.on.aws/"}
        elif resource["Type"] == "AWS::SNS::Topic":
            arn = f"arn:aws-us-gov:sns:{region}:{ACCOUNT}:{name}"
            long[logical] = {"Ref": arn, "TopicArn": arn}
        elif resource["Type"] == "AWS::DynamoDB::Table":
            long[logical] = {"Ref": name}
    world = World(body, region=region, physical=long)
    for name, logical in _guards(world).items():
        variables = world.resolve(_variables(world, logical))
        added = {k: v for k, v in variables.items() if k not in from_context}
        assert {Env.LINK_SECRET, Env.ANSWER_URL} <= set(added)
        assert len(json.dumps(added).encode()) <= STACK_VARIABLES_BYTES, (name, added)


def test_the_slack_notifier_signs_buttons_with_the_signing_secret(on: World) -> None:
    # GIVEN answers on
    notifier = _function(on, "costguard.handlers.slack_notifier.handler")
    role = on.function_role(notifier)
    signing = _secret(on, "SlackSigning")
    # THEN the notifier is told the signing secret, and may read it, but not the link key
    variables = _variables(on, notifier)
    assert on.resolve(variables[Env.SLACK_SIGNING_SECRET]) == "costguard/slack-signing-secret"
    assert role_may(on, role, "secretsmanager:GetSecretValue", signing)
    assert not role_may(on, role, "secretsmanager:GetSecretValue", _secret(on, "AnswerLink"))


def test_the_slack_secrets_are_placeholders_and_the_link_key_generated(on: World) -> None:
    # GIVEN answers on
    secrets = on.resources("AWS::SecretsManager::Secret")
    (signing,) = [s["Properties"] for k, s in secrets.items() if "SlackSigning" in k]
    (bot,) = [s["Properties"] for k, s in secrets.items() if "SlackBotToken" in k]
    (link,) = [s["Properties"] for k, s in secrets.items() if "AnswerLink" in k]
    # THEN all are encrypted with CostGuard's key; no value is in the template
    for props in (signing, bot, link):
        assert "KmsKeyId" in props
        assert "SecretString" not in props
    assert signing["Name"] == "costguard/slack-signing-secret"
    assert bot["Name"] == "costguard/slack-bot-token"
    assert link["GenerateSecretString"]["PasswordLength"] >= 32


def test_only_the_answer_role_reads_the_slack_bot_token(on: World) -> None:
    # GIVEN answers on: the bot token opens the Exempt… dialog (views.open)
    bot = _secret(on, "SlackBotToken")
    answer = _function(on, ANSWER_HANDLER)
    answer_role = on.function_role(answer)
    # THEN the answer Lambda is told its name and may read it, with CostGuard's key
    variables = _variables(on, answer)
    assert on.resolve(variables[Env.SLACK_BOT_TOKEN]) == "costguard/slack-bot-token"
    assert role_may(on, answer_role, "secretsmanager:GetSecretValue", bot)
    (key,) = on.resources("AWS::KMS::Key")
    assert role_may(on, answer_role, "kms:Decrypt", on.arn(key))
    # AND no other Lambda is told it, and no other role may read it: not the notifier, not a
    # guard, not the scan
    for logical in set(on.resources("AWS::Lambda::Function")) - {answer}:
        assert Env.SLACK_BOT_TOKEN not in _variables(on, logical), logical
    others = set(on.resources("AWS::IAM::Role")) - {answer_role}
    assert others
    for role in others:
        assert not role_may(on, role, "secretsmanager:GetSecretValue", bot), role
    # AND the operator is told where to put it
    outputs = on.template["Outputs"]
    (name,) = [o for k, o in outputs.items() if k.startswith("SlackBotTokenSecretName")]
    assert on.resolve(name["Value"]) == "costguard/slack-bot-token"


def test_cdk_nag_finds_nothing_unacknowledged_with_answers_on() -> None:
    from costguard_infra.app_builder import ACKNOWLEDGEMENTS
    from tests.infra.synth import nag_findings

    # GIVEN the app with answers on, synthesized with no acknowledgement at all
    findings = nag_findings(context=ANSWERS)
    # THEN every finding is one the stack already acknowledges (the link key's rotation
    # joins the webhook's under AwsSolutions-SMG4), and none is left unacknowledged
    assert sorted(findings - set(ACKNOWLEDGEMENTS)) == []
    # AND the endpoint adds no new kind of finding to acknowledge
    assert findings == nag_findings()


# -- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("context", "named"),
    [
        ({"answers": True, "orgAccounts": "discover", "orgId": ORG_ID}, "`answers`"),
        ({"timeZone": "Mars/Olympus"}, "`timeZone`"),
        ({"answerConcurrency": 0}, "`answerConcurrency`"),
        ({"answerConcurrency": 101}, "`answerConcurrency`"),
        ({"answerAdmins": "maria"}, "`answerAdmins`"),
        ({"answerAdmins": '["a,b@example.com"]'}, "`answerAdmins`"),
        ({"slackSigningSecretName": "no spaces"}, "`slackSigningSecretName`"),
        ({"slackBotTokenSecretName": "no spaces"}, "`slackBotTokenSecretName`"),
    ],
)
def test_answer_settings_are_checked_at_synth(context: dict[str, Any], named: str) -> None:
    # GIVEN a wrong answer setting WHEN the context is read THEN the error names its key
    with pytest.raises(ConfigError, match=named):
        CostGuardConfig.from_context(context)


def test_a_long_admin_list_that_would_not_fit_a_guards_environment_is_refused() -> None:
    # GIVEN 300 admins: the guards' Lambdas carry them on top of the scan's variables
    admins = ",".join(f"admin{n:03d}@example.com" for n in range(300))
    # WHEN the context is read THEN the synth refuses, naming answerAdmins
    with pytest.raises(ConfigError, match="`answerAdmins`"):
        CostGuardConfig.from_context({"answers": True, "answerAdmins": admins})
    # AND without answers nobody gets them: nothing to refuse
    CostGuardConfig.from_context({"answerAdmins": admins})


def test_answer_settings_read_their_string_forms() -> None:
    # GIVEN the settings as -c gives them
    config = CostGuardConfig.from_context(
        {"answers": "true", "answerAdmins": "U024BE7LH, ops@example.com", "timeZone": "Asia/Tokyo"}
    )
    # THEN they read as values, and no Lambda gets them from the settings' variables
    assert config.answers is True
    assert config.answer_admins == ("U024BE7LH", "ops@example.com")
    assert config.time_zone == "Asia/Tokyo"
    assert Env.ANSWER_ADMINS not in config.environment()
    assert Env.TIME_ZONE not in config.environment()
