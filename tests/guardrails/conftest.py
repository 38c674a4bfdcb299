"""The guardrail policies the tests judge, built once from the packaged catalog's families."""

from __future__ import annotations

from decimal import Decimal

import pytest

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


def guardrails(target: Target, **kwargs: object) -> Guardrails:
    return build_guardrails(
        target=target,
        families=FAMILIES,
        exempt_roles=(CI_ROLE,),
        ec2_rates=EC2_RATES,
        sagemaker_rates=ML_RATES,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module", params=[Target.SCP, Target.BOUNDARY], ids=["scp", "boundary"])
def guard(request: pytest.FixtureRequest) -> Guardrails:
    """Both targets, with a $20/h ceiling: every test holds for the SCP and the boundary."""
    return guardrails(request.param, ceiling=Decimal(20))
