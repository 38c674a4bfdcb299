"""The idle judgement: thresholds, missing data, several GPUs, windows, the fallbacks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from costguard.domain.findings import FindingCode
from costguard.domain.idle import (
    EMPTY,
    MB,
    IdleThresholds,
    Judgement,
    Series,
    Verdict,
    aligned_window,
    judge_ec2,
    judge_gpus,
    judge_heartbeat,
    judge_studio,
    managed_by,
    period_for,
    window_of,
)
from tests.support.clock import MIDDAY

HOUR = timedelta(hours=1)
T = IdleThresholds()
KEY = "us-east-1/ec2-instance/i-1"


def series(*values: float, every: timedelta = timedelta(minutes=5)) -> Series:
    stamps = tuple(MIDDAY - HOUR + every * i for i in range(len(values)))
    return Series(tuple(values), stamps)


def flat(value: float, n: int = 12) -> Series:
    return series(*([value] * n))


def ec2(
    gpus: list[Series] | None = None,
    count: int = 1,
    cpu: Series | None = None,
    net: Series | None = None,
) -> Verdict:
    return judge_ec2(
        gpus=gpus if gpus is not None else [flat(0)] * count,
        gpu_count=count,
        cpu=cpu or flat(1),
        network_in=net or flat(1000),
        network_out=net or flat(1000),
        window=HOUR,
        thresholds=T,
        resource=KEY,
    ).verdict


def test_idle_when_every_datapoint_is_under_every_threshold() -> None:
    assert ec2() is Verdict.IDLE


@pytest.mark.parametrize(
    ("what", "kwargs"),
    [
        ("one GPU datapoint at the threshold", {"gpus": [series(*[0] * 11, 5)]}),
        ("one CPU datapoint over", {"cpu": series(*[0] * 6, 5.1, *[0] * 5)}),
        ("network over the floor", {"net": flat(2.6 * MB)}),
    ],
)
def test_busy_when_a_single_datapoint_reaches_its_threshold(what: str, kwargs: dict) -> None:
    assert ec2(**kwargs) is Verdict.BUSY, what


def test_unknown_when_there_are_no_datapoints() -> None:
    assert ec2(gpus=[Series()]) is Verdict.UNKNOWN
    assert ec2(cpu=Series()) is Verdict.UNKNOWN
    assert ec2(count=0, net=Series()) is Verdict.UNKNOWN


def test_unknown_when_too_few_datapoints_cover_the_window_but_ten_of_twelve_do() -> None:
    # 9 of 12 periods: the agent stopped a quarter of an hour ago -> unknown
    assert ec2(gpus=[flat(0, 9)]) is Verdict.UNKNOWN
    # 10 of 12 (a late or dropped datapoint or two) is covered
    assert ec2(gpus=[flat(0, 10)]) is Verdict.IDLE


def test_busy_beats_missing_data_activity_seen_is_activity() -> None:
    assert ec2(gpus=[series(90)]) is Verdict.BUSY


def test_several_gpus_idle_only_if_every_gpu_is() -> None:
    assert ec2(gpus=[flat(0)] * 8, count=8) is Verdict.IDLE
    assert ec2(gpus=[*[flat(0)] * 7, flat(40)], count=8) is Verdict.BUSY
    # seven of eight report: the eighth may be training
    j = judge_gpus(gpus=[flat(0)] * 7, gpu_count=8, window=HOUR, thresholds=T, resource=KEY)
    assert j.verdict is Verdict.UNKNOWN
    assert j.evidence["gpus_reporting"] == "7 of 8"
    assert [f.code for f in j.findings] == [FindingCode.IDLE_METRICS_MISSING]


def test_a_gpu_instance_without_gpu_metrics_is_never_idle_on_cpu_alone() -> None:
    assert ec2(gpus=[], count=8) is Verdict.UNKNOWN


def test_network_counts_in_and_out_together() -> None:
    half = flat(2.6 * MB)
    v = judge_ec2(
        gpus=[],
        gpu_count=0,
        cpu=flat(1),
        network_in=half,
        network_out=half,
        window=HOUR,
        thresholds=T,
        resource=KEY,
    )
    assert v.verdict is Verdict.BUSY
    assert v.evidence["network_max"] == "5.20 MB"


def test_evidence_carries_the_maxima_and_datapoint_counts() -> None:
    j = judge_ec2(
        gpus=[series(*[1] * 11, 3.5)],
        gpu_count=1,
        cpu=flat(2),
        network_in=flat(10),
        network_out=flat(10),
        window=HOUR,
        thresholds=T,
        resource=KEY,
    )
    assert j.verdict is Verdict.IDLE
    assert j.evidence["gpu0_max"] == "3.5%"
    assert j.evidence["gpu0_datapoints"] == "12"
    assert j.evidence["cpu_max"] == "2.0%"
    assert "idle for 60 minutes" in j.reason


def test_the_window_comes_from_the_tag_and_a_malformed_tag_is_a_finding_and_the_default() -> None:
    assert window_of({"costguard:idle-minutes": "90"}, HOUR, KEY) == (timedelta(minutes=90), ())
    for bad in ("ninety", "5", "１２０", "99999", ""):
        window, findings = window_of({"costguard:idle-minutes": bad}, HOUR, KEY)
        assert window == HOUR
        assert [f.code for f in findings] == [FindingCode.MALFORMED_IDLE_MINUTES]


def test_a_longer_window_needs_its_whole_length_covered() -> None:
    # 90-minute window, 12 datapoints (an hour): unknown
    j = judge_ec2(
        gpus=[],
        gpu_count=0,
        cpu=flat(1),
        network_in=flat(1),
        network_out=flat(1),
        window=timedelta(minutes=90),
        thresholds=T,
        resource=KEY,
    )
    assert j.verdict is Verdict.UNKNOWN


def test_periods_stay_five_minutes_until_the_datapoint_limit_needs_longer() -> None:
    assert period_for(HOUR) == timedelta(minutes=5)
    assert period_for(timedelta(hours=16, minutes=40)) == timedelta(minutes=5)  # 200 periods
    assert period_for(timedelta(days=7)) == timedelta(minutes=55)
    start, end, period = aligned_window(datetime(2026, 11, 20, 12, 7, 31, tzinfo=UTC), HOUR)
    assert (start, end, period) == (
        datetime(2026, 11, 20, 11, 5, tzinfo=UTC),
        datetime(2026, 11, 20, 12, 5, tzinfo=UTC),
        timedelta(minutes=5),
    )


def test_a_week_long_window_judged_on_coarser_maxima_keeps_the_rule() -> None:
    week = timedelta(days=7)
    period = period_for(week)
    n = int(week / period)
    stamps = tuple(MIDDAY - week + period * i for i in range(n))
    quiet = Series(tuple([0.0] * n), stamps)
    j = judge_ec2(
        gpus=[],
        gpu_count=0,
        cpu=quiet,
        network_in=quiet,
        network_out=quiet,
        window=week,
        thresholds=T,
        resource=KEY,
    )
    assert j.verdict is Verdict.IDLE


# -- SageMaker notebook instances: the heartbeat, or the maximum runtime ---------------------


def heartbeat(activity: Series, gpu: Series = EMPTY, since: datetime | None = None) -> Verdict:
    return judge_heartbeat(
        activity=activity,
        gpu=gpu,
        in_service_since=since,
        now=MIDDAY,
        window=HOUR,
        thresholds=T,
        resource=KEY,
    ).verdict


def test_a_notebook_is_idle_when_its_heartbeat_shows_no_activity_and_an_idle_gpu() -> None:
    assert heartbeat(flat(0)) is Verdict.IDLE
    assert heartbeat(flat(0), flat(1)) is Verdict.IDLE
    assert heartbeat(series(*[0] * 11, 1)) is Verdict.BUSY
    assert heartbeat(flat(0), series(*[0] * 11, 50)) is Verdict.BUSY
    assert heartbeat(flat(0, 6)) is Verdict.UNKNOWN


def test_a_gpu_notebook_whose_heartbeat_has_no_gpu_reading_is_unknown() -> None:
    """Defect: an ml.p3.2xlarge whose heartbeat sent JupyterActivity=0 but no
    GPUUtilization (nvidia-smi timed out, or printed [N/A]) was judged on Jupyter activity
    alone, idle, and stopped: missing data is never idle.

    GIVEN a heartbeat with an hour of no Jupyter activity and no GPU series
    WHEN the notebook's type has 1 GPU, or an unknown number, or an Inferentia chip
    THEN it is unknown, with an idle-metrics-missing finding for the GPU;
    AND a CPU type, or a GPU type whose GPU reports idle, is still idle."""

    def judge(gpu: Series, gpu_count: int | None, accelerator: str | None = None) -> Judgement:
        return judge_heartbeat(
            activity=flat(0),
            gpu=gpu,
            in_service_since=MIDDAY - timedelta(hours=3),
            now=MIDDAY,
            window=HOUR,
            thresholds=T,
            resource=KEY,
            gpu_count=gpu_count,
            accelerator=accelerator,
        )

    for count in (1, 8, None):
        j = judge(EMPTY, count)
        assert j.verdict is Verdict.UNKNOWN, count
        assert "no GPUUtilization" in j.reason
        assert [f.code for f in j.findings] == [FindingCode.IDLE_METRICS_MISSING]
    # a partly covered GPU series is unknown as well; a busy one is busy whatever else
    assert judge(series(0, 0, 0), 1).verdict is Verdict.UNKNOWN
    assert judge(series(0, 0, 50), 1).verdict is Verdict.BUSY
    inferentia = judge(EMPTY, 0, "AWS Inferentia2")
    assert inferentia.verdict is Verdict.UNKNOWN
    assert judge(EMPTY, 0).verdict is Verdict.IDLE
    assert judge(flat(1), 1).verdict is Verdict.IDLE


def test_a_notebook_without_heartbeat_falls_back_to_its_maximum_runtime_with_a_finding() -> None:
    j = judge_heartbeat(
        activity=Series(),
        gpu=Series(),
        in_service_since=MIDDAY - timedelta(hours=12),
        now=MIDDAY,
        window=HOUR,
        thresholds=T,
        resource=KEY,
        history=Series(),
    )
    assert j.verdict is Verdict.IDLE
    assert "maximum runtime 12 hours" in j.reason
    assert [f.code for f in j.findings] == [FindingCode.NO_HEARTBEAT]
    assert heartbeat(Series(), since=MIDDAY - timedelta(hours=11, minutes=59)) is Verdict.UNKNOWN
    assert heartbeat(Series(), since=None) is Verdict.UNKNOWN


def test_a_heartbeat_that_went_silent_is_unknown_never_the_fallbacks_idle() -> None:
    # GIVEN a notebook InService 13 hours, with no heartbeat in its window
    def judge(history: Series | None) -> object:
        return judge_heartbeat(
            activity=Series(),
            gpu=Series(),
            in_service_since=MIDDAY - timedelta(hours=13),
            now=MIDDAY,
            window=HOUR,
            thresholds=T,
            resource=KEY,
            history=history,
        )

    # WHEN its heartbeat published within the maximum runtime (12 h), then stopped
    silent = judge(series(1, 1, 0))
    # THEN it is unknown, with a finding saying the heartbeat stopped
    assert silent.verdict is Verdict.UNKNOWN and "went silent" in silent.reason
    assert [f.code for f in silent.findings] == [FindingCode.IDLE_METRICS_MISSING]
    # AND with that time not read, the fallback never acts either
    assert judge(None).verdict is Verdict.UNKNOWN
    # AND silent for the whole maximum runtime, it is a notebook without a heartbeat
    assert judge(Series()).verdict is Verdict.IDLE


# -- Studio ----------------------------------------------------------------------------------


def test_a_studio_app_is_idle_without_user_activity_for_the_window() -> None:
    old = MIDDAY - timedelta(days=1)
    assert judge_studio(MIDDAY - timedelta(minutes=61), old, MIDDAY, HOUR).verdict is Verdict.IDLE
    assert judge_studio(MIDDAY - timedelta(minutes=59), old, MIDDAY, HOUR).verdict is Verdict.BUSY
    assert judge_studio(None, old, MIDDAY, HOUR).verdict is Verdict.UNKNOWN
    # activity in the future (a clock skew) is activity
    assert judge_studio(MIDDAY + timedelta(minutes=5), old, MIDDAY, HOUR).verdict is Verdict.BUSY


def test_thresholds_are_the_documented_defaults() -> None:
    from costguard.config_spec import BY_NAME

    assert T.gpu_pct == BY_NAME["idle_gpu_pct"].default == Decimal(5)
    assert T.cpu_pct == BY_NAME["idle_cpu_pct"].default == Decimal(5)
    assert T.network_bytes_per_5min == BY_NAME["idle_network_mb"].default * MB
    assert T.window == timedelta(minutes=BY_NAME["idle_minutes"].default)
    assert T.max_runtime == timedelta(hours=BY_NAME["idle_max_runtime_hours"].default)
    assert BY_NAME["idle_rate"].default == f"{BY_NAME['idle_minutes'].default} minutes"


# -- instances a group owns ------------------------------------------------------------


@pytest.mark.parametrize(
    ("tags", "group"),
    [
        ({"aws:autoscaling:groupName": "gpu-asg"}, "Auto Scaling group gpu-asg"),
        ({"eks:cluster-name": "c", "eks:nodegroup-name": "gpu"}, "EKS managed node group gpu"),
        ({"aws:eks:cluster-name": "c"}, "EKS cluster c"),
        ({"karpenter.sh/nodepool": "gpu"}, "Karpenter node pool gpu"),
        ({"karpenter.sh/provisioner-name": "old"}, "Karpenter provisioner old"),
        ({"kubernetes.io/cluster/prod-ü": "owned"}, "Kubernetes cluster prod-ü"),
        ({"aws:ec2:fleet-id": "fleet-1"}, "EC2 Fleet fleet-1"),
        ({"aws:ec2spot:fleet-request-id": "sfr-1"}, "Spot Fleet sfr-1"),
        ({"aws:elasticmapreduce:job-flow-id": "j-1"}, "EMR cluster j-1"),
        ({"Name": "eks:cluster-name", "kubernetes.io/cluster": "x"}, None),
        ({}, None),
    ],
)
def test_an_instance_a_group_owns_and_replaces_is_recognised(
    tags: dict[str, str], group: str | None
) -> None:
    assert managed_by(tags) == group
