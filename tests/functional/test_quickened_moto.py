"""moto made quicker (``costguard_demo.server.quicken``), without changing what it answers.

``quicken`` keeps moto's list of a response class's methods between requests. CostGuard
adds the actions moto lacks to those classes after their first request (CloudTrail's
``LookupEvents`` in ``costguard_demo.cloudtrail``, and tests), and takes them away again:
a list kept too long would hide an added action, or answer with a removed one.
"""

from __future__ import annotations

from typing import Any

import pytest

from costguard_demo.server import quicken

DECODED = (
    "<DecodeAuthorizationMessageResponse><DecodeAuthorizationMessageResult>"
    "<DecodedMessage>{}</DecodedMessage></DecodeAuthorizationMessageResult>"
    "</DecodeAuthorizationMessageResponse>"
)


def test_an_action_added_after_the_first_request_is_answered_and_one_taken_away_is_not(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN moto quickened, and STS asked for an action moto lacks (so its class's methods
    were listed) WHEN the action is added to moto's STS responses THEN it is answered AND
    when it is taken away again THEN moto says it lacks it, as before."""
    from moto.sts.responses import TokenResponse

    quicken()
    sts = aws.client("sts", region_name="us-east-1")
    with pytest.raises(NotImplementedError):
        sts.decode_authorization_message(EncodedMessage="x")
    # WHEN added
    with monkeypatch.context() as patch:
        patch.setattr(
            TokenResponse, "decode_authorization_message", lambda self: DECODED, raising=False
        )
        # THEN answered
        assert sts.decode_authorization_message(EncodedMessage="x")["DecodedMessage"] == "{}"
    # AND once taken away, not
    with pytest.raises(NotImplementedError):
        sts.decode_authorization_message(EncodedMessage="x")
    assert sts.get_caller_identity()["Account"]


def answers() -> str:
    """What moto answers to a few calls whose responses are deep (EC2 instances with tags,
    block devices and network interfaces; volumes; a DynamoDB table; an SNS topic's
    attributes), seeded, with the instants it stamps taken out: the same text from one moto
    as from another."""
    import json

    import boto3
    from moto import mock_aws
    from moto.moto_api._internal import mock_random

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items() if k != "ResponseMetadata"}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value if isinstance(value, str | int | float | bool | type(None)) else "<instant>"

    mock_random.seed(20)
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        ec2 = session.client("ec2")
        tags = [{"Key": "costguard:project", "Value": "vision"}, {"Key": "Name", "Value": "é"}]
        ec2.run_instances(
            ImageId="ami-12345678", ClientToken="quickened", MinCount=3, MaxCount=3, InstanceType="g5.xlarge",
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )  # fmt: skip
        ec2.create_volume(AvailabilityZone="us-east-1a", Size=100, VolumeType="gp3", Iops=4000)
        dynamodb = session.client("dynamodb")
        dynamodb.create_table(
            TableName="t", BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        )  # fmt: skip
        sns = session.client("sns")
        topic = sns.create_topic(Name="alerts")["TopicArn"]
        said = {
            "instances": ec2.describe_instances(),
            "volumes": ec2.describe_volumes(),
            "types": ec2.describe_instance_types(InstanceTypes=["g5.xlarge", "p5.48xlarge"]),
            "table": dynamodb.describe_table(TableName="t"),
            "topic": sns.get_topic_attributes(TopicArn=topic),
        }
    return json.dumps(plain(said), sort_keys=True)


def test_moto_quickened_answers_as_moto_does() -> None:
    """GIVEN the same seeded calls WHEN made to moto as it comes (another process) and to
    moto quickened (this one) THEN every answer is the same, field for field."""
    import subprocess
    import sys

    quicken()
    done = subprocess.run(
        [sys.executable, "-c", "from tests.functional.test_quickened_moto import answers; "
         "print(answers())"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    as_it_comes = done.stdout.strip()
    assert len(as_it_comes) > 10_000
    assert answers() == as_it_comes


class DBInstance:
    """An object moto answers with, named as its shape: ``DBInstanceIdentifier`` may be
    read from it as ``identifier``."""

    identifier = "db-1"


class Snapshot:
    """Another, whose ``DBInstanceIdentifier`` is only ``db_instance_identifier``."""

    db_instance_identifier = "db-2"


def test_each_attribute_is_looked_up_by_the_names_of_its_own_object_key_and_shape() -> None:
    """GIVEN moto quickened WHEN its serializer asks, in turn, the names an attribute may
    have on objects of two classes, under two shapes, the second of each first THEN each
    answer is what moto's own alias providers say for that object, key and shape, never one
    remembered for another."""
    from botocore import xform_name
    from moto.core.serialize import (
        AttributePicker,
        AttributePickerContext,
        XFormedAttributePicker,
    )
    from moto.core.utils import get_service_model

    quicken()
    model = get_service_model("rds")
    shapes = [
        model.shape_for("DBInstance").members["DBInstanceIdentifier"],
        model.shape_for("DBSnapshot").members["DBInstanceIdentifier"],
    ]
    for member, parent in zip(shapes, ("DBInstance", "DBSnapshot"), strict=True):
        member.parent = model.shape_for(parent)
    picker = XFormedAttributePicker()
    asked = [(obj, shape) for shape in reversed(shapes) for obj in (Snapshot(), DBInstance())]
    said = set()
    for obj, shape in asked * 2:
        context = AttributePickerContext(obj=obj, key="DBInstanceIdentifier", shape=shape)
        names = list(picker.get_possible_keys(context))
        own = AttributePicker.get_possible_keys.__wrapped__(picker, context)  # moto's, as is
        assert names == [name for key in own for name in (key, xform_name(key))]
        said.add(tuple(names))
        assert picker(context) == ("db-1" if isinstance(obj, DBInstance) else "db-2")
    assert len(said) > 1, "the objects and shapes asked for differ in their names"
