"""``costguard guardrails``: the policy that refuses an untagged accelerator at launch.

It writes a Service Control Policy (``--org``) or, for one account, an IAM permissions
boundary policy (docs/guardrails.md). The policy is built by
:mod:`costguard.domain.guardrails`; this module reads the price catalog (for the known
accelerator families and the $/h ceiling), prints the summary and writes the document.
No AWS call is made: the command prints a policy, it attaches nothing.
"""

from __future__ import annotations

import argparse
import re
import sys
from decimal import Decimal, InvalidOperation
from typing import Any

from costguard.cli import common
from costguard.cli.output import Column, Table, plain_text, write

COLUMNS = (
    Column("sid", "Statement"),
    Column("effect", "Effect"),
    Column("actions", "Actions"),
    Column("resources", "Resources"),
    Column("when", "When"),
)


def _exempt_role(value: str) -> str:
    from costguard.domain.guardrails import ROLE_ARN

    shown = value if len(value) <= 80 else value[:80] + "…"
    if not ROLE_ARN.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"not an IAM role ARN: {shown!r} (expected arn:aws:iam::123456789012:role/NAME; "
            "* and ? allowed)"
        )
    return value


def _ceiling(value: str) -> Decimal:
    text = value.strip().removeprefix("$")
    try:
        if not re.fullmatch(r"[0-9]+(\.[0-9]+)?", text):
            raise InvalidOperation
        usd = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(
            f"not a $/h amount: {value!r} (a positive number of dollars, e.g. 10 or 2.50)"
        ) from None
    if usd <= 0 or usd > 100_000:
        raise argparse.ArgumentTypeError(
            f"the $/h ceiling must be above 0 and at most 100000, got {value!r}"
        )
    return usd


def _highest(rates_by_region: dict[str, dict[str, Decimal]]) -> dict[str, Decimal]:
    """Each type's highest rate over the catalog's regions: the policy is global, and a
    type above the ceiling in any region is refused in every region (fail closed)."""
    out: dict[str, Decimal] = {}
    for rates in rates_by_region.values():
        for name, usd in rates.items():
            if usd is not None and (name not in out or usd > out[name]):
                out[name] = usd
    return out


def sdk_instance_types() -> tuple[list[str], list[str]]:
    """Every EC2 and SageMaker instance type the installed SDK names: what a family
    prefix (``p5*``) must not cover beyond the accelerator families."""
    import botocore.session

    models = botocore.session.get_session()
    # StringShape carries ``enum``; the stubs type shape_for() as the base Shape.
    ec2 = list(getattr(models.get_service_model("ec2").shape_for("InstanceType"), "enum", ()))
    sagemaker = models.get_service_model("sagemaker")
    ml = [
        t
        for name in sagemaker.shape_names
        if name.endswith("InstanceType")
        for t in getattr(sagemaker.shape_for(name), "enum", None) or ()
        if t.startswith("ml.")
    ]
    return ec2, ml


def build(args: argparse.Namespace) -> Any:
    """The guardrails for ``args``: (guardrails, the catalog line, unpriced types)."""
    from costguard.domain.guardrails import (
        GuardrailsError,
        Target,
        accelerator_families,
        build_guardrails,
        family,
    )

    catalog, which, _source = common.choose_catalog(args.catalog, common.progress(True))
    ec2_rates = _highest(catalog.ec2)
    unpriced = sorted(k for k in catalog.unpriced_reasons if "/" not in k and "." in k)
    families = accelerator_families([*ec2_rates, *(t for t in unpriced if not t.startswith("ml."))])
    known = set(families)
    # The catalog's SageMaker section also prices CPU notebook types (ml.t3, ml.m5):
    # only accelerator families are refused by the ceiling.
    ml_rates = {n: r for n, r in _highest(catalog.sagemaker).items() if family(n) in known}
    ec2_universe, ml_universe = sdk_instance_types()
    try:
        guard = build_guardrails(
            target=Target.SCP if args.org else Target.BOUNDARY,
            families=families,
            exempt_roles=args.exempt_role or (),
            ceiling=args.max_usd_per_hour,
            ec2_rates=ec2_rates,
            sagemaker_rates=ml_rates,
            ec2_universe=ec2_universe,
            sagemaker_universe=ml_universe,
        )
    except GuardrailsError as exc:
        raise common.CommandError(str(exc)) from None
    no_rate = [t for t in unpriced if family(t) in known] if args.max_usd_per_hour else []
    return guard, which, no_rate


