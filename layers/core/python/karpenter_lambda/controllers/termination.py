"""NodeClaim deletion that honours the ``karpenter.sh/termination`` finalizer (never a hard delete).

``Terminator(store, kube, cloud, claims, clock, decide)``:

* ``request(nodeclaim, reason)`` -- the deletion request: ``metadata.deletionTimestamp`` is set (with the reason)
  and nothing else; the record stays while its instance exists.
* ``finalize(nodeclaim, node, instance, errors=None) -> str`` -- one step toward gone, safe to repeat (the
  lifecycle sweep calls it every minute for each deleting NodeClaim; every call is a new Lambda invocation's view):

  0. **hold** (``wait_for``, :meth:`Terminator.hold`): a deletion whose replacements were launched ahead of it and
     whose instance is not going away on its own soon (:data:`HOLD_FOR_REPLACEMENTS`) taints the Node and evicts
     nothing while those replacements initialize (``waitingFor``); never once the drain has started, never past half
     the time to the deadline below;
  1. **drain** (while the instance may still run and the Node exists): taint the Node ``karpenter.sh/disrupted:
     NoSchedule``, label it ``node.kubernetes.io/exclude-from-external-load-balancers=true``, then evict its pods
     with the Eviction API in Karpenter's four groups (:mod:`karpenter_lambda.disruption.eviction`: non-critical,
     non-critical DaemonSet, critical, critical DaemonSet; each only once every pod of the earlier groups is gone).
     A 429 from a PodDisruptionBudget (its Status names the ``DisruptionBudget`` cause) and an active do-not-disrupt
     are retried next time; a 429 without that cause is API-server throttling: recorded as such (not as a PDB), no
     more evictions in this call, retried next time; from the NodeClaim's
     ``terminationGracePeriod`` deadline minus a pod's own grace period the pod is deleted instead.  Returns
     ``"draining"`` while pods remain.  An instance missing from the caller's listing is looked up by id first
     (a registered one too: a tag-filtered listing misses an instance whose tags changed).  An instance gone
     (terminated, or NotFound by id) skips the drain once its Node is not Ready: its pods cannot run any more (a Node
     still Ready is drained until it turns NotReady, as Karpenter's termination controller); a shutting-down one is
     drained unless this flow drained it already (Karpenter's cloudProvider.Get still finds it);
  2. terminate the instance, once per NodeClaim (the time is recorded; not a shutting-down one, as Karpenter's
     Delete); ``"terminating"`` until EC2 reports it terminated or NotFound -- while it is shutting down the record,
     the Node and the launch claim stay (it still counts against its NodePool's limits), as Karpenter's finalizers
     requeue until the cloud provider says NotFound;
  3. delete the Node and remove its ``karpenter.sh/termination`` finalizer (:data:`TERMINATION_FINALIZER`, put on
     every Node at registration: a ``kubectl delete node`` only marks it deleting, and the lifecycle sweep deletes
     its NodeClaim, which brings the deletion here), so the Node goes; then remove the record and release the launch
     claim (limits, pod nominations): ``"deleted"``.  The finalizer is removed before the record, so a failure in
     between is retried by the next call (the record names the Node) and no Node is left held by it.

* ``finalize_node(node, instance, errors=None) -> str`` -- a deleting Node that still has the finalizer and no
  NodeClaim (Karpenter's termination controller with none: its NodeClaim was removed some other way): released
  (finalizer removed) at once when its instance is gone and the Node is not Ready, else drained first -- taint,
  evictions in the four groups through PodDisruptionBudgets, no deadline (there is no NodeClaim, so no
  ``terminationGracePeriod``), nothing recorded -- and released once drained: ``"draining"`` or ``"released"``.
  Its instance is not terminated here (the lifecycle sweep's orphan garbage collection does that).

The drain's progress is kept on the NodeClaim record (``status.termination``, optimistic locking)::

    {"waitingFor": [replacement NodeClaim names], "startedAt": iso, "group": 0..3, "groupName": "non-critical",
     "evicted": {pod uid: iso}, "deleted": {pod uid: iso},
     "blocked": {pod uid: "PDB ns/name (429)" | "do-not-disrupt" | "API server throttling (429, Retry-After 5s)"},
     "drainedAt": iso, "instanceTerminatedAt": iso}

so a drain that outlasts one invocation resumes in the next.  A pod uid is never evicted twice nor deleted twice
(the record and the pod's deletionTimestamp are both checked).  A crash between any two steps leaves a deleting
NodeClaim that the next sweep finishes.
"""

