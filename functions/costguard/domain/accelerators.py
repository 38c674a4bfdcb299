"""The accelerators CostGuard can estimate a run on: peak dense BF16/FP16 throughput,
memory, where each figure comes from, and the EC2 instance types that carry them.

Peaks are *dense* (no 2:4 sparsity): NVIDIA datasheets print the sparse figure first, and
training does not run sparse. An estimate divides by this peak, so a sparse figure would
halve every cost. Which types are *offered* is not decided here: the price catalog's
``offered_types`` is (retired types such as p3 are never options).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from costguard.domain.models import AcceleratorKind


@dataclass(frozen=True, slots=True)
class AcceleratorSpec:
    """One accelerator model: dense BF16/FP16 peak per device, memory per device, sources."""

    key: str
    name: str
    peak_tflops: Decimal
    memory_gb: Decimal
    source: str
    #: EC2 instance type -> devices per instance.
    instances: tuple[tuple[str, int], ...]
    #: A figure that rests on a secondary source rather than the maker's datasheet.
    caveat: str = ""
    #: What DescribeInstanceTypes calls it (``GpuInfo`` or ``NeuronInfo``) and who makes it:
    #: the idle guard reads GPU utilization from NVIDIA's tools only.
    kind: AcceleratorKind = AcceleratorKind.GPU
    manufacturer: str = "NVIDIA"


_NV_A100 = (
    "NVIDIA A100 datasheet: BF16/FP16 Tensor Core 312 TFLOPS dense (624 with sparsity); "
    "40 GB HBM2 or 80 GB HBM2e"
)
_NV_H100 = (
    "NVIDIA H100 SXM datasheet: BF16/FP16 Tensor Core 1,979 TFLOPS with sparsity, "
    "989 dense; 80 GB HBM3"
)

ACCELERATORS: tuple[AcceleratorSpec, ...] = (
    AcceleratorSpec(
        "a100-40gb",
        "NVIDIA A100 40GB",
        Decimal(312),
        Decimal(40),
        _NV_A100,
        (("p4d.24xlarge", 8),),
    ),
    AcceleratorSpec(
        "a100-80gb",
        "NVIDIA A100 80GB",
        Decimal(312),
        Decimal(80),
        _NV_A100,
        (("p4de.24xlarge", 8),),
    ),
    AcceleratorSpec(
        "h100",
        "NVIDIA H100 80GB (SXM)",
        Decimal(989),
        Decimal(80),
        _NV_H100,
        (("p5.48xlarge", 8), ("p5.4xlarge", 1)),
    ),
    AcceleratorSpec(
        "h200",
        "NVIDIA H200 141GB (SXM)",
        Decimal(989),
        Decimal(141),
        "NVIDIA H200 datasheet: same Hopper tensor cores as H100 SXM (989 TFLOPS dense "
        "BF16/FP16), 141 GB HBM3e",
        (("p5en.48xlarge", 8), ("p5e.48xlarge", 8)),
    ),
    AcceleratorSpec(
        "b200",
        "NVIDIA B200 (HGX)",
        Decimal(2250),
        Decimal(180),
        "NVIDIA HGX B200 datasheet: FP16/BF16 Tensor Core 4.5 PFLOPS per GPU with sparsity, "
        "2.25 PFLOPS dense; 180 GB HBM3e per GPU (1.44 TB per 8-GPU board)",
        (("p6-b200.48xlarge", 8),),
    ),
    AcceleratorSpec(
        "l40s",
        "NVIDIA L40S",
        Decimal("362.05"),
        Decimal(48),
        "NVIDIA L40S datasheet: BF16/FP16 Tensor Core 362.05 TFLOPS dense (733 with "
        "sparsity); 48 GB GDDR6",
        (
            ("g6e.xlarge", 1),
            ("g6e.2xlarge", 1),
            ("g6e.4xlarge", 1),
            ("g6e.8xlarge", 1),
            ("g6e.16xlarge", 1),
            ("g6e.12xlarge", 4),
            ("g6e.24xlarge", 4),
            ("g6e.48xlarge", 8),
        ),
    ),
    AcceleratorSpec(
        "l4",
        "NVIDIA L4",
        Decimal(121),
        Decimal(24),
        "NVIDIA L4 datasheet: FP16/BF16 Tensor Core 242 TFLOPS with sparsity, 121 dense; "
        "24 GB GDDR6",
        (
            ("g6.xlarge", 1),
            ("g6.2xlarge", 1),
            ("g6.4xlarge", 1),
            ("g6.8xlarge", 1),
            ("g6.16xlarge", 1),
            ("gr6.4xlarge", 1),
            ("gr6.8xlarge", 1),
            ("g6.12xlarge", 4),
            ("g6.24xlarge", 4),
            ("g6.48xlarge", 8),
        ),
    ),
    AcceleratorSpec(
        "a10g",
        "NVIDIA A10G",
        Decimal(70),
        Decimal(24),
        "AWS G5 (A10G, 24 GB GDDR6); NVIDIA publishes no A10G datasheet",
        (
            ("g5.xlarge", 1),
            ("g5.2xlarge", 1),
            ("g5.4xlarge", 1),
            ("g5.8xlarge", 1),
            ("g5.16xlarge", 1),
            ("g5.12xlarge", 4),
            ("g5.24xlarge", 4),
            ("g5.48xlarge", 8),
        ),
        caveat=(
            "the A10G's 70 TFLOPS dense FP16 is a secondary figure (public A10 vs A10G "
            "comparisons; the A10 datasheet says 125): NVIDIA publishes none for the A10G"
        ),
    ),
    AcceleratorSpec(
        "v100",
        "NVIDIA V100",
        Decimal(125),
        Decimal(16),
        "NVIDIA V100 SXM2 datasheet: 125 Tensor TFLOPS (FP16); 16 GB HBM2 (32 GB on p3dn)",
        (("p3.2xlarge", 1), ("p3.8xlarge", 4), ("p3.16xlarge", 8), ("p3dn.24xlarge", 8)),
    ),
    AcceleratorSpec(
        "t4",
        "NVIDIA T4",
        Decimal(65),
        Decimal(16),
        "NVIDIA T4 datasheet: 65 TFLOPS mixed-precision FP16/FP32; 16 GB GDDR6",
        (
            ("g4dn.xlarge", 1),
            ("g4dn.2xlarge", 1),
            ("g4dn.4xlarge", 1),
            ("g4dn.8xlarge", 1),
            ("g4dn.16xlarge", 1),
            ("g4dn.12xlarge", 4),
            ("g4dn.metal", 8),
        ),
    ),
    AcceleratorSpec(
        "trainium1",
        "AWS Trainium",
        Decimal(190),
        Decimal(32),
        "AWS Neuron docs, Trainium architecture: 190 FP16/BF16 TFLOPS and 32 GiB per chip; "
        "trn1.32xlarge and trn1n.32xlarge carry 16 chips",
        (("trn1.2xlarge", 1), ("trn1.32xlarge", 16), ("trn1n.32xlarge", 16)),
        kind=AcceleratorKind.TRAINIUM,
        manufacturer="AWS",
    ),
    AcceleratorSpec(
        "trainium2",
        "AWS Trainium2",
        Decimal(667),
        Decimal(96),
        "AWS Neuron docs, Trainium2 architecture: 667 BF16/FP16 TFLOPS dense per chip; "
        "96 GiB HBM per chip; trn2.48xlarge carries 16 chips",
        (("trn2.3xlarge", 1), ("trn2.48xlarge", 16)),
        kind=AcceleratorKind.TRAINIUM,
        manufacturer="AWS",
    ),
    AcceleratorSpec(
        "inferentia2",
        "AWS Inferentia2",
        Decimal(190),
        Decimal(32),
        "AWS Neuron docs, Inferentia2 architecture: 190 FP16/BF16 TFLOPS and 32 GiB per chip",
        (("inf2.xlarge", 1), ("inf2.8xlarge", 1), ("inf2.24xlarge", 6), ("inf2.48xlarge", 12)),
        caveat="Inferentia2 is an inference accelerator: few training stacks run on it",
        kind=AcceleratorKind.INFERENTIA,
        manufacturer="AWS",
    ),
)

BY_KEY: dict[str, AcceleratorSpec] = {a.key: a for a in ACCELERATORS}

#: Instance type -> (accelerator, devices per instance).
BY_INSTANCE: dict[str, tuple[AcceleratorSpec, int]] = {
    itype: (a, n) for a in ACCELERATORS for itype, n in a.instances
}


def accelerator_of_type(instance_type: str) -> tuple[AcceleratorSpec, int] | None:
    """The accelerator an EC2 or SageMaker (``ml.``) type carries, and how many."""
    return BY_INSTANCE.get(instance_type.removeprefix("ml."))
