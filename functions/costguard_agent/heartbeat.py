"""CostGuard notebook heartbeat: Jupyter activity and GPU use, to CloudWatch every 5 min.

Runs ON a SageMaker notebook instance (installed by CostGuard's lifecycle configuration),
not in a Lambda. Standard library only, plus boto3 when the Python it runs under has it
(SageMaker's conda environments do), else the AWS CLI. No internet needed: it calls the
regional CloudWatch endpoint, which a VPC-only notebook reaches through a
``com.amazonaws.<region>.monitoring`` interface endpoint.

Contract (costguard.domain.idle.Heartbeat): namespace CostGuard/Notebook, dimension
NotebookInstanceName; JupyterActivity 1/0; GPUUtilization = busiest GPU's percent.
What it cannot measure it does not publish: no datapoint is "unknown", never "idle".
Kept compatible with Python 3.7 (old notebook images).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timedelta, timezone

NAMESPACE = "CostGuard/Notebook"
DIMENSION = "NotebookInstanceName"
ACTIVITY = "JupyterActivity"
GPU = "GPUUtilization"
PERIOD = 300
METADATA = "/opt/ml/metadata/resource-metadata.json"
#: SageMaker notebook instances serve Jupyter on https://localhost:8443 (self-signed,
#: no token from localhost); a plain Jupyter server listens on http://localhost:8888.
JUPYTER_URLS = ("https://localhost:8443", "http://localhost:8888")

log = logging.getLogger("costguard-heartbeat")


def parse_time(raw: object) -> datetime | None:
    """Jupyter's ``last_activity`` (``2026-11-20T11:58:01.123456Z``) as aware UTC."""
    m = re.match(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)", str(raw or ""))
    if not m:
        return None
    y, mo, d, h, mi, se = (int(g) for g in m.groups())
    try:
        return datetime(y, mo, d, h, mi, se, tzinfo=timezone.utc)
    except ValueError:  # 2026-13-45: not a time
        return None


def _get(base: str, path: str, token: str | None, timeout: float) -> object:
    if not base.startswith(("http://localhost", "https://localhost", "http://127.0.0.1")):
        raise ValueError("the heartbeat only asks the local Jupyter server: " + base)
    request = urllib.request.Request(base + path)  # noqa: S310 - local http(s) only
    if token:
        request.add_header("Authorization", "token " + token)
    context = None
    if base.startswith("https://localhost"):
        context = ssl.create_default_context()
        context.check_hostname = False  # the notebook's own self-signed certificate
        context.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(request, timeout=timeout, context=context) as response:  # noqa: S310
        return json.loads(response.read().decode("utf-8"))


def jupyter_activity(
    urls: tuple[str, ...], now: datetime, token: str | None = None, timeout: float = 3.0
) -> int | None:
    """1 if a kernel is busy or a kernel or terminal was active in the last period,
    0 if the server answered and nothing was; None if no server answered."""
    for base in urls:
        try:
            kernels = _get(base, "/api/kernels", token, timeout)
        except Exception as exc:  # the next URL, or unknown
            log.info("no Jupyter at %s: %s", base, exc)
            continue
        items = list(kernels) if isinstance(kernels, list) else []
        for path in ("/api/terminals", "/api/sessions"):
            try:
                extra = _get(base, path, token, timeout)
            except Exception as exc:  # terminals may be disabled: kernels still count
                log.info("%s%s unreadable: %s", base, path, exc)
                continue
            for item in extra if isinstance(extra, list) else []:
                if isinstance(item, dict):
                    kernel = item.get("kernel")
                    items.append(kernel if isinstance(kernel, dict) else item)
        since = now - timedelta(seconds=PERIOD)
        for item in items:
            if not isinstance(item, dict):
                continue
            if item.get("execution_state") == "busy":
                return 1
            seen = parse_time(item.get("last_activity"))
            if seen is not None and seen >= since:
                return 1
        return 0
    return None