def data(guard: Any, no_rate: list[str]) -> dict[str, Any]:
    return {
        "target": guard.target.value,
        "size_chars": guard.size,
        "limit_chars": guard.limit,
        "families": list(guard.families),
        "exempt_roles": list(guard.exempt_roles),
        "max_usd_per_hour": None if guard.ceiling is None else str(guard.ceiling),
        "over_ceiling": {
            "ec2": list(guard.over_ceiling_ec2),
            "sagemaker": list(guard.over_ceiling_sagemaker),
        },
        "unpriced_not_capped": no_rate,
        "statements": [
            {
                "sid": s.sid,
                "effect": s.effect,
                "actions": list(s.actions),
                "resources": list(s.resources),
                "when": s.when,
            }
            for s in guard.statements
        ],
        "policy": guard.document,
    }


def table(guard: Any) -> Table:
    return Table(
        COLUMNS,
        [
            {
                "sid": s.sid,
                "effect": s.effect,
                "actions": ", ".join(s.actions),
                "resources": ", ".join(r.replace("arn:aws:", "") for r in s.resources),
                "when": s.when,
            }
            for s in guard.statements
        ],
        title="Statements",
    )


def text(guard: Any, no_rate: list[str], out: Any) -> str:
    lines = [
        f"{guard.target.label}: {len(guard.statements)} statements, "
        f"{guard.size:,} of {guard.limit:,} characters.",
        f"Accelerator families: {', '.join(guard.families)}.",
    ]
    if guard.exempt_roles:
        lines.append(f"Exempt: {', '.join(guard.exempt_roles)}.")
    if guard.ceiling is not None:
        over = [*guard.over_ceiling_ec2, *guard.over_ceiling_sagemaker]
        lines.append(
            f"Above ${guard.ceiling}/h (highest catalog rate): {', '.join(over) or 'none'}."
        )
        if no_rate:
            lines.append(
                f"No on-demand rate, so not capped by the ceiling (still need the tag): "
                f"{', '.join(no_rate)}."
            )
    lines.append("")
    lines.append(plain_text(table(guard)).rstrip("\n"))
    lines.append("")
    lines.append(
        f"Policy written to {out}."
        if out
        else "The policy: --format json (data.policy) or --out FILE."
    )
    return "\n".join(lines)


def cmd_guardrails(args: argparse.Namespace) -> int:
    guard, which, no_rate = build(args)
    if not args.quiet:
        common.progress(True)(which)
    if args.out is not None:
        try:
            args.out.write_text(guard.text + "\n", encoding="utf-8")
        except OSError as exc:
            raise common.CommandError(
                f"cannot write the policy to {args.out}: {exc.strerror or exc}"
            ) from None
    write(
        args.format,
        kind="guardrails",
        data=data(guard, no_rate),
        table=lambda: table(guard),
        generated_at=common.now(),
        text=lambda: text(guard, no_rate, args.out),
        heading=f"CostGuard guardrails ({guard.target.label})",
    )
    sys.stdout.flush()
    return common.EXIT_OK


def register(sub: Any, flags: common.Flags) -> None:
    """Add ``guardrails`` to the ``costguard`` parser."""
    p = sub.add_parser(
        "guardrails",
        parents=[flags.format, flags.quiet],
        help="a policy that refuses untagged GPU launches (SCP or permissions boundary)",
        description=(
            "Write an IAM policy that denies launching accelerator EC2 instances, SageMaker "
            "notebooks and training jobs of accelerator types, and SageMaker endpoints, "
            "without a costguard:project tag, and denies removing or blanking that tag. "
            "--org writes a Service Control Policy; otherwise a permissions boundary policy "
            "for one account. Nothing is attached: see docs/guardrails.md."
        ),
    )
    p.add_argument(
        "--org",
        action="store_true",
        help="a Service Control Policy for an Organization (default: an IAM permissions "
        "boundary policy for one account)",
    )
    p.add_argument(
        "--exempt-role",
        action="append",
        type=_exempt_role,
        metavar="ARN",
        help="an IAM role ARN the denies do not apply to (e.g. the CI deploy role); "
        "* and ? allowed; repeat for several",
    )
    p.add_argument(
        "--max-usd-per-hour",
        type=_ceiling,
        metavar="USD",
        help="also deny instance types whose on-demand rate (the highest in the price "
        "catalog's regions) is above USD per hour",
    )
    p.add_argument(
        "--out",
        type=common.file_path,
        metavar="FILE",
        help="also write the bare policy document (compact JSON) to FILE, as "
        "`aws organizations create-policy --content file://FILE` takes it",
    )
    p.add_argument(
        "--catalog",
        type=common.file_path,
        metavar="PATH",
        help="price catalog file (default: as for `costguard scan`)",
    )
    p.set_defaults(func=cmd_guardrails)
