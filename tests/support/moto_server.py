"""One moto HTTP server per test process (per xdist worker), reset before each test.

Starting a ``ThreadedMotoServer`` per test costs seconds: each new server builds its
per-service apps again on first use. One server, reset (``POST /moto-api/reset``) at each
test's start, gives every test an empty AWS as a fresh server would: moto keeps its
backends per process, so a reset server is indistinguishable from a new one.
"""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from costguard_demo.server import _CLEARED, _FAKE_ENV, quicken


def start() -> tuple[str, object]:
    """Start the process's server on a free loopback port: (its URL, the server)."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    quicken()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return f"http://{host}:{port}", server


def _post(url: str, data: bytes | None = None) -> None:
    headers = {"Content-Type": "text/plain"}
    request = urllib.request.Request(url, data=data, method="POST", headers=headers)  # noqa: S310
    urllib.request.urlopen(request, timeout=10).close()  # noqa: S310


@contextmanager
def reset_aws(url: str) -> Iterator[str]:
    """An empty AWS on the running server, and boto3 pointed at it (as ``embedded_aws``
    does); the environment restored after."""
    from costguard_demo.cloudtrail import install

    install()  # CloudTrail's AttachVolume history, which moto does not keep
    _post(f"{url}/moto-api/reset")
    saved = {k: os.environ.get(k) for k in (*_FAKE_ENV, *_CLEARED, "AWS_ENDPOINT_URL")}
    try:
        for key in _CLEARED:
            os.environ.pop(key, None)
        os.environ.update(_FAKE_ENV)
        os.environ["AWS_ENDPOINT_URL"] = url
        yield url
    finally:
        # IAM checks are process-wide: a test that turned them on leaves them off again
        _post(f"{url}/moto-api/reset-auth", b"inf")
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
