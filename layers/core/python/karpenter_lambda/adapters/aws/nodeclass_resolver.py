"""Resolve an EC2NodeClass against AWS: subnets, security groups, AMIs, instance profile, block devices.

``NodeClassResolver(ec2, ssm, iam, cluster_name, k8s_version, region).resolve(nodeclass)``
returns a :class:`ResolvedNodeClass`.  Nothing matching is not an exception: the resolved object
carries Karpenter's status conditions (``SubnetsReady``, ``SecurityGroupsReady``, ``AMIsReady``,
``InstanceProfileReady``, ``Ready``) with the reason, and ``status_patch()`` gives the
``EC2NodeClass.status`` to store.  ``require_ready()`` raises :class:`NodeClassNotReady` for
callers that must launch.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Callable

from ...api import labels as wk
from ...api.objects import ALIAS_FAMILIES
from ...api.times import format_time
from ...catalog.reservations import CapacityReservation
from . import capacity_reservations, placement_groups
from .amis import AMI, AMIProvider, AMIResolutionError, pick_ami
from .placement_groups import PlacementGroup

DEFAULT_METADATA_OPTIONS = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 1,
    "httpTokens": "required",
}
_DEFAULT_EBS = {"volumeSize": "20Gi", "volumeType": "gp3", "encrypted": True}


def default_block_device_mappings(family: str | None) -> list[dict]:
    """Karpenter's defaults when ``blockDeviceMappings`` is unset (CRD shape)."""
    fam = (family or "").lower()
    if fam == "bottlerocket":
        return [
            {"deviceName": "/dev/xvda", "ebs": dict(_DEFAULT_EBS, volumeSize="4Gi")},
            {"deviceName": "/dev/xvdb", "ebs": dict(_DEFAULT_EBS), "rootVolume": False},
        ]
    if fam.startswith("windows"):
        return [{"deviceName": "/dev/sda1", "ebs": dict(_DEFAULT_EBS, volumeSize="50Gi")}]
    if fam in ("al2", "al2023"):
        return [{"deviceName": "/dev/xvda", "ebs": dict(_DEFAULT_EBS)}]
    return []  # Custom: the AMI's own mappings


class NodeClassNotReady(Exception):
    """The EC2NodeClass cannot be launched from: the message lists every failing dependency."""


def format_terms(terms) -> str:
    """Compact flow rendering of selector terms: ``[{tags: {karpenter.sh/discovery: x}}]``."""

    def fmt(v):
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {fmt(x)}" for k, x in v.items()) + "}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(fmt(x) for x in v) + "]"
        return str(v)

    return fmt(list(terms or []))


@dataclass
class Condition:
    type: str
    status: bool
    reason: str
    message: str = ""


