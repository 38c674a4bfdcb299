"""The ceiling's type list: grouped by family, compact, and never over AWS's size limit."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from costguard.domain.guardrails import (
    MANAGED_POLICY_MAX_CHARS,
    SCP_MAX_CHARS,
    GuardrailsError,
    PolicyTooLarge,
    Target,
    accelerator_families,
    build_guardrails,
    family,
    family_patterns,
    over_ceiling,
)

RATES = {
    "p5.48xlarge": Decimal("55.04"),
    "p5.4xlarge": Decimal("6.88"),
    "p4d.24xlarge": Decimal("21.96"),
    "g5.xlarge": Decimal("1.006"),
    "g5.48xlarge": Decimal("16.288"),
}


def test_a_whole_family_above_the_ceiling_becomes_one_wildcard() -> None:
    """GIVEN a $10/h ceiling THEN p4d (every size above) is ``p4d.*``, while p5 (one size
    below) lists its one size above, and g5 (none above) nothing."""
    assert over_ceiling(RATES, Decimal(10)) == ["g5.48xlarge", "p4d.*", "p5.48xlarge"]
    assert over_ceiling(RATES, Decimal(5)) == ["g5.48xlarge", "p4d.*", "p5.*"]
    assert over_ceiling(RATES, Decimal(100)) == []


def test_a_rate_equal_to_the_ceiling_is_allowed() -> None:
    """GIVEN a ceiling equal to a rate THEN that type is not above it."""
    assert over_ceiling({"g5.48xlarge": Decimal("16.288")}, Decimal("16.288")) == []


def test_the_document_is_compact_and_counted_as_aws_counts_it() -> None:
    """GIVEN the policy THEN its text has no whitespace outside strings, and its size is
    that text's length."""
    guard = build_guardrails(target=Target.SCP, families=accelerator_families())
    assert json.loads(guard.text) == guard.document
    assert guard.size == len(guard.text) <= SCP_MAX_CHARS
    assert ", " not in guard.text and "\n" not in guard.text and '": ' not in guard.text


def test_a_policy_over_the_limit_is_refused_with_its_size() -> None:
    """Defect guarded: a ceiling so low that hundreds of types are listed would give an
    SCP AWS rejects at create-policy. It is refused here, with the size and the limit."""
    rates = {f"x{i}.{s}": Decimal(100) for i in range(200) for s in ("large", "xlarge")}
    rates.update({f"x{i}.small": Decimal(1) for i in range(200)})
    with pytest.raises(PolicyTooLarge) as caught:
        build_guardrails(
            target=Target.SCP,
            families=accelerator_families(),
            ceiling=Decimal(10),
            ec2_rates=rates,
        )
    assert caught.value.limit == SCP_MAX_CHARS and caught.value.size > SCP_MAX_CHARS
    assert "5,120" in str(caught.value)


def test_the_boundary_has_the_managed_policy_limit() -> None:
    """GIVEN the boundary THEN the limit is 6,144 (IAM managed policy), not the SCP's."""
    guard = build_guardrails(target=Target.BOUNDARY, families=accelerator_families())
    assert guard.limit == MANAGED_POLICY_MAX_CHARS


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:iam::12345:role/x",
        "arn:aws:iam::123456789012:user/alice",
        "role/ci",
        "arn:aws:iam::123456789012:role/",
        "arn:aws:iam::123456789012:role/a b",
    ],
)
def test_a_bad_exempt_arn_is_refused(arn: str) -> None:
    """GIVEN something that is not an IAM role ARN THEN a clear error, no policy."""
    with pytest.raises(GuardrailsError, match="not an IAM role ARN"):
        build_guardrails(target=Target.SCP, families=("p5",), exempt_roles=(arn,))


@pytest.mark.parametrize("ceiling", [Decimal(0), Decimal(-1), Decimal("NaN"), Decimal("Infinity")])
def test_a_ceiling_that_is_not_positive_is_refused(ceiling: Decimal) -> None:
    """GIVEN a zero, negative or non-finite ceiling THEN a clear error."""
    with pytest.raises(GuardrailsError, match="positive"):
        build_guardrails(target=Target.SCP, families=("p5",), ceiling=ceiling)


def test_families_come_from_the_estimate_table_and_the_catalog() -> None:
    """GIVEN the estimate table and catalog types THEN their families, sorted, once each;
    a malformed name adds nothing."""
    families = accelerator_families(["g4ad.xlarge", "ml.dl1.24xlarge", "g4ad.2xlarge", "", "A B"])
    assert {"p5", "g5", "trn1", "inf2", "g4ad", "dl1"} <= set(families)
    assert list(families) == sorted(set(families))
    assert "A B" not in families and "t3" not in families


def test_families_share_a_prefix_only_where_no_other_family_does() -> None:
    """GIVEN p2 among the families AWS names (not ours) THEN p3, p3dn, p5, p5e, p5en are
    ``p3*`` and ``p5*``, never ``p*``; a family another AWS family extends keeps ``.*``."""
    universe = ["p2.xlarge", "p3.2xlarge", "p3dn.24xlarge", "p5.48xlarge", "p5e.48xlarge"]
    assert family_patterns(["p3", "p3dn", "p5", "p5e", "p5en"], universe) == ["p3*", "p5*"]
    assert family_patterns(["p5"], ["p5.48xlarge", "p5x.large"]) == ["p5.*"]
    assert family_patterns(["trn1", "trn2"], ["trn1.2xlarge", "t3.micro"]) == ["trn*"]
    assert family_patterns(["p5"], [], prefix="ml.") == ["ml.p5.*"]


def test_the_prefixes_cover_no_type_aws_names_outside_the_families() -> None:
    """GIVEN every EC2 and SageMaker type the SDK names THEN each type a prefix covers is of
    an accelerator family CostGuard knows, and every such type is covered: the grouping
    changes the document's size, not what it denies (today's types)."""
    from tests.guardrails.conftest import EC2_TYPES, FAMILIES, ML_TYPES
    from tests.support.iam_eval import condition_operator_holds

    assert len(EC2_TYPES) > 500 and len(ML_TYPES) > 100  # the SDK's lists, not nothing
    for types, prefix in ((EC2_TYPES, ""), (ML_TYPES, "ml.")):
        patterns = family_patterns(FAMILIES, [t.removeprefix(prefix) for t in types], prefix=prefix)
        for t in types:
            covered = condition_operator_holds("StringLike", "k", patterns, {"k": t})
            assert covered == (family(t) in FAMILIES), t
