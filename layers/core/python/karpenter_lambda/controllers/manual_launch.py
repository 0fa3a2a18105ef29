"""Manual NodeClaims (:mod:`.manual_nodeclaims`), launched by the lifecycle sweep: Karpenter's NodeClaim lifecycle
controller launches any NodeClaim whose ``nodeClassRef`` it manages (kubernetes-sigs/karpenter v1.14
``pkg/controllers/nodeclaim/lifecycle/launch.go``), and so does :func:`sweep`, called by
:meth:`.lifecycle.Lifecycle._reconcile` for every NodeClaim not being deleted.

A manual NodeClaim without providerID, in this order:

1. **adopted** when this deployment's live instance tagged ``karpenter.sh/nodeclaim=<its name>`` exists (a sweep died
   between CreateFleet and writing the providerID): written on it, never launched again (the lifecycle's adoption);
2. **left alone** while another sweep's attempt holds it (Launched ``Unknown``/``Launching`` less than
   :data:`~.launcher.LAUNCH_LEASE` ago);
3. else **launched**: its EC2NodeClass resolved, the instance types it may launch as
   (:func:`~.manual_nodeclaims.launch_options`), its NodePool's launch claim when it is labelled with one (counted in
   the NodePool's usage, the limits not checked: Karpenter's launch checks none), then **taken** by a conditional
   store update (the ``karpenter.sh/termination`` finalizer, the EC2NodeClass hash, the launch token, Launched
   ``Unknown``/``Launching``: two sweeps never launch it together), then CreateFleet through the cloud provider (its
   ClientToken from the launch token: an attempt whose outcome is unknown -- a crash, a timeout -- is relaunched with
   the same token, after adoption found nothing), then marked Launched as the launcher marks any launch.

As Karpenter on a failed launch: insufficient capacity (no instance type left: :func:`launch_options`' reason, or
every offering refused by EC2), an EC2NodeClass that does not exist (upstream treats it as insufficient capacity) or
is not ready -> Launched ``False`` with the reason, and the NodeClaim is deleted (``InsufficientCapacity: ...``,
``NodeClassNotReady: ...``); any other failure (EC2 refused or throttled the request, the EC2NodeClass or the
catalog could not be read for a transient reason) -> Launched ``Unknown`` with the reason, retried by the next
sweeps, deleted once it has not launched 5 minutes after its creation (Karpenter's ``LaunchTimeout``).  A
``nodeClassRef`` that is not an EC2NodeClass is another provider's: left alone (Karpenter's ``IsManaged``).

A launched manual NodeClaim of no NodePool (no ``karpenter.sh/nodepool`` label) is no disruption candidate (Karpenter's
need a NodePool), but it still **expires**: once older than its ``spec.expireAfter`` its deletion is requested
(Karpenter's expiration controller reads the NodeClaim alone), a ``disrupted`` entry of the report with reason
``Expired``.  One of a NodePool expires through the drift sweep's expiration, from its own ``expireAfter`` too.
"""

from __future__ import annotations

from ..adapters.store.errors import NotFound
from ..api import hashes
from ..api import labels as wk
from ..api.conditions import make_condition, set_condition
from ..api.durations import DurationError, parse_duration, parse_nillable_duration
from ..api.labels import LAUNCH_TOKEN_ANNOTATION
from ..api.times import to_epoch
from ..cloudprovider.types import CreateRequest, LaunchFailed, NoCapacity
from ..disruption.types import EXPIRED
from ..scheduling.inputs import claim_request, limits_of
from .launcher import LAUNCH_LEASE, LAUNCHING, OUTCOME_UNKNOWN, Launcher, launch_token
from .manual_nodeclaims import (is_manual, launch_options, launch_plan, nodeclass_name, nodeclass_ref_problem,
                                nodepool_view)
from .transient import is_transient

#: Karpenter's ``LaunchTimeout`` (``lifecycle.LAUNCH_TIMEOUT``, the provisioner's backstop, is the same 5 minutes)
LAUNCH_TIMEOUT = 5 * 60
INSUFFICIENT_CAPACITY = "InsufficientCapacity"
NODECLASS_NOT_READY = "NodeClassNotReady"
NODECLASS_READINESS_UNKNOWN = "NodeClassReadinessUnknown"
NODECLASS_NOT_MANAGED = "NodeClassNotManaged"
LAUNCH_FAILED = "LaunchFailed"


