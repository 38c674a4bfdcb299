"""The guardrail policies the tests judge, built once from the packaged catalog's families."""

from __future__ import annotations

from decimal import Decimal

import pytest

from costguard.cli.guardrails import sdk_instance_types
from costguard.domain.guardrails import Guardrails, Target, accelerator_families, build_guardrails

#: The CI deploy role the tests exempt.
CI_ROLE = "arn:aws:iam::123456789012:role/ci-deploy"
#: An ordinary developer.
DEVELOPER = "arn:aws:iam::123456789012:role/developer"
FAMILIES = accelerator_families(["g4ad.xlarge", "p5en.48xlarge", "dl1.24xlarge"])
EC2_RATES = {
    "p5.48xlarge": Decimal("55.04"),
    "p4d.24xlarge": Decimal("21.96"),
    "g5.xlarge": Decimal("1.006"),
    "g5.48xlarge": Decimal("16.288"),
}
ML_RATES = {"ml.p5.48xlarge": Decimal("63.296"), "ml.g5.xlarge": Decimal("1.41")}


#: Every instance type the installed SDK names (what family prefixes are checked against).
EC2_TYPES, ML_TYPES = sdk_instance_types()


def guardrails(target: Target, *, grouped: bool = True, **kwargs: object) -> Guardrails:
    """The policy as the command builds it (``grouped``: family prefixes checked against
    the SDK's types, ``p5*``), or one pattern per family (``p5.*``)."""
    return build_guardrails(
        target=target,
        families=FAMILIES,
        exempt_roles=(CI_ROLE,),
        ec2_rates=EC2_RATES,
        sagemaker_rates=ML_RATES,
        ec2_universe=EC2_TYPES if grouped else (),
        sagemaker_universe=ML_TYPES if grouped else (),
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture(
    scope="module",
    params=[(Target.SCP, True), (Target.BOUNDARY, True), (Target.SCP, False)],
    ids=["scp", "boundary", "scp-per-family"],
)
def guard(request: pytest.FixtureRequest) -> Guardrails:
    """Both targets, with a $20/h ceiling, and the SCP with one pattern per family: every
    test holds for each."""
    target, grouped = request.param
    return guardrails(target, grouped=grouped, ceiling=Decimal(20))
