"""The idle-notebook guard's candidates: running EC2 notebooks and InService notebook instances.

EC2: one paginated ``DescribeInstances`` (1,000 a page) filtered on ``costguard:role=notebook``
(or on nothing, when every accelerator instance is in the guard's scope). Each type's GPUs
come from CostGuard's accelerator table (:mod:`costguard.domain.accelerators`) without a
call; only types the table does not list (CPU types, new families) are asked of EC2,
through the shared, batched :class:`InstanceTypeCache` (100 types a call, once per Lambda
instance). A type missing from the table is never guessed to have no GPU.
SageMaker: ``ListNotebookInstances`` (InService), their tags through the scan's
:class:`TagReader` (one tagging-API pass, or ``ListTags`` per notebook where that API is
missing), and each ``ml.`` type's GPUs as for EC2 (the table, else EC2 for the same
hardware): the heartbeat of a GPU type must report its GPU.
"""

from __future__ import annotations

from collections.abc import Sequence

from costguard.adapters.aws import ClientFor, reading, tags_of
from costguard.adapters.ec2 import InstanceTypeCache
from costguard.adapters.sagemaker import TagReader
from costguard.domain.accelerators import accelerator_of_type
from costguard.domain.idle import NOTEBOOK_ROLE, Ec2Notebook, NotebookInstance
from costguard.domain.models import Accelerator, AcceleratorKind
from costguard.domain.tags import Tags

#: A notebook whose type SageMaker did not report: unknown (as a type EC2 does not know).
_NO_TYPE = object()


def _listed(instance_type: str) -> Accelerator | None:
    """The accelerator of a type CostGuard's table lists, as DescribeInstanceTypes would
    report it (kind, maker, count); None: not listed, so EC2 is asked."""
    known = accelerator_of_type(instance_type)
    if known is None or instance_type.startswith("ml."):
        return None
    spec, count = known
    return Accelerator(spec.kind, spec.name, count, manufacturer=spec.manufacturer)


def _gpus(info: Accelerator | object | None) -> tuple[int | None, str | None]:
    """(NVIDIA GPUs, other accelerator's name) of a type's accelerator info: 0 GPUs for a
    CPU type, None for a type EC2 does not know; a non-NVIDIA accelerator is named."""
    if info is None:
        return 0, None
    if isinstance(info, Accelerator):
        nvidia = info.kind is AcceleratorKind.GPU and "nvidia" in info.manufacturer.lower()
        return (info.count, None) if nvidia else (0, info.name or info.kind.value)
    return None, None  # a type DescribeInstanceTypes does not know


class NotebookCandidateSource:
    def __init__(
        self,
        clients: ClientFor,
        tag_reader: TagReader,
        *,
        types: InstanceTypeCache | None = None,
        all_accelerators: bool = False,
        sagemaker: bool = True,
    ) -> None:
        self._sagemaker = sagemaker
        self._clients = clients
        self._tags = tag_reader
        self._types = types or InstanceTypeCache()
        self._all = all_accelerators

    def ec2_notebooks(self, region: str) -> Sequence[Ec2Notebook]:
        ec2 = self._clients.ec2(region)
        filters = [{"Name": "instance-state-name", "Values": ["running"]}]
        if not self._all:
            filters.append({"Name": f"tag:{Tags.ROLE}", "Values": [NOTEBOOK_ROLE]})
        with reading("ec2", region, "DescribeInstances"):
            pages = ec2.get_paginator("describe_instances").paginate(
                Filters=filters,  # type: ignore[arg-type]
                PaginationConfig={"PageSize": 1000},
            )
            instances = [
                i for p in pages for r in p.get("Reservations", []) for i in r.get("Instances", [])
            ]
        types = sorted({str(i["InstanceType"]) for i in instances})
        listed = {t: _listed(t) for t in types}
        accel: dict[str, Accelerator | object | None] = {
            **self._types.resolve(ec2, region, [t for t in types if listed[t] is None]),
            **{t: info for t, info in listed.items() if info is not None},
        }
        found: list[Ec2Notebook] = []
        for inst in instances:
            tags = tags_of(inst.get("Tags"))
            info = accel[str(inst["InstanceType"])]
            tagged = tags.get(Tags.ROLE, "").strip().lower() == NOTEBOOK_ROLE
            if self._all and info is None and not tagged:
                continue  # a CPU instance nobody called a notebook
            gpu_count, other = _gpus(info)
            found.append(
                Ec2Notebook(
                    id=str(inst["InstanceId"]),
                    region=region,
                    instance_type=str(inst["InstanceType"]),
                    launched_at=inst.get("LaunchTime"),
                    tags=tags,
                    gpu_count=gpu_count,
                    accelerator=other,
                    spot=inst.get("InstanceLifecycle") == "spot",
                )
            )
        return found

    def notebook_instances(self, region: str) -> Sequence[NotebookInstance]:
        if not self._sagemaker:
            return []
        sm = self._clients.sagemaker(region)
        listed = []
        with reading("sagemaker", region, "ListNotebookInstances"):
            for page in sm.get_paginator("list_notebook_instances").paginate(
                StatusEquals="InService"
            ):
                listed.extend(page.get("NotebookInstances", []))
        if not listed:
            return []
        tags = self._tags.tags(region, [str(nb["NotebookInstanceArn"]) for nb in listed])
        accel = self._notebook_types(region, [str(nb.get("InstanceType") or "") for nb in listed])
        found = []
        for nb in listed:
            gpu_count, other = _gpus(accel.get(str(nb.get("InstanceType") or ""), _NO_TYPE))
            found.append(
                NotebookInstance(
                    name=str(nb["NotebookInstanceName"]),
                    arn=str(nb["NotebookInstanceArn"]),
                    region=region,
                    instance_type=nb.get("InstanceType"),
                    # An InService notebook was last modified when it last started.
                    in_service_since=nb.get("LastModifiedTime") or nb.get("CreationTime"),
                    tags=tags.get(str(nb["NotebookInstanceArn"]), {}),
                    gpu_count=gpu_count,
                    accelerator=other,
                )
            )
        return found

    def _notebook_types(
        self, region: str, types: Sequence[str]
    ) -> dict[str, Accelerator | object | None]:
        """Each ``ml.`` type's accelerator: from the table, else from EC2 for the same
        hardware (``ml.t3.medium`` is a ``t3.medium``), through the shared cache. A type
        missing from both is unknown, never guessed to have no GPU."""
        known = {t: _listed(t.removeprefix("ml.")) for t in types if t}
        ask = sorted({t.removeprefix("ml.") for t, info in known.items() if info is None})
        asked = self._types.resolve(self._clients.ec2(region), region, ask) if ask else {}
        return {
            t: info if info is not None else asked[t.removeprefix("ml.")]
            for t, info in known.items()
        }
