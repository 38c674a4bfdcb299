"""Inside a member account (through its member-read role): the cheap probe of one
region, and the account's opted-in regions.

The probe answers one question, "does this account-region hold anything the scan would
price?", with at most five small calls, stopping at the first hit:

1. ``ec2:DescribeInstances`` of pending/running instances, 1,000 a page, a page at a
   time until one carries accelerators; their types are judged as the scan judges them
   (``DescribeInstanceTypes``, cached per region across accounts by a warm Lambda, and
   an unknown type counts, as the scan keeps it). An empty region costs one call, and
   probe and scan never disagree about what an accelerator is (so a slice does not
   flip between active and empty);
2. ``eks:ListClusters`` (``maxResults=1``): a cluster bills its control plane, and the
   scan prices it;
3. ``sagemaker:ListNotebookInstances`` (InService), ``ListEndpoints`` (InService),
   ``ListTrainingJobs`` (InProgress), each ``MaxResults=1``;
4. ``sagemaker:ListApps`` when Studio is scanned.

Each is a call the scan already makes, so the member role needs nothing new for it
(:data:`costguard.iam.PROBE_ACTIONS`). A service that refuses the role (a service
control policy, an outdated member role) is named in the answer and the other calls
still run: a hit elsewhere makes the slice active; otherwise the answer is *unknown*
(:attr:`~costguard.domain.directory.ProbeAnswer.unknown`; *blind* when every call was
refused), which the consumer reports rather than reading as empty. Throttling and other
errors fail the probe, which the queue retries.
"""

from __future__ import annotations

from collections.abc import Callable

from costguard.adapters.aws import ClientFor, reading
from costguard.adapters.ec2 import InstanceTypeCache
from costguard.domain.directory import ProbeAnswer
from costguard.iam import ORG_MEMBER_EXTRA
from costguard.ports import AccessDeniedError

PERMISSIONS = ORG_MEMBER_EXTRA
#: Studio app states that bill.
_STUDIO_RUNNING = frozenset({"InService", "Pending"})


def regions_read_from(home: str) -> str:
    """Where an account's DescribeRegions is called: a region that cannot be disabled in
    the hub's partition. The hub's own region may be an opt-in region a member did not
    enable, where every call would fail."""
    if home.startswith("us-gov-"):
        return "us-gov-west-1"
    if home.startswith("cn-"):
        return "cn-north-1"
    return "us-east-1"


class MemberProbe:
    """:class:`costguard.services.fanout.Prober` on one member account's clients."""

    def __init__(
        self, clients: ClientFor, *, studio: bool = False, types: InstanceTypeCache | None = None
    ) -> None:
        self._clients = clients
        self._studio = studio
        self._types = types or InstanceTypeCache()

    def probe(self, region: str) -> ProbeAnswer:
        checks: list[tuple[str, Callable[[str], str | None]]] = [
            ("ec2:DescribeInstances", self._instances),
            ("eks:ListClusters", self._clusters),
            ("sagemaker:ListNotebookInstances", self._notebooks),
            ("sagemaker:ListEndpoints", self._endpoints),
            ("sagemaker:ListTrainingJobs", self._training_jobs),
        ]
        if self._studio:
            checks.append(("sagemaker:ListApps", self._studio_apps))
        denied: list[str] = []
        for action, check in checks:
            try:
                hit = check(region)
            except AccessDeniedError:
                denied.append(action)
                continue
            if hit:
                return ProbeAnswer((hit,), tuple(denied))
        return ProbeAnswer((), tuple(denied), blind=len(denied) == len(checks))

    def _instances(self, region: str) -> str | None:
        ec2 = self._clients.ec2(region)
        with reading("ec2", region, "DescribeInstances"):
            pages = iter(
                ec2.get_paginator("describe_instances").paginate(
                    Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}],
                    PaginationConfig={"PageSize": 1000},
                )
            )
        while True:
            with reading("ec2", region, "DescribeInstances"):
                page = next(pages, None)
            if page is None:
                return None
            types = sorted(
                {
                    str(i["InstanceType"])
                    for r in page.get("Reservations", [])
                    for i in r.get("Instances", [])
                }
            )
            if not types:
                continue
            known = self._types.resolve(ec2, region, types)
            hit = next((t for t in types if known[t] is not None), None)
            if hit is not None:
                return f"ec2:{hit}"

    def _clusters(self, region: str) -> str | None:
        with reading("eks", region, "ListClusters"):
            names = self._clients.eks(region).list_clusters(maxResults=1).get("clusters", [])
        return f"eks:{names[0]}" if names else None

    def _notebooks(self, region: str) -> str | None:
        with reading("sagemaker", region, "ListNotebookInstances"):
            found = (
                self._clients.sagemaker(region)
                .list_notebook_instances(StatusEquals="InService", MaxResults=1)
                .get("NotebookInstances", [])
            )
        return f"sagemaker-notebook:{found[0]['NotebookInstanceName']}" if found else None

    def _endpoints(self, region: str) -> str | None:
        with reading("sagemaker", region, "ListEndpoints"):
            found = (
                self._clients.sagemaker(region)
                .list_endpoints(StatusEquals="InService", MaxResults=1)
                .get("Endpoints", [])
            )
        return f"sagemaker-endpoint:{found[0]['EndpointName']}" if found else None

    def _training_jobs(self, region: str) -> str | None:
        with reading("sagemaker", region, "ListTrainingJobs"):
            found = (
                self._clients.sagemaker(region)
                .list_training_jobs(StatusEquals="InProgress", MaxResults=1)
                .get("TrainingJobSummaries", [])
            )
        return f"sagemaker-training:{found[0]['TrainingJobName']}" if found else None

    def _studio_apps(self, region: str) -> str | None:
        sm = self._clients.sagemaker(region)
        with reading("sagemaker", region, "ListApps"):
            for page in sm.get_paginator("list_apps").paginate(PaginationConfig={"PageSize": 100}):
                for app in page.get("Apps", []):
                    if app.get("Status") in _STUDIO_RUNNING:
                        return f"sagemaker-app:{app.get('AppName', '?')}"
        return None


class MemberRegions:
    """:class:`costguard.services.fanout.RegionReader`: DescribeRegions in the member."""

    def __init__(self, clients: ClientFor) -> None:
        self._clients = clients

    def opted_in(self, region: str) -> tuple[str, ...]:
        """The account's enabled regions: AllRegions=False returns only those that need no
        opt-in or were opted in (a region being enabled or disabled is left out)."""
        with reading("ec2", region, "DescribeRegions"):
            answer = self._clients.ec2(region).describe_regions(AllRegions=False)
        return tuple(
            sorted(
                str(r["RegionName"])
                for r in answer.get("Regions", [])
                if r.get("OptInStatus", "opt-in-not-required")
                in ("opt-in-not-required", "opted-in")
            )
        )
