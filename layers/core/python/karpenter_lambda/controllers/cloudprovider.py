"""The cloud-provider interface: everything the controllers ask of EC2, behind one small class.

:class:`CloudProvider` is what provisioning, the lifecycle sweep, disruption and interruption call; another
cloud plugs in by implementing it.  :class:`AWSCloudProvider` is the EC2 implementation:

* ``resolve(nodeclass)`` -- subnets, security groups, AMIs, instance profile (``(resolved, problem)``);
* ``instance_types(nodeclass, resolved, unavailable)`` -- the priced catalog in the resolved zones;
* ``create(request)`` -- launch templates + CreateFleet (instant) with insufficient-capacity fallback;
* ``list_instances()`` / ``describe(instance_ids)`` / ``terminate(instance_ids)``;
* ``instances_of(nodeclaim)`` -- the instances launched for one NodeClaim (adoption of a launch whose record was
  never marked Launched); ``as_instance(description)`` -- an EC2 description as an :class:`Instance`;
* ``cleanup_nodeclasses(existing)`` -- launch templates and instance profiles of deleted EC2NodeClasses.

Ownership: this deployment lists, adopts, garbage-collects and terminates only instances tagged
``karpenter-lambda.io/cluster=<cluster>`` (:data:`~karpenter_lambda.api.labels.OWNER_TAG`).  Upstream Karpenter
tags its instances with ``kubernetes.io/cluster/<c>`` and ``karpenter.sh/nodeclaim`` too, so those tags alone
never make an instance ours (both can run side by side during a migration: docs/provisioning.md).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Protocol

from ..api import labels as wk
from .cloud_types import CreateRequest, Instance, LaunchFailed, NoCapacity  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)


class CloudProvider(Protocol):
    def resolve(self, nodeclass) -> tuple[Any, str | None]: ...
    def instance_types(self, nodeclass, resolved, unavailable: set) -> list: ...
    def unavailable_offerings(self) -> set: ...
    def create(self, request: CreateRequest, on_retry: Callable[[str, list], None] | None = None) -> Instance: ...
    def list_instances(self) -> dict[str, dict]: ...
    def terminate(self, instance_ids: list[str]) -> None: ...


NODECLAIM_TAG = "karpenter.sh/nodeclaim"
GONE_STATES = frozenset({"shutting-down", "terminated"})


def instance_state(instance: dict | None) -> str | None:
    return ((instance or {}).get("State") or {}).get("Name")


def instance_tags(instance: dict | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in (instance or {}).get("Tags") or []}


class NotOwned(Exception):
    """An instance this deployment did not launch (no ``karpenter-lambda.io/cluster=<cluster>`` tag): never terminated."""


class AWSCloudProvider:
    def __init__(self, ec2, ssm, iam, cluster, *, region: str = "us-east-1", unavailable=None, pricing=None,
                 price_cache=None, catalog_loader: Callable[..., list] | None = None, beside_karpenter: bool = False):
        self.ec2, self.ssm, self.iam = ec2, ssm, iam
        self.beside_karpenter = beside_karpenter  # instances without the tag keys upstream Karpenter lists by
        self.cluster = cluster  # environment.ClusterDescription-like: name, endpoint, ca_b64, version, service_cidr
        self.region = region
        self.unavailable = unavailable
        self.pricing = pricing
        self.price_cache = price_cache
        self.catalog_loader = catalog_loader

    @classmethod
    def from_environment(cls, env) -> "AWSCloudProvider":
        return cls(env.ec2, env.ssm, env.iam, env.cluster, region=env.config.region, unavailable=env.unavailable,
                   pricing=env.pricing, price_cache=env.price_cache,
                   beside_karpenter=bool(getattr(env.config, "beside_karpenter", False)))

    # -- EC2NodeClass ----------------------------------------------------------------------------
    def resolve(self, nodeclass):
        from ..adapters.aws.nodeclass_resolver import NodeClassResolver

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
        from .catalog_cache import default_catalog_loader

        return default_catalog_loader(self.ec2, self.region, nodeclass, zones, unavailable,
                                      pricing=self.pricing, price_cache=self.price_cache)

    # -- instances ---------------------------------------------------------------------------------
    def create(self, request: CreateRequest, on_retry=None) -> Instance:
        from .ec2_launch import launch

        return launch(self, request, on_retry)

    def _owner_filters(self) -> list[dict]:
        return [{"Name": f"tag:kubernetes.io/cluster/{self.cluster.name}", "Values": ["owned"]},
                {"Name": f"tag:{wk.OWNER_TAG}", "Values": [self.cluster.name]}]

    def _describe_pages(self, **kwargs) -> dict[str, dict]:
        out = {}
        while True:
            resp = self.ec2.describe_instances(**kwargs)
            for r in resp.get("Reservations", []):
                for i in r.get("Instances", []):
                    out[i["InstanceId"]] = i
            if not resp.get("NextToken"):
                return out
            kwargs["NextToken"] = resp["NextToken"]

    def owns(self, instance: dict | None) -> bool:
        return instance_tags(instance).get(wk.OWNER_TAG) == self.cluster.name

    def list_instances(self) -> dict[str, dict]:
        """Instances this deployment launched for a NodeClaim of this cluster, by id (every state)."""
        return self._describe_pages(Filters=self._owner_filters() + [{"Name": "tag-key", "Values": [NODECLAIM_TAG]}])

    def instances_of(self, nodeclaim: str) -> dict[str, dict]:
        """This deployment's instances tagged for NodeClaim ``nodeclaim``, by id (every state)."""
        return self._describe_pages(Filters=self._owner_filters() + [{"Name": f"tag:{NODECLAIM_TAG}", "Values": [nodeclaim]}])

    def describe(self, instance_ids: list[str]) -> dict[str, dict]:
        """The given instances by id; ids EC2 does not know are left out."""
        out = {}
        for iid in instance_ids:
            try:
                resp = self.ec2.describe_instances(InstanceIds=[iid])
            except Exception as e:  # InvalidInstanceID.NotFound / Malformed: gone
                if "InvalidInstanceID" in str(e):
                    continue
                raise
            for r in resp.get("Reservations", []):
                for i in r.get("Instances", []):
                    out[i["InstanceId"]] = i
        return out

    def terminate(self, instance_ids: list[str]) -> None:
        """Terminate instances of this deployment.  Each is described first: one without this deployment's owner tag
        is not terminated (:class:`NotOwned`, naming it); ids EC2 does not know are gone already."""
        if not instance_ids:
            return
        found = self.describe(list(instance_ids))
        foreign = sorted(i for i, d in found.items() if not self.owns(d))
        ours = [i for i in instance_ids if i in found and i not in foreign]
        if ours:
            self.ec2.terminate_instances(InstanceIds=ours)
        if foreign:
            raise NotOwned(f"instance(s) {', '.join(foreign)} not tagged {wk.OWNER_TAG}={self.cluster.name}: not "
                           f"launched by this deployment, not terminated")

    @staticmethod
    def as_instance(desc: dict, price: float = 0.0) -> Instance:
        """An EC2 instance description as the :class:`Instance` a launch returns."""
        return Instance(instance_id=desc["InstanceId"], instance_type=desc.get("InstanceType", ""),
                        zone=(desc.get("Placement") or {}).get("AvailabilityZone", ""),
                        capacity_type=wk.CAPACITY_TYPE_SPOT if desc.get("InstanceLifecycle") == "spot"
                        else wk.CAPACITY_TYPE_ON_DEMAND,
                        price=float(price or 0.0), image_id=desc.get("ImageId"), subnet_id=desc.get("SubnetId"),
                        security_group_ids=sorted(g["GroupId"] for g in desc.get("SecurityGroups") or [] if g.get("GroupId")))

    # -- EC2NodeClass deletion ---------------------------------------------------------------------
    def cleanup_nodeclasses(self, existing: set[str], in_use: set[str] = frozenset()) -> list[dict]:
        """Delete the launch templates (and the instance profile this project created) of EC2NodeClasses that no
        longer exist and that no NodeClaim or live instance still uses.  ``[{"nodeClass", "launchTemplates",
        "instanceProfile"}]`` for what was deleted."""
        from ..adapters.aws.launch_templates import LaunchTemplates
        from ..adapters.aws.nodeclass_resolver import NodeClassResolver

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
        if c.get("type") in ("SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady") and c.get("status") == "False":
            return c.get("message") or c.get("reason") or c.get("type")
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "False":
            return c.get("message") or c.get("reason") or "not ready"
    return None
