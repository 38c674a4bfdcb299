"""Answering a warning: the endpoint's time within Slack's 3 seconds, the calls each answer
makes, and what answers cost a month.

On moto's HTTP server, N idle instances are warned by a guard whose warnings carry answers.
For each, the Slack stand-in presses **Keep 4 hours** as Slack does (signed, form-encoded,
over a real socket) to the answer handler behind a loopback Function URL, built as
deployed (``wiring.answers.answer_desk``: secrets from Secrets Manager, replays in the
ledger) but for its hand-off, which records the answer instead of invoking the guard's
Lambda (moto cannot run it; the invoke is counted as one call). Then the guard Lambda's own
handler takes each answer (``handlers.act.take_answer``).

Measured: the press's round trip as Slack sees it (socket to socket), the endpoint's own
calls (``before-call``), and the guard's calls per answer and its time. moto over HTTP on a
shared 2-core machine is slower than AWS: the durations are upper bounds.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.guard_bill import PRICES, CapacityMeter

START = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
ACCOUNT = "123456789012"
REGION = "us-east-1"
#: A busy month: 100 answers a day.
ANSWERS_PER_DAY = 100
DAYS_PER_MONTH = 30.4
#: The answer Lambda's memory and the guards', in GB (the stack's).
ANSWER_MEMORY_GB = 0.5
GUARD_MEMORY_GB = 0.5
#: Secrets answers add: the Slack signing secret, the link key and the Slack bot token.
SECRETS = 3
#: Secrets Manager API calls, $0.05 per 10,000 (us-east-1, 2026-11).
SECRET_CALL = 0.05 / 10_000


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class _Recorded:
    """The desk's hand-off: the answers it would invoke the guard's Lambda with."""

    def __init__(self) -> None:
        self.answers: list[Any] = []

    def submit(self, request: Any) -> None:
        self.answers.append(request)


def measure(answers: int = 100) -> dict[str, Any]:
    import boto3

    from costguard.adapters.ec2_actuator import Ec2InstanceActuator
    from costguard.domain.answers import answer_event
    from costguard.env import Env
    from costguard.handlers.act import take_answer
    from costguard.handlers.answer import process
    from costguard.handlers.slack_notifier import button_signer
    from costguard.rendering import MachineAlert, machine_json, slack_blocks
    from costguard.services.guard import Guard
    from costguard.settings import Settings
    from costguard.wiring.answers import answer_desk
    from costguard_demo.function_url import FunctionUrlServer
    from costguard_demo.plumbing import create_ledger_table
    from costguard_demo.server import embedded_aws
    from costguard_demo.slack_standin import SlackStandIn, SlackUser
    from tests.support.toy import TOY, ToyPolicy

    saved = dict(os.environ)
    os.environ.update(
        {
            "POWERTOOLS_METRICS_DISABLED": "true",
            "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
        }
    )
    try:
        with embedded_aws(), SlackStandIn() as slack:
            session = boto3.Session()
            create_ledger_table(session, "ledger", REGION)
            sm = session.client("secretsmanager", region_name=REGION)
            sm.create_secret(Name="costguard/slack-signing-secret", SecretString="s" * 32)
            sm.create_secret(Name="costguard/answer-link", SecretString="k" * 64)
            ec2 = session.client("ec2", region_name=REGION)
            tags = {"costguard:project": "vision", TOY: "idle", "costguard:owner": "U0ALICE01"}
            instances = [
                str(i["InstanceId"])
                for i in ec2.run_instances(
                    ImageId="ami-12345678",
                    InstanceType="g5.xlarge",
                    MinCount=answers,
                    MaxCount=answers,
                    TagSpecifications=[
                        {
                            "ResourceType": "instance",
                            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                        }
                    ],
                )["Instances"]
            ]
            settings = Settings.from_env(
                {
                    Env.REGIONS: REGION,
                    Env.TABLE_NAME: "ledger",
                    Env.SCOPE: ACCOUNT,
                    Env.DRY_RUN: "false",
                }
            )
            # The endpoint's session (a warm container): its calls counted.
            endpoint_session = boto3.Session()
            endpoint_calls: Counter[str] = Counter()
            endpoint_session.events.register(
                "before-call",
                lambda model, **_: endpoint_calls.update(
                    [f"{model.service_model.service_name}.{model.name}"]
                ),
            )
            queue = _Recorded()
            clock = [START]
            desk = answer_desk(
                {
                    Env.SLACK_SIGNING_SECRET: "costguard/slack-signing-secret",
                    Env.LINK_SECRET: "costguard/answer-link",
                    Env.TABLE_NAME: "ledger",
                    Env.SCOPE: ACCOUNT,
                },
                endpoint_session,
                queue=queue,
            )
            sign = button_signer("costguard/slack-signing-secret")
            alice = SlackUser("U0ALICE01", "alice")
            round_trips: list[float] = []
            statuses: Counter[int] = Counter()
            with FunctionUrlServer(lambda event: process(event, desk, clock[0])) as url:
                slack.interactivity(url.url + "slack", b"s" * 32, lambda: clock[0])
                for n, instance in enumerate(instances):
                    clock[0] = START + timedelta(seconds=20 * n)
                    warning = _warning(instance, clock[0])
                    message = slack_blocks(MachineAlert.model_validate(machine_json(warning)), sign)
                    answered = slack.press(message, "keep-4h", alice, at=clock[0])
                    statuses[answered.status] += 1
                    round_trips.append(answered.elapsed_s)
                # The guard's Lambda takes each answer (a warm container).
                guard_session = boto3.Session()
                guard_calls: Counter[str] = Counter()
                guard_session.events.register(
                    "before-call",
                    lambda model, **_: guard_calls.update(
                        [f"{model.service_model.service_name}.{model.name}"]
                    ),
                )
                meter = CapacityMeter()
                meter.attach(guard_session)

                def toy(_s: Any, clients: Any, _c: Any) -> Guard:
                    return Guard("toy", ToyPolicy(guard_session), [Ec2InstanceActuator(clients)])

                taking: list[float] = []
                outcomes: Counter[str] = Counter()
                for request in queue.answers:
                    started = time.perf_counter()
                    result = take_answer(
                        answer_event(request),
                        settings,
                        guard_session,
                        request.at,
                        guards={"toy": toy},
                        slack_origin=slack.origin,
                    )
                    taking.append(time.perf_counter() - started)
                    outcomes[result["answer"]] += 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    n = len(queue.answers)
    endpoint_per = {k: round(v / answers, 3) for k, v in sorted(endpoint_calls.items())}
    guard_per = {k: round(v / max(1, n), 3) for k, v in sorted(guard_calls.items())}
    month_answers = ANSWERS_PER_DAY * DAYS_PER_MONTH
    endpoint_seconds = statistics.mean(round_trips)
    guard_seconds = statistics.mean(taking) if taking else 0.0
    wru = sum(meter.write_units.values()) / max(1, n)
    rru = sum(meter.read_units.values()) / max(1, n)
    month = {
        "secrets_stored": SECRETS * PRICES["secret_month"],
        "lambda_requests": month_answers * 2 * PRICES["lambda_request"],
        "lambda_compute": month_answers
        * (endpoint_seconds * ANSWER_MEMORY_GB + guard_seconds * GUARD_MEMORY_GB)
        * PRICES["lambda_gb_second_arm64"],
        # The endpoint's replay record, and the guard's claim, tag and audit.
        "dynamodb": month_answers
        * ((wru + 1) * PRICES["dynamodb_write_unit"] + rru * PRICES["dynamodb_read_unit"]),
        # A warm container reads each secret at most every 5 minutes: an upper bound of one
        # read per answer and secret.
        "secrets_calls": month_answers * 2 * SECRET_CALL,
        "alarms": 3 * PRICES["alarm_month"],
    }
    return {
        "answers": answers,
        "statuses": dict(statuses),
        "outcomes": dict(outcomes),
        "press_round_trip_seconds": {
            "p50": round(statistics.median(round_trips), 3),
            "p99": round(_quantile(round_trips, 0.99), 3),
            "max": round(max(round_trips), 3),
            "slack_limit": 3.0,
        },
        "guard_take_seconds": {
            "p50": round(statistics.median(taking), 3) if taking else None,
            "p99": round(_quantile(taking, 0.99), 3) if taking else None,
        },
        "endpoint_calls_per_answer": {**endpoint_per, "lambda.Invoke (async, counted)": 1.0},
        "guard_calls_per_answer": guard_per,
        "guard_dynamodb_units_per_answer": {"write": round(wru, 2), "read": round(rru, 2)},
        "month_usd_at_100_answers_a_day": {k: round(v, 4) for k, v in month.items()}
        | {"total": round(sum(month.values()), 2)},
    }


def _warning(instance: str, at: datetime) -> Any:
    from costguard.domain.decisions import Action, Decision, Target, warning_alert

    target = Target(
        f"{REGION}/ec2-instance/{instance}",
        "ec2-instance",
        REGION,
        instance,
        ACCOUNT,
        "vision",
        ("U0ALICE01",),
    )
    decision = Decision(Action.STOP_INSTANCE, target, "idle for 60 minutes", at)
    return warning_alert(decision, at + timedelta(hours=1), at, "toy")


if __name__ == "__main__":
    import json

    print(json.dumps(measure(), indent=2))
