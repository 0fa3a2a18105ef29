"""The EC2 implementation of the cloud-provider interface (:class:`~.protocol.CloudProvider`).

* ``resolve(nodeclass)`` -- subnets, security groups, AMIs, instance profile (``(resolved, problem)``);
* ``instance_types(nodeclass, resolved, unavailable)`` -- the priced catalog in the resolved zones (:mod:`.catalog`);
* ``create(request)`` / ``list_instances()`` / ``describe(ids)`` / ``terminate(ids)`` / ``instances_of(nodeclaim)``
  -- the instance provider (:mod:`.instance`: launch templates + CreateFleet; instances found by this deployment's
  tags); ``as_instance(description)`` -- an EC2 description as an :class:`~.types.Instance`;
* ``cleanup_nodeclasses(existing)`` -- launch templates and instance profiles of deleted EC2NodeClasses.
"""

from __future__ import annotations

import logging
from typing import Callable

from ..adapters.aws.launch_templates import LaunchTemplates
from ..adapters.aws.nodeclass_resolver import NodeClassResolver
from ..catalog.allocatable import DEFAULT_VM_MEMORY_OVERHEAD_PERCENT
from .catalog import default_catalog_loader
from .instance import InstanceProvider
from .types import CreateRequest, Instance

log = logging.getLogger(__name__)


class AWSCloudProvider:
    def __init__(self, ec2, ssm, iam, cluster, *, region: str = "us-east-1", unavailable=None, pricing=None,
                 price_cache=None, catalog_loader: Callable[..., list] | None = None, beside_karpenter: bool = False,
                 vm_memory_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT, reserved_enis: int = 0):
        self.ec2, self.ssm, self.iam = ec2, ssm, iam
        # Karpenter's --vm-memory-overhead-percent and --reserved-enis: every catalog built here uses them
        self.vm_memory_overhead_percent = vm_memory_overhead_percent
        self.reserved_enis = reserved_enis
        self.beside_karpenter = beside_karpenter  # instances without the tag keys upstream Karpenter lists by
        self.cluster = cluster  # environment.ClusterDescription-like: name, endpoint, ca_b64, version, service_cidr
        self.region = region
        self.unavailable = unavailable
        self.pricing = pricing
        self.price_cache = price_cache
        self.catalog_loader = catalog_loader
        self.instances = InstanceProvider(ec2, cluster, unavailable, beside_karpenter=beside_karpenter)

    @classmethod
    def from_environment(cls, env) -> "AWSCloudProvider":
        return cls(env.ec2, env.ssm, env.iam, env.cluster, region=env.config.region, unavailable=env.unavailable,
                   pricing=env.pricing, price_cache=env.price_cache,
                   beside_karpenter=bool(getattr(env.config, "beside_karpenter", False)),
                   vm_memory_overhead_percent=getattr(env.config, "vm_memory_overhead_percent",
                                                      DEFAULT_VM_MEMORY_OVERHEAD_PERCENT),
                   reserved_enis=getattr(env.config, "reserved_enis", 0))

    # -- EC2NodeClass ----------------------------------------------------------------------------
    def resolve(self, nodeclass):
        resolver = NodeClassResolver(self.ec2, self.ssm, self.iam, self.cluster.name, self.cluster.version, self.region)
        try:
            resolved = resolver.resolve(nodeclass)
        except Exception as e:  # a broken nodeclass must not fail the other NodePools
            return None, str(e)
        return resolved, not_ready_reason(resolved.status_patch())

    @staticmethod
    def zones(resolved) -> list[str]:
        subs = getattr(resolved, "subnets", None) or []
        return sorted({(s if isinstance(s, dict) else s.__dict__)["zone"] for s in subs})

    # -- catalog -----------------------------------------------------------------------------------
    def unavailable_offerings(self) -> set:
        return set(self.unavailable.all()) if self.unavailable is not None else set()

    def instance_types(self, nodeclass, resolved, unavailable: set) -> list:
        zones = self.zones(resolved)
        if self.catalog_loader is not None:
            return self.catalog_loader(self.ec2, self.region, nodeclass, zones, unavailable)
        pg = getattr(resolved, "placement_group", None)
        return default_catalog_loader(self.ec2, self.region, nodeclass, zones, unavailable,
                                      pricing=self.pricing, price_cache=self.price_cache,
                                      reservations=tuple(getattr(resolved, "capacity_reservations", None) or ()),
                                      placement_group_id=pg.id if pg is not None else None,
                                      placement_group_strategy=(pg.strategy or None) if pg is not None else None,
                                      vm_memory_overhead_percent=self.vm_memory_overhead_percent,
                                      reserved_enis=self.reserved_enis)

    # -- instances (the instance provider) ------------------------------------------------------------
    def create(self, request: CreateRequest, on_retry=None) -> Instance:
        return self.instances.create(request, on_retry)

    def owns(self, instance: dict | None) -> bool:
        return self.instances.owns(instance)

    def list_instances(self) -> dict[str, dict]:
        """Instances this deployment launched for a NodeClaim of this cluster, by id (every state)."""
        return self.instances.list()

    def instances_of(self, nodeclaim: str) -> dict[str, dict]:
        """This deployment's instances tagged for NodeClaim ``nodeclaim``, by id (every state)."""
        return self.instances.instances_of(nodeclaim)

    def describe(self, instance_ids: list[str]) -> dict[str, dict]:
        """The given instances by id; ids EC2 does not know are left out."""
        return self.instances.describe(instance_ids)

    def terminate(self, instance_ids: list[str]) -> None:
        """Terminate instances of this deployment (:class:`~.types.NotOwned` for an instance without its owner tag)."""
        self.instances.terminate(instance_ids)

    def terminate_launched(self, instance_ids: list[str]) -> None:
        """Terminate by id instances this deployment launched and EC2 does not describe yet (eventual consistency)."""
        self.instances.terminate_launched(instance_ids)

    as_instance = staticmethod(InstanceProvider.as_instance)

    # -- EC2NodeClass deletion ---------------------------------------------------------------------
    def cleanup_nodeclasses(self, existing: set[str], in_use: set[str] = frozenset()) -> list[dict]:
        """Delete the launch templates (and the instance profile this project created) of EC2NodeClasses that no
        longer exist and that no NodeClaim or live instance still uses.  ``[{"nodeClass", "launchTemplates",
        "instanceProfile"}]`` for what was deleted."""
        lts = LaunchTemplates(self.ec2, self.cluster.name)
        gone: dict[str, list[str]] = {}
        for lt in lts.owned():
            nc = lt.get("nodeclass")
            if nc and nc not in existing and nc not in in_use:
                gone.setdefault(nc, [])
        out = []
        for nc in sorted(gone):
            deleted = lts.delete_for_nodeclass(nc)
            profile = None
            if self.iam is not None:
                resolver = NodeClassResolver(self.ec2, self.ssm, self.iam, self.cluster.name,
                                             self.cluster.version or "0", self.region)
                profile = resolver.delete_instance_profile(nc)
            out.append({"nodeClass": nc, "launchTemplates": deleted, "instanceProfile": profile})
        return out


def not_ready_reason(status: dict) -> str | None:
    for c in status.get("conditions") or []:
        if c.get("type") in ("SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady",
                             "CapacityReservationsReady", "PlacementGroupReady") and c.get("status") == "False":
            return c.get("message") or c.get("reason") or c.get("type")
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "False":
            return c.get("message") or c.get("reason") or "not ready"
    return None
