"""The notebook heartbeat on this machine: a real local HTTP server stands in for
Jupyter, a script on PATH for nvidia-smi, moto for CloudWatch; and the on-start script
itself is run, to prove it never fails or slows a notebook's start."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from costguard.domain.idle import Heartbeat
from costguard_agent import heartbeat
from costguard_agent.lifecycle import MAX_CONTENT, on_start_content, on_start_script
from tests.support.clock import MIDDAY


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.123456Z")


class FakeJupyter:
    """Jupyter's REST API: /api/kernels, /api/terminals, /api/sessions."""

    def __init__(self) -> None:
        self.routes: dict[str, Any] = {
            "/api/kernels": [],
            "/api/terminals": [],
            "/api/sessions": [],
        }
        self.auth: list[str | None] = []
        routes, auth = self.routes, self.auth

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                auth.append(self.headers.get("Authorization"))
                body = routes.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                raw = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def jupyter() -> Iterator[FakeJupyter]:
    fake = FakeJupyter()
    yield fake
    fake.server.shutdown()


def fake_nvidia_smi(bin_dir: Path, script: str) -> None:
    exe = bin_dir / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- activity ---------------------------------------------------------------------------


def test_a_busy_kernel_is_activity(jupyter: FakeJupyter) -> None:
    jupyter.routes["/api/kernels"] = [
        {"id": "k", "execution_state": "busy", "last_activity": iso(MIDDAY - timedelta(hours=5))}
    ]
    assert heartbeat.jupyter_activity((jupyter.url,), MIDDAY) == 1


def test_a_terminal_typed_in_within_five_minutes_is_activity(jupyter: FakeJupyter) -> None:
    jupyter.routes["/api/kernels"] = [
        {"id": "k", "execution_state": "idle", "last_activity": iso(MIDDAY - timedelta(hours=2))}
    ]
    jupyter.routes["/api/terminals"] = [
        {"name": "1", "last_activity": iso(MIDDAY - timedelta(seconds=299))}
    ]
    assert heartbeat.jupyter_activity((jupyter.url,), MIDDAY) == 1


def test_idle_kernels_and_old_terminals_are_no_activity_and_the_token_is_sent(
    jupyter: FakeJupyter,
) -> None:
    jupyter.routes["/api/kernels"] = [
        {
            "id": "k",
            "execution_state": "idle",
            "last_activity": iso(MIDDAY - timedelta(seconds=301)),
        }
    ]
    jupyter.routes["/api/terminals"] = [
        {"name": "1", "last_activity": iso(MIDDAY - timedelta(days=1))}
    ]
    jupyter.routes["/api/sessions"] = [
        {"kernel": {"execution_state": "idle", "last_activity": "garbage"}}
    ]
    assert heartbeat.jupyter_activity((jupyter.url,), MIDDAY, token="s3cret") == 0
    assert set(jupyter.auth) == {"token s3cret"}


def test_no_jupyter_server_is_unknown_not_idle(jupyter: FakeJupyter) -> None:
    # GIVEN nothing listening where Jupyter should be, then a server answering 404s
    assert (
        heartbeat.jupyter_activity((f"http://127.0.0.1:{closed_port()}",), MIDDAY, timeout=1)
        is None
    )
    jupyter.routes.pop("/api/kernels")
    assert heartbeat.jupyter_activity((jupyter.url,), MIDDAY) is None


def test_terminals_disabled_still_counts_kernels(jupyter: FakeJupyter) -> None:
    jupyter.routes.pop("/api/terminals")
    jupyter.routes["/api/kernels"] = [
        {"execution_state": "idle", "last_activity": iso(MIDDAY - timedelta(seconds=10))}
    ]
    assert heartbeat.jupyter_activity((jupyter.url,), MIDDAY) == 1


def test_only_the_local_server_is_ever_asked() -> None:
    assert heartbeat.jupyter_activity(("http://169.254.169.254",), MIDDAY) is None


# -- GPU ---------------------------------------------------------------------------------


def test_gpu_is_the_busiest_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nvidia_smi(tmp_path, 'echo "3"\necho "87"\necho " 12 "\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert heartbeat.gpu_utilization() == 87.0


@pytest.mark.parametrize("unreadable", ["[N/A]", "[Not Supported]", "ERR!", "250"])
def test_a_gpu_it_cannot_read_makes_no_gpu_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unreadable: str
) -> None:
    """Defect: a GPU that nvidia-smi could not read (``[N/A]``, as MIG-enabled GPUs print)
    was skipped, and the busiest of the *others* was published as the busiest GPU: two
    idle GPUs and one busy unreadable one read 0 %, which is idle.

    GIVEN nvidia-smi printing two idle GPUs and one it cannot read
    WHEN the heartbeat measures THEN it publishes no GPU reading (unknown, never idle)."""
    fake_nvidia_smi(tmp_path, f'echo "0"\necho "{unreadable}"\necho "1"\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert heartbeat.gpu_utilization() is None


@pytest.mark.parametrize(
    "script",
    [
        "exit 9\n",  # the driver crashed
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver"\n',
        "sleep 30\n",  # hangs
    ],
)
def test_a_broken_nvidia_smi_is_no_gpu_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str
) -> None:
    fake_nvidia_smi(tmp_path, script)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    started = time.monotonic()
    assert heartbeat.gpu_utilization(timeout=2) is None
    assert time.monotonic() - started < 10