@dataclass
class ResolvedNodeClass:
    name: str
    ami_family: str | None
    subnets: list[dict] = field(default_factory=list)  # [{id, zone, zone_id, available_ips}] most free IPs first
    security_groups: list[dict] = field(default_factory=list)  # [{id, name}]
    amis: list[AMI] = field(default_factory=list)  # one per requirement set (amis.one_per_requirements)
    instance_profile: str | None = None
    block_device_mappings: list[dict] = field(default_factory=list)  # CRD shape
    metadata_options: dict = field(default_factory=lambda: dict(DEFAULT_METADATA_OPTIONS))
    tags: dict = field(default_factory=dict)
    kubelet: dict = field(default_factory=dict)
    user_data: str | None = None
    associate_public_ip_address: bool | None = None
    detailed_monitoring: bool = False
    instance_store_policy: str | None = None  # "RAID0" or None
    ip_prefix_count: int | None = None
    capacity_reservations: list[CapacityReservation] = field(default_factory=list)  # sorted by id
    capacity_reservations_selected: bool = False  # the EC2NodeClass has capacityReservationSelectorTerms
    placement_group: PlacementGroup | None = None
    conditions: list[Condition] = field(default_factory=list)
    now: str | None = None

    # -- readiness -------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return all(c.status for c in self.conditions if c.type != "Ready")

    def not_ready_messages(self) -> list[str]:
        return [f"{c.type}: {c.message or c.reason}" for c in self.conditions if not c.status and c.type != "Ready"]

    def require_ready(self) -> "ResolvedNodeClass":
        if not self.ready:
            raise NodeClassNotReady(f"EC2NodeClass {self.name} is not ready: " + "; ".join(self.not_ready_messages()))
        return self

    # -- choices ---------------------------------------------------------------------
    def ami_for(self, instance_type) -> AMI | None:
        """The AMI this EC2NodeClass launches ``instance_type`` with: the first of :attr:`amis` (one per requirement
        set, newest first) whose requirements the type meets.  Launch templates and the AMIDrift check
        (``disruption/drift.py``) both ask this, as upstream's launch and ``isAMIDrifted`` both use
        ``amifamily.MapToInstanceTypes``.

        ``instance_type`` is a ``catalog.types.InstanceType`` or a label dict.
        """
        labels = instance_type if isinstance(instance_type, dict) else instance_type.labels
        return pick_ami(self.amis, labels)

    def subnets_by_zone(self) -> dict[str, dict]:
        """One subnet per zone: the one with the most free IPs."""
        out: dict[str, dict] = {}
        for s in self.subnets:  # already sorted by free IPs desc
            out.setdefault(s["zone"], s)
        return out

    @property
    def security_group_ids(self) -> list[str]:
        return [g["id"] for g in self.security_groups]

    # -- status ----------------------------------------------------------------------
    def status_patch(self) -> dict:
        """The ``EC2NodeClass.status`` fields Karpenter writes (camelCase)."""
        conds = []
        for c in self.conditions:
            d = {"type": c.type, "status": "True" if c.status else "False", "reason": c.reason, "message": c.message}
            if self.now:
                d["lastTransitionTime"] = self.now
            conds.append(d)
        out = {
            "subnets": [{"id": s["id"], "zone": s["zone"], **({"zoneID": s["zone_id"]} if s.get("zone_id") else {})} for s in self.subnets],
            "securityGroups": [{"id": g["id"], "name": g.get("name", "")} for g in self.security_groups],
            "amis": [a.to_status() for a in self.amis],
            "conditions": conds,
        }
        if self.instance_profile:
            out["instanceProfile"] = self.instance_profile
        if self.capacity_reservations or self.capacity_reservations_selected:  # [] when none resolves (drift reads it)
            out["capacityReservations"] = [r.to_status() for r in self.capacity_reservations]
        if self.placement_group is not None:
            out["placementGroups"] = [self.placement_group.to_status()]
        return out


def _spec(nodeclass) -> tuple[str, dict, dict]:
    if hasattr(nodeclass, "spec"):
        return nodeclass.name, nodeclass.spec, nodeclass.metadata
    return (nodeclass.get("metadata") or {}).get("name", ""), nodeclass.get("spec") or {}, nodeclass.get("metadata") or {}


def _family(spec: dict) -> str | None:
    if spec.get("amiFamily"):
        return spec["amiFamily"]
    for t in spec.get("amiSelectorTerms") or []:
        if t.get("alias"):
            return ALIAS_FAMILIES.get(t["alias"].split("@", 1)[0].lower())
    return None


def _tag_filters(tags: dict) -> list[dict]:
    out = []
    for k, v in sorted((tags or {}).items()):
        if v == "*":
            out.append({"Name": "tag-key", "Values": [k]})
        else:
            out.append({"Name": f"tag:{k}", "Values": [str(v)]})
    return out