class _Taken(Exception):
    """The NodeClaim is launched, deleting, or being launched by another sweep."""


def in_flight(nc, now: float) -> bool:
    """Another sweep's launch attempt holds the NodeClaim: Launched ``Unknown``/``Launching`` less than
    :data:`LAUNCH_LEASE` ago (a sweep that died at CreateFleet holds it no longer)."""
    cond = nc.condition("Launched") or {}
    if cond.get("status") != "Unknown" or cond.get("reason") != LAUNCHING:
        return False
    since = to_epoch(cond.get("lastTransitionTime"))
    return since is not None and now - since < LAUNCH_LEASE


def sweep(lc, nc, np, node_by_provider: dict, instances: dict, now: float, report) -> bool:
    """The lifecycle sweep's step for ``nc`` when it is a manual NodeClaim (see the module doc); ``lc`` is the
    :class:`~.lifecycle.Lifecycle`.  True when the sweep is done with ``nc`` for now."""
    if not is_manual(nc) or nc.metadata.get("deletionTimestamp"):
        return False
    if nc.status.get("providerID"):
        return _expire(lc, nc, now, report)
    if lc._adopt(nc, np, instances, now, report):   # launched, never recorded: adopted, never launched twice
        return True
    if in_flight(nc, now):
        return True
    ManualLaunch(lc, now, report).run(nc, np)
    return True