def test_no_nvidia_smi_is_no_gpu_metric(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert heartbeat.gpu_utilization() is None


# -- what is published --------------------------------------------------------------------


def test_publishes_the_heartbeat_contract_to_cloudwatch(
    aws: Any, jupyter: FakeJupyter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a notebook instance (its metadata file), an idle Jupyter and two GPUs
    meta = tmp_path / "resource-metadata.json"
    meta.write_text(
        json.dumps(
            {
                "ResourceName": "nb-vision",
                "ResourceArn": "arn:aws:sagemaker:eu-west-1:123456789012:notebook-instance/nb-vision",
            }
        )
    )
    fake_nvidia_smi(tmp_path, 'echo "0"\necho "4"\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("COSTGUARD_METADATA", str(meta))
    monkeypatch.setenv("COSTGUARD_JUPYTER_URLS", jupyter.url)
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    # WHEN one beat runs
    sent = heartbeat.beat(MIDDAY)
    # THEN exactly the contract's two metrics reach CloudWatch in the notebook's region
    cw = aws.client("cloudwatch", region_name="eu-west-1")
    listed = cw.list_metrics(Namespace=Heartbeat.NAMESPACE)["Metrics"]
    assert {m["MetricName"] for m in listed} == {
        Heartbeat.JUPYTER_ACTIVITY,
        Heartbeat.GPU_UTILIZATION,
    }
    assert all(
        m["Dimensions"] == [{"Name": Heartbeat.DIMENSION, "Value": "nb-vision"}] for m in listed
    )
    assert {d["MetricName"]: d["Value"] for d in sent} == {
        "JupyterActivity": 0.0,
        "GPUUtilization": 4.0,
    }
    stats = cw.get_metric_statistics(
        Namespace=Heartbeat.NAMESPACE, MetricName="GPUUtilization",
        Dimensions=[{"Name": Heartbeat.DIMENSION, "Value": "nb-vision"}],
        StartTime=MIDDAY - timedelta(minutes=5), EndTime=MIDDAY + timedelta(minutes=5), Period=300, Statistics=["Maximum"],
    )  # fmt: skip
    assert [p["Maximum"] for p in stats["Datapoints"]] == [4.0]
    assert (heartbeat.NAMESPACE, heartbeat.DIMENSION, heartbeat.ACTIVITY, heartbeat.GPU, heartbeat.PERIOD) == (
        Heartbeat.NAMESPACE, Heartbeat.DIMENSION, Heartbeat.JUPYTER_ACTIVITY, Heartbeat.GPU_UTILIZATION, Heartbeat.PERIOD_SECONDS,
    )  # fmt: skip


def test_publishes_nothing_when_it_measured_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("COSTGUARD_NOTEBOOK_NAME", "nb")
    monkeypatch.setenv("COSTGUARD_JUPYTER_URLS", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert heartbeat.metric_data("nb", MIDDAY, None, None) == []
    assert heartbeat.beat(MIDDAY) == []  # and no CloudWatch call (none is mocked here)


# -- the on-start script ------------------------------------------------------------------


def run_on_start(
    tmp_path: Path, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], float]:
    script = tmp_path / "on-start.sh"
    script.write_text(on_start_script())
    started = time.monotonic()
    done = subprocess.run(
        ["/bin/bash", str(script)],
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "COSTGUARD_AGENT_DIR": str(tmp_path / "agent"), **env},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return done, time.monotonic() - started


def test_on_start_exits_0_at_once_and_the_heartbeat_runs_in_the_background(
    tmp_path: Path, jupyter: FakeJupyter
) -> None:
    # GIVEN CloudWatch unreachable (a closed port), a crashing nvidia-smi, and a Jupyter
    # that answers (so there is a heartbeat to send)
    fake_nvidia_smi(tmp_path, "kill -SEGV $$\n")
    import sys

    done, took = run_on_start(
        tmp_path,
        {
            "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
            "COSTGUARD_PYTHONS": sys.executable,
            "COSTGUARD_NOTEBOOK_NAME": "nb",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed_port()}",
            "COSTGUARD_JUPYTER_URLS": jupyter.url,
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        },
    )
    # THEN the start is not failed, nor slowed, and the heartbeat keeps running, logging
    try:
        assert done.returncode == 0 and took < 5, done
        log = tmp_path / "agent" / "heartbeat.log"
        for _ in range(100):
            if log.exists() and "heartbeat failed" in log.read_text():
                break
            time.sleep(0.2)
        assert "heartbeat failed" in log.read_text()  # CloudWatch unreachable: logged, not fatal
        assert pids_of(tmp_path), "the heartbeat loop should survive a failed beat"
    finally:
        for pid in pids_of(tmp_path):  # our own background process, by its id
            os.kill(pid, 15)


def pids_of(tmp_path: Path) -> list[int]:
    found = subprocess.run(
        ["pgrep", "-f", str(tmp_path / "agent" / "heartbeat.py")],  # noqa: S607
        capture_output=True,
        text=True,
        check=False,
    )
    return [int(p) for p in found.stdout.split()]


def test_on_start_exits_0_when_no_python_exists(tmp_path: Path) -> None:
    done, took = run_on_start(tmp_path, {"COSTGUARD_PYTHONS": "/nonexistent/python"})
    assert done.returncode == 0 and took < 5
    assert "no python found" in (tmp_path / "agent.on-start.log").read_text()


def test_on_start_exits_0_when_it_cannot_even_write_its_directory(tmp_path: Path) -> None:
    done, _ = run_on_start(tmp_path, {"COSTGUARD_AGENT_DIR": "/proc/costguard-cannot-exist"})
    assert done.returncode == 0


def test_the_deployed_content_is_the_tested_script_and_within_sagemakers_limit() -> None:
    import base64

    content = on_start_content()
    assert len(content) <= MAX_CONTENT
    assert base64.b64decode(content).decode() == on_start_script()
    script = on_start_script()
    assert script.startswith("#!/bin/bash") and script.rstrip().endswith("exit 0")
    assert "set -e" not in script  # one failing command must never fail the start
    assert Path(heartbeat.__file__).read_text().rstrip("\n") in script
