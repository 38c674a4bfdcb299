from __future__ import annotations

from decimal import Decimal

from costguard.domain.attribution import ProjectConfig, attribute
from costguard.domain.findings import FindingCode
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.pricing import PricedResource
from costguard.domain.tags import TagKeys


def priced(
    id_: str, kind: ResourceKind = ResourceKind.EC2_INSTANCE, rate: str | None = "1", **kw: object
) -> PricedResource:
    res = Resource(id=id_, kind=kind, region="us-east-1", **kw)  # type: ignore[arg-type]
    return PricedResource(res, Decimal(rate) if rate is not None else None, "test")


def by_id(result: object) -> dict[str, object]:
    return {a.priced.resource.id: a for a in result.resources}  # type: ignore[attr-defined]


def test_node_group_instances_take_the_node_group_project_when_they_have_none() -> None:
    # GIVEN a node group tagged with a project and its instances carrying only EKS tags
    ng = priced(
        "vision-eks/gpu",
        ResourceKind.EKS_NODEGROUP,
        rate="0",
        tags={"costguard:project": "vision"},
        eks_cluster="vision-eks",
        eks_nodegroup="gpu",
    )
    node = priced(
        "i-node",
        tags={"eks:cluster-name": "vision-eks", "eks:nodegroup-name": "gpu"},
        eks_cluster="vision-eks",
        eks_nodegroup="gpu",
    )
    own = priced(
        "i-own",
        tags={"costguard:project": "other", "eks:nodegroup-name": "gpu"},
        eks_cluster="vision-eks",
        eks_nodegroup="gpu",
    )
    # WHEN attributed
    result = attribute([ng, node, own], TagKeys())
    found = by_id(result)
    # THEN the untagged node belongs to the node group's project, a tagged one keeps its own
    assert found["i-node"].project == "vision"  # type: ignore[attr-defined]
    assert found["i-node"].via == "nodegroup"  # type: ignore[attr-defined]
    assert found["i-own"].project == "other"  # type: ignore[attr-defined]


def test_karpenter_nodes_fall_back_to_the_cluster_project() -> None:
    cluster = priced(
        "ml-eks",
        ResourceKind.EKS_CLUSTER,
        rate="0.10",
        tags={"costguard:project": "platform"},
        eks_cluster="ml-eks",
    )
    node = priced(
        "i-k", tags={"karpenter.sh/nodepool": "gpu", "kubernetes.io/cluster/ml-eks": "owned"}
    )
    found = by_id(attribute([cluster, node], TagKeys()))
    assert found["i-k"].project == "platform"  # type: ignore[attr-defined]
    assert found["i-k"].via == "cluster"  # type: ignore[attr-defined]


def test_conflicting_budgets_are_a_finding_and_the_lowest_applies() -> None:
    a = priced("i-a", tags={"costguard:project": "nlp", "costguard:budget": "8000"})
    b = priced("i-b", tags={"costguard:project": "nlp", "costguard:budget": "$12,000"})
    result = attribute([a, b], TagKeys())
    assert result.budgets["nlp"].amount == Decimal(8000)
    (conflict,) = [f for f in result.findings if f.code is FindingCode.BUDGET_CONFLICT]
    assert "8000" in conflict.message and "12000" in conflict.message
    assert "i-a" in conflict.message and "i-b" in conflict.message


def test_central_project_table_overrides_tags() -> None:
    a = priced(
        "i-a",
        tags={
            "costguard:project": "nlp",
            "costguard:budget": "8000",
            "costguard:owner": "x@example.com",
        },
    )
    table = {
        "nlp": ProjectConfig(Decimal(50000), ("lead@example.com",)),
        "idle-project": ProjectConfig(Decimal(10)),
    }
    result = attribute([a], TagKeys(), table)
    assert result.budgets["nlp"].amount == Decimal(50000)
    assert result.budgets["nlp"].source == "table"
    assert result.owners["nlp"] == ("lead@example.com",)
    assert "idle-project" in result.budgets


def test_untagged_accelerator_is_unattributed_and_reported_with_its_rate() -> None:
    result = attribute([priced("i-x", rate="1.006", instance_type="g5.xlarge")], TagKeys())
    assert result.resources[0].project is None
    (finding,) = result.findings
    assert finding.code is FindingCode.UNATTRIBUTED
    assert "$1.0060/h" in finding.message


def test_custom_project_tag_keys_are_honoured() -> None:
    res = priced("i-c", tags={"team": "search", "costguard:project": "ignored"})
    result = attribute([res], TagKeys(project=("team",)))
    assert result.resources[0].project == "search"


def test_each_of_several_owners_in_one_tag_is_an_owner_of_the_project() -> None:
    # GIVEN two resources of one project, one naming two owners, the other one of them
    a = priced("i-a", tags={"costguard:project": "cv", "costguard:owner": "a@x.io, <@U024BE7LH>"})
    b = priced("i-b", tags={"costguard:project": "cv", "costguard:owner": "U024BE7LH"})
    # WHEN attributed
    result = attribute([a, b], TagKeys())
    # THEN the project has each owner once, and each resource keeps its own owners for display
    assert result.owners["cv"] == ("a@x.io", "U024BE7LH")
    assert by_id(result)["i-a"].owner == "a@x.io, U024BE7LH"  # type: ignore[attr-defined]


def test_a_malformed_owner_is_a_finding_and_not_an_owner() -> None:
    a = priced("i-a", tags={"costguard:project": "cv", "costguard:owner": "x\r\nURGENT"})
    result = attribute([a], TagKeys())
    assert "cv" not in result.owners
    assert [f.code for f in result.findings] == [FindingCode.MALFORMED_OWNER]