class ManualLaunch:
    def __init__(self, lc, now: float, report):
        self.lc, self.now, self.report = lc, now, report
        self.store, self.cloud = lc.store, lc.cloud

    def run(self, nc, np) -> None:
        problem = nodeclass_ref_problem(nc)
        if problem:
            self._condition(nc.name, "Unknown", NODECLASS_NOT_MANAGED, problem, only_if_changed=True)
            return
        ref = nodeclass_name(nc)
        nodeclass = self.store.get("EC2NodeClass", ref)
        if nodeclass is None:   # upstream: "resolving nodeclass" NotFound is an insufficient capacity error
            self._fail(nc, INSUFFICIENT_CAPACITY, f"resolving EC2NodeClass {ref!r}: not found")
            return
        try:
            resolved, problem = self.cloud.resolve(nodeclass)
        except Exception as e:  # noqa: BLE001
            resolved, problem = None, str(e)
        if resolved is None and problem and is_transient(problem):
            self._retry(nc, NODECLASS_READINESS_UNKNOWN, f"EC2NodeClass {ref} could not be resolved: {problem}")
            return
        if resolved is None or problem:
            self._fail(nc, NODECLASS_NOT_READY, f"EC2NodeClass {ref} is not ready: {problem or 'not resolved'}")
            return
        try:
            types = self.cloud.instance_types(nodeclass, resolved, self.cloud.unavailable_offerings())
        except Exception as e:  # noqa: BLE001 - the catalog could not be read: the next sweep tries again
            self._retry(nc, "InstanceTypeResolutionFailed", f"resolving the instance types of EC2NodeClass {ref}: {e}")
            return
        options = launch_options(nc, types)
        if options.why:
            self._fail(nc, INSUFFICIENT_CAPACITY, options.why)
            return
        plan = launch_plan(nc, options)
        if not self._claim(nc, np, plan):
            return
        taken = self._take(nc, nodeclass, len(options.types))
        if taken is None:
            return
        self._create(taken, plan, nodeclass, resolved)

    # -- the steps -------------------------------------------------------------------------------------------
    def _claim(self, nc, np, plan) -> bool:
        """A NodeClaim labelled with a NodePool counts in its usage (a launch claim without pods, no limit checked);
        released with the NodeClaim.  False (retried) when the claim could not be written."""
        claims = self.lc.claims
        if claims is None or np is None or not nc.nodepool_name:
            return True
        try:
            out = claims.commit(np.name, nc.name, claim_request(plan, limits_of(np)), {}, [])
        except Exception as e:  # noqa: BLE001
            self._retry(nc, LAUNCH_FAILED, f"launch claim in NodePool {np.name}: {e}")
            return False
        if out.ok or out.duplicate:   # duplicate: an earlier attempt's claim
            return True
        self._retry(nc, LAUNCH_FAILED, f"launch claim in NodePool {np.name}: {out.message or 'refused'}")
        return False

    def _take(self, nc, nodeclass, n_types: int):
        """The NodeClaim taken for this attempt by a conditional update (see the module doc); None when another
        sweep has it, it launched or it is gone."""
        now = self.now

        def mutate(obj):
            if obj.status.get("providerID") or obj.metadata.get("deletionTimestamp") or in_flight(obj, now):
                raise _Taken(obj.name)
            cond = obj.condition("Launched") or {}
            ann = obj.metadata.setdefault("annotations", {})
            # an attempt whose outcome is unknown (a crash, a timeout) is repeated with its token: EC2 answers a launch
            # that did happen with its instance; after a known failure, a new one
            if not (cond.get("reason") in (LAUNCHING, OUTCOME_UNKNOWN) and ann.get(LAUNCH_TOKEN_ANNOTATION)):
                ann[LAUNCH_TOKEN_ANNOTATION] = launch_token(obj.name, now)
            ann[wk.NODECLASS_HASH] = hashes.ec2nodeclass_hash(nodeclass)   # upstream's Create stamps it too
            ann[wk.NODECLASS_HASH_VERSION] = hashes.EC2NODECLASS_HASH_VERSION
            finalizers = obj.metadata.setdefault("finalizers", [])
            if wk.TERMINATION_FINALIZER not in finalizers:   # upstream adds it before any launch
                finalizers.append(wk.TERMINATION_FINALIZER)
            set_condition(obj.status, make_condition("Launched", "Unknown", LAUNCHING,
                                                     f"launching: {n_types} instance types", now))
            return obj

        try:
            return self.store.update("NodeClaim", nc.name, mutate)
        except (_Taken, NotFound):
            return None

    def _create(self, nc, plan, nodeclass, resolved) -> None:
        name = nc.name
        request = CreateRequest(name=name, plan=plan, nodepool=nodepool_view(nc), nodeclass=nodeclass,
                                resolved=resolved, labels=dict(nc.labels),
                                client_token=nc.annotations.get(LAUNCH_TOKEN_ANNOTATION))

        def on_retry(message: str, unavailable: list) -> None:
            self.lc._decision("insufficient-capacity", f"NodeClaim {name}: {message}; retrying with the remaining "
                                                       f"offerings", nodeclaim=name, unavailable=unavailable)

        try:
            inst = self.cloud.create(request, on_retry)
        except NoCapacity as e:
            self._fail(nc, INSUFFICIENT_CAPACITY, str(e))
            return
        except LaunchFailed as e:   # EC2 answered (or throttled): nothing launched
            self._retry(nc, LAUNCH_FAILED, str(e))
            return
        except Exception as e:  # noqa: BLE001 - maybe launched: adopted, or relaunched with the same token, next sweep
            self._condition(name, "Unknown", OUTCOME_UNKNOWN, f"launch outcome unknown: {e}")
            self.report.errors.append(f"NodeClaim {name}: launch outcome unknown ({e}); the next sweep adopts the "
                                      f"instance tagged for it or launches it again with the same ClientToken")
            self.lc._decision("launch-unknown", f"NodeClaim {name}: launch outcome unknown ({e})", nodeclaim=name)
            return
        it = next((t for t in plan.instance_types if t.name == inst.instance_type), None)
        try:
            Launcher(self.store, self.lc.claims, self.cloud, self.lc.clock, self.lc._decision).mark_launched(
                name, nc.nodepool_name, inst, it)
        except Exception as e:  # noqa: BLE001 - the instance runs: the next sweep adopts it
            self.report.errors.append(f"NodeClaim {name}: instance {inst.instance_id} launched but not recorded "
                                      f"({e}); the next sweep adopts it")
            self.lc._decision("launch-unrecorded", f"NodeClaim {name}: instance {inst.instance_id} launched but not "
                                                   f"recorded ({e})", nodeclaim=name, instanceId=inst.instance_id)
            return
        self.report.resolved.append({"nodeClaim": name, "outcome": "launched", "detail": inst.instance_id,
                                     "manual": True})
        self.lc._decision("launch", f"manual NodeClaim {name}: launched {inst.instance_type} {inst.capacity_type} in "
                                    f"{inst.zone} ({inst.instance_id}) of {len(plan.instance_types)} instance types",
                          nodeclaim=name, instanceId=inst.instance_id, instanceType=inst.instance_type,
                          zone=inst.zone, capacityType=inst.capacity_type)

    # -- outcomes ---------------------------------------------------------------------------------------------
    def _condition(self, name: str, status: str, reason: str, message: str, only_if_changed: bool = False) -> None:
        """Launched ``status`` with ``reason`` and ``message`` (best effort; never over a launch recorded meanwhile)."""
        message = message[:512]

        def mutate(obj):
            if obj.status.get("providerID"):
                return obj
            cur = obj.condition("Launched") or {}
            if only_if_changed and (cur.get("status"), cur.get("reason"), cur.get("message")) == (status, reason, message):
                return obj
            set_condition(obj.status, make_condition("Launched", status, reason, message, self.now))
            return obj

        try:
            self.store.update("NodeClaim", name, mutate)
        except Exception as e:  # noqa: BLE001 - a status only: the outcome stands
            self.report.errors.append(f"NodeClaim {name}: Launched condition not written: {e}")

    def _fail(self, nc, reason: str, message: str) -> None:
        """Karpenter's insufficient capacity and NodeClassNotReady: the NodeClaim is deleted (a reason recorded)."""
        self._condition(nc.name, "False", reason, message)
        fresh = self.store.get("NodeClaim", nc.name)
        if fresh is None or fresh.status.get("providerID"):
            return
        self.lc._decision("launch-failed", f"manual NodeClaim {nc.name} not launched: {reason}: {message}; deleted, as "
                                           f"Karpenter deletes it", nodeclaim=nc.name, reason=reason)
        self.lc._delete_nodeclaim(fresh, f"{reason}: {message}", self.report)

    def _retry(self, nc, reason: str, message: str) -> None:
        """Any other failure: Launched ``Unknown`` with the reason, retried by the next sweep until
        :data:`LAUNCH_TIMEOUT` after the NodeClaim's creation, then deleted."""
        self._condition(nc.name, "Unknown", reason, message)
        self.report.errors.append(f"NodeClaim {nc.name}: not launched: {reason}: {message}")
        created = to_epoch(nc.metadata.get("creationTimestamp"))
        if created is not None and self.now - created >= LAUNCH_TIMEOUT:
            fresh = self.store.get("NodeClaim", nc.name)
            if fresh is not None and not fresh.status.get("providerID"):
                self.lc._delete_nodeclaim(fresh, f"launch did not complete within {LAUNCH_TIMEOUT // 60}m: {reason}: "
                                                 f"{message}", self.report)
            return
        self.lc._decision("launch-retry", f"manual NodeClaim {nc.name} not launched: {reason}: {message}; retried by "
                                          f"the next sweep", nodeclaim=nc.name, reason=reason)


