"""Demo chapter: a warning answered from Slack, then answered again.

An idle GPU notebook whose owner is a Slack member is warned by the deployed idle guard (its
Lambda's handler, on the embedded AWS). The warning reaches the Slack stand-in with its
buttons; the owner presses **Keep 4 hours** there. The stand-in signs the press as Slack
does and sends it to the answer endpoint (its handler behind a local HTTP server), which
hands it to the guard's own handler: the notebook is tagged ``costguard:exempt`` for 4
hours and the message says so in place. At the warning's deadline the guard leaves it.
After the 4 hours it is idle still, so it is warned again; this time the owner presses
**Act now**, and it is stopped at once. The audit trail names who answered, each time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from costguard.domain.tags import Tags
from costguard.env import Env
from costguard.rendering import ANSWER_BUTTONS
from costguard_demo.idle import launch_notebook, publish_metrics
from costguard_demo.server import DEMO_ACCOUNT

_LABELS = {action: f'"{label}"' for action, label in ANSWER_BUTTONS}
#: The guard that warns, and its grace period (the deployment's default, 60 minutes).
GUARD = "idle-notebooks"
GRACE = timedelta(minutes=60)
#: The Slack member who owns the notebook, and the name the stand-in gives her.
OWNER = "U0DEMOALICE"
OWNER_NAME = "alice"
#: What the deployed secrets hold in the embedded account (the values are the demo's own).
SIGNING_SECRET_NAME = "costguard/slack-signing-secret"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
LINK_SECRET_NAME = "costguard/answer-link-key"
LINK_SECRET = "demo-link-key-0123456789abcdef0123456789abcdef"


@dataclass
class AnswerStory:
    """What happened, in order, for the caller (the demo's summary, the e2e test)."""

    notebook: str
    #: (time, what) the story's steps, as the narrator told them.
    steps: list[tuple[datetime, str]] = field(default_factory=list)
    #: Every Slack message the warnings posted, and every in-place update.
    warnings: list[dict[str, Any]] = field(default_factory=list)
    updates: list[str] = field(default_factory=list)
    #: The notebook's state and tags after each step.
    states: list[tuple[str, Mapping[str, str]]] = field(default_factory=list)
    #: The answer endpoint's HTTP status for each press.
    statuses: list[int] = field(default_factory=list)
    #: What each run of the guard did with the notebook ("warned", "cleared", ...).
    runs: list[str] = field(default_factory=list)


def guard_environment(region: str, table: str, topic: str) -> dict[str, str]:
    """The idle guard Lambda's environment, as the stack sets it with ``answers`` on."""
    return {
        Env.REGIONS: region,
        Env.TABLE_NAME: table,
        Env.SCOPE: DEMO_ACCOUNT,
        Env.TOPIC_ARN: topic,
        Env.DRY_RUN: "false",
        Env.GUARD: GUARD,
        Env.SAGEMAKER_TAGS: "per-resource",
        Env.SAGEMAKER_STUDIO: "false",
        # The embedded AWS (moto) does not evaluate SEARCH: list the GPU series first.
        Env.IDLE_GPU_DISCOVERY: "list",
        Env.SLACK_SIGNING_SECRET: SIGNING_SECRET_NAME,
    }


def answer_environment(table: str) -> dict[str, str]:
    """The answer Lambda's environment, as the stack sets it (no bot token: the demo's story
    presses Keep and Act now, not Exempt…)."""
    return {
        Env.SLACK_SIGNING_SECRET: SIGNING_SECRET_NAME,
        Env.LINK_SECRET: LINK_SECRET_NAME,
        Env.TABLE_NAME: table,
        Env.SCOPE: DEMO_ACCOUNT,
        Env.TIME_ZONE: "UTC",
    }


def put_secrets(session: Any, region: str) -> None:
    """The two secrets ``answers=true`` deploys, with the values the operator puts in."""
    sm = session.client("secretsmanager", region_name=region)
    sm.create_secret(Name=SIGNING_SECRET_NAME, SecretString=SIGNING_SECRET)
    sm.create_secret(Name=LINK_SECRET_NAME, SecretString=LINK_SECRET)


def run_answer_chapter(
    session: Any,
    region: str,
    say: Callable[[str], None],
    now: datetime,
    *,
    slack: Any,
    table: str,
    topic: str,
    deliver: Callable[[], None],
    home: str | None = None,
) -> AnswerStory:
    """The answered warning's story from ``now`` (see the module's docstring).

    ``slack``: the stand-in the warnings reach; ``deliver`` hands what the alert topic holds
    to the Slack notifier (signing the answer buttons), as SNS would. The secrets are the
    caller's to put first (:func:`put_secrets`). ``home``: the deployment's region (the
    ledger's), when the notebook is in another."""
    home = home or region
    import boto3

    from costguard.handlers.act import process as run_guard_lambda
    from costguard.handlers.answer import process as answer_endpoint
    from costguard.settings import Settings
    from costguard.wiring.answers import answer_desk
    from costguard_demo.answer_queue import GuardsInProcess
    from costguard_demo.function_url import FunctionUrlServer
    from costguard_demo.slack_standin import SlackUser

    settings = Settings.from_env(guard_environment(region, table, topic))
    notebook = launch_notebook(
        session,
        region,
        "answered-gpu-notebook",
        now - timedelta(hours=3),
        **{Tags.OWNER: OWNER},
    )
    publish_metrics(
        session, region, notebook, now - timedelta(hours=2), now + timedelta(hours=6), 0
    )
    story = AnswerStory(notebook)
    clock = [now]
    queue = GuardsInProcess(settings, session, lambda: clock[0], slack_origin=slack.origin)
    # The answer Lambda as deployed (its secrets read from the embedded Secrets Manager),
    # but for where it hands answers: the guard's handler here, not an invoke of its Lambda.
    desk = answer_desk(
        answer_environment(table),
        boto3.Session(region_name=home),
        queue=queue,
        slack_api_origin=slack.origin,
        slack_webhook_origin=slack.origin,
    )
    ec2 = session.client("ec2", region_name=region)

    def told(what: str) -> None:
        story.steps.append((clock[0], what))
        say(f"  {clock[0]:%H:%M} UTC: {what}")

    def state() -> tuple[str, Mapping[str, str]]:
        (i,) = ec2.describe_instances(InstanceIds=[notebook])["Reservations"][0]["Instances"]
        seen = (i["State"]["Name"], {t["Key"]: t["Value"] for t in i.get("Tags", [])})
        story.states.append(seen)
        return seen

    def guard_runs(at: datetime) -> None:
        clock[0] = at
        report = run_guard_lambda({"guard": GUARD, "time": at.isoformat()}, settings, session, at)
        mine = [o for o in report.outcomes if o.decision.target.id == notebook]
        step = mine[0].step.value if mine else ""
        story.runs.append(step)
        told(f"the idle guard runs: {_RUNS.get(step, step or 'nothing to do')}")
        before = len(slack.received)
        deliver()
        story.warnings += [m for m in slack.received[before:] if _answerable(m)]

    owner = SlackUser(OWNER, OWNER_NAME)

    def press(action: str, at: datetime) -> None:
        clock[0] = at
        answered = slack.press(story.warnings[-1], action, owner, at=at)
        story.statuses.append(answered.status)
        update = slack.responses[-1][1]["text"] if slack.responses else ""
        story.updates.append(update)
        told(f"@{OWNER_NAME} presses {_LABELS[action]} in Slack; the message now reads:")
        say(f"      {update}")

    say("Answering a warning from Slack (the Slack stand-in signs each press as Slack does):")
    with FunctionUrlServer(lambda event: answer_endpoint(event, desk, clock[0])) as endpoint:
        slack.interactivity(endpoint.url + "slack", SIGNING_SECRET.encode(), lambda: clock[0])
        guard_runs(now)
        press("keep-4h", now + timedelta(minutes=10))
        guard_runs(now + GRACE + timedelta(minutes=5))
        told(f"the notebook is {state()[0]}: kept past the warning's deadline")
        later = now + timedelta(hours=4, minutes=15)
        guard_runs(later)
        press("act-now", later + timedelta(minutes=2))
        told(f"the notebook is {state()[0]}")
    return story


#: What a run of the guard did with the notebook, as the story tells it.
_RUNS = {
    "warned": "the notebook is idle; its owner is warned in Slack, with the answers as buttons",
    "cleared": "the notebook is exempt (kept); its warning is withdrawn",
    "acted": "the notebook is stopped",
}


def _answerable(message: Mapping[str, Any]) -> bool:
    return any(b.get("type") == "actions" for b in message.get("blocks") or ())
