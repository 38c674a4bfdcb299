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


def quicken() -> None:
    """Costs of the embedded AWS that are the tools' (moto's and botocore's), not the
    product's, paid once per process instead of on every request, session or client
    (together about 40 % of the demo's time, and a quarter of a moto-bound test's;
    idempotent):

    - moto's server finds the service a request is for by listing its own package folder,
      with a ``stat`` per entry, on every request: the listing is cached (it cannot change
      while the process runs);
    - every boto3 session parses botocore's service models again (EC2's alone is megabytes,
      about 40 ms a client), and the demo and the server make a hundred: one loader per
      data path is shared by every session of the process (the models are read-only);
    - every client is an instance of a class botocore builds afresh, a method per
      operation (EC2 has about 700): a service's class is built once per process. Only
      the deterministic ``creating-client-class`` handlers of botocore and boto3 shape it;
    - moto lists a response class's methods (``inspect.getmembers``: every attribute of
      the class and its bases, sorted) on every request, to find the action's handler: the
      list is kept per class and the names and kinds of what its class dictionaries hold,
      so an action CostGuard adds to a class after its first request
      (``costguard_demo.cloudtrail``, ``tests/support``) is found as before, and one taken
      away is gone;
    - Python's cycle collector, at its default first threshold (700 allocations), walks the
      millions of objects moto's backends and botocore's models keep alive, again and
      again: it runs a hundred times less often (the demo: 17.5-17.8 CPU-s against
      20.4-21.7, two interleaved runs each).
    """
    import functools
    import gc

    import botocore.client
    import botocore.loaders
    import botocore.session
    import moto.backends
    import moto.core.responses

    responses: Any = moto.core.responses
    if not hasattr(responses.method_names_from_class, "_by_class"):
        listed_methods = responses.method_names_from_class
        by_class: dict[tuple[object, ...], list[str]] = {}

        def method_names(clazz: Any) -> list[str]:
            # a name's kind (function, static method, property...) decides whether it is listed
            key = (clazz, *((n, type(v)) for c in clazz.__mro__ for n, v in vars(c).items()))
            if key not in by_class:
                by_class[key] = listed_methods(clazz)
            return list(by_class[key])

        method_names._by_class = by_class  # type: ignore[attr-defined]
        responses.method_names_from_class = method_names

    _remember_attribute_names()
    gc.set_threshold(100_000, 50, 1000)
    if not getattr(moto.backends.list_of_moto_modules, "cache_info", None):
        listed = moto.backends.list_of_moto_modules
        moto.backends.list_of_moto_modules = functools.cache(lambda: tuple(listed()))  # type: ignore[assignment]
    if not getattr(botocore.session.create_loader, "cache_info", None):  # type: ignore[attr-defined]
        botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)  # type: ignore[attr-defined]
    creator: Any = botocore.client.ClientCreator
    if not hasattr(creator, "_built_classes"):
        build = creator._create_client_class
        built: dict[tuple[str, str], type] = {}

        def once(self: Any, service_name: str, service_model: Any) -> type:
            key = (service_name, service_model.api_version)
            if key not in built:
                built[key] = build(self, service_name, service_model)
            return built[key]

        creator._built_classes = built
        creator._create_client_class = once


def _remember_attribute_names() -> None:
    """moto's response serializer asks six alias providers, afresh for every attribute of
    every object it answers with, which names the attribute may have on the object
    (``DBInstanceIdentifier``, ``db_instance_identifier``, ``identifier``...). The names
    depend only on the picker's kind and providers, the object's class, the key and its
    shape (with the structure it sits in), so each list is worked out once per process:
    1,000 instances started in 9.7 s against 12.1 s, one described among them in 10.8 ms
    against 12.6 ms (two interleaved runs each). Left as it is where moto's serializer is
    not shaped as this expects."""
    from moto.core import serialize

    for picker in ("AttributePicker", "XFormedAttributePicker"):
        cls = getattr(serialize, picker, None)
        listed = getattr(cls, "get_possible_keys", None) if cls else None
        if listed is None or hasattr(listed, "_by_kind") or "get_possible_keys" not in vars(cls):
            continue
        by_kind: dict[tuple[object, ...], tuple[str, ...]] = {}

        def possible_keys(
            self: Any,
            context: Any,
            listed: Any = listed,
            by_kind: dict[tuple[object, ...], tuple[str, ...]] = by_kind,
        ) -> tuple[str, ...]:
            shape = context.shape
            kind = (
                type(self),
                tuple(self.alias_providers),
                type(context.obj),
                context.key,
                shape,
                getattr(shape, "parent", None),
            )
            names = by_kind.get(kind)
            if names is None:
                names = by_kind[kind] = tuple(listed(self, context))
            return names

        possible_keys._by_kind = by_kind  # type: ignore[attr-defined]
        possible_keys.__wrapped__ = listed  # type: ignore[attr-defined]
        cls.get_possible_keys = possible_keys  # type: ignore[union-attr]


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
    quicken()
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
