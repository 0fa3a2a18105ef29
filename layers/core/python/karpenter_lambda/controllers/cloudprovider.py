"""The cloud-provider interface: everything the controllers ask of EC2, behind one small class.

:class:`CloudProvider` is what provisioning, the lifecycle sweep, disruption and interruption call; another
cloud plugs in by implementing it.  :class:`AWSCloudProvider` is the EC2 implementation:

* ``resolve(nodeclass)`` -- subnets, security groups, AMIs, instance profile (``(resolved, problem)``);
* ``instance_types(nodeclass, resolved, unavailable)`` -- the priced catalog in the resolved zones;
* ``create(request)`` -- launch templates + CreateFleet (instant) with insufficient-capacity fallback;
* ``list_instances()`` / ``describe(instance_ids)`` / ``terminate(instance_ids)``.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from .cloud_types import CreateRequest, Instance, NoCapacity  # noqa: F401  (re-exported)


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


class AWSCloudProvider:
    def __init__(self, ec2, ssm, iam, cluster, *, region: str = "us-east-1", unavailable=None, pricing=None,
                 price_cache=None, catalog_loader: Callable[..., list] | None = None):
        self.ec2, self.ssm, self.iam = ec2, ssm, iam
        self.cluster = cluster  # environment.ClusterDescription-like: name, endpoint, ca_b64, version, service_cidr
        self.region = region
        self.unavailable = unavailable
        self.pricing = pricing
        self.price_cache = price_cache
        self.catalog_loader = catalog_loader

    @classmethod
    def from_environment(cls, env) -> "AWSCloudProvider":
        return cls(env.ec2, env.ssm, env.iam, env.cluster, region=env.config.region, unavailable=env.unavailable,
                   pricing=env.pricing, price_cache=env.price_cache)

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

    def list_instances(self) -> dict[str, dict]:
        """Instances tagged for this cluster and a NodeClaim, by id (every state)."""
        out = {}
        kwargs = {"Filters": [{"Name": f"tag:kubernetes.io/cluster/{self.cluster.name}", "Values": ["owned"]},
                              {"Name": "tag-key", "Values": [NODECLAIM_TAG]}]}
        while True:
            resp = self.ec2.describe_instances(**kwargs)
            for r in resp.get("Reservations", []):
                for i in r.get("Instances", []):
                    out[i["InstanceId"]] = i
            if not resp.get("NextToken"):
                return out
            kwargs["NextToken"] = resp["NextToken"]

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
        if instance_ids:
            self.ec2.terminate_instances(InstanceIds=list(instance_ids))


def not_ready_reason(status: dict) -> str | None:
    for c in status.get("conditions") or []:
        if c.get("type") in ("SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady") and c.get("status") == "False":
            return c.get("message") or c.get("reason") or c.get("type")
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "False":
            return c.get("message") or c.get("reason") or "not ready"
    return None
