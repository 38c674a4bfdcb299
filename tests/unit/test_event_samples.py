"""The recorded EventBridge samples (tests/fixtures/events) and their loader (tests/support/events.py)."""

from __future__ import annotations

import json

import pytest

from tests.support.events import ENVELOPE_KEYS, EVENTS_DIR, SAMPLES, load_event


def test_every_file_in_the_folder_is_a_named_sample() -> None:
    """GIVEN the fixtures folder
    WHEN its JSON files are listed
    THEN each is one of SAMPLES and each of SAMPLES has a file (no sample silently untested)."""
    assert sorted(p.stem for p in EVENTS_DIR.glob("*.json")) == sorted(SAMPLES)


@pytest.mark.parametrize("name", SAMPLES)
def test_each_sample_loads_with_exactly_the_eventbridge_envelope(name: str) -> None:
    """GIVEN a sample
    WHEN it is loaded
    THEN it has exactly EventBridge's top-level keys, version "0", an aws.* source and a detail."""
    event = load_event(name)
    assert set(event) == ENVELOPE_KEYS
    assert event["version"] == "0"
    assert event["source"].startswith("aws.")
    assert event["account"] == "123456789012"
    assert event["region"] == "us-east-1"
    assert isinstance(event["resources"], list)
    assert event["detail"]


def test_a_loaded_event_is_a_copy_the_next_test_does_not_see() -> None:
    """GIVEN a test that mutates a loaded event deep inside its detail
    WHEN the same sample is loaded again
    THEN the second copy is untouched."""
    load_event("cloudtrail-runinstances")["detail"]["userIdentity"]["userName"] = "mallory"
    again = load_event("cloudtrail-runinstances.json")
    assert again["detail"]["userIdentity"]["userName"] == "alice"


def test_envelope_overrides_and_detail_merge_apply() -> None:
    """GIVEN the running-instance sample
    WHEN it is loaded with a time, an id and a detail override
    THEN those are set, and the rest of detail is kept."""
    event = load_event(
        "ec2-instance-state-running",
        time="2026-11-20T12:00:30Z",
        id="00000000-0000-4000-8000-000000000000",
        detail={"state": "stopping"},
    )
    assert event["time"] == "2026-11-20T12:00:30Z"
    assert event["id"] == "00000000-0000-4000-8000-000000000000"
    assert event["detail"] == {"instance-id": "i-0123456789abcdef0", "state": "stopping"}


def test_account_and_region_are_rewritten_wherever_the_event_names_them() -> None:
    """GIVEN the CloudTrail sample, which names its account and region in a dozen places
    WHEN it is loaded for another account and region
    THEN no trace of the old account or region is left, and the availability zone moves too."""
    event = load_event("cloudtrail-runinstances", account="210987654321", region="eu-west-1")
    text = json.dumps(event)
    assert "123456789012" not in text
    assert "us-east-1" not in text
    assert event["detail"]["userIdentity"]["arn"] == "arn:aws:iam::210987654321:user/alice"
    assert event["detail"]["awsRegion"] == "eu-west-1"
    item = event["detail"]["responseElements"]["instancesSet"]["items"][0]
    assert item["placement"]["availabilityZone"] == "eu-west-1a"


@pytest.mark.parametrize(
    ("name", "resource_id", "field", "arn"),
    [
        (
            "ec2-instance-state-pending",
            "i-0fedcba9876543210",
            "instance-id",
            "arn:aws:ec2:us-east-1:123456789012:instance/i-0fedcba9876543210",
        ),
        (
            "sagemaker-notebook-inservice",
            "Team-Notebook",
            "NotebookInstanceName",
            "arn:aws:sagemaker:us-east-1:123456789012:notebook-instance/team-notebook",
        ),
        (
            "sagemaker-training-inprogress",
            "nightly-train-7",
            "TrainingJobName",
            "arn:aws:sagemaker:us-east-1:123456789012:training-job/nightly-train-7",
        ),
        (
            "sagemaker-endpoint-inservice",
            "Scoring-Endpoint",
            "EndpointName",
            "arn:aws:sagemaker:us-east-1:123456789012:endpoint/scoring-endpoint",
        ),
    ],
)
def test_resource_id_lands_in_the_name_field_its_arn_and_resources(
    name: str, resource_id: str, field: str, arn: str
) -> None:
    """GIVEN a state-change sample
    WHEN it is loaded with a resource id
    THEN the id is in the kind's own field, and every ARN naming the resource agrees."""
    event = load_event(name, resource_id=resource_id, region="us-east-1")
    assert event["detail"][field] == resource_id
    assert event["resources"] == [arn]
    arn_fields = [k for k in event["detail"] if k.endswith("Arn") and k != "RoleArn"]
    assert all(event["detail"][k] == arn for k in arn_fields)


def test_resource_id_and_time_in_a_cloudtrail_event_go_where_cloudtrail_puts_them() -> None:
    """GIVEN the RunInstances CloudTrail sample (its resources[] is empty, as documented)
    WHEN it is loaded with an instance id and a time
    THEN the id is the launched instance's, resources stays empty, and eventTime follows time."""
    event = load_event(
        "cloudtrail-runinstances", resource_id="i-0fedcba9876543210", time="2026-11-20T12:00:02Z"
    )
    item = event["detail"]["responseElements"]["instancesSet"]["items"][0]
    assert item["instanceId"] == "i-0fedcba9876543210"
    assert event["resources"] == []
    assert event["detail"]["eventTime"] == "2026-11-20T12:00:02Z"


def test_an_unknown_sample_name_says_which_exist() -> None:
    """GIVEN a misspelt sample name
    WHEN it is loaded
    THEN the error lists the samples that exist."""
    with pytest.raises(KeyError, match="ec2-instance-state-running"):
        load_event("ec2-instance-running")
