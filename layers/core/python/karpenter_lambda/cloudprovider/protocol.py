"""The cloud-provider interface: everything the controllers ask of the cloud (Karpenter's ``cloudprovider.CloudProvider``).

Provisioning, the lifecycle sweep, disruption and interruption call these methods only; another cloud plugs in by
implementing them.  :class:`~karpenter_lambda.cloudprovider.aws.AWSCloudProvider` is the EC2 implementation.
Instances are EC2 ``DescribeInstances`` dicts (``InstanceId``, ``State``, ``Tags``, ...), keyed by instance id.
"""

from __future__ import annotations

from typing import Callable, Protocol

from ..api.objects import EC2NodeClass
from ..catalog.types import InstanceType
from .types import CreateRequest, Instance

#: ``(instance type, zone, capacity type)``: an offering insufficient capacity made unavailable for a while
OfferingKey = tuple[str, str, str]


class CloudProvider(Protocol):
    def resolve(self, nodeclass: EC2NodeClass) -> tuple[object | None, str | None]:
        """(the resolved EC2NodeClass: subnets, security groups, AMIs, instance profile; why it is not ready or
        None).  A broken EC2NodeClass answers (None, why) and raises nothing."""
        ...

    def instance_types(self, nodeclass: EC2NodeClass, resolved: object, unavailable: set[OfferingKey]) -> list[InstanceType]:
        """The priced catalog in the resolved zones, ``unavailable`` offerings marked so."""
        ...

    def unavailable_offerings(self) -> set[OfferingKey]: ...

    def create(self, request: CreateRequest, on_retry: Callable[[str, list], None] | None = None) -> Instance:
        """Launch one NodeClaim; :class:`~.types.NoCapacity` / :class:`~.types.LaunchFailed`: nothing launched."""
        ...

    def list_instances(self) -> dict[str, dict]:
        """This deployment's instances launched for a NodeClaim, by id (every state)."""
        ...

    def describe(self, instance_ids: list[str]) -> dict[str, dict]:
        """The given instances by id; ids the cloud does not know are left out."""
        ...

    def terminate(self, instance_ids: list[str]) -> None:
        """Terminate this deployment's instances (:class:`~.types.NotOwned` for any other)."""
        ...

    def terminate_launched(self, instance_ids: list[str]) -> None:
        """Terminate by id instances this deployment launched that EC2 does not describe yet (eventual consistency)."""
        ...
