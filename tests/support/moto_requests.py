"""Count the requests moto's server receives, by AWS operation, at the WSGI layer."""

from __future__ import annotations

import io
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from costguard.iam import READ_ONLY_PREFIXES

#: Verbs that only read (the product's list, and S3's HeadObject); everything else changes
#: something.
READ_PREFIXES = (*READ_ONLY_PREFIXES, "Head")


class RequestCounter:
    """WSGI middleware: ``counter.calls`` is a Counter of ``service-ish:Operation``."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        def counted(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            name = self._operation(environ)
            if name is not None:
                with self._lock:
                    self.calls[name] += 1
            return app(environ, start_response)

        return counted

    @staticmethod
    def _operation(environ: dict[str, Any]) -> str | None:
        path = str(environ.get("PATH_INFO", ""))
        if path.startswith("/moto-api"):
            return None
        target = environ.get("HTTP_X_AMZ_TARGET")
        if target:  # JSON protocols: DynamoDB_20120810.PutItem, SageMaker.StopNotebookInstance
            return str(target).split(".")[-1]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        action = parse_qs(body.decode("utf-8", "replace")).get("Action")
        if action:  # query protocols: EC2, SNS, SQS (form) ...
            return action[0]
        return f"{environ.get('REQUEST_METHOD')} {path}"  # REST (S3, EKS ...)

    def mutating(self) -> dict[str, int]:
        with self._lock:
            return {
                name: n
                for name, n in self.calls.items()
                if not name.split(" ")[-1].lstrip("/").startswith(READ_PREFIXES)
                and not name.startswith(("GET ", "HEAD "))
            }
