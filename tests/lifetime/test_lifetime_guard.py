"""The maximum-lifetime guard on moto, through the actuator Lambda's handler: warned, then
stopped at the deadline; exempt, dry-run, a tag removed mid-flight, a second run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from costguard.domain.tags import Tags
from tests.support.clock import MIDDAY
from tests.support.idle_fleet import REGION, launch
from tests.support.lifetime import (
    ACCOUNT,
    AFTER,
    END,
    LAUNCHED,
    WARN_AT,
    instance,
    run,
    settings,
    tagged,
)


def test_warned_in_the_window_then_stopped_at_the_end_and_a_second_run_acts_no_more(
    account: Any,
) -> None:
    # GIVEN a GPU instance with costguard:max-hours=12, launched 10 hours before midday
    (iid,) = launch(account, tagged(**{Tags.MAX_HOURS: "12"}), at=LAUNCHED)
    # WHEN the guard runs before the warning window
    assert run(account, MIDDAY)["counts"] == {}
    # THEN nothing; WHEN it runs in the window
    assert run(account, WARN_AT)["counts"] == {"warned": 1}
    # THEN it is warned with the guard's own tag, whose deadline is the lifetime's end
    state, tags = instance(account, iid)
    assert state == "running"
    assert tags[Tags.STOP_AFTER] == "2026-11-20T14:00:00Z"
    assert Tags.ACTION_AFTER not in tags
    # WHEN the guard runs again before the deadline
    assert run(account, END - timedelta(minutes=1))["counts"] == {"waiting": 1}
    assert instance(account, iid)[0] == "running"
    # AND after it
    assert run(account, AFTER)["counts"] == {"acted": 1}
    # THEN it is stopped (not terminated) and the warning tag is gone
    state, tags = instance(account, iid)
    assert state == "stopped"
    assert Tags.STOP_AFTER not in tags
    # AND a second run acts no more
    assert run(account, AFTER + timedelta(minutes=15))["counts"] == {}


def test_exempt_is_never_warned(account: Any) -> None:
    (iid,) = launch(account, tagged(**{Tags.MAX_HOURS: "1", Tags.EXEMPT: "true"}), at=LAUNCHED)
    run(account, MIDDAY)
    run(account, MIDDAY + timedelta(hours=2))
    state, tags = instance(account, iid)
    assert state == "running" and Tags.STOP_AFTER not in tags


def test_dry_run_reports_and_leaves_no_tag(account: Any) -> None:
    # GIVEN a GPU instance past its lifetime, and the deployment in dry-run
    (iid,) = launch(account, tagged(**{Tags.MAX_HOURS: "2"}), at=LAUNCHED)
    # WHEN the guard runs
    result = run(account, MIDDAY, dry_run=True)
    # THEN it reports what it would do, and tags nothing
    assert result["counts"] == {"would-warn": 1}
    state, tags = instance(account, iid)
    assert state == "running" and Tags.STOP_AFTER not in tags


def test_switching_dry_run_on_after_a_warning_acts_on_nothing(account: Any) -> None:
    (iid,) = launch(account, tagged(**{Tags.MAX_HOURS: "12"}), at=LAUNCHED)
    assert run(account, WARN_AT)["counts"] == {"warned": 1}
    assert run(account, AFTER, dry_run=True)["counts"] == {"would-act": 1}
    assert instance(account, iid)[0] == "running"


def test_a_lifetime_tag_removed_mid_flight_withdraws_the_warning(account: Any) -> None:
    # GIVEN an instance warned that its lifetime ends
    (iid,) = launch(account, tagged(**{Tags.MAX_HOURS: "12"}), at=LAUNCHED)
    run(account, WARN_AT)
    assert Tags.STOP_AFTER in instance(account, iid)[1]
    # WHEN its owner removes costguard:max-hours before the deadline
    account.client("ec2", region_name=REGION).delete_tags(
        Resources=[iid], Tags=[{"Key": Tags.MAX_HOURS}]
    )
    result = run(account, WARN_AT + timedelta(minutes=15))
    # THEN the warning is withdrawn (its tag too), and nothing is stopped after the deadline
    assert result["counts"] == {"cleared": 1}
    assert Tags.STOP_AFTER not in instance(account, iid)[1]
    assert run(account, AFTER)["counts"] == {}
    assert instance(account, iid)[0] == "running"


def test_a_lifetime_extended_mid_flight_withdraws_the_warning(account: Any) -> None:
    (iid,) = launch(account, tagged(**{Tags.MAX_HOURS: "12"}), at=LAUNCHED)
    run(account, WARN_AT)
    account.client("ec2", region_name=REGION).create_tags(
        Resources=[iid], Tags=[{"Key": Tags.MAX_HOURS, "Value": "48"}]
    )
    assert run(account, AFTER)["counts"] == {"cleared": 1}
    state, tags = instance(account, iid)
    assert state == "running" and Tags.STOP_AFTER not in tags


def test_exempted_mid_flight_withdraws_the_warning(account: Any) -> None:
    (iid,) = launch(account, tagged(**{Tags.MAX_HOURS: "12"}), at=LAUNCHED)
    run(account, WARN_AT)
    account.client("ec2", region_name=REGION).create_tags(
        Resources=[iid], Tags=[{"Key": Tags.EXEMPT, "Value": "2026-12-31"}]
    )
    assert run(account, AFTER)["counts"] == {"cleared": 1}
    state, tags = instance(account, iid)
    assert state == "running" and Tags.STOP_AFTER not in tags


def test_the_idle_guards_warning_is_neither_read_nor_withdrawn(account: Any) -> None:
    """Defect guarded: both guards warning with costguard:action-after on one instance
    would let a busy notebook's idle verdict withdraw its lifetime warning, every run."""
    # GIVEN an instance that carries the idle guard's warning and a lifetime in the future
    (iid,) = launch(
        account,
        tagged(**{Tags.MAX_HOURS: "48", Tags.ACTION_AFTER: "2026-11-20T13:00:00Z"}),
        at=LAUNCHED,
    )
    # WHEN the lifetime guard runs (its verdict: within its lifetime)
    run(account, MIDDAY)
    # THEN the idle guard's warning is left as it was
    assert instance(account, iid)[1][Tags.ACTION_AFTER] == "2026-11-20T13:00:00Z"