from __future__ import annotations

import logging
from typing import Callable

from ..adapters.store.errors import NotFound
from ..api import labels as wk
from ..api.durations import DurationError, parse_duration
from ..api.kube import instance_id_of, is_terminating, node_ready, pod_key, pod_uid
from ..api.labels import (  # noqa: F401  (re-exported: interruption imports DELETION_REASON_ANNOTATION from here)
    DELETION_REASON_ANNOTATION,
    DISRUPTED_TAINT,
    EXCLUDE_LB_LABEL,
    has_disrupted_taint,
)
from ..api.times import format_time, to_epoch
from ..cloudprovider.instance import GONE_STATES, instance_gone, instance_state
from ..disruption import eviction
from ..disruption.pdb import selects
from . import runtime
from .cluster_state import as_dict

TERMINATION_STATUS = wk.TERMINATION_STATUS
# how long after its launch an instance may still be missing from DescribeInstances (EC2's eventual consistency):
# within it, a NodeClaim deleted before registration terminates its instance by id instead of trusting the miss
INVISIBLE_AFTER_LAUNCH_SECONDS = 120.0
log = logging.getLogger(__name__)


def _not_found(e: Exception) -> bool:
    return isinstance(e, NotFound)


USER_DELETED = "deleted by the user (karpenter-lambda delete nodeclaim)"   # the CLI's deletion reason
NODE_DELETED = "NodeDeleted"   # the reason of a NodeClaim whose Node was deleted (``kubectl delete node``)
TERMINATION_FINALIZER = wk.TERMINATION_FINALIZER
# deletions whose drain waits for the replacements launched ahead of it (``leaving.py``) to initialize, at most
# ``disruption_exec.REPLACEMENT_TIMEOUT`` after their launch and half the terminationGracePeriod at most: the
# instance is not going away on its own soon (an AWS Health scheduled change is days ahead), so the pods move once,
# onto a Ready node, instead of waiting Pending for it.  Beyond Karpenter, which drains these at once (its provisioner
# launches for the pods as they go).  A spot warning, a stop and a shutdown drain at once: the instance is going.
# An expiration with a terminationGracePeriod is deleted once its replacements are launched (disruption_exec.carry)
# and waits for them here; one without waits for them before its deletion (no deadline to keep).
HOLD_FOR_REPLACEMENTS = frozenset({"ScheduledChange", "RebalanceRecommendation", "NodePoolDeleted", USER_DELETED,
                                   NODE_DELETED, "Expired"})


def holds_for_replacements(reason: str | None) -> bool:
    """Does a deletion for ``reason`` (its ``deletion-reason`` annotation, ``"<Reason>: <detail>"`` or the bare
    reason) wait for its replacements (:data:`HOLD_FOR_REPLACEMENTS`)?"""
    return bool(reason) and reason.split(":", 1)[0] in HOLD_FOR_REPLACEMENTS


def user_deletion(reason: str | None) -> bool:
    """Was the deletion the user's: ``karpenter-lambda delete nodeclaim`` (as ``kubectl delete nodeclaim``) or a
    ``kubectl delete node`` (:data:`NODE_DELETED`)?  The lifecycle sweep launches capacity for its pods before the
    drain (``leaving.py``), as Karpenter's provisioner counts a deleting node's pods as pending."""
    return bool(reason) and (reason == USER_DELETED or reason.split(":", 1)[0] == NODE_DELETED)


# -- the Node's termination finalizer ------------------------------------------------------------------------------
# Merge patches for ``KubeClient.update_node`` (read, change, PATCH with the read's resourceVersion, 409: again), so
# a finalizer list another controller changed meanwhile is never overwritten.

def has_termination_finalizer(node: dict | None) -> bool:
    return TERMINATION_FINALIZER in (((node or {}).get("metadata") or {}).get("finalizers") or ())


def add_termination_finalizer(node: dict) -> dict | None:
    """The patch putting the finalizer on ``node`` (Karpenter's registration, ``syncNode``); None when it has it or
    is deleting (the API server takes no new finalizer on an object being deleted)."""
    meta = node.get("metadata") or {}
    if has_termination_finalizer(node) or meta.get("deletionTimestamp"):
        return None
    return {"metadata": {"finalizers": [*(meta.get("finalizers") or ()), TERMINATION_FINALIZER]}}