class NodeClassResolver:
    """Looks an EC2NodeClass up in AWS with boto3 ``ec2``, ``ssm`` and ``iam`` clients."""

    def __init__(self, ec2, ssm, iam, cluster_name: str, k8s_version: str, region: str, clock: Callable[[], float] = time.time):
        if not cluster_name:
            raise ValueError("cluster_name is required")
        if not k8s_version:
            raise ValueError("k8s_version is required (e.g. '1.31')")
        self.ec2 = ec2
        self.ssm = ssm
        self.iam = iam
        self.cluster_name = cluster_name
        self.k8s_version = str(k8s_version)
        self.region = region
        self.clock = clock

    # -- subnets ---------------------------------------------------------------------
    def resolve_subnets(self, terms: list[dict]) -> list[dict]:
        found: dict[str, dict] = {}
        for term in terms or []:
            if term.get("id"):
                filters = [{"Name": "subnet-id", "Values": [term["id"]]}]
            else:
                filters = _tag_filters(term.get("tags") or {})
                if not filters:
                    continue
            for page in self.ec2.get_paginator("describe_subnets").paginate(Filters=filters):
                for s in page.get("Subnets", []):
                    if s.get("State", "available") != "available":
                        continue
                    found[s["SubnetId"]] = {
                        "id": s["SubnetId"],
                        "zone": s["AvailabilityZone"],
                        "zone_id": s.get("AvailabilityZoneId"),
                        "available_ips": int(s.get("AvailableIpAddressCount") or 0),
                    }
        return sorted(found.values(), key=lambda s: (-s["available_ips"], s["id"]))

    # -- security groups ---------------------------------------------------------------
    def resolve_security_groups(self, terms: list[dict]) -> list[dict]:
        found: dict[str, dict] = {}
        for term in terms or []:
            if term.get("id"):
                filters = [{"Name": "group-id", "Values": [term["id"]]}]
            else:
                filters = _tag_filters(term.get("tags") or {})
                if term.get("name"):
                    filters.append({"Name": "group-name", "Values": [term["name"]]})
                if not filters:
                    continue
            for page in self.ec2.get_paginator("describe_security_groups").paginate(Filters=filters):
                for g in page.get("SecurityGroups", []):
                    found[g["GroupId"]] = {"id": g["GroupId"], "name": g.get("GroupName", "")}
        return sorted(found.values(), key=lambda g: g["id"])

    # -- instance profile -------------------------------------------------------------
    def instance_profile_name(self, nodeclass_name: str) -> str:
        digest = int(hashlib.sha256(f"{self.region}{nodeclass_name}".encode()).hexdigest()[:16], 16)
        return f"{self.cluster_name}_{digest}"[:128]

    def resolve_instance_profile(self, name: str, spec: dict, metadata: dict) -> tuple[str | None, str]:
        """``(profile name, error message)``: from ``instanceProfile`` (must exist) or created/reused for ``role``."""
        if spec.get("instanceProfile"):
            profile = spec["instanceProfile"]
            try:
                self.iam.get_instance_profile(InstanceProfileName=profile)
            except self.iam.exceptions.NoSuchEntityException:
                return None, f"instance profile {profile} not found"
            return profile, ""
        role = spec.get("role")
        if not role:
            return None, "spec.role or spec.instanceProfile is required"
        role_name = role.rsplit("/", 1)[-1] if role.startswith("arn:") else role
        try:
            self.iam.get_role(RoleName=role_name)
        except self.iam.exceptions.NoSuchEntityException:
            return None, f"role {role_name} not found"
        profile = self.instance_profile_name(name)
        tags = [
            {"Key": f"kubernetes.io/cluster/{self.cluster_name}", "Value": "owned"},
            {"Key": "eks:eks-cluster-name", "Value": self.cluster_name},
            {"Key": wk.EC2NODECLASS, "Value": name},
            {"Key": wk.REGION, "Value": self.region or ""},
            {"Key": wk.OWNER_TAG, "Value": self.cluster_name},
        ]
        # read first: once created, every resolution is one GetInstanceProfile (not a CreateInstanceProfile that
        # fails with EntityAlreadyExists, then the read)
        try:
            roles = self.iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"].get("Roles", [])
        except self.iam.exceptions.NoSuchEntityException:
            try:
                out = self.iam.create_instance_profile(
                    InstanceProfileName=profile,
                    Path=f"/karpenter/{self.region}/{self.cluster_name}/{metadata.get('uid') or name}/",
                    Tags=tags,
                )
                roles = out["InstanceProfile"].get("Roles", [])
            except self.iam.exceptions.EntityAlreadyExistsException:   # created meanwhile by another invocation
                roles = self.iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"].get("Roles", [])
        current = [r["RoleName"] for r in roles]
        if current != [role_name]:
            for r in current:
                self.iam.remove_role_from_instance_profile(InstanceProfileName=profile, RoleName=r)
            self.iam.add_role_to_instance_profile(InstanceProfileName=profile, RoleName=role_name)
        return profile, ""

    def delete_instance_profile(self, nodeclass_name: str) -> str | None:
        """Delete the instance profile this project created for an EC2NodeClass (on its deletion): the one named
        :meth:`instance_profile_name` and tagged for this cluster and that EC2NodeClass (a profile the user named
        in ``spec.instanceProfile`` is never touched).  Its roles are removed first.  The name, or None."""
        profile = self.instance_profile_name(nodeclass_name)
        try:
            got = self.iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]
        except self.iam.exceptions.NoSuchEntityException:
            return None
        tags = {t["Key"]: t["Value"] for t in got.get("Tags") or []}
        if tags.get(wk.EC2NODECLASS) != nodeclass_name or tags.get(f"kubernetes.io/cluster/{self.cluster_name}") != "owned":
            return None
        try:
            for r in got.get("Roles") or []:
                self.iam.remove_role_from_instance_profile(InstanceProfileName=profile, RoleName=r["RoleName"])
            self.iam.delete_instance_profile(InstanceProfileName=profile)
        except self.iam.exceptions.NoSuchEntityException:
            return None
        return profile

    # -- capacity reservations, placement group ------------------------------------------
    def _reservations_and_placement(self, r: ResolvedNodeClass, spec: dict) -> list[Condition]:
        """Resolve ``capacityReservationSelectorTerms`` and ``placementGroupSelector`` onto ``r``; their conditions
        (``CapacityReservationsReady`` is False only when the describe call failed; ``PlacementGroupReady`` when the
        selected group is not found or cannot be described)."""
        conds = []
        terms = spec.get("capacityReservationSelectorTerms") or []
        r.capacity_reservations_selected = bool(terms)
        try:
            r.capacity_reservations, _ = capacity_reservations.resolve(self.ec2, terms, self.clock())
            conds.append(Condition("CapacityReservationsReady", True, "CapacityReservationsReady"))
        except Exception as e:  # noqa: BLE001 - e.g. DescribeCapacityReservations denied
            conds.append(Condition("CapacityReservationsReady", False, "CapacityReservationResolutionFailed",
                                   f"capacityReservationSelectorTerms {format_terms(terms)}: {e}"))
        selector = spec.get("placementGroupSelector")
        if not selector:
            return conds
        try:
            r.placement_group = placement_groups.resolve(self.ec2, selector)
        except Exception as e:  # noqa: BLE001
            conds.append(Condition("PlacementGroupReady", False, "PlacementGroupResolutionFailed",
                                   f"placement group {placement_groups.selector_text(selector)!r}: {e}"))
            return conds
        if r.placement_group is None:
            conds.append(Condition("PlacementGroupReady", False, "PlacementGroupNotFound",
                                   f"Placement group {placement_groups.selector_text(selector)!r} not found"))
        else:
            conds.append(Condition("PlacementGroupReady", True, "PlacementGroupReady"))
        return conds

    # -- all together -------------------------------------------------------------------
    def resolve(self, nodeclass) -> ResolvedNodeClass:
        name, spec, metadata = _spec(nodeclass)
        family = _family(spec)
        now = format_time(self.clock())
        r = ResolvedNodeClass(
            name=name,
            ami_family=family,
            tags=dict(spec.get("tags") or {}),
            kubelet=dict(spec.get("kubelet") or {}),
            user_data=spec.get("userData"),
            associate_public_ip_address=spec.get("associatePublicIPAddress"),
            detailed_monitoring=bool(spec.get("detailedMonitoring", False)),
            instance_store_policy=spec.get("instanceStorePolicy"),
            ip_prefix_count=int(spec["ipPrefixCount"]) if spec.get("ipPrefixCount") is not None else None,
            metadata_options={**DEFAULT_METADATA_OPTIONS, **(spec.get("metadataOptions") or {})},
            block_device_mappings=[dict(b) for b in spec.get("blockDeviceMappings") or []] or default_block_device_mappings(family),
            now=now,
        )
        conds = []

        terms = spec.get("subnetSelectorTerms") or []
        r.subnets = self.resolve_subnets(terms)
        conds.append(
            Condition("SubnetsReady", True, "SubnetsReady")
            if r.subnets
            else Condition("SubnetsReady", False, "SubnetsNotFound", f"no subnet matches subnetSelectorTerms {format_terms(terms)}")
        )

        terms = spec.get("securityGroupSelectorTerms") or []
        r.security_groups = self.resolve_security_groups(terms)
        conds.append(
            Condition("SecurityGroupsReady", True, "SecurityGroupsReady")
            if r.security_groups
            else Condition(
                "SecurityGroupsReady", False, "SecurityGroupsNotFound", f"no security group matches securityGroupSelectorTerms {format_terms(terms)}"
            )
        )

        terms = spec.get("amiSelectorTerms") or []
        provider = AMIProvider(self.ec2, self.ssm, self.k8s_version, clock=self.clock)
        try:
            r.amis = provider.resolve(terms)
            err = "; ".join(provider.errors)
        except AMIResolutionError as e:
            r.amis, err = [], str(e)
        if r.amis:
            conds.append(Condition("AMIsReady", True, "AMIsReady"))
        else:
            msg = f"no AMI matches amiSelectorTerms {format_terms(terms)}"
            conds.append(Condition("AMIsReady", False, "AMINotFound", msg + (f" ({err})" if err else "")))

        profile, err = self.resolve_instance_profile(name, spec, metadata)
        r.instance_profile = profile
        conds.append(
            Condition("InstanceProfileReady", True, "InstanceProfileReady")
            if profile
            else Condition("InstanceProfileReady", False, "InstanceProfileNotFound", err)
        )

        conds.extend(self._reservations_and_placement(r, spec))

        bad = [c for c in conds if not c.status]
        if bad:
            conds.append(Condition("Ready", False, "UnhealthyDependents", "; ".join(f"{c.type}=False: {c.message}" for c in bad)))
        else:
            conds.append(Condition("Ready", True, "Ready"))
        r.conditions = conds
        return r