def test_the_default_lifetime_warns_once_then_stops_an_untagged_accelerator(
    account: Any,
) -> None:
    # GIVEN maxGpuHours=8, a GPU instance without a lifetime tag launched 10 hours ago,
    # and a CPU instance as old
    (gpu,) = launch(account, tagged(), at=LAUNCHED)
    (cpu,) = launch(account, tagged(), "t3.large", at=LAUNCHED)
    # WHEN the guard runs: the GPU is past its default lifetime
    assert run(account, MIDDAY, max_gpu_hours=8)["counts"] == {"warned": 1}
    # THEN its owner has the whole grace period from now
    assert instance(account, gpu)[1][Tags.STOP_AFTER] == "2026-11-20T13:00:00Z"
    assert run(account, MIDDAY + timedelta(minutes=30), max_gpu_hours=8)["counts"] == {"waiting": 1}
    assert run(account, MIDDAY + timedelta(minutes=61), max_gpu_hours=8)["counts"] == {"acted": 1}
    assert instance(account, gpu)[0] == "stopped"
    # AND the CPU instance was never judged
    assert instance(account, cpu) == ("running", tagged())


def test_a_malformed_lifetime_is_a_finding_and_never_a_stop(account: Any) -> None:
    from costguard.guards import SPECS
    from costguard.wiring.guards import build_guard

    (iid,) = launch(account, tagged(**{Tags.MAX_HOURS: "1e9"}), at=LAUNCHED)
    assert run(account, MIDDAY, max_gpu_hours=1)["counts"] == {}
    guard, _ = build_guard(settings(max_gpu_hours=1), account, SPECS["max-lifetime"].name)
    guard.policy.decide(MIDDAY)
    (finding,) = guard.findings()
    assert finding.code.value == "malformed-max-hours"
    assert iid in finding.resource and "costguard:max-hours='1e9'" in finding.message
    assert instance(account, iid)[0] == "running"


def test_a_group_member_is_never_stopped(account: Any) -> None:
    (iid,) = launch(
        account,
        tagged(**{Tags.MAX_HOURS: "1", Tags.AUTOSCALING_GROUP: "trainers"}),
        at=LAUNCHED,
    )
    assert run(account, MIDDAY)["counts"] == {}
    assert instance(account, iid)[0] == "running"


def test_a_notebook_instance_is_warned_then_stopped_from_its_last_in_service(
    account: Any,
) -> None:
    from costguard_demo.fleet import backdate_sagemaker

    # GIVEN a GPU notebook instance InService since LAUNCHED, with costguard:max-hours=12
    sm = account.client("sagemaker", region_name=REGION)
    sm.create_notebook_instance(
        NotebookInstanceName="nb",
        InstanceType="ml.p3.2xlarge",
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/sm",
        Tags=[{"Key": k, "Value": v} for k, v in tagged(**{Tags.MAX_HOURS: "12"}).items()],
    )
    backdate_sagemaker(REGION, {"nb": LAUNCHED}, {})
    # WHEN the guard runs in the warning window, then after the end
    assert run(account, WARN_AT)["counts"] == {"warned": 1}
    arn = sm.describe_notebook_instance(NotebookInstanceName="nb")["NotebookInstanceArn"]
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
    assert tags[Tags.STOP_AFTER] == "2026-11-20T14:00:00Z"
    assert run(account, AFTER)["counts"] == {"acted": 1}
    # THEN it is stopped (its storage is kept), not deleted
    found = sm.describe_notebook_instance(NotebookInstanceName="nb")
    assert found["NotebookInstanceStatus"] in {"Stopping", "Stopped"}


