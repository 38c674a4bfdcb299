"""Headless Chromium driven over the DevTools protocol, with the standard library only.

A page is loaded from a file at a given width, as a person's browser would show it; the
test then asks the page questions (JavaScript evaluated by the browser, not by the page:
the report itself has none), collects what the console said, and takes screenshots.

Why not Playwright or Selenium: both need a package (and Playwright its own browser
build) for what is a websocket and a dozen JSON messages. Chromium is the Debian package
``chromium`` (``make chromium`` installs it).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
#: The flags that work on a CI container (no sandbox, no GPU, nothing fetched in the background).
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
    "about:blank",
)


class ChromiumError(Exception):
    pass


class _Socket:
    """A websocket client (RFC 6455): text frames, masked, no extensions."""

    def __init__(self, url: str, port: int, timeout: float = 30.0) -> None:
        # Chromium listens on 127.0.0.1; its URLs may say "localhost", which can be ::1.
        parts = urlparse(url)
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self._sock.sendall(
            (
                f"GET {parts.path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self._sock.recv(1)
            if not chunk:
                raise ChromiumError("the browser closed the connection during the handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ChromiumError(f"websocket handshake refused: {head[:80]!r}")

    def _exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self._sock.recv(n - len(data))
            if not chunk:
                raise ChromiumError("the browser closed the connection")
            data += chunk
        return data

    def send(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 1 << 16:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self._sock.sendall(header + mask + masked)

    def recv(self) -> str:
        message = b""
        while True:
            first, second = self._exact(2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._exact(8))[0]
            data = self._exact(n)
            opcode = first & 0x0F
            if opcode == 0x8:
                raise ChromiumError("the browser closed the websocket")
            if opcode in (0x9, 0xA):  # ping/pong: not part of a message
                continue
            message += data
            if first & 0x80:
                return message.decode()

    def close(self) -> None:
        self._sock.close()


class Page:
    """One tab: load a file, evaluate, screenshot; console errors are collected."""

    def __init__(self, ws: _Socket) -> None:
        self._ws = ws
        self._next = 0
        self.console_errors: list[str] = []
        self._events: list[dict[str, Any]] = []
        for method in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.call(method)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise ChromiumError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self._event(message)

    def _event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.console_errors.append(json.dumps(params.get("args", []))[:300])
        elif method == "Runtime.exceptionThrown":
            self.console_errors.append(str(params.get("exceptionDetails", {}))[:300])
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.console_errors.append(str(params["entry"].get("text", ""))[:300])
        self._events.append(message)

    def _wait_for(self, method: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = json.loads(self._ws.recv())
            self._event(message)
            if message.get("method") == method:
                return
        raise ChromiumError(f"no {method} within {timeout} s")

    def open(self, path: Path, width: int, height: int = 900) -> None:
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=width < 600,
        )
        self.call("Page.navigate", url=path.resolve().as_uri())
        self._wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        answer = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in answer:
            raise ChromiumError(f"evaluating failed: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def screenshot(self, out: Path, *, full_page: bool = True) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
            )
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", **params)["data"]
        out.write_bytes(base64.b64decode(data))


@contextmanager
def chromium() -> Iterator[Page]:
    """A fresh headless Chromium (its own profile folder), one page, closed after."""
    if not CHROMIUM.exists():
        raise ChromiumError(f"{CHROMIUM} is missing: `make chromium` installs it")
    profile = tempfile.mkdtemp(prefix="costguard-chromium-")
    process = subprocess.Popen(
        [str(CHROMIUM), *FLAGS[:-1], f"--user-data-dir={profile}", FLAGS[-1]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if process.poll() is not None or time.monotonic() > deadline:
                raise ChromiumError("Chromium did not start (no DevToolsActivePort)")
            time.sleep(0.05)
        port = int(port_file.read_text().split("\n")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(
                f"PUT /json/new?about:blank HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
            )
            answer = b""
            while not answer.rstrip().endswith(b"}"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
        target = json.loads(answer.split(b"\r\n\r\n", 1)[1])
        ws = _Socket(target["webSocketDebuggerUrl"], port)
        try:
            yield Page(ws)
        finally:
            ws.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(profile, ignore_errors=True)
