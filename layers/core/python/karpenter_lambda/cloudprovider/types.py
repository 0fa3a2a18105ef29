"""The data the cloud-provider interface exchanges (:mod:`.protocol`): a launch request, a launched instance, and
the errors a launch or a termination reports.  Its own module so implementations (:mod:`.launch`,
:mod:`.instance`) and callers share them without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..adapters.aws.nodeclass_resolver import ResolvedNodeClass
from ..api.objects import EC2NodeClass, NodePool

if TYPE_CHECKING:   # the scheduling package is large; a launch only reads a plan's fields
    from ..scheduling import NodeClaimPlan


@dataclass
class CreateRequest:
    """One NodeClaim to launch: its plan (instance type options, requirements), NodePool and EC2NodeClass."""

    name: str
    plan: NodeClaimPlan
    nodepool: NodePool
    nodeclass: EC2NodeClass
    resolved: ResolvedNodeClass | None     # the provider's resolution of the nodeclass (:meth:`resolve`)
    labels: dict[str, str] = field(default_factory=dict)
    client_token: str | None = None  # unique per launch attempt, recorded on the NodeClaim before the call


@dataclass
class Instance:
    """What a launch gives back (and what drift compares later)."""

    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    image_id: str | None = None
    subnet_id: str | None = None
    security_group_ids: list[str] = field(default_factory=list)
    #: labels the launch adds to the NodeClaim beyond the instance type's (capacity reservation id/type, placement
    #: group partition): the launcher writes them with the others
    labels: dict[str, str] = field(default_factory=dict)


class NoCapacity(Exception):
    """Nothing could be launched for the request (the message says why)."""


class LaunchFailed(Exception):
    """The cloud answered and nothing was launched (the message says why); ``throttled``: the API refused the call
    for its rate, the request itself is fine and should be retried later.  Any other exception out of ``create``
    leaves it open whether an instance exists (a timeout, a crash after the call)."""

    def __init__(self, message: str, throttled: bool = False):
        super().__init__(message)
        self.throttled = throttled


class NotOwned(Exception):
    """An instance this deployment did not launch (no ``karpenter-lambda.io/cluster=<cluster>`` tag): never terminated."""