def test_an_instance_store_root_is_reported_never_stopped_or_terminated(account: Any) -> None:
    """An instance that boots from instance store cannot be stopped, and CostGuard never
    terminates: its owner gets a notice, and nothing is counted as saved."""
    from costguard_demo.server import moto_backend

    # GIVEN an instance-store-backed GPU instance past its lifetime, warned
    (iid,) = launch(account, tagged(**{Tags.MAX_HOURS: "12"}), at=LAUNCHED)
    moto_backend("ec2", REGION).get_instance(iid).root_device_type = "instance-store"
    assert run(account, WARN_AT)["counts"] == {"warned": 1}
    # WHEN the deadline passes
    result = run(account, AFTER)
    # THEN a notice, and it still runs
    assert result["counts"] == {"notice-only": 1}
    assert instance(account, iid)[0] == "running"


def test_the_warning_tells_the_owner_how_to_extend_the_lifetime() -> None:
    from costguard.domain.decisions import warning_alert
    from costguard.domain.idle import Ec2Notebook
    from costguard.services.lifetime import LifetimePolicy, LifetimeSettings
    from tests.support.catalog import fixture_catalog

    class One:
        def ec2_notebooks(self, region: str) -> list[Ec2Notebook]:
            return [
                Ec2Notebook(
                    "i-1", region, "g5.xlarge", LAUNCHED, tagged(**{Tags.MAX_HOURS: "12"}), 1
                )
            ]

        def notebook_instances(self, region: str) -> list[Any]:
            return []

    settings = LifetimeSettings(regions=(REGION,), account=ACCOUNT)
    policy = LifetimePolicy(One(), fixture_catalog(), settings)
    (decision,) = policy.decide(WARN_AT)
    alert = warning_alert(decision, END, WARN_AT)
    assert "unless its lifetime is extended" in alert.summary
    assert "costguard:max-hours=12" in alert.summary
    assert any("extend its lifetime" in step for step in alert.next_steps)
    assert not any("use it" in step for step in alert.next_steps)


def test_every_ec2_call_of_a_warn_and_stop_is_allowed_by_the_guards_own_conditions(
    account: Any,
) -> None:
    """moto checks no IAM condition: the guard's declared statements are evaluated against
    the instance's tags at each call, as AWS would. With the idle guard's warning-tag
    statements instead, its warning would be refused (it writes costguard:stop-after)."""
    from costguard.adapters.ec2_actuator import Ec2InstanceActuator
    from costguard.guards import SPECS
    from tests.support.ec2_conditions import enforce_ec2_conditions

    (iid,) = launch(account, tagged(**{Tags.MAX_HOURS: "12"}), at=LAUNCHED)
    (other,) = launch(account, tagged(**{Tags.MAX_HOURS: "12"}), at=LAUNCHED)
    own = SPECS["max-lifetime"].permissions()
    refused = enforce_ec2_conditions(account, own, region=REGION, account=ACCOUNT)
    # WHEN warned, one warning withdrawn (lifetime removed), the other acted on
    assert run(account, WARN_AT)["counts"] == {"warned": 2}
    import boto3

    owner = boto3.Session().client("ec2", region_name=REGION)  # the owner: not the guard's role
    owner.delete_tags(Resources=[other], Tags=[{"Key": Tags.MAX_HOURS}])
    assert run(account, AFTER)["counts"] == {"acted": 1, "cleared": 1}
    # THEN no call was refused
    assert refused == []
    assert instance(account, iid)[0] == "stopped"
    # AND the idle guard's statements would have refused the lifetime warning
    from costguard.iam import Permission
    from tests.support.iam_eval import allowed

    idle_tagging = [p for p in Ec2InstanceActuator.permissions if "ec2:CreateTags" in p.actions]
    arn = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{iid}"
    args = ("ec2:CreateTags", arn, tagged(), [Tags.STOP_AFTER])
    assert not allowed(idle_tagging, *args, account=ACCOUNT)
    assert allowed([p for p in own if isinstance(p, Permission)], *args, account=ACCOUNT)


def test_a_copied_stop_after_tag_never_stops_without_a_warning(account: Any) -> None:
    """Defect guarded: "launch more like this" copies every tag, a past costguard:stop-after
    included. Only a warning CostGuard delivered counts: the owner is warned first."""
    # GIVEN an instance past its lifetime that carries a stop-after it was never warned with
    (iid,) = launch(
        account,
        tagged(**{Tags.MAX_HOURS: "2", Tags.STOP_AFTER: "2026-11-20T00:00:00Z"}),
        at=LAUNCHED,
    )
    # WHEN the guard runs
    assert run(account, MIDDAY)["counts"] == {"warned": 1}
    # THEN it is warned, with a fresh deadline, and still runs
    state, tags = instance(account, iid)
    assert state == "running" and tags[Tags.STOP_AFTER] == "2026-11-20T13:00:00Z"
