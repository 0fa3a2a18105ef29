"""The instance provider (karpenter-provider-aws's ``instance.Provider``): EC2 instances of one cluster.

* ``create(request)`` -- launch templates + CreateFleet (instant) with insufficient-capacity fallback (:mod:`.launch`);
* ``list()`` -- this deployment's instances launched for a NodeClaim; ``instances_of(nodeclaim)`` -- those tagged for
  one NodeClaim; ``describe(ids)``; ``terminate(ids)`` -- only instances this deployment owns.

Ownership: this deployment lists, adopts, garbage-collects and terminates only instances tagged
``karpenter-lambda.io/cluster=<cluster>`` (:data:`~karpenter_lambda.api.labels.OWNER_TAG`).  Upstream Karpenter
tags its instances with ``kubernetes.io/cluster/<c>`` and ``karpenter.sh/nodeclaim`` too, so those tags alone
never make an instance ours (both can run side by side during a migration: docs/provisioning.md).
"""

from __future__ import annotations

from typing import Callable

from ..adapters.aws.launch_templates import LaunchTemplates
from ..api import labels as wk
from ..api.labels import NODECLAIM_TAG
from . import launch
from .types import CreateRequest, Instance, NotOwned

# Not live any more: never adopted, never garbage-collected, never a NodeClaim's candidate (as Karpenter's garbage
# collection, which leaves instances the cloud provider lists as shutting down alone: EC2 finishes them).  Not
# "gone" for the termination flow: see :func:`instance_gone`.
GONE_STATES = frozenset({"shutting-down", "terminated"})


def instance_state(instance: dict | None) -> str | None:
    return ((instance or {}).get("State") or {}).get("Name")


def instance_gone(instance: dict | None) -> bool:
    """Is the instance gone for the termination flow (and what a NodeClaim counts against its NodePool's limits)?
    Only NotFound (None) or ``terminated``: a ``shutting-down`` instance still exists -- Karpenter's instance provider
    lists it (its ``instanceStateFilter``) and both termination finalizers requeue until the cloud provider says
    NotFound -- so a deleting NodeClaim keeps its record, Node and launch claim until EC2 reports it terminated."""
    return instance is None or instance_state(instance) == "terminated"


def instance_tags(instance: dict | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in (instance or {}).get("Tags") or []}


class InstanceProvider:
    def __init__(self, ec2, cluster, unavailable=None, *, beside_karpenter: bool = False):
        self.ec2 = ec2
        self.cluster = cluster  # environment.ClusterDescription-like: name, endpoint, ca_b64, version, service_cidr
        self.unavailable = unavailable
        self.beside_karpenter = beside_karpenter  # instances without the tag keys upstream Karpenter lists by
        self._templates: LaunchTemplates | None = None

    def templates(self) -> LaunchTemplates:
        """The launch templates of this provider's launches: a template described or created once is not described
        again by a later launch of the same invocation (Karpenter keeps them in memory too; a template deleted
        meanwhile fails that CreateFleet, and the NodeClaim's launch is retried by the next round)."""
        if self._templates is None:
            self._templates = LaunchTemplates(self.ec2, self.cluster.name)
        return self._templates

    def create(self, request: CreateRequest, on_retry: Callable[[str, list], None] | None = None) -> Instance:
        return launch.launch(self, request, on_retry)   # through the module: a benchmark may wrap it

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

    def list(self) -> dict[str, dict]:
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

    def terminate_launched(self, instance_ids: list[str]) -> None:
        """Terminate instances this deployment launched itself (their ids recorded on its NodeClaims at launch) that
        EC2 may not describe yet (eventual consistency): by id, without the describe; the IAM owner-tag condition on
        TerminateInstances still refuses anything not ours.  An id EC2 does not know raises (the caller retries)."""
        if instance_ids:
            self.ec2.terminate_instances(InstanceIds=list(instance_ids))

    @staticmethod
    def as_instance(desc: dict, price: float = 0.0) -> Instance:
        """An EC2 instance description as the :class:`Instance` a launch returns.  Reserved (as upstream): launched
        into a capacity reservation with the ``capacity-reservations-only`` preference only this project's reserved
        launch templates set (an instance that found an open reservation by itself stays on-demand); its reservation's
        type and interruptible from ``InstanceLifecycle`` (``capacity-block``, ``interruptible-capacity-reservation``)."""
        capacity_type, labels = wk.CAPACITY_TYPE_ON_DEMAND, {}
        spec = desc.get("CapacityReservationSpecification") or {}
        if desc.get("InstanceLifecycle") == "spot" or desc.get("SpotInstanceRequestId"):
            capacity_type = wk.CAPACITY_TYPE_SPOT
        elif desc.get("CapacityReservationId") and spec.get("CapacityReservationPreference") == "capacity-reservations-only":
            capacity_type = wk.CAPACITY_TYPE_RESERVED
            lifecycle = desc.get("InstanceLifecycle")
            labels = {wk.CAPACITY_RESERVATION_ID: desc["CapacityReservationId"],
                      wk.CAPACITY_RESERVATION_TYPE: "capacity-block" if lifecycle == "capacity-block" else "default",
                      wk.CAPACITY_RESERVATION_INTERRUPTIBLE:
                          "true" if lifecycle == "interruptible-capacity-reservation" else "false"}
        placement = desc.get("Placement") or {}
        if placement.get("GroupId"):
            labels[wk.PLACEMENT_GROUP_ID] = placement["GroupId"]
            if placement.get("PartitionNumber"):
                labels[wk.PLACEMENT_GROUP_PARTITION] = str(placement["PartitionNumber"])
        return Instance(instance_id=desc["InstanceId"], instance_type=desc.get("InstanceType", ""),
                        zone=placement.get("AvailabilityZone", ""), capacity_type=capacity_type,
                        price=float(price or 0.0), image_id=desc.get("ImageId"), subnet_id=desc.get("SubnetId"),
                        security_group_ids=sorted(g["GroupId"] for g in desc.get("SecurityGroups") or [] if g.get("GroupId")),
                        labels=labels)