def _expire(lc, nc, now: float, report) -> bool:
    """A launched manual NodeClaim of no NodePool older than its ``expireAfter``: its deletion requested (drained as
    any, up to its ``terminationGracePeriod`` after the expiry).  True when requested."""
    if nc.nodepool_name:
        return False   # a NodePool's NodeClaim: the drift sweep's expiration (disruption/expiration.py)
    text = nc.spec.get("expireAfter") or "720h"
    try:
        ttl = parse_nillable_duration(text)
    except DurationError:
        return False
    born = to_epoch(nc.metadata.get("creationTimestamp"))
    if ttl is None or born is None or now < born + ttl:
        return False
    deadline = None
    if nc.spec.get("terminationGracePeriod"):
        try:
            deadline = born + ttl + parse_duration(nc.spec["terminationGracePeriod"])
        except DurationError:
            deadline = None
    lc.terminator.request(nc, f"{EXPIRED}: older than its expireAfter {text} (a manual NodeClaim of no NodePool)",
                          deadline=deadline)
    labels = nc.labels
    report.disrupted.append({
        "nodeClaim": nc.name, "reason": EXPIRED, "nodePool": None, "node": nc.status.get("nodeName"),
        "instanceType": labels.get(wk.INSTANCE_TYPE), "zone": labels.get(wk.ZONE),
        "capacityType": labels.get(wk.CAPACITY_TYPE), "replacements": [], "savingsPerHour": 0.0,
        "detail": f"expireAfter {text}"})
    lc._decision("expire", f"manual NodeClaim {nc.name} expired (expireAfter {text}): deletion requested",
                 nodeclaim=nc.name)
    return True
