"""The launch rules (pure): the events AWS sends, the project's policy, the forecast."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.domain.alerts import AlertKind, AlertResource
from costguard.domain.attribution import ProjectConfig
from costguard.domain.findings import FindingCode
from costguard.domain.launch import (
    ProjectFigures,
    decode_figures,
    encode_figures,
    figures_at,
    launch_forecast_alert,
)
from costguard.domain.launch_events import (
    LaunchEvent,
    Refused,
    launcher_from_tags,
    parse_launch_event,
)
from costguard.domain.launch_policy import (
    Cause,
    LaunchPolicy,
    ProjectPolicy,
    breaches,
    project_policy,
    read_policy_tags,
    stricter,
)
from costguard.domain.models import Lifecycle, Resource, ResourceKind
from tests.support.clock import MIDDAY
from tests.support.events import load_event

NOW = MIDDAY + timedelta(seconds=30)
INSTANCE = "i-0a1b2c3d4e5f60789"


def parsed(raw: Any, now: datetime = NOW) -> list[LaunchEvent]:
    found = parse_launch_event(raw, now)
    assert not isinstance(found, Refused), found
    return found


def refused(raw: Any, now: datetime = NOW) -> Refused:
    found = parse_launch_event(raw, now)
    assert isinstance(found, Refused), found
    return found


# -- the events AWS sends ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sample", "kind", "state"),
    [
        ("ec2-instance-state-pending", ResourceKind.EC2_INSTANCE, "pending"),
        ("ec2-instance-state-running", ResourceKind.EC2_INSTANCE, "running"),
        ("sagemaker-notebook-inservice", ResourceKind.SAGEMAKER_NOTEBOOK, "InService"),
        ("sagemaker-training-inprogress", ResourceKind.SAGEMAKER_TRAINING_JOB, "InProgress"),
        # the endpoint event says IN_SERVICE where DescribeEndpoint says InService
        ("sagemaker-endpoint-inservice", ResourceKind.SAGEMAKER_ENDPOINT, "InService"),
    ],
)
def test_each_recorded_launch_event_names_its_resource(
    sample: str, kind: ResourceKind, state: str
) -> None:
    # GIVEN a launch event in the shape EventBridge delivers
    # WHEN it is read  THEN it names one resource, its account, region, state and time
    [event] = parsed(load_event(sample, time="2026-11-20T12:00:14Z"))
    assert (event.kind, event.account, event.region, event.state) == (
        kind,
        "123456789012",
        "us-east-1",
        state,
    )
    assert event.at == datetime(2026, 11, 20, 12, 0, 14, tzinfo=UTC)
    assert event.resource_id


def test_a_runinstances_call_names_each_instance_and_who_made_it() -> None:
    # GIVEN CloudTrail's RunInstances event (a trail exists)  WHEN read
    # THEN each instance it launched, with the caller from userIdentity
    events = parsed(load_event("cloudtrail-runinstances", time="2026-11-20T12:00:00Z"))
    assert events and all(e.kind is ResourceKind.EC2_INSTANCE for e in events)
    assert all(e.launched_by and "user/" in e.launched_by for e in events)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (None, "not a JSON object"),
        ([], "not a JSON object"),
        ("running", "not a JSON object"),
        ({"detail-type": "x"}, "no detail"),
        (load_event("ec2-instance-state-running", detail={"instance-id": "i-; DROP"}), "valid"),
        (
            load_event("ec2-instance-state-running", detail={"instance-id": "i-０１２３４５６７"}),
            "valid",
        ),
        (load_event("ec2-instance-state-running", detail={"instance-id": 12345}), "valid"),
        (load_event("ec2-instance-state-running", account="12345678901x"), "account"),
        ({**load_event("ec2-instance-state-running"), "account": 123456789012}, "account"),
        (load_event("ec2-instance-state-running", region="us-east-1\n"), "region"),
        ({**load_event("ec2-instance-state-running"), "time": 1795176242}, "time"),
        ({**load_event("ec2-instance-state-running"), "time": "yesterday"}, "ISO-8601"),
        ({**load_event("ec2-instance-state-running"), "source": "my.app"}, "not a launch event"),
        (
            load_event(
                "sagemaker-notebook-inservice",
                time="2026-11-20T12:00:00Z",
                detail={"NotebookInstanceName": "a" * 64},
            ),
            "valid",
        ),
    ],
)
def test_a_malformed_event_is_refused_with_a_reason(raw: Any, why: str) -> None:
    # GIVEN an event that is not what AWS sends (hostile, hand-written, or garbled)
    # WHEN read  THEN refused, as hostile, with a reason a person can read; never raised
    answer = refused(raw)
    assert answer.hostile and why in answer.reason


def test_a_stopped_state_is_not_a_launch_and_not_hostile() -> None:
    answer = refused(load_event("ec2-instance-state-stopped", time="2026-11-20T12:00:00Z"))
    assert not answer.hostile and "not a launch" in answer.reason


def test_events_older_than_three_hours_are_ignored_and_future_ones_refused() -> None:
    # GIVEN a redelivered event 3 h 1 min old, and one 6 minutes ahead of the clock
    old = load_event("ec2-instance-state-running", time="2026-11-20T08:59:00Z")
    ahead = load_event("ec2-instance-state-running", time="2026-11-20T12:06:31Z")
    # THEN the old one is ignored (the scan has judged it since), the future one refused
    assert not refused(old).hostile
    assert refused(ahead).hostile
    # and 2 h 59 min late is still judged (Lambda's own retries end before)
    assert parsed(load_event("ec2-instance-state-running", time="2026-11-20T09:01:00Z"))


def test_automation_that_launched_an_instance_is_named_from_its_tags() -> None:
    assert launcher_from_tags({"eks:nodegroup-name": "gpu"}) == "EKS node group gpu"
    assert launcher_from_tags({"aws:autoscaling:groupName": "asg"}) == "Auto Scaling group asg"
    assert launcher_from_tags({"Name": "x"}) is None


# -- the project's policy ------------------------------------------------------------------


def gpu(
    *, rate_tags: dict[str, str] | None = None, spot: bool = False, region: str = "us-east-1"
) -> Resource:
    return Resource(
        id=INSTANCE,
        kind=ResourceKind.EC2_INSTANCE,
        region=region,
        account="123456789012",
        instance_type="p5.48xlarge",
        lifecycle=Lifecycle.SPOT if spot else Lifecycle.ON_DEMAND,
        tags={"costguard:project": "vision", **(rate_tags or {})},
    )


def test_the_projects_table_beats_tags_which_beat_the_deployment() -> None:
    tagged = [read_policy_tags("r", {"costguard:max-usd-per-hour": "40"})]
    defaults = LaunchPolicy(Decimal(10))
    assert project_policy(tagged, ProjectConfig(max_usd_per_hour=Decimal(60)), defaults) == (
        ProjectPolicy(Decimal(60), "table")
    )
    assert project_policy(tagged, None, defaults).max_usd_per_hour == Decimal(40)
    assert project_policy([], None, defaults) == ProjectPolicy(Decimal(10), "deployment")
    assert project_policy([], None, LaunchPolicy()).max_usd_per_hour is None


def test_the_lowest_tagged_limit_and_any_spot_requirement_make_the_project_policy() -> None:
    tagged = [
        read_policy_tags("a", {"costguard:max-usd-per-hour": "$50"}),
        read_policy_tags(
            "b", {"costguard:max-usd-per-hour": "30", "costguard:require-spot": "YES"}
        ),
    ]
    policy = project_policy(tagged, None, LaunchPolicy())
    assert (policy.max_usd_per_hour, policy.require_spot) == (Decimal(30), True)
    # the launch's own tags and the project's (last scan) together: the stricter of both
    assert stricter(ProjectPolicy(Decimal(80), "tag"), policy).max_usd_per_hour == Decimal(30)
    assert stricter(ProjectPolicy(Decimal(5), "deployment"), ProjectPolicy(Decimal(50), "tag")) == (
        ProjectPolicy(Decimal(50), "tag")
    )


@pytest.mark.parametrize(
    ("tags", "code"),
    [
        ({"costguard:max-usd-per-hour": "lots"}, FindingCode.MALFORMED_USD_PER_HOUR),
        ({"costguard:max-usd-per-hour": "0"}, FindingCode.MALFORMED_USD_PER_HOUR),
        ({"costguard:max-usd-per-hour": "４０"}, FindingCode.MALFORMED_USD_PER_HOUR),
        ({"costguard:max-usd-per-hour": "1e9"}, FindingCode.MALFORMED_USD_PER_HOUR),
        ({"costguard:max-usd-per-hour": "200000"}, FindingCode.MALFORMED_USD_PER_HOUR),
        ({"costguard:require-spot": "sometimes"}, FindingCode.MALFORMED_REQUIRE_SPOT),
    ],
)
def test_a_malformed_policy_tag_is_a_finding_naming_the_resource_and_the_tag(
    tags: dict[str, str], code: FindingCode
) -> None:
    read = read_policy_tags("123456789012/us-east-1/ec2-instance/i-1", tags)
    [finding] = read.findings
    assert finding.code is code and "i-1" in finding.resource
    assert next(iter(tags)) in finding.message
    assert (read.max_usd_per_hour, read.require_spot) == (None, False)


def test_a_launch_breaks_each_rule_of_its_projects_policy_separately() -> None:
    policy = ProjectPolicy(Decimal(40), "tag", True, frozenset({"us-west-2"}))
    found = breaches(gpu(), Decimal("55.04"), policy)
    assert [b.cause for b in found] == [Cause.USD_PER_HOUR, Cause.SPOT, Cause.REGION]
    assert "$55.04/h" in found[0].message and "$40.00/h" in found[0].message
    # in policy: cheap enough, on spot, in an allowed region
    assert breaches(gpu(spot=True, region="us-west-2"), Decimal(39), policy) == []
    # an unpriced type is never judged above a limit (no guess)
    assert breaches(gpu(spot=True, region="us-west-2"), None, policy) == []
    # a notebook cannot run on spot: the spot rule does not apply to it
    notebook = Resource(id="nb", kind=ResourceKind.SAGEMAKER_NOTEBOOK, region="us-west-2")
    assert breaches(notebook, Decimal(1), ProjectPolicy(require_spot=True)) == []


# -- the figures the scan leaves, and the forecast at a launch --------------------------------


def test_figures_survive_their_state_document_and_a_bad_row_is_skipped() -> None:
    figures = {
        "vision": ProjectFigures(MIDDAY, Decimal("1000.50"), Decimal("12.5"), Decimal(5000)),
        "名前 ✓": ProjectFigures(MIDDAY, Decimal(0), Decimal(0), None, ("a@example.com",)),
    }
    doc = encode_figures(MIDDAY, figures)
    doc["projects"]["broken"] = {"mtd": "not a number", "rate": "1"}
    assert decode_figures(doc, LaunchPolicy()) == figures
    assert decode_figures({"at": "garbage"}, LaunchPolicy()) == {}


@pytest.mark.parametrize(
    "scan_at",
    [
        datetime(2026, 11, 30, 23, 45, tzinfo=UTC),  # the last scan of the month
        datetime(2028, 2, 29, 23, 45, tzinfo=UTC),  # ... of a leap February
        datetime(2026, 12, 31, 23, 45, tzinfo=UTC),  # ... of the year
    ],
)
def test_a_month_that_turned_since_the_last_scan_starts_from_zero(scan_at: datetime) -> None:
    # GIVEN the last scan 15 minutes before midnight at the month's end, $9,000 spent
    figures = ProjectFigures(scan_at, Decimal(9000), Decimal(10))
    # WHEN a launch comes 30 minutes later, in the new month
    mtd, rate = figures_at(figures, scan_at + timedelta(minutes=30))
    # THEN only the 15 minutes of the new month count
    assert (mtd, rate) == (Decimal("2.5"), Decimal(10))


def cause(rate: str = "55.04") -> AlertResource:
    return AlertResource(
        f"123456789012/us-east-1/ec2-instance/{INSTANCE}",
        "ec2-instance",
        "us-east-1",
        "p5.48xlarge",
        Decimal(rate),
    )


def test_a_launch_that_takes_the_forecast_over_budget_is_named_as_the_cause() -> None:
    # GIVEN vision at $3,000 spent and $2/h at the last scan (forecast under $5,000)
    figures = ProjectFigures(MIDDAY, Decimal(3000), Decimal(2), Decimal(5000))
    # WHEN a p5 ($55.04/h) starts 30 s later
    alert = launch_forecast_alert("vision", figures, Decimal(5000), cause(), False, NOW, (50, 80))
    # THEN budget-forecast, the scan's own claim, naming the launch
    assert alert is not None and alert.kind is AlertKind.BUDGET_FORECAST
    assert alert.dedupe == ("budget/vision/2026-11/5000.00/forecast-100",)
    assert INSTANCE in alert.title and "$55.04/h" in alert.summary
    # and a cheap launch that keeps the forecast under budget says nothing
    assert (
        launch_forecast_alert("vision", figures, Decimal(5000), cause("0.5"), False, NOW, (50,))
        is None
    )
    # nor does a launch the last scan already counted (a redelivered event)
    assert (
        launch_forecast_alert("vision", figures, Decimal(5000), cause(), True, NOW, (50,)) is None
    )


def test_figures_older_than_three_days_are_not_forecast_from() -> None:
    stale = ProjectFigures(NOW - timedelta(days=3, minutes=1), Decimal(4900), Decimal(50))
    assert figures_at(stale, NOW) == (Decimal(0), Decimal(0))