def remove_termination_finalizer(node: dict) -> dict | None:
    """The patch taking the finalizer off ``node``; None when it has none."""
    if not has_termination_finalizer(node):
        return None
    rest = [f for f in (node.get("metadata") or {}).get("finalizers") or () if f != TERMINATION_FINALIZER]
    return {"metadata": {"finalizers": rest or None}}


def with_termination_finalizer(change: Callable[[dict], dict | None]) -> Callable[[dict], dict | None]:
    """``change`` (an ``update_node`` change) that also puts the finalizer on the Node, in the same write."""
    def both(node: dict) -> dict | None:
        patch, add = change(node), add_termination_finalizer(node)
        if add is None or patch is None:
            return patch if add is None else add
        patch.setdefault("metadata", {}).update(add["metadata"])
        return patch
    return both


def request_deletion(store, name: str, reason: str, now: float, *, forceful: bool = False,
                     deadline: float | None = None):
    """Mark the NodeClaim ``name`` deleting, as the API server does an object with a finalizer (idempotent: an earlier
    timestamp and reason are kept); the lifecycle sweep then drains and terminates it.  ``forceful`` (node repair):
    Karpenter's ``karpenter.sh/nodeclaim-termination-timestamp`` is set to now, so the drain deletes the pods at once
    instead of evicting them (no PodDisruptionBudget is asked); ``deadline``: that annotation set to this time (an AWS
    Health scheduled change's start: the drain is over by then).  An earlier deadline stands.  The NodeClaim as
    stored, or None when it is gone."""
    until = now if forceful else deadline

    def mutate(obj):
        if not obj.metadata.get("deletionTimestamp"):
            obj.metadata["deletionTimestamp"] = format_time(now)
            obj.metadata.setdefault("annotations", {})[DELETION_REASON_ANNOTATION] = reason
        if until is not None:
            ann = obj.metadata.setdefault("annotations", {})
            stamped = to_epoch(ann.get(wk.NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION))
            if stamped is None or stamped > until:   # an earlier deadline stands
                ann[wk.NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION] = format_time(until)
        return obj

    try:
        return store.update("NodeClaim", name, mutate)
    except Exception as e:
        if _not_found(e):
            return None
        raise


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
        self.holds: list[dict] = []     # {nodeClaim, node, replacements}: drains held by this object (likewise)

    def request(self, nodeclaim, reason: str, *, forceful: bool = False, deadline: float | None = None):
        """Mark the NodeClaim deleting (:func:`request_deletion` at the controller's time)."""
        return request_deletion(self.store, nodeclaim.name, reason, self.clock(), forceful=forceful, deadline=deadline)

    # -- the steps ---------------------------------------------------------------------------------
    def _just_launched(self, nodeclaim) -> bool:
        c = nodeclaim.condition("Launched")
        at = to_epoch(c.get("lastTransitionTime")) if c and c.get("status") == "True" else None
        return at is not None and self.clock() - at < INVISIBLE_AFTER_LAUNCH_SECONDS

    def _terminate_once(self, nodeclaim, iid: str, errors: list[str] | None, terminate, note: str = "") -> bool:
        """Terminate the instance once per NodeClaim (recorded as ``instanceTerminatedAt``); False when the call
        failed (the error is listed, the step is retried).  A crash before the record leaves the instance
        shutting-down (or terminated), drained already: :meth:`finalize` waits for it without calling again."""
        term = nodeclaim.status.get(TERMINATION_STATUS) or {}
        if term.get(wk.INSTANCE_TERMINATED_AT):
            return True
        try:
            terminate([iid])
        except Exception as e:  # noqa: BLE001 - NotFound included: retried
            if errors is not None:
                errors.append(f"terminate {iid}: {e}")
            return False
        self._record(nodeclaim.name, {wk.INSTANCE_TERMINATED_AT: format_time(self.clock())})
        self.decide("terminate", f"terminating instance {iid} of NodeClaim {nodeclaim.name}{note}",
                    nodeclaim=nodeclaim.name, instanceId=iid)
        return True

    def _terminate_unseen(self, nodeclaim, iid: str, errors: list[str] | None) -> str:
        """A just-launched instance EC2 does not describe yet: terminate it by id (as Karpenter's Delete does) and
        keep the record until the visibility window has passed, so the instance is never left running unowned."""
        self._terminate_once(nodeclaim, iid, errors, getattr(self.cloud, "terminate_launched", self.cloud.terminate),
                             " (not described yet)")
        return "terminating"

    def finalize(self, nodeclaim, node: dict | None, instance: dict | None, errors: list[str] | None = None,
                 wait_for: list[str] | tuple = ()) -> str:
        """One idempotent step: ``"draining"`` (pods still to go), ``"terminating"`` (the instance is still shutting
        down, or a step failed and is retried) or ``"deleted"`` (Node and record gone).  ``wait_for``: replacements
        not yet Initialized that the drain waits for (:meth:`hold`; the caller decides which, see
        :data:`HOLD_FOR_REPLACEMENTS`)."""
        iid = instance_id_of(nodeclaim.status.get("providerID"))
        if iid and instance is None:
            # missing from the caller's listing (a tag-filtered list misses an instance whose karpenter.sh/nodeclaim
            # tag was removed; EC2's eventual consistency): ask by id, as Karpenter's cloudProvider.Get -- never a
            # skipped drain and a deleted record on a listing's word while the instance may still run
            instance = self._describe(iid, errors)
            if instance is None and not nodeclaim.is_true("Registered") and self._just_launched(nodeclaim):
                return self._terminate_unseen(nodeclaim, iid, errors)
        gone = not iid or instance_gone(instance)            # NotFound or terminated
        running = not gone and instance_state(instance) not in GONE_STATES
        drained = bool((nodeclaim.status.get(TERMINATION_STATUS) or {}).get("drainedAt"))
        # The drain is skipped once the instance is gone and its Node is no longer Ready (its pods cannot run any
        # more).  As Karpenter's termination controller: a Node still Ready has a running kubelet whatever EC2 says
        # (eventual consistency, or a Ready condition not yet expired), so it is drained until it turns NotReady.  A
        # shutting-down instance still exists (Karpenter's cloudProvider.Get finds it): its node is drained as any
        # other unless it was drained already (this flow drained it before TerminateInstances).
        if node is not None and (not gone or node_ready(node)) and (running or not drained):
            try:
                if running and wait_for and self.hold(nodeclaim, node, list(wait_for)):
                    return "draining"
                if self._drain(nodeclaim, node) != "drained":
                    return "draining"
            except Exception as e:
                if errors is not None:
                    errors.append(f"drain {node['metadata']['name']}: {e}")
                return "draining"
            nodeclaim = self.store.get("NodeClaim", nodeclaim.name) or nodeclaim
        if running:
            if not self._terminate_once(nodeclaim, iid, errors, self.cloud.terminate):
                return "terminating"
            instance = self._describe(iid, errors)
            gone = instance_gone(instance)
        if not gone:
            # shutting-down (or unknown): as Karpenter's finalizers, wait until EC2 reports it terminated or NotFound;
            # Node, record and launch claim (what the NodePool's limits count) stay until then.  No second
            # TerminateInstances (Karpenter's Delete skips a shutting-down instance too)
            return "terminating"
        if node is not None:
            name = node["metadata"]["name"]
            try:
                self.kube.delete_node(name)   # with the finalizer: marked deleting (done already by a kubectl delete)
            except Exception as e:
                if errors is not None:
                    errors.append(f"delete node {name}: {e}")
                return "terminating"
            if not self.release(name, errors):
                return "terminating"   # the Node is held by the finalizer: the record stays, the next call retries
            self.decide("delete-node", f"deleted node {name} of NodeClaim {nodeclaim.name}",
                        nodeclaim=nodeclaim.name, node=name)
        try:
            self.store.delete("NodeClaim", nodeclaim.name)
        except Exception as e:
            if not _not_found(e):
                raise
        if self.claims is not None:
            self.claims.release(nodeclaim.nodepool_name or nodeclaim.labels.get(wk.NODEPOOL, ""), nodeclaim.name)
        return "deleted"

    def release(self, name: str, errors: list[str] | None = None) -> bool:
        """Remove the termination finalizer from Node ``name`` (a deleting Node then goes); True when it no longer has
        it (or is gone), False when the write failed (listed in ``errors``)."""
        try:
            self.kube.update_node(name, remove_termination_finalizer)
        except Exception as e:  # noqa: BLE001 - retried by the next call
            if getattr(e, "status", None) == 404:   # gone between the read and the write
                return True
            if errors is not None:
                errors.append(f"remove finalizer {TERMINATION_FINALIZER} of node {name}: {e}")
            return False
        return True

    def finalize_node(self, node: dict, instance: dict | None, errors: list[str] | None = None) -> str:
        """One step for a deleting Node holding the finalizer without a NodeClaim (see the module doc):
        ``"draining"`` or ``"released"``."""
        name = node["metadata"]["name"]
        if not instance_gone(instance) or node_ready(node):
            # as Karpenter: skipped only once the instance is NotFound and the Node no longer Ready
            try:
                if self._drain_node(node) != "drained":
                    return "draining"
            except Exception as e:  # noqa: BLE001 - the next sweep tries again
                if errors is not None:
                    errors.append(f"drain {name}: {e}")
                return "draining"
        if not self.release(name, errors):
            return "draining"
        self.decide("release-node", f"removed finalizer {TERMINATION_FINALIZER} from deleting node {name}: it has "
                                    f"no NodeClaim", node=name)
        return "released"

    def _drain_node(self, node: dict) -> str:
        """One stateless pass of the drain of a Node without a NodeClaim (no deadline, nothing recorded: an evicted
        pod is terminating or gone, so it is not evicted twice)."""
        name = node["metadata"]["name"]
        if not has_disrupted_taint(node):
            self.kube.patch_node_taints(name, add=[dict(DISRUPTED_TAINT)])
            self.decide("taint", f"tainted node {name} {DISRUPTED_TAINT['key']}:{DISRUPTED_TAINT['effect']}", node=name)
        if ((node.get("metadata") or {}).get("labels") or {}).get(EXCLUDE_LB_LABEL) != "true":
            self.kube.patch_node_labels(name, {EXCLUDE_LB_LABEL: "true"})
        now = self.clock()
        for _ in range(len(eviction.GROUPS) + 1):   # pods that go at once let the next group start in this call
            step = eviction.next_step([as_dict(p) for p in self.kube.list_pods_on_node(name)], now, None)
            if step.done:
                self.decide("drained", f"node {name} drained", node=name)
                return "drained"
            evicted = 0
            for p in step.evict:
                ok, refusal = self.kube.evict(p["metadata"].get("namespace") or "default", p["metadata"]["name"])
                if ok:
                    evicted += 1
                    self.actions.append({"pod": pod_key(p), "node": name, "how": "eviction"})
                    self.decide("evict", f"evicted pod {pod_key(p)} from node {name} ({eviction.GROUPS[step.group]})",
                                pod=pod_key(p), node=name, group=step.group)
                    continue
                why = "API server throttling (429)" if refusal.startswith("throttled") else self._pdb_names(p) + " (429)"
                self.decide("evict-blocked", f"eviction of pod {pod_key(p)} from node {name} refused: {why}; retried "
                                             f"next time", pod=pod_key(p), node=name, reason=why)
                if refusal.startswith("throttled"):
                    return "draining"
            if not evicted:
                return "draining"
        return "draining"

    def _describe(self, iid: str, errors: list[str] | None) -> dict | None:
        try:
            return self.cloud.describe([iid]).get(iid)
        except Exception as e:   # unknown: treat as still there (the next call asks again)
            if errors is not None:
                errors.append(f"describe {iid}: {e}")
            return {"InstanceId": iid, "State": {"Name": "unknown"}}

    # -- the drain ---------------------------------------------------------------------------------
    def _record(self, name: str, patch: dict) -> None:
        """Merge ``patch`` into the NodeClaim's ``status.termination`` (maps merge one level deep, except
        ``blocked``, which is replaced: it says what blocks the drain now)."""
        def mutate(obj):
            cur = dict(obj.status.get(TERMINATION_STATUS) or {})
            for k, v in patch.items():
                if k == "startedAt" and cur.get(k):
                    continue
                cur[k] = {**(cur.get(k) or {}), **v} if isinstance(v, dict) and k != "blocked" else v
            obj.status[TERMINATION_STATUS] = cur
            return obj

        try:
            self.store.update("NodeClaim", name, mutate)
        except Exception as e:
            if not _not_found(e):
                raise

    def deadline(self, nodeclaim) -> float | None:
        """deletionTimestamp + ``spec.terminationGracePeriod``, or the NodeClaim's
        ``karpenter.sh/nodeclaim-termination-timestamp`` when earlier; None (wait forever) without either."""
        stamped = to_epoch((nodeclaim.annotations or {}).get(wk.NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION))
        tgp = nodeclaim.spec.get("terminationGracePeriod")
        start = to_epoch(nodeclaim.metadata.get("deletionTimestamp"))
        if not tgp or start is None:
            return stamped
        try:
            by_grace = start + parse_duration(tgp)
        except DurationError:
            return stamped
        return by_grace if stamped is None else min(by_grace, stamped)

    def hold(self, nodeclaim, node: dict, waiting: list[str]) -> bool:
        """Keep the drain from starting while the replacements in ``waiting`` initialize: the node is tainted (no new
        pod lands on it) and ``status.termination.waitingFor`` names them.  False (drain now) once the drain has
        started, or half the time to the ``terminationGracePeriod`` deadline has gone: the hold leaves the drain at
        least the other half, so its pods are still evicted (PodDisruptionBudgets asked), not deleted at the deadline."""
        term = nodeclaim.status.get(TERMINATION_STATUS) or {}
        if term.get("startedAt"):
            return False
        deadline = self.deadline(nodeclaim)
        if deadline is not None:
            start = to_epoch(nodeclaim.metadata.get("deletionTimestamp"))
            if start is None or self.clock() >= start + (deadline - start) / 2:
                return False
        name = node["metadata"]["name"]
        self._taint(nodeclaim, node)
        waiting = sorted(waiting)
        self.holds.append({"nodeClaim": nodeclaim.name, "node": name, "replacements": waiting})
        if sorted(term.get("waitingFor") or ()) != waiting:
            self._record(nodeclaim.name, {"waitingFor": waiting})
            self.decide("drain-held", f"drain of node {name} waits for replacement(s) {', '.join(waiting)} "
                                      f"to initialize", nodeclaim=nodeclaim.name, node=name, replacements=waiting)
        return True

    def _taint(self, nodeclaim, node: dict) -> None:
        """The disrupted taint on ``node`` (as read), unless it has it."""
        if not has_disrupted_taint(node):
            name = node["metadata"]["name"]
            self.kube.patch_node_taints(name, add=[dict(DISRUPTED_TAINT)])
            self.decide("taint", f"tainted node {name} {DISRUPTED_TAINT['key']}:{DISRUPTED_TAINT['effect']}",
                        nodeclaim=nodeclaim.name, node=name)

    def drain(self, nodeclaim, node: dict) -> str:
        """One drain step now ("draining" | "drained"), for a deletion already requested; the instance and the
        records are left to :meth:`finalize` (the interruption handler starts a spot node's drain at the warning)."""
        if not nodeclaim.metadata.get("deletionTimestamp"):
            raise ValueError(f"NodeClaim {nodeclaim.name}: drain before its deletion was requested")
        return self._drain(nodeclaim, node)

    def _drain(self, nodeclaim, node: dict) -> str:
        """One pass of the drain: ``"drained"`` when no pod is left to wait for, else ``"draining"``."""
        name = node["metadata"]["name"]
        now = self.clock()
        term = nodeclaim.status.get(TERMINATION_STATUS) or {}
        self._taint(nodeclaim, node)
        if ((node.get("metadata") or {}).get("labels") or {}).get(EXCLUDE_LB_LABEL) != "true":
            self.kube.patch_node_labels(name, {EXCLUDE_LB_LABEL: "true"})
        if not term.get("startedAt"):
            self._record(nodeclaim.name, {"startedAt": format_time(now)})
        deleted: set[str] = set(term.get("deleted") or {})
        evicted: set[str] = set(term.get("evicted") or {})
        old_blocked: dict = dict(term.get("blocked") or {})
        deadline = self.deadline(nodeclaim)
        prev_group = None
        for _ in range(len(eviction.GROUPS) + 1):   # pods that go at once let the next group start in this call
            pods = [as_dict(p) for p in self.kube.list_pods_on_node(name)]
            step = eviction.next_step(pods, now, deadline, deleted=deleted, evicted=evicted, lead=eviction.DELETE_LEAD)
            if step.done:
                self._record(nodeclaim.name, {"drainedAt": format_time(now), "blocked": {}})
                self.decide("drained", f"node {name} drained", nodeclaim=nodeclaim.name, node=name)
                return "drained"
            patch: dict = {"group": step.group, "groupName": eviction.GROUPS[step.group], "evicted": {}, "deleted": {},
                           "blocked": dict(step.blocked)}
            for uid, why in step.blocked.items():
                if old_blocked.get(uid) != why:
                    pod = next(p for p in step.waiting if pod_uid(p) == uid)
                    self.decide("evict-blocked", f"pod {pod_key(pod)} on node {name} not evicted: {why}",
                                nodeclaim=nodeclaim.name, pod=pod_key(pod), reason=why)
            if step.group == prev_group or not (step.evict or step.delete):
                present = {pod_uid(p) for p in step.evict + step.waiting}
                # a PDB's 429 is only known from the eviction call: keep it for the pods still waiting
                patch["blocked"] = {**{u: w for u, w in old_blocked.items() if u in present}, **step.blocked}
                self._record(nodeclaim.name, patch)
                return "draining"
            prev_group = step.group
            try:
                self._act(nodeclaim, name, step, now, deadline, patch)
            finally:   # what was done is recorded even when a later call fails
                self._record(nodeclaim.name, patch)
            deleted.update(patch["deleted"])
            evicted.update(patch["evicted"])
            old_blocked = patch["blocked"]
        return "draining"

    def _pdb_names(self, pod: dict) -> str:
        """The PodDisruptionBudgets selecting ``pod`` (for the record; best effort)."""
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        try:
            names = [f"{ns}/{(b.get('metadata') or {}).get('name')}" for b in map(as_dict, self.kube.list_pdbs(ns))
                     if selects(b, pod)]
        except Exception:
            names = []
        return "PDB " + ", ".join(names) if names else "PodDisruptionBudget"

    def _act(self, nodeclaim, name: str, step, now: float, deadline: float | None, patch: dict) -> None:
        for p in step.delete:
            ns, pn = (p["metadata"].get("namespace") or "default"), p["metadata"]["name"]
            # as Karpenter: the pod's grace is clamped to what is left of the node's, never below 1 s
            grace = eviction.deadline_grace(p, now, deadline)
            self.kube.delete_pod(ns, pn, grace_period_seconds=grace)
            patch["deleted"][pod_uid(p)] = format_time(now)
            patch["blocked"].pop(pod_uid(p), None)
            self.actions.append({"pod": pod_key(p), "node": name, "how": "deleted at the terminationGracePeriod deadline"})
            self.decide("delete-pod", f"deleted pod {pod_key(p)} on node {name}: terminationGracePeriod deadline",
                        nodeclaim=nodeclaim.name, pod=pod_key(p), node=name)
        for p in step.evict:
            ns, pn = (p["metadata"].get("namespace") or "default"), p["metadata"]["name"]
            if is_terminating(p):
                continue
            ok, refusal = self.kube.evict(ns, pn)   # a PDB refusal and API-server throttling told apart
            if not ok and refusal.startswith("throttled"):
                # API Priority and Fairness: the API server is busy, the pod's PDBs were not even asked
                why = f"API server throttling (429{refusal[len('throttled'):].replace(' Retry-After', ', Retry-After')})"
                for q in step.evict[step.evict.index(p):]:
                    if not is_terminating(q):
                        patch["blocked"][pod_uid(q)] = why
                self.decide("evict-throttled", f"eviction of pod {pod_key(p)} from node {name} throttled by the API "
                                               f"server ({why}); the drain resumes next time",
                            nodeclaim=nodeclaim.name, pod=pod_key(p), node=name, reason=why)
                return
            if ok:
                patch["evicted"][pod_uid(p)] = format_time(now)
                self.actions.append({"pod": pod_key(p), "node": name, "how": "eviction"})
                self.decide("evict", f"evicted pod {pod_key(p)} from node {name} ({eviction.GROUPS[step.group]})",
                            nodeclaim=nodeclaim.name, pod=pod_key(p), node=name, group=step.group)
            else:
                why = self._pdb_names(p) + " (429)"
                patch["blocked"][pod_uid(p)] = why
                self.decide("evict-blocked", f"eviction of pod {pod_key(p)} refused by {why}; retried next time",
                            nodeclaim=nodeclaim.name, pod=pod_key(p), node=name, reason=why)
