"""NodeClaim deletion that honours the ``karpenter.sh/termination`` finalizer (never a hard delete).

``Terminator(store, kube, cloud, claims, clock, decide)``:

* ``request(nodeclaim, reason)`` -- the deletion request: ``metadata.deletionTimestamp`` is set (with the reason)
  and nothing else; the record stays while its instance exists.
* ``finalize(nodeclaim, node, instance)`` -- one step toward gone, safe to repeat (every sweep calls it for a
  deleting NodeClaim): terminate the instance if it still runs; once EC2 reports it gone (or unknown) delete the
  Node, release the launch claim (limits, pod nominations) and remove the record.  Returns ``"terminating"``
  while the instance is still going, ``"deleted"`` when the record is gone.

A crash between any two steps leaves a deleting NodeClaim that the next sweep finishes.
"""

from __future__ import annotations

import logging
from typing import Callable

from ..api import labels as wk
from ..api.kube import instance_id_of
from . import runtime
from .cloudprovider import GONE_STATES, instance_state

DELETION_REASON_ANNOTATION = "karpenter-lambda.io/deletion-reason"
log = logging.getLogger(__name__)


class Terminator:
    def __init__(self, store, kube, cloud, claims=None, clock: Callable[[], float] | None = None,
                 decide: Callable[..., None] | None = None):
        self.store = store
        self.kube = kube
        self.cloud = cloud
        self.claims = claims
        self.clock = clock or runtime.clock_proxy
        self.decide = decide or (lambda decision, message, **f: log.info("%s %s", decision, message))

    def request(self, nodeclaim, reason: str):
        """Mark the NodeClaim deleting (idempotent: an earlier timestamp and reason are kept)."""
        now = self.clock()

        def mutate(obj):
            if not obj.metadata.get("deletionTimestamp"):
                obj.metadata["deletionTimestamp"] = runtime.iso(now)
                obj.metadata.setdefault("annotations", {})[DELETION_REASON_ANNOTATION] = reason
            return obj

        try:
            return self.store.update("NodeClaim", nodeclaim.name, mutate)
        except Exception as e:
            from ..adapters.store import NotFound

            if isinstance(e, NotFound):
                return None
            raise

    def finalize(self, nodeclaim, node: dict | None, instance: dict | None, errors: list[str] | None = None) -> str:
        iid = instance_id_of(nodeclaim.status.get("providerID"))
        state = instance_state(instance)
        if iid and instance is not None and state not in GONE_STATES:
            try:
                self.cloud.terminate([iid])
            except Exception as e:
                if errors is not None:
                    errors.append(f"terminate {iid}: {e}")
                return "terminating"
            self.decide("terminate", f"terminating instance {iid} of NodeClaim {nodeclaim.name}",
                        nodeclaim=nodeclaim.name, instanceId=iid)
            after = self.cloud.describe([iid]).get(iid)
            if after is not None and instance_state(after) not in GONE_STATES:
                return "terminating"
        if node is not None:
            try:
                self.kube.delete_node(node["metadata"]["name"])
            except Exception as e:
                if errors is not None:
                    errors.append(f"delete node {node['metadata']['name']}: {e}")
                return "terminating"
        self.store.delete("NodeClaim", nodeclaim.name)
        if self.claims is not None:
            self.claims.release(nodeclaim.nodepool_name or nodeclaim.labels.get(wk.NODEPOOL, ""), nodeclaim.name)
        return "deleted"
