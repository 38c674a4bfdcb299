"""Attribute priced resources to projects, and settle each project's budget.

Precedence for a resource's project:

1. its own project tag;
2. for an EC2 instance of an EKS managed node group, the node group's project;
3. for an EKS node (node group or Karpenter), the cluster's project;
4. otherwise it is *unattributed* and reported as such.

Budgets: the central project table wins over tags; otherwise the lowest of the
budgets tagged on the project's resources applies, and disagreement is a finding.

Teams (domain/teams.py): each project's team and each team's budget are settled from the
same resources' ``costguard:team`` and ``costguard:team-budget`` tags and the central tables.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, NamedTuple

from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.tags import Exemption, ResourceTags, TagKeys, Tags, read_tags
from costguard.domain.teams import TeamBudget, TeamConfig, settle_teams

if TYPE_CHECKING:
    from costguard.domain.pricing import PricedResource


_NODEGROUP = ResourceKind.EKS_NODEGROUP
_CLUSTER = ResourceKind.EKS_CLUSTER
_EKS_MEMBERS = frozenset({ResourceKind.EC2_INSTANCE, ResourceKind.EBS_VOLUME})


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    """A row of the optional central project table; overrides tags."""

    budget: Decimal | None = None
    owners: tuple[str, ...] = ()
    #: The most one of the project's resources may cost an hour (None: no limit of its own).
    max_usd_per_hour: Decimal | None = None
    #: The project's EC2 instances and training jobs must run on spot capacity.
    require_spot: bool = False
    #: The team the project belongs to; wins over ``costguard:team`` tags.
    team: str | None = None


class AttributedResource(NamedTuple):
    """A priced resource with its project (None: unattributed). A NamedTuple for speed."""

    priced: PricedResource
    project: str | None
    owner: str | None
    exemption: Exemption | None
    #: How the project was found: "tag", "nodegroup", "cluster" or "".
    via: str


@dataclass(frozen=True, slots=True)
class Budget:
    amount: Decimal | None
    source: str  # "table", "tag" or "none"


@dataclass(frozen=True, slots=True)
class Attribution:
    resources: tuple[AttributedResource, ...]
    budgets: Mapping[str, Budget]
    owners: Mapping[str, tuple[str, ...]]
    findings: tuple[Finding, ...]
    #: project -> team, for every project that has one.
    teams: Mapping[str, str] = field(default_factory=dict)
    team_budgets: Mapping[str, TeamBudget] = field(default_factory=dict)


def _cluster_of(tags: Mapping[str, str]) -> str | None:
    for key in (Tags.EKS_CLUSTER, Tags.AWS_EKS_CLUSTER):
        if key in tags:
            return tags[key]
    for key in tags:
        if key.startswith(Tags.KARPENTER_CLUSTER_PREFIX):
            return key[len(Tags.KARPENTER_CLUSTER_PREFIX) :]
    return None


def attribute(
    priced: Iterable[PricedResource],
    keys: TagKeys,
    table: Mapping[str, ProjectConfig] | None = None,
    team_table: Mapping[str, TeamConfig] | None = None,
) -> Attribution:
    """Give every resource a project (or none), every project a budget and a team (or
    none), and every team a budget."""
    table = table or {}
    items = list(priced)
    findings: list[Finding] = []
    # One pass reads every resource's tags; the few EKS clusters and node groups are
    # kept aside for the second pass, which only they need.
    parsed: dict[str, ResourceTags] = {}
    eks_parents: list[Resource] = []
    for item in items:
        res = item.resource
        tags = read_tags(res.key, res.tags, keys)
        parsed[res.key] = tags
        if tags.findings:
            findings.extend(tags.findings)
        if res.kind is _NODEGROUP or res.kind is _CLUSTER:
            eks_parents.append(res)

    nodegroup_project: dict[tuple[str, str, str, str], str] = {}
    cluster_project: dict[tuple[str, str, str], str] = {}
    for res in eks_parents:
        project = parsed[res.key].project
        if project is None:
            continue
        if res.kind is _NODEGROUP and res.eks_cluster and res.eks_nodegroup:
            nodegroup_project[(res.account, res.region, res.eks_cluster, res.eks_nodegroup)] = (
                project
            )
        elif res.kind is _CLUSTER:
            cluster_project[(res.account, res.region, res.id)] = project

    attributed: list[AttributedResource] = []
    unattributed: list[AttributedResource] = []
    budgets_seen: dict[str, dict[Decimal, list[str]]] = defaultdict(lambda: defaultdict(list))
    owners: dict[str, list[str]] = defaultdict(list)
    teams_seen: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    team_budgets_seen: dict[str, dict[Decimal, list[str]]] = defaultdict(lambda: defaultdict(list))
    for item in items:
        res = item.resource
        tags = parsed[res.key]
        project = tags.project
        via = "tag" if project else ""
        if project is None and res.kind in _EKS_MEMBERS:
            cluster = res.eks_cluster or _cluster_of(res.tags)
            nodegroup = res.eks_nodegroup or res.tags.get(Tags.EKS_NODEGROUP)
            if cluster and nodegroup:
                project = nodegroup_project.get((res.account, res.region, cluster, nodegroup))
                via = "nodegroup" if project else ""
            if project is None and cluster:
                project = cluster_project.get((res.account, res.region, cluster))
                via = "cluster" if project else ""
        if project is not None:
            if tags.budget is not None:
                budgets_seen[project][tags.budget].append(res.key)
            for owner in tags.owners:
                if owner not in owners[project]:
                    owners[project].append(owner)
            if tags.team is not None:
                teams_seen[project][tags.team].append(res.key)
            if tags.team_budget is not None:
                team_budgets_seen[project][tags.team_budget].append(res.key)
        a = AttributedResource(item, project, tags.owner, tags.exemption, via)
        attributed.append(a)
        if project is None and res.billable:
            unattributed.append(a)

    projects = {a.project for a in attributed if a.project is not None} | set(table)
    budgets: dict[str, Budget] = {}
    for project in sorted(projects):
        config = table.get(project)
        if config is not None and config.budget is not None:
            budgets[project] = Budget(config.budget, "table")
            continue
        seen = budgets_seen.get(project, {})
        if not seen:
            budgets[project] = Budget(None, "none")
            continue
        lowest = min(seen)
        if len(seen) > 1:
            detail = "; ".join(
                f"{amount} on {', '.join(sorted(refs)[:5])}"
                + (f" and {len(refs) - 5} more" if len(refs) > 5 else "")
                for amount, refs in sorted(seen.items())
            )
            findings.append(
                Finding(
                    FindingCode.BUDGET_CONFLICT,
                    f"project/{project}",
                    f"project {project!r} carries {len(seen)} different budgets ({detail}); "
                    f"the lowest, {lowest} USD, applies",
                )
            )
        budgets[project] = Budget(lowest, "tag")

    owner_map = {p: tuple(o) for p, o in owners.items()}
    for project, config in table.items():
        if config.owners:
            owner_map[project] = config.owners

    settled = settle_teams(
        teams_seen,
        team_budgets_seen,
        {p: c.team for p, c in table.items() if c.team is not None},
        team_table or {},
    )
    findings.extend(settled.findings)

    for a in unattributed:
        rate = a.priced.usd_per_hour
        findings.append(
            Finding(
                FindingCode.UNATTRIBUTED,
                a.priced.resource.key,
                f"{a.priced.resource.instance_type or a.priced.resource.kind.value} "
                f"has no project tag ({keys.project[0]})"
                + (f" and costs ${rate:.4f}/h" if rate is not None else ""),
                Severity.WARNING,
            )
        )
    return Attribution(
        tuple(attributed),
        budgets,
        owner_map,
        tuple(findings),
        settled.team_of,
        settled.budgets,
    )
