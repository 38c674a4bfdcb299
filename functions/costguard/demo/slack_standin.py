"""A real HTTP server on loopback that plays Slack's incoming webhook.

It records every payload and answers from a script (e.g. ``[429, 500, 200]``), so
tests and the demo exercise the notifier's retries over a real socket.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class SlackStandIn:
    def __init__(self, script: list[int] | None = None, retry_after: str = "0") -> None:
        self.received: list[dict[str, Any]] = []
        self.attempts = 0
        self._script: deque[int] = deque(script or [])
        self._retry_after = retry_after
        self._lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with stand_in._lock:
                    stand_in.attempts += 1
                    status = stand_in._script.popleft() if stand_in._script else 200
                    if status == 200:
                        stand_in.received.append(json.loads(body))
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", stand_in._retry_after)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(
                    b"ok" if status == 200 else b"rate_limited" if status == 429 else b"error"
                )

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/services/T000/B000/demo"

    def __enter__(self) -> SlackStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
