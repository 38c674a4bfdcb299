"""The answer Lambda behind a real HTTP server, as its Function URL serves it: each request
becomes the Function URL's event (payload format 2.0) for ``handlers.answer.process``, and
its answer the HTTP response. The clock is the product's (:data:`costguard.events.CLOCK`,
set by the test through :mod:`tests.support.clock`)."""

from __future__ import annotations

import base64
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

if TYPE_CHECKING:
    from costguard.services.answers import AnswerDesk


def function_url_event(
    method: str, target: str, headers: dict[str, str], body: bytes
) -> dict[str, Any]:
    """What the Function URL hands the Lambda for one HTTP request."""
    parts = urlsplit(target)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return {
        "version": "2.0",
        "rawPath": parts.path or "/",
        "rawQueryString": parts.query,
        **({"queryStringParameters": query} if query else {}),
        "headers": {k.lower(): v for k, v in headers.items()},
        "requestContext": {"http": {"method": method, "path": parts.path or "/"}},
        "body": base64.b64encode(body).decode(),
        "isBase64Encoded": True,
    }


class AnswerEndpoint:
    """``with AnswerEndpoint(desk) as endpoint:`` serves the desk on ``endpoint.url``."""

    def __init__(self, desk: AnswerDesk) -> None:
        self.desk = desk
        self.requests: list[tuple[str, str, int]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                from costguard.handlers.answer import process

                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                event = function_url_event(self.command, self.path, dict(self.headers), body)
                answer = process(event, endpoint.desk)
                endpoint.requests.append((self.command, self.path, answer["statusCode"]))
                raw = str(answer["body"]).encode()
                self.send_response(answer["statusCode"])
                for name, value in answer["headers"].items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = _serve
            do_POST = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}/"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> AnswerEndpoint:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