def gpu_utilization(timeout: float = 20.0) -> float | None:
    """The busiest GPU's utilization in percent; None without nvidia-smi or a reading.

    nvidia-smi prints one line per GPU. A GPU it cannot read (``[N/A]``, as MIG-enabled
    GPUs print, ``[Not Supported]``, noise) makes the whole reading None: the busiest of
    the others is not the busiest GPU, and a missing reading is "unknown", never idle.
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(  # noqa: S603
            [exe, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
            capture_output=True,
            timeout=timeout,
            check=True,
        ).stdout.decode("utf-8", "replace")
    except Exception as exc:
        log.warning("nvidia-smi failed: %s", exc)
        return None
    values = []
    for line in out.splitlines():
        if not line.strip():
            continue
        try:
            value = float(line.strip())
        except ValueError:
            log.warning("a GPU without a utilization reading: %r", line.strip()[:80])
            return None  # "[N/A]", "[Not Supported]", noise: that GPU is unknown
        if not 0 <= value <= 100:
            log.warning("a GPU utilization out of range: %r", line.strip()[:80])
            return None
        values.append(value)
    return max(values) if values else None


def metric_data(name: str, now: datetime, activity: int | None, gpu: float | None) -> list[dict]:  # type: ignore[type-arg]
    dims = [{"Name": DIMENSION, "Value": name}]
    data = []
    if activity is not None:
        data.append({"MetricName": ACTIVITY, "Dimensions": dims, "Timestamp": now,
                     "Value": float(activity), "Unit": "Count"})  # fmt: skip
    if gpu is not None:
        data.append({"MetricName": GPU, "Dimensions": dims, "Timestamp": now,
                     "Value": gpu, "Unit": "Percent"})  # fmt: skip
    return data


def identity() -> tuple[str | None, str | None]:
    """(notebook instance name, region), from the environment or SageMaker's metadata."""
    name = os.environ.get("COSTGUARD_NOTEBOOK_NAME")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    try:
        with open(os.environ.get("COSTGUARD_METADATA", METADATA)) as f:
            meta = json.load(f)
        name = name or meta.get("ResourceName")
        arn = str(meta.get("ResourceArn") or "")
        region = region or (arn.split(":")[3] if arn.count(":") >= 5 else None)
    except Exception as exc:
        log.info("no notebook metadata: %s", exc)
    return name, region


def publish(data: list[dict], region: str) -> None:  # type: ignore[type-arg]
    """PutMetricData with boto3 if present, else the AWS CLI; raises on failure."""
    try:
        import boto3  # noqa: PLC0415
        from botocore.config import Config  # noqa: PLC0415
    except ImportError:
        boto3 = None  # type: ignore[assignment]
    if boto3 is not None:
        config = Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 2})
        client = boto3.client("cloudwatch", region_name=region, config=config)
        client.put_metric_data(Namespace=NAMESPACE, MetricData=data)
        return
    for d in data:
        d["Timestamp"] = d["Timestamp"].strftime("%Y-%m-%dT%H:%M:%SZ")
    subprocess.run(  # noqa: S603
        ["aws", "cloudwatch", "put-metric-data", "--region", region,  # noqa: S607
         "--namespace", NAMESPACE, "--metric-data", json.dumps(data),
         "--cli-connect-timeout", "5", "--cli-read-timeout", "10"],
        check=True, timeout=60, capture_output=True,
    )  # fmt: skip


def beat(now: datetime | None = None) -> list[dict]:  # type: ignore[type-arg]
    """Measure once and publish; returns what was published (logged, never raised)."""
    now = now or datetime.now(timezone.utc)
    name, region = identity()
    if not name or not region:
        log.warning("not a SageMaker notebook instance (no name or region): nothing sent")
        return []
    urls = tuple(os.environ.get("COSTGUARD_JUPYTER_URLS", " ".join(JUPYTER_URLS)).split())
    token = os.environ.get("JUPYTER_TOKEN") or None
    data = metric_data(name, now, jupyter_activity(urls, now, token), gpu_utilization())
    if data:
        publish(data, region)
    log.info("published %s", [(d["MetricName"], d["Value"]) for d in data])
    return data


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    loop = "--loop" in argv
    while True:
        started = time.time()
        try:
            beat()
        except Exception:  # the next beat may succeed (CloudWatch back, a VPC endpoint added)
            log.exception("heartbeat failed")
        if not loop:
            return 0
        time.sleep(max(1.0, PERIOD - (time.time() - started)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
