"""Guardrails before launch: the IAM policy that refuses an untagged accelerator.

A pure function of what CostGuard knows (the accelerator families, the catalog's rates)
and what the caller chooses (SCP or permissions boundary, exempt roles, a $/h ceiling).
It returns the policy document, its compact text and a summary of each statement; it
never returns a document AWS would reject for its size. The CLI prints it
(``costguard guardrails``); a CDK construct can attach it later.

The AWS details each statement rests on (Service Authorization Reference, "Actions,
resources, and condition keys" for Amazon EC2 and Amazon SageMaker; IAM User Guide,
"IAM JSON policy elements: Condition operators"; docs/guardrails.md says more):

- ``ec2:RunInstances`` is authorized once per resource it touches (the instance, its
  volumes, network interfaces, the image, the subnet, ...), each with the condition keys
  of that resource type. ``ec2:InstanceType`` exists only for the *instance* resource, so
  the launch statements name instance ARNs only: a deny on ``*`` would also be asked
  about the image and the subnet, where the key is absent.
- ``aws:RequestTag/<key>`` and ``aws:TagKeys`` carry the tags of the request for the
  resource being created: for RunInstances, the ``TagSpecifications`` entry whose
  ``ResourceType`` is ``instance``.
- The *name* of a condition key is case-insensitive: ``aws:RequestTag/costguard:project``
  also finds a ``CostGuard:Project`` tag, which the scan does not read (tag keys are
  case-sensitive). ``aws:TagKeys`` holds the keys as written and ``StringNotEquals`` is
  case-sensitive, so "no key exactly ``costguard:project``" is
  ``ForAllValues:StringNotEquals aws:TagKeys``, which is also true for a request with no
  tags at all (an empty set satisfies "for all"): both are refused by one statement.
- An empty value is a second statement (conditions in one statement are ANDed):
  ``StringEquals aws:RequestTag/costguard:project ""``.
- SageMaker ``CreateNotebookInstance`` and ``CreateTrainingJob`` carry
  ``sagemaker:InstanceTypes`` (every type in the request: a multivalued key, hence
  ``ForAnyValue:StringLike``). ``CreateEndpoint`` does not: its types are on the endpoint
  config. So every endpoint needs the tag, whatever its type, and the $/h ceiling is
  applied to ``CreateEndpointConfig``, which carries the types.
- Removing the tag later: ``ForAnyValue:StringEquals aws:TagKeys`` is false when the
  request has no keys, and an EC2 ``DeleteTags`` without ``Tags`` deletes every tag, so a
  second statement refuses a ``DeleteTags`` whose ``aws:TagKeys`` is null.
- Exempt principals: ``ArnNotLike aws:PrincipalArn``. For an assumed role the key is the
  role's ARN (not the session's), and it may hold wildcards.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from costguard.domain.accelerators import BY_INSTANCE
from costguard.domain.tags import Tags

PROJECT_TAG = Tags.PROJECT
#: AWS Organizations quotas: "Maximum size of a policy document: SCPs 5,120 characters".
SCP_MAX_CHARS = 5120
#: IAM quotas: "Managed policy size: 6,144 characters" (whitespace not counted).
MANAGED_POLICY_MAX_CHARS = 6144

INSTANCE_ARN = "arn:aws:ec2:*:*:instance/*"
SAGEMAKER_ARNS = (
    "arn:aws:sagemaker:*:*:notebook-instance/*",
    "arn:aws:sagemaker:*:*:endpoint/*",
    "arn:aws:sagemaker:*:*:training-job/*",
)
ENDPOINT_CONFIG_ARN = "arn:aws:sagemaker:*:*:endpoint-config/*"

#: What ``--exempt-role`` accepts: an IAM role ARN (``aws:PrincipalArn`` of an assumed
#: role is the role's ARN), in any partition; ``*`` and ``?`` allowed (``ArnNotLike``).
ROLE_ARN = re.compile(
    r"arn:(aws|aws-cn|aws-us-gov|\*):iam::([0-9]{12}|\*):role/[\w+=,.@/*?-]{1,512}"
)


class Target(StrEnum):
    """Where the policy goes: an Organization's SCP, or one account's boundary."""

    SCP = "scp"
    BOUNDARY = "boundary"

    @property
    def max_chars(self) -> int:
        return SCP_MAX_CHARS if self is Target.SCP else MANAGED_POLICY_MAX_CHARS

    @property
    def label(self) -> str:
        return "Service Control Policy" if self is Target.SCP else "IAM permissions boundary policy"


class GuardrailsError(ValueError):
    """The request cannot make a valid policy; the message says why and what to change."""


class PolicyTooLarge(GuardrailsError):
    def __init__(self, size: int, limit: int, target: Target, over: int) -> None:
        self.size, self.limit = size, limit
        fixes = ["exempt fewer roles (one ARN with a wildcard, role/ci-*, covers several)"]
        if over:
            fixes.insert(0, f"raise --max-usd-per-hour ({over:,} type patterns are above it)")
        super().__init__(
            f"the {target.label} would be {size:,} characters, over AWS's limit of "
            f"{limit:,}: {', or '.join(fixes)}"
        )


@dataclass(frozen=True, slots=True)
class StatementSummary:
    """One statement, as a person reads it."""

    sid: str
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    when: str


@dataclass(frozen=True, slots=True)
class Guardrails:
    target: Target
    document: dict[str, Any]
    #: The document as it is handed to AWS: compact JSON, no whitespace.
    text: str
    statements: tuple[StatementSummary, ...]
    families: tuple[str, ...]
    exempt_roles: tuple[str, ...]
    ceiling: Decimal | None
    #: Type patterns refused by the ceiling (``p5.*`` for a whole family), per service.
    over_ceiling_ec2: tuple[str, ...]
    over_ceiling_sagemaker: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.text)

    @property
    def limit(self) -> int:
        return self.target.max_chars


def family(instance_type: str) -> str:
    """``p5`` of ``p5.48xlarge`` and of ``ml.p5.48xlarge``; ``p6-b200`` of ``p6-b200.48xlarge``."""
    return instance_type.removeprefix("ml.").split(".", 1)[0]


def accelerator_families(known_types: Iterable[str] = ()) -> tuple[str, ...]:
    """Every accelerator family CostGuard knows: the estimate table's
    (:mod:`costguard.domain.accelerators`) and those of ``known_types`` (the price
    catalog's EC2 types, which are all accelerated, and its unpriced ones). Sorted."""
    names = {family(t) for t in BY_INSTANCE} | {family(t) for t in known_types if t}
    return tuple(sorted(n for n in names if re.fullmatch(r"[a-z][a-z0-9-]*", n)))


def family_patterns(
    families: Iterable[str], universe: Iterable[str] = (), prefix: str = ""
) -> list[str]:
    """``StringLike`` patterns for the types of ``families``, as few as is safe.

    Without a ``universe`` (every family AWS names: the SDK's instance-type lists), one
    pattern per family (``p5.*``). With one, a family is covered by the shortest prefix
    (its leading letters at least) that no family outside ``families`` in the universe
    starts with: ``p3*`` covers p3 and p3dn, ``trn*`` trn1, trn1n, trn2 and trn2u, while
    ``p*`` is not used as long as p2 (not an accelerator CostGuard prices) is a family AWS
    names. A prefix also covers a family AWS adds later that starts with it: a new
    accelerator generation is gated before CostGuard knows it.
    """
    ours = sorted(set(families))
    named = {family(t) for t in universe}
    if not named:
        return [f"{prefix}{f}.*" for f in ours]
    others = named - set(ours)
    chosen = set()
    for name in ours:
        stem = next(
            (
                name[:n]
                for n in range(_letters(name), len(name) + 1)
                if not any(o.startswith(name[:n]) for o in others)
            ),
            None,
        )
        chosen.add(f"{name}.*" if stem is None else f"{stem}*")
    # A pattern another one covers goes (p5* covers p5e* and p5.*).
    return [
        prefix + p
        for p in sorted(chosen)
        if not any(q != p and q.endswith("*") and p.startswith(q[:-1]) for q in chosen)
    ]


def _letters(name: str) -> int:
    """The length of the family's leading letters (``trn`` of trn1): a prefix is never
    shorter, so ``trn*`` and ``inf*`` are written, never ``tr*`` or ``in*``."""
    return max(1, len(name) - len(name.lstrip("abcdefghijklmnopqrstuvwxyz")))


def over_ceiling(rates: Mapping[str, Decimal], ceiling: Decimal, prefix: str = "") -> list[str]:
    """The type patterns whose rate is above ``ceiling``: a family's wildcard
    (``p5.*``) when every type of it that ``rates`` holds is above, else the types.

    ``rates`` maps a type to the rate it is judged by (the caller chooses: the highest of
    the catalog's regions). A family wildcard also covers sizes the catalog has not
    priced: when every known size is above the ceiling, a new one is refused as well.
    """
    by_family: dict[str, list[tuple[str, Decimal]]] = {}
    for name, usd in rates.items():
        by_family.setdefault(family(name), []).append((name, usd))
    out: list[str] = []
    for fam, members in sorted(by_family.items()):
        above = sorted(n for n, usd in members if usd > ceiling)
        if above and len(above) == len(members):
            out.append(f"{prefix}{fam}.*")
        else:
            out.extend(above)
    return out


def _statement(
    sid: str,
    actions: Sequence[str],
    resources: Sequence[str],
    condition: dict[str, dict[str, Any]],
    exempt: Sequence[str],
) -> dict[str, Any]:
    if exempt:
        condition = {**condition, "ArnNotLike": {"aws:PrincipalArn": _one(exempt)}}
    return {
        "Sid": sid,
        "Effect": "Deny",
        "Action": _one(actions),
        "Resource": _one(resources),
        "Condition": condition,
    }


def _one(values: Sequence[str]) -> str | list[str]:
    """A single value as a string (shorter), several as a list."""
    return values[0] if len(values) == 1 else list(values)


def build_guardrails(
    *,
    target: Target,
    families: Sequence[str],
    exempt_roles: Sequence[str] = (),
    ceiling: Decimal | None = None,
    ec2_rates: Mapping[str, Decimal] | None = None,
    sagemaker_rates: Mapping[str, Decimal] | None = None,
    ec2_universe: Iterable[str] = (),
    sagemaker_universe: Iterable[str] = (),
) -> Guardrails:
    """The guardrail policy for ``target``, or :class:`GuardrailsError` (bad input, or a
    document over AWS's size limit: never one AWS would reject).

    ``ec2_universe`` and ``sagemaker_universe`` are every instance type AWS names (the
    SDK's lists): with them, families are grouped under prefixes (:func:`family_patterns`),
    which keeps the document small; without them, one pattern per family."""
    if not families:
        raise GuardrailsError("no accelerator families to guard")
    for arn in exempt_roles:
        if not ROLE_ARN.fullmatch(arn):
            raise GuardrailsError(
                f"not an IAM role ARN: {arn!r} (expected arn:aws:iam::123456789012:role/NAME; "
                "* and ? allowed)"
            )
    if ceiling is not None and (not ceiling.is_finite() or ceiling <= 0):
        raise GuardrailsError(f"the $/h ceiling must be a positive number, got {ceiling}")
    exempt = tuple(dict.fromkeys(exempt_roles))
    ec2_types = family_patterns(families, ec2_universe)
    ml_types = family_patterns(
        families, [t.removeprefix("ml.") for t in sagemaker_universe], prefix="ml."
    )
    tag = f"aws:RequestTag/{PROJECT_TAG}"
    no_key = {"ForAllValues:StringNotEquals": {"aws:TagKeys": PROJECT_TAG}}
    empty = {"StringEquals": {tag: ""}}
    is_gpu = {"StringLike": {"ec2:InstanceType": ec2_types}}
    is_ml_gpu = {"ForAnyValue:StringLike": {"sagemaker:InstanceTypes": ml_types}}
    sm_launch = ["sagemaker:CreateNotebookInstance", "sagemaker:CreateTrainingJob"]
    every = [INSTANCE_ARN, *SAGEMAKER_ARNS]
    rows: list[tuple[dict[str, Any], str]] = [
        (
            _statement(
                "DenyUntaggedAcceleratorInstances",
                ["ec2:RunInstances"],
                [INSTANCE_ARN],
                {**is_gpu, **no_key},
                exempt,
            ),
            f"an accelerator instance type and no {PROJECT_TAG} tag on the instance",
        ),
        (
            _statement(
                "DenyBlankProjectAcceleratorInstances",
                ["ec2:RunInstances"],
                [INSTANCE_ARN],
                {**is_gpu, **empty},
                exempt,
            ),
            f"an accelerator instance type and an empty {PROJECT_TAG} value",
        ),
        (
            _statement(
                "DenyUntaggedSageMakerAccelerators",
                sm_launch,
                ["*"],
                {**is_ml_gpu, **no_key},
                exempt,
            ),
            f"any accelerator type in the request and no {PROJECT_TAG} tag",
        ),
        (
            _statement(
                "DenyBlankProjectSageMakerAccelerators",
                sm_launch,
                ["*"],
                {**is_ml_gpu, **empty},
                exempt,
            ),
            f"any accelerator type in the request and an empty {PROJECT_TAG} value",
        ),
        (
            _statement(
                "DenyUntaggedEndpoints",
                ["sagemaker:CreateEndpoint"],
                ["*"],
                dict(no_key),
                exempt,
            ),
            f"no {PROJECT_TAG} tag (any type: CreateEndpoint does not carry the types)",
        ),
        (
            _statement(
                "DenyBlankProjectEndpoints",
                ["sagemaker:CreateEndpoint"],
                ["*"],
                dict(empty),
                exempt,
            ),
            f"an empty {PROJECT_TAG} value",
        ),
        (
            _statement(
                "DenyRemovingProjectTag",
                ["ec2:DeleteTags", "sagemaker:DeleteTags"],
                every,
                {"ForAnyValue:StringEquals": {"aws:TagKeys": PROJECT_TAG}},
                exempt,
            ),
            f"the request removes {PROJECT_TAG}",
        ),
        (
            _statement(
                "DenyRemovingEveryTag",
                ["ec2:DeleteTags"],
                [INSTANCE_ARN],
                {"Null": {"aws:TagKeys": "true"}},
                exempt,
            ),
            "DeleteTags without keys (it deletes every tag, the project's too)",
        ),
        (
            _statement(
                "DenyBlankingProjectTag",
                ["ec2:CreateTags", "sagemaker:AddTags"],
                every,
                dict(empty),
                exempt,
            ),
            f"the request sets {PROJECT_TAG} to an empty value",
        ),
    ]
    over_ec2: list[str] = []
    over_ml: list[str] = []
    if ceiling is not None:
        over_ec2 = over_ceiling(ec2_rates or {}, ceiling)
        over_ml = over_ceiling(sagemaker_rates or {}, ceiling, prefix="ml.")
        if over_ec2:
            rows.append(
                (
                    _statement(
                        "DenyInstanceTypesAboveCeiling",
                        ["ec2:RunInstances"],
                        [INSTANCE_ARN],
                        {"StringLike": {"ec2:InstanceType": over_ec2}},
                        exempt,
                    ),
                    f"an instance type above ${ceiling}/h ({len(over_ec2)} patterns)",
                )
            )
        if over_ml:
            rows.append(
                (
                    _statement(
                        "DenySageMakerTypesAboveCeiling",
                        [*sm_launch, "sagemaker:CreateEndpointConfig"],
                        ["*"],
                        {"ForAnyValue:StringLike": {"sagemaker:InstanceTypes": over_ml}},
                        exempt,
                    ),
                    f"any instance type in the request above ${ceiling}/h "
                    f"({len(over_ml)} patterns)",
                )
            )
    statements = [s for s, _ in rows]
    summaries = [
        StatementSummary(s["Sid"], s["Effect"], _many(s["Action"]), _many(s["Resource"]), why)
        for s, why in rows
    ]
    if target is Target.BOUNDARY:
        # A boundary caps what identity policies grant: a boundary of denies alone would
        # allow nothing at all. An SCP needs no allow: FullAWSAccess stays attached.
        allow = {"Sid": "AllowWithinBoundary", "Effect": "Allow", "Action": "*", "Resource": "*"}
        statements.insert(0, allow)
        summaries.insert(
            0,
            StatementSummary(
                "AllowWithinBoundary",
                "Allow",
                ("*",),
                ("*",),
                "always: the boundary caps, the identity policies grant",
            ),
        )
    document = {"Version": "2012-10-17", "Statement": statements}
    text = compact(document)
    if len(text) > target.max_chars:
        raise PolicyTooLarge(len(text), target.max_chars, target, len(over_ec2) + len(over_ml))
    return Guardrails(
        target=target,
        document=document,
        text=text,
        statements=tuple(summaries),
        families=tuple(families),
        exempt_roles=exempt,
        ceiling=ceiling,
        over_ceiling_ec2=tuple(over_ec2),
        over_ceiling_sagemaker=tuple(over_ml),
    )


def _many(value: str | list[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def compact(document: Mapping[str, Any]) -> str:
    """The document as AWS counts it: JSON without whitespace, key order kept."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)
