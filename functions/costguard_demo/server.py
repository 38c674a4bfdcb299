"""Run moto's HTTP server on a free loopback port, in this process.

In-process (``ThreadedMotoServer``) rather than a child ``moto_server`` so the demo
can back-date launch times on moto's backend objects; boto3 still talks to it over
a real socket, exactly as it talks to AWS.
"""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

DEMO_ACCOUNT = "123456789012"

#: What the embedded AWS needs in the environment, and what must not leak in.
_FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
}
_CLEARED = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_REGION",
)


@contextmanager
def embedded_aws(middleware: Callable[[Any], Any] | None = None) -> Iterator[str]:
    """Start moto's server on 127.0.0.1:<free port>; yield its URL; restore the env after.

    While it runs, ``AWS_ENDPOINT_URL`` points every boto3 client at it and the
    credentials are fake, so nothing can reach a real account. ``middleware`` wraps
    the server's WSGI app (tests count the requests the server receives with it).
    """
    import logging

    from moto.server import ThreadedMotoServer

    from costguard_demo.cloudtrail import install

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    install()  # CloudTrail's AttachVolume history, which moto does not keep
    saved = {k: os.environ.get(k) for k in (*_FAKE_ENV, *_CLEARED, "AWS_ENDPOINT_URL")}
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    if middleware is not None:
        wsgi = server._server
        assert wsgi is not None
        wsgi.app = middleware(wsgi.app)
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    # moto's backends live in this process: start from an empty account every time.
    reset = urllib.request.Request(f"{url}/moto-api/reset", method="POST")  # noqa: S310 - loopback http
    urllib.request.urlopen(reset, timeout=10).close()  # noqa: S310
    try:
        for key in _CLEARED:
            os.environ.pop(key, None)
        os.environ.update(_FAKE_ENV)
        os.environ["AWS_ENDPOINT_URL"] = url
        yield url
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def backdate_object(bucket: str, key: str, when: datetime) -> None:
    """Make an S3 object as old as ``when`` in moto (S3 sets LastModified itself)."""
    backend = moto_backend("s3", "global")
    obj = backend.get_object(bucket, key)
    obj.last_modified = when.astimezone(UTC).replace(tzinfo=None)  # moto keeps naive UTC


def moto_backend(service: str, region: str, account: str = DEMO_ACCOUNT) -> Any:
    """moto's in-memory backend for a service, region and account (for back-dating only)."""
    from moto.backends import get_backend

    return get_backend(service)[account][region]  # type: ignore[call-overload]


def backdate_volumes(
    region: str, volume_ids: Iterable[str], when: datetime, account: str = DEMO_ACCOUNT
) -> None:
    """Set EBS volumes' CreateTime on moto's backend objects (moto uses the real clock)."""
    backend = moto_backend("ec2", region, account)
    for volume_id in volume_ids:
        backend.get_volume(volume_id).create_time = when.astimezone(UTC).replace(tzinfo=None)


def snapshot_ids(region: str, account: str = DEMO_ACCOUNT) -> frozenset[str]:
    """The EBS snapshots moto holds in ``region`` (to tell later which ones are new)."""
    return frozenset(moto_backend("ec2", region, account).snapshots)


def stamp_new_snapshots(
    region: str, known: frozenset[str], at: datetime, account: str = DEMO_ACCOUNT
) -> frozenset[str]:
    """Start every snapshot not in ``known`` at the story's ``at``; return all ids now.

    moto starts (and completes) a snapshot at the real clock's time. A story's guard asks
    for a snapshot at a simulated time, and judges it by when it started: the stamp is
    set to that simulated time, so the story holds whatever the wall clock reads.
    """
    snapshots = moto_backend("ec2", region, account).snapshots
    naive = at.astimezone(UTC).replace(tzinfo=None)
    for snapshot_id, snapshot in snapshots.items():
        if snapshot_id not in known:
            snapshot.start_time = naive
    return frozenset(snapshots)
