"""NodeClaim deletion that honours the ``karpenter.sh/termination`` finalizer (never a hard delete).

``Terminator(store, kube, cloud, claims, clock, decide)``:

* ``request(nodeclaim, reason)`` -- the deletion request: ``metadata.deletionTimestamp`` is set (with the reason)
  and nothing else; the record stays while its instance exists.
* ``finalize(nodeclaim, node, instance)`` -- one step toward gone, safe to repeat (the lifecycle sweep calls it
  every minute for each deleting NodeClaim):

  1. **drain** (while the instance still runs and the Node exists): taint the Node ``karpenter.sh/disrupted:
     NoSchedule``, label it ``node.kubernetes.io/exclude-from-external-load-balancers``, then evict its pods with
     the Eviction API in Karpenter's four groups (:mod:`karpenter_lambda.disruption.eviction`: non-critical,
     non-critical DaemonSet, critical, critical DaemonSet; each after the previous is gone).  A 429 from a PDB and
     a do-not-disrupt pod are retried next time; at the NodeClaim's ``terminationGracePeriod`` deadline the
     remaining pods are deleted.  Returns ``"draining"`` while pods remain;
  2. terminate the instance (once: the time is recorded); ``"terminating"`` until EC2 reports it gone;
  3. delete the Node, release the launch claim (limits, pod nominations), remove the record: ``"deleted"``.

The drain's progress is kept on the NodeClaim (``status.termination``: startedAt, group, evicted / deleted pod
uids with times, blocked pods and why, instanceTerminatedAt), so a drain that outlasts one invocation resumes in
the next.  A pod is never evicted twice: one already evicted is terminating or gone.  A crash between any two
steps leaves a deleting NodeClaim that the next sweep finishes.
"""

from __future__ import annotations

import logging
from typing import Callable

from ..api import labels as wk
from ..api.durations import DurationError, parse_duration
from ..api.kube import instance_id_of, pod_key, pod_uid
from ..disruption import eviction
from ..scheduling.reschedule import DISRUPTED_TAINT
from . import runtime
from .cloudprovider import GONE_STATES, instance_state
from .cluster_state import as_dict

