"""A Lambda Function URL on loopback, for the demo and the e2e tests: the answer endpoint's
handler behind a real HTTP server."""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


class FunctionUrlServer:
    """A Lambda Function URL on loopback: each request becomes the event a Function URL
    gives its Lambda (payload format 2.0, body base64-encoded, header names lower-cased),
    handed to ``handler``; its ``{"statusCode", "headers", "body"}`` is the HTTP answer.
    ``with FunctionUrlServer(lambda e: process(e, desk, clock())) as endpoint:``, then the
    stand-in's request URL is ``endpoint.url + "slack"``."""

    def __init__(self, handler: Callable[[dict[str, Any]], Mapping[str, Any]]) -> None:
        self.events: list[dict[str, Any]] = []
        #: (method, path, status) of every request, in order.
        self.requests: list[tuple[str, str, int]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                parts = urlsplit(self.path)
                event: dict[str, Any] = {
                    "version": "2.0",
                    "routeKey": "$default",
                    "rawPath": parts.path,
                    "rawQueryString": parts.query,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "requestContext": {
                        "http": {
                            "method": self.command,
                            "path": parts.path,
                            "protocol": "HTTP/1.1",
                            "sourceIp": self.client_address[0],
                            "userAgent": self.headers.get("User-Agent", ""),
                        }
                    },
                    "body": base64.b64encode(body).decode(),
                    "isBase64Encoded": True,
                }
                if parts.query:
                    event["queryStringParameters"] = dict(parse_qsl(parts.query))
                server.events.append(event)
                answer = handler(event)
                status = int(answer.get("statusCode", 200))
                server.requests.append((self.command, self.path, status))
                payload = str(answer.get("body") or "").encode()
                self.send_response(status)
                for name, value in (answer.get("headers") or {}).items():
                    self.send_header(str(name), str(value))
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """The Function URL, as AWS gives it: ending in ``/`` (Slack's request URL is
        ``url + "slack"``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/"

    def __enter__(self) -> FunctionUrlServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
