"""The placement group of an EC2NodeClass: its ``placementGroupSelector`` (``name`` or ``id``) through
DescribePlacementGroups, ``state=available`` (karpenter-provider-aws's ``placementgroup`` provider).

Launches go into the group by the launch template's ``Placement.GroupId``; a partition group's partition is the
lowest value the NodeClaim's ``karpenter.k8s.aws/placement-group-partition`` requirement allows (upstream scopes
its launch the same way), else EC2 chooses.  Nodes carry ``karpenter.k8s.aws/placement-group-id``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NOT_FOUND = ("InvalidPlacementGroup.Unknown", "InvalidPlacementGroupId.NotFound", "InvalidPlacementGroupId.Malformed")


@dataclass(frozen=True)
class PlacementGroup:
    id: str
    name: str
    strategy: str = ""            # cluster | partition | spread
    partition_count: int = 0
    spread_level: str = ""        # rack | host (spread)

    def to_status(self) -> dict:
        out = {"id": self.id, "name": self.name, "strategy": self.strategy}
        if self.partition_count:
            out["partitionCount"] = self.partition_count
        if self.spread_level:
            out["spreadLevel"] = self.spread_level
        return out


def _code(e: Exception) -> str:
    return ((getattr(e, "response", None) or {}).get("Error") or {}).get("Code", "")


def selector_text(selector: dict | None) -> str:
    return str((selector or {}).get("name") or (selector or {}).get("id") or "")


def resolve(ec2: Any, selector: dict | None) -> PlacementGroup | None:
    """The available placement group the selector names, or None (none selected, or not found)."""
    if not selector:
        return None
    params: dict = {"Filters": [{"Name": "state", "Values": ["available"]}]}
    if selector.get("id"):
        params["GroupIds"] = [selector["id"]]
    elif selector.get("name"):
        params["GroupNames"] = [selector["name"]]
    else:
        return None
    try:
        groups = ec2.describe_placement_groups(**params).get("PlacementGroups") or []
    except Exception as e:  # noqa: BLE001
        if _code(e) in NOT_FOUND:
            return None
        raise
    if not groups:
        return None
    g = groups[0]
    return PlacementGroup(id=str(g.get("GroupId") or ""), name=str(g.get("GroupName") or ""),
                          strategy=str(g.get("Strategy") or ""), partition_count=int(g.get("PartitionCount") or 0),
                          spread_level=str(g.get("SpreadLevel") or ""))