DELETION_REASON_ANNOTATION = "karpenter-lambda.io/deletion-reason"
EXCLUDE_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
TERMINATION_STATUS = "termination"
TERMINATE_RETRY_SECONDS = 300
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
        self.actions: list[dict] = []   # pods evicted / deleted by this object (the caller's report drains it)

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
        running = bool(iid) and instance is not None and state not in GONE_STATES
        if running and node is not None:
            try:
                if self._drain(nodeclaim, node) == "draining":
                    return "draining"
            except Exception as e:
                if errors is not None:
                    errors.append(f"drain {node['metadata']['name']}: {e}")
                return "draining"
            nodeclaim = self.store.get("NodeClaim", nodeclaim.name) or nodeclaim
        if running:
            term = nodeclaim.status.get(TERMINATION_STATUS) or {}
            asked = runtime.parse_iso(term.get("instanceTerminatedAt"))
            if asked is None or self.clock() - asked >= TERMINATE_RETRY_SECONDS:
                try:
                    self.cloud.terminate([iid])
                except Exception as e:
                    if errors is not None:
                        errors.append(f"terminate {iid}: {e}")
                    return "terminating"
                self._record(nodeclaim.name, {"instanceTerminatedAt": runtime.iso(self.clock())})
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

    # -- the drain ---------------------------------------------------------------------------------
    def _record(self, name: str, patch: dict) -> None:
        """Merge ``patch`` into the NodeClaim's ``status.termination`` (maps merge one level deep)."""
        def mutate(obj):
            cur = dict(obj.status.get(TERMINATION_STATUS) or {})
            for k, v in patch.items():
                cur[k] = {**(cur.get(k) or {}), **v} if isinstance(v, dict) and k != "blocked" else v
            obj.status[TERMINATION_STATUS] = cur
            return obj

        try:
            self.store.update("NodeClaim", name, mutate)
        except Exception as e:
            from ..adapters.store import NotFound

            if not isinstance(e, NotFound):
                raise

    def deadline(self, nodeclaim) -> float | None:
        tgp = nodeclaim.spec.get("terminationGracePeriod")
        start = runtime.parse_iso(nodeclaim.metadata.get("deletionTimestamp"))
        if not tgp or start is None:
            return None
        try:
            return start + parse_duration(tgp)
        except DurationError:
            return None

    def _drain(self, nodeclaim, node: dict) -> str:
        name = node["metadata"]["name"]
        now = self.clock()
        taints = (node.get("spec") or {}).get("taints") or []
        if not any(t.get("key") == DISRUPTED_TAINT["key"] and t.get("effect") == DISRUPTED_TAINT["effect"] for t in taints):
            self.kube.patch_node_taints(name, add=[dict(DISRUPTED_TAINT)])
        if ((node.get("metadata") or {}).get("labels") or {}).get(EXCLUDE_LB_LABEL) != "true":
            self.kube.patch_node_labels(name, {EXCLUDE_LB_LABEL: "true"})
        deleted: set[str] = set((nodeclaim.status.get(TERMINATION_STATUS) or {}).get("deleted") or {})
        started = bool((nodeclaim.status.get(TERMINATION_STATUS) or {}).get("startedAt"))
        prev_group = None
        for _ in range(len(eviction.GROUPS) + 1):   # pods that go at once let the next group start in this call
            pods = [as_dict(p) for p in self.kube.list_pods_on_node(name)]
            step = eviction.next_step(pods, now, self.deadline(nodeclaim), deleted)
            if step.done:
                self._record(nodeclaim.name, {"drainedAt": runtime.iso(now), "blocked": {}})
                self.decide("drained", f"node {name} drained", nodeclaim=nodeclaim.name, node=name)
                return "drained"
            if step.group == prev_group or not (step.evict or step.delete):
                if step.blocked:
                    self._record(nodeclaim.name, {"group": eviction.GROUPS[step.group], "blocked": dict(step.blocked)})
                return "draining"
            prev_group = step.group
            patch: dict = {"group": eviction.GROUPS[step.group], "evicted": {}, "deleted": {}, "blocked": dict(step.blocked)}
            if not started:
                patch["startedAt"] = runtime.iso(now)
                started = True
            try:
                self._act(nodeclaim, name, step, now, patch)
            finally:   # what was done is recorded even when a later call fails
                self._record(nodeclaim.name, patch)
            deleted.update(patch["deleted"])
        return "draining"

    def _act(self, nodeclaim, name: str, step, now: float, patch: dict) -> None:
        for p in step.delete:
            ns, pn = (p["metadata"].get("namespace") or "default"), p["metadata"]["name"]
            self.kube.delete_pod(ns, pn)
            patch["deleted"][pod_uid(p)] = runtime.iso(now)
            self.actions.append({"pod": pod_key(p), "node": name, "how": "deleted at the terminationGracePeriod deadline"})
            self.decide("delete-pod", f"deleted pod {pod_key(p)} on node {name}: terminationGracePeriod deadline",
                        nodeclaim=nodeclaim.name, pod=pod_key(p))
        for p in step.evict:
            ns, pn = (p["metadata"].get("namespace") or "default"), p["metadata"]["name"]
            if self.kube.evict_pod(ns, pn):
                patch["evicted"][pod_uid(p)] = runtime.iso(now)
                self.actions.append({"pod": pod_key(p), "node": name, "how": "eviction"})
                self.decide("evict", f"evicted pod {pod_key(p)} from node {name} ({eviction.GROUPS[step.group]})",
                            nodeclaim=nodeclaim.name, pod=pod_key(p))
            else:
                patch["blocked"][pod_uid(p)] = "PodDisruptionBudget (429)"
                self.decide("evict-blocked", f"eviction of pod {pod_key(p)} refused by a PodDisruptionBudget; retried",
                            nodeclaim=nodeclaim.name, pod=pod_key(p))
