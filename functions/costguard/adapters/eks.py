"""EKS: clusters (control-plane fee) and managed node groups (scaling and tags).

The EKS API has no batch describe, so clusters and node groups cost one
``Describe*`` each; both are few per account compared with the instances, which
EC2 lists in pages. Node-group tags come from ``DescribeNodegroup``.
"""

from __future__ import annotations

from datetime import datetime

from costguard.adapters.aws import ClientFor, reading
from costguard.domain.models import Lifecycle, Resource, ResourceKind
from costguard.ports import Inventory


class EksInventory:
    name = "eks"

    def __init__(self, client_for: ClientFor) -> None:
        self._client_for = client_for

    def collect(self, region: str, now: datetime) -> Inventory:
        eks = self._client_for.eks(region)
        resources: list[Resource] = []
        with reading("eks", region, "ListClusters"):
            names = [
                n
                for page in eks.get_paginator("list_clusters").paginate()
                for n in page.get("clusters", [])
            ]
        for name in names:
            with reading("eks", region, "DescribeCluster"):
                cluster = eks.describe_cluster(name=name)["cluster"]
            if cluster.get("status") in {"DELETING", "FAILED"}:
                continue
            resources.append(
                Resource(
                    id=name,
                    kind=ResourceKind.EKS_CLUSTER,
                    region=region,
                    account=self._client_for.account,
                    tags=dict(cluster.get("tags") or {}),
                    launched_at=cluster.get("createdAt"),
                    state=str(cluster.get("status", "")),
                    name=name,
                    eks_cluster=name,
                    version=cluster.get("version"),
                )
            )
            with reading("eks", region, "ListNodegroups"):
                groups = [
                    g
                    for page in eks.get_paginator("list_nodegroups").paginate(clusterName=name)
                    for g in page.get("nodegroups", [])
                ]
            for group in groups:
                with reading("eks", region, "DescribeNodegroup"):
                    ng = eks.describe_nodegroup(clusterName=name, nodegroupName=group)["nodegroup"]
                types = ng.get("instanceTypes") or []
                scaling = ng.get("scalingConfig") or {}
                resources.append(
                    Resource(
                        id=f"{name}/{group}",
                        kind=ResourceKind.EKS_NODEGROUP,
                        region=region,
                        account=self._client_for.account,
                        tags=dict(ng.get("tags") or {}),
                        instance_type=",".join(types) or None,
                        lifecycle=Lifecycle.SPOT
                        if ng.get("capacityType") == "SPOT"
                        else Lifecycle.ON_DEMAND,
                        launched_at=ng.get("createdAt"),
                        state=str(ng.get("status", "")),
                        name=group,
                        eks_cluster=name,
                        eks_nodegroup=group,
                        desired_size=int(scaling.get("desiredSize", 0)),
                    )
                )
        return Inventory(tuple(resources))
