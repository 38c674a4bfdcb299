"""One EC2 instance on moto, tagged at launch: the fleet most functional tests start from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def run_instance(
    ec2: Any, tags: Mapping[str, str] | None = None, instance_type: str = "g5.xlarge", **extra: Any
) -> str:
    """Launch one running instance (untagged when ``tags`` is empty); ``extra`` goes to
    ``RunInstances`` as is (``InstanceMarketOptions`` for spot). Returns its id."""
    specs = (
        {
            "TagSpecifications": [
                {
                    "ResourceType": "instance",
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                }
            ]
        }
        if tags
        else {}
    )
    made = ec2.run_instances(
        ImageId="ami-12345678",
        InstanceType=instance_type,
        MinCount=1,
        MaxCount=1,
        **specs,
        **extra,
    )
    return str(made["Instances"][0]["InstanceId"])
