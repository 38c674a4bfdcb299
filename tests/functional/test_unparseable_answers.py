"""An endpoint that answers with an HTML page (a proxy, a captive portal, a wrong endpoint)
is a failed source in every adapter, never a traceback and never an empty region.

Two loopback HTTP endpoints: a tiny ``http.server`` that answers every request with an
HTML page (the whole command), and moto's server with a WSGI wrapper that answers one
chosen operation with it (each inventory path a scan takes, reached on a real fleet).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest

from costguard.domain.findings import FindingCode
from costguard.env import Env
from tests.support.clock import MIDDAY, clock_at
from tests.support.ec2 import run_instance
from tests.support.endpoints import oversized_endpoint

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/x"
#: Not well-formed XML (an unclosed <meta>, <br>): what web servers and proxies send.
PAGE = (
    b"<!DOCTYPE html>\n<html><head><meta charset=utf-8><title>Error</title></head>"
    b"<body><p>The requested URL was not found on this server.<br></body></html>"
)
#: Well-formed, so EC2's XML parser reads it as an (empty) answer.
TIDY_PAGE = b"<html><body><h1>Welcome to the guest network</h1></body></html>"
HTML_PAGE = "the endpoint answered with an HTML error page"


def _answer(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "text/html; charset=utf-8")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@pytest.fixture
def html_endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    """A loopback endpoint answering every request with ``request.param`` (status, page)."""
    status, body = request.param

    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            _answer(self, status, body)

        do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _any

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "html_endpoint",
    [(404, PAGE), (200, PAGE), (200, TIDY_PAGE), (403, TIDY_PAGE)],
    ids=["404", "200", "200-well-formed", "403-well-formed"],
    indirect=True,
)
def test_a_scan_against_an_html_answering_endpoint_fails_each_source_in_one_line(
    html_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Any,
) -> None:
    """Defect: ``costguard scan`` against an endpoint answering with an HTML page ended in
    a traceback (botocore's ResponseParserError from the EC2 adapter), where the SageMaker
    adapter reported the same answer as a failed source; with HTTP 200, EKS and SageMaker
    read the page as an empty answer, and the region looked empty.

    GIVEN every call answered with an HTML page
    WHEN a user scans
    THEN every source is a scan-failed finding saying so in one line, and the command
    exits 3 (nothing was read), without a traceback
    """
    from costguard.cli import main

    monkeypatch.setenv("AWS_ENDPOINT_URL", html_endpoint)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    # (a day the bundled catalog is current: a stale-catalog finding is another story)
    with clock_at(MIDDAY):
        code = main(["scan", "--region", REGION, "--json"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert code == 3, captured.err
    report = json.loads(captured.out)["data"]
    failed = {f["resource"]: f["message"] for f in report["findings"]}
    assert set(failed) >= {
        f"{REGION}/ec2",
        f"{REGION}/eks",
        f"{REGION}/sagemaker/notebook-instances",
        f"{REGION}/sagemaker/endpoints",
        f"{REGION}/sagemaker/training-jobs",
    }, failed
    for message in failed.values():
        assert HTML_PAGE in message and "\n" not in message, message
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("costguard: every source failed") and "AWS answered HTTP " in last


# -- each inventory path of a scan, on a real fleet, one operation answered with HTML -----------


def _operation(environ: dict[str, Any]) -> str:
    """The AWS operation of a request, whatever its protocol."""
    import io

    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:  # JSON protocols: SageMaker.ListApps
        return str(target).split(".")[-1]
    path = str(environ.get("PATH_INFO", ""))
    if "/operation/" in path:  # Smithy RPC v2 CBOR: /service/<name>/operation/GetMetricData
        return path.rsplit("/", 1)[-1]
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    action = parse_qs(body.decode("utf-8", "replace")).get("Action")
    if action:  # EC2 and the other query protocols
        return action[0]
    for pattern, name in (  # EKS (REST)
        (r"/clusters", "ListClusters"),
        (r"/clusters/[^/]+", "DescribeCluster"),
        (r"/clusters/[^/]+/node-groups", "ListNodegroups"),
        (r"/clusters/[^/]+/node-groups/[^/]+", "DescribeNodegroup"),
    ):
        if re.fullmatch(pattern, path):
            return name
    return f"{environ.get('REQUEST_METHOD')} {path}"


@dataclass
class HtmlFor:
    """WSGI middleware: answers ``operation`` with an HTML page, the rest goes to moto."""

    operation: str = ""
    status: int = 200
    seen: list[str] = field(default_factory=list)

    def __call__(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        def wrapped(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            name = _operation(environ)
            if name == self.operation:
                self.seen.append(name)
                start_response(
                    f"{self.status} HTML",
                    [("Content-Type", "text/html"), ("Content-Length", str(len(PAGE)))],
                )
                return [PAGE]
            return app(environ, start_response)

        return wrapped


@pytest.fixture(scope="module")
def fleet() -> Iterator[tuple[str, HtmlFor, Any]]:
    """moto's server, behind the HTML middleware, holding one of everything a scan reads
    in us-east-1: an on-demand and a spot GPU instance (their volumes), an EKS cluster
    with a node group, a notebook, an oversized endpoint (its GPU metrics are read) and a
    running training job. Yields the middleware, and the clients every test shares
    (made once: a client costs more to make than a scan of this fleet)."""
    import boto3

    from costguard.adapters.aws import ClientFactory
    from costguard_demo.server import embedded_aws

    html = HtmlFor()
    with embedded_aws(html) as url:
        session = boto3.Session(region_name=REGION)
        ec2 = session.client("ec2")
        for market in ({}, {"InstanceMarketOptions": {"MarketType": "spot"}}):
            run_instance(ec2, {"costguard:project": "cv"}, **market)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
        eks = session.client("eks")
        eks.create_cluster(
            name="ml", roleArn=ROLE, resourcesVpcConfig={"subnetIds": [subnet]}, version="1.31"
        )
        eks.create_nodegroup(
            clusterName="ml",
            nodegroupName="gpu",
            nodeRole=ROLE,
            subnets=[subnet],
            instanceTypes=["g5.12xlarge"],
            scalingConfig={"minSize": 0, "maxSize": 2, "desiredSize": 1},
        )
        sm = session.client("sagemaker")
        sm.create_notebook_instance(
            NotebookInstanceName="nb", InstanceType="ml.p3.2xlarge", RoleArn=ROLE
        )
        oversized_endpoint(session, "ep", "serving", MIDDAY - timedelta(days=30), REGION)
        sm.create_training_job(
            TrainingJobName="job",
            AlgorithmSpecification={
                "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1",
                "TrainingInputMode": "File",
            },
            RoleArn=ROLE,
            OutputDataConfig={"S3OutputPath": "s3://out/"},
            ResourceConfig={
                "InstanceType": "ml.p3.2xlarge",
                "InstanceCount": 1,
                "VolumeSizeInGB": 10,
            },
            StoppingCondition={"MaxRuntimeInSeconds": 3600},
        )
        # moto finishes a training job at once: a running one, as the scan reads.
        from costguard_demo.server import moto_backend

        moto_backend("sagemaker", REGION).training_jobs["job"].training_job_status = "InProgress"
        yield url, html, ClientFactory(boto3.Session(region_name=REGION), account="123456789012")


#: Each call a scan makes in a region, by the finding that must name it when its answer is
#: an HTML page: (operation, SageMaker tag reader, Studio scanned, finding resource).
PATHS = [
    ("DescribeInstances", "tagging-api", False, f"{REGION}/ec2"),
    ("DescribeInstanceTypes", "tagging-api", False, f"{REGION}/ec2"),
    ("DescribeVolumes", "tagging-api", False, f"{REGION}/ec2"),
    ("DescribeSpotPriceHistory", "tagging-api", False, f"{REGION}/ec2-spot-prices"),
    ("ListClusters", "tagging-api", False, f"{REGION}/eks"),
    ("DescribeCluster", "tagging-api", False, f"{REGION}/eks"),
    ("ListNodegroups", "tagging-api", False, f"{REGION}/eks"),
    ("DescribeNodegroup", "tagging-api", False, f"{REGION}/eks"),
    ("ListNotebookInstances", "tagging-api", False, f"{REGION}/sagemaker/notebook-instances"),
    ("ListEndpoints", "tagging-api", False, f"{REGION}/sagemaker/endpoints"),
    ("DescribeEndpoint", "tagging-api", False, f"{REGION}/sagemaker/endpoints"),
    ("DescribeEndpointConfig", "tagging-api", False, f"{REGION}/sagemaker/endpoints"),
    ("ListTrainingJobs", "tagging-api", False, f"{REGION}/sagemaker/training-jobs"),
    ("DescribeTrainingJob", "tagging-api", False, f"{REGION}/sagemaker/training-jobs"),
    ("ListApps", "tagging-api", True, f"{REGION}/sagemaker/studio-apps"),
    ("GetResources", "tagging-api", False, f"{REGION}/sagemaker"),
    ("ListTags", "per-resource", False, f"{REGION}/sagemaker"),
    ("GetMetricData", "tagging-api", False, f"{REGION}/sagemaker-endpoint-metrics"),
]


#: Each path answered with HTTP 200 (a JSON protocol read it as an empty answer), and EC2's
#: also with 404 (the traceback reported: an error page is no XML error).
CASES = [(200, *p) for p in PATHS] + [(404, *p) for p in PATHS if p[3].endswith("/ec2")]


@pytest.mark.parametrize(
    ("status", "operation", "tags", "studio", "resource"),
    CASES,
    ids=[f"{c[0]}-{c[1]}" for c in CASES],
)
def test_each_inventory_call_answered_with_html_is_a_failed_source_of_the_scan(
    fleet: tuple[str, HtmlFor, Any],
    monkeypatch: pytest.MonkeyPatch,
    operation: str,
    tags: str,
    studio: bool,
    resource: str,
    status: int,
) -> None:
    """Defect: an HTML answer to an EC2 call raised botocore's ResponseParserError
    through the scan; one to a JSON call with HTTP 200 was read as an empty answer.

    GIVEN a region holding one of everything a scan reads, and ``operation`` answered with
    an HTML page (HTTP ``status``), the rest by moto
    WHEN the scan runs
    THEN it finishes, and one finding names the operation, the status and the HTML page
    """
    from costguard.adapters.ec2 import InstanceTypeCache
    from costguard.adapters.memory import InMemoryLedger
    from costguard.settings import Settings
    from costguard.wiring import build_scan_service

    url, html, clients = fleet
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)  # (the clients are made on first use)
    monkeypatch.setattr(html, "operation", operation)
    monkeypatch.setattr(html, "status", status)
    monkeypatch.setattr(html, "seen", [])
    settings = Settings.from_env(
        {
            Env.REGIONS: REGION,
            Env.SAGEMAKER_TAGS: tags,
            Env.SAGEMAKER_STUDIO: str(studio).lower(),
        }
    )
    service = build_scan_service(
        settings, clients, ledger=InMemoryLedger(), instance_types=InstanceTypeCache()
    )
    report = service.run(MIDDAY)
    assert html.seen, f"the scan never called {operation}"
    named = [
        f
        for f in report.findings
        if f.code is FindingCode.SCAN_FAILED and f.resource.startswith(resource)
    ]
    assert named, [(f.resource, f.message) for f in report.findings]
    (finding,) = named
    assert operation in finding.message and f"HTTP {status}" in finding.message, finding.message
    assert "\n" not in finding.message
