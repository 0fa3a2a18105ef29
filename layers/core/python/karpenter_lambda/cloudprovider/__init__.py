"""The cloud provider: everything the controllers ask of EC2, behind one interface (an I/O layer like ``adapters``:
it may import adapters; controllers import it, never the other way round).

* :mod:`.protocol` -- :class:`CloudProvider`, the interface (resolve, instance_types, unavailable_offerings, create,
  list_instances, describe, terminate);
* :mod:`.types` -- :class:`CreateRequest`, :class:`Instance`, :class:`NoCapacity`, :class:`LaunchFailed`,
  :class:`NotOwned`;
* :mod:`.aws` -- :class:`AWSCloudProvider`, the EC2 implementation;
* :mod:`.instance` -- :class:`InstanceProvider` (karpenter-provider-aws's instance provider: create through launch
  templates + CreateFleet, describe/list/terminate by this deployment's tags);
* :mod:`.launch` -- one NodeClaim's launch (candidates, CreateFleet with insufficient-capacity fallback);
* :mod:`.catalog` -- instance types per EC2NodeClass, cached per process.
"""

from .aws import AWSCloudProvider, not_ready_reason
from .instance import GONE_STATES, InstanceProvider, instance_state, instance_tags
from .protocol import CloudProvider
from .types import CreateRequest, Instance, LaunchFailed, NoCapacity, NotOwned

__all__ = ["AWSCloudProvider", "CloudProvider", "CreateRequest", "GONE_STATES", "Instance", "InstanceProvider",
           "LaunchFailed", "NoCapacity", "NotOwned", "instance_state", "instance_tags", "not_ready_reason"]
