"""The launcher: one ``NodeClaimPlan`` -> a NodeClaim record + an instance.  Provisioning, disruption replacements
and interruption all launch through it.

``Launcher(store, claims, cloud, clock, decide).launch(plan, nodepool, nodeclass, resolved, pods) -> LaunchOutcome``:

1. **commit** -- one DynamoDB transaction (:mod:`.claims`): the NodePool usage within its limits + a reservation
   of each pod (the same plan delivered twice is refused: ``duplicate``; limits reached: ``limit``; pods
   nominated elsewhere meanwhile: ``taken``).  ``takeover`` names pods whose old nomination no longer holds
   (:func:`karpenter_lambda.scheduling.inputs.held_reservations`), which may be moved to this NodeClaim.
   (:meth:`Launcher.nominate` reserves, under the same conditions, pods a round placed on an in-flight NodeClaim.)
2. **record** -- the NodeClaim (finalizer ``karpenter.sh/termination``) stamped with what drift compares later:
   ``karpenter.sh/nodepool-hash`` (+ version), ``karpenter.k8s.aws/ec2nodeclass-hash`` (+ version), and the
   launch token (``karpenter-lambda.io/launch-token``: unique per launch attempt, written before CreateFleet, its
   ClientToken); after the launch its ``status.imageID``, and the subnet and security groups as annotations.
   The provisioner's names are the NodePool + a hash of the pods, of the nominations taken over and of the
   attempt's time: a re-plan of the same pods never reuses the name of an instance that may still live.
   (Idempotency of a redelivered message is the pod reservations' job in step 1, not the name's.)
3. **create** -- the cloud provider's launch (CreateFleet with insufficient-capacity fallback).
4. **mark launched** -- labels of the chosen type/zone/capacity, price, providerID, capacity/allocatable, the
   ``Launched`` condition; the usage claim shrunk to what was really launched.

Failures: only when the cloud provider says nothing was launched (:class:`NoCapacity`, :class:`LaunchFailed`)
are the record and the claim rolled back.  Any other error (a timeout, a crash after CreateFleet) and a failure
to mark the record Launched leave the record as it is: the lifecycle sweep adopts the instance tagged for it
(:mod:`.lifecycle`), or deletes the record after 5 minutes when there is none.  An instance that launched is
never rolled back.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Callable

from ..adapters.store.errors import AlreadyExists
from ..api import hashes
from ..api import labels as wk
from ..api.conditions import make_condition, set_condition
from ..api.kube import pod_key, pod_uid, provider_id
from ..api.times import to_epoch
from ..api.labels import (  # noqa: F401  (NOMINATED_PODS_ANNOTATION re-exported: provision, the simulator)
    LAUNCH_TOKEN_ANNOTATION,
    NOMINATED_PODS_ANNOTATION,
    NOMINATED_UIDS_ANNOTATION,
    PRICE_ANNOTATION,
    SECURITY_GROUPS_ANNOTATION,
    SUBNET_ANNOTATION,
)
from ..api.objects import NodeClaim
from ..api.quantity import format_resource, parse_resource_list
from ..catalog.types import launched_resources
from ..cloudprovider.instance import GONE_STATES, instance_state
from ..cloudprovider.types import CreateRequest, LaunchFailed, NoCapacity
from ..scheduling.inputs import claim_request, limits_of
from ..scheduling.model import NodeClaimPlan
from ..scheduling.requirements import Requirements
from . import runtime
from .manual_nodeclaims import is_manual

log = logging.getLogger(__name__)

# A NodeClaim without providerID whose launch is older than this has no live launcher: no single launch (launch
# templates, CreateFleet with its ICE fallback and botocore's retries) takes that long, and it is the provisioner's
# Lambda timeout.  Its outcome is resolved by the next provisioning round (:meth:`Launcher.resolve`); one marked
# ``LaunchOutcomeUnknown`` by a launcher that survived the error is resolved at once.
LAUNCH_LEASE = 120.0
LAUNCHING, OUTCOME_UNKNOWN, RELAUNCHING = "Launching", "LaunchOutcomeUnknown", "Relaunching"


class _NotResolvable(Exception):
    """The NodeClaim is launched, deleting, or being launched by a live launcher."""


def launch_pending(nc, now: float) -> bool:
    """A NodeClaim whose launch must be resolved now: no providerID, not deleting, and its outcome unknown or its
    launcher's lease (:data:`LAUNCH_LEASE` since the last launch attempt) over.  Never a manual NodeClaim
    (:mod:`.manual_nodeclaims`): the lifecycle sweep launches, adopts and relaunches those (:mod:`.manual_launch`)."""
    if nc.status.get("providerID") or nc.metadata.get("deletionTimestamp"):
        return False
    if is_manual(nc):   # a manual NodeClaim's launch is the lifecycle sweep's alone (manual_launch.py)
        return False
    cond = nc.condition("Launched") or {}
    if cond.get("status") == "True":
        return False
    if cond.get("reason") == OUTCOME_UNKNOWN:
        return True
    since = to_epoch(cond.get("lastTransitionTime")) or to_epoch(nc.metadata.get("creationTimestamp")) or now
    return now - since >= LAUNCH_LEASE


class Throttled(RuntimeError):
    """EC2 throttled a launch: nothing launched, nothing marked unavailable.  The provisioner raises it so the SQS
    records fail and are redelivered later (the pods' reservations were released with the NodeClaim)."""


@dataclass
class Launched:
    nodeclaim: str
    nodepool: str
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    image_id: str | None
    pods: list[str]

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class LaunchOutcome:
    name: str
    launched: Launched | None = None
    duplicate: bool = False              # a previous delivery already made this NodeClaim
    limit: str | None = None             # the NodePool's limits refused it (message)
    taken: list[str] = field(default_factory=list)  # pod uids nominated by another NodeClaim meanwhile
    failed: str | None = None            # nothing launched: why
    error: str | None = None             # an unexpected error (also in ``failed``)
    throttled: bool = False              # EC2 throttled the launch: nothing launched, retry later


def nodeclaim_name(nodepool: str, pod_uids: list[str], previous: list[str] | tuple = (), attempt: str | None = None) -> str:
    """The NodePool name + a hash of the pods the NodeClaim was made for, of the NodeClaims whose nominations of
    those pods no longer hold and of ``attempt`` (the launcher passes the launch time,
    :func:`~karpenter_lambda.controllers.runtime.attempt_stamp`, so a later re-plan of the same pods gets a new name
    even while an instance tagged with the old one still lives; on the simulator's virtual clock it is the time since
    the run's start, so runs stay reproducible).  Without ``attempt``: deterministic in the pods and ``previous``."""
    text = "\n".join(sorted(pod_uids))
    if previous:
        text += "\nafter:" + ",".join(sorted(set(previous)))
    if attempt:
        text += "\nattempt:" + attempt
    h = hashlib.sha256(text.encode()).hexdigest()[:10]
    return f"{nodepool}-{h}"[:63]


def launch_token(name: str, now: float) -> str:
    """Unique per launch attempt (the NodeClaim and the time it was written): the CreateFleet ClientToken base."""
    return hashlib.sha256(f"{name}\n{runtime.attempt_stamp(now)}".encode()).hexdigest()[:24]


def drift_stamps(nodepool, nodeclass) -> dict[str, str]:
    """The annotations a NodeClaim carries from launch so drift can compare them with the current objects."""
    return {
        wk.NODEPOOL_HASH: hashes.nodepool_hash(nodepool),
        wk.NODEPOOL_HASH_VERSION: hashes.NODEPOOL_HASH_VERSION,
        wk.NODECLASS_HASH: hashes.ec2nodeclass_hash(nodeclass),
        wk.NODECLASS_HASH_VERSION: hashes.EC2NODECLASS_HASH_VERSION,
    }


def nodeclaim_doc(name: str, plan, nodepool, nodeclass, keys: list[str], uids: list[str], now: float,
                  annotations: dict | None = None) -> dict:
    labels = dict(nodepool.template_labels)
    try:
        labels.update({k: v for k, v in plan.requirements.node_labels().items() if not k.startswith(wk.AWS) or k in wk.AWS_WELL_KNOWN})
    except Exception:
        pass
    labels[wk.NODEPOOL] = nodepool.name
    labels[wk.EC2NODECLASS] = nodeclass.name
    reqs = plan.requirements.to_list() if hasattr(plan.requirements, "to_list") else list(plan.requirements or [])
    reqs = [r for r in reqs if r.get("key") != wk.INSTANCE_TYPE]
    reqs.append({"key": wk.INSTANCE_TYPE, "operator": "In", "values": [it.name for it in plan.instance_types]})
    tspec = nodepool.template_spec
    spec = {
        "nodeClassRef": dict(nodepool.node_class_ref),
        "requirements": reqs,
        "resources": {"requests": {k: format_resource(k, v) for k, v in sorted((plan.requests or {}).items())}},
        "expireAfter": nodepool.expire_after,
    }
    for f in ("taints", "startupTaints", "terminationGracePeriod"):
        if tspec.get(f):
            spec[f] = tspec[f]
    ann = dict(nodepool.template_annotations)
    ann.update(drift_stamps(nodepool, nodeclass))
    if callable(getattr(plan, "annotations", None)):   # karpenter.sh/nodeclaim-min-values-relaxed (minValues policy)
        ann.update(plan.annotations())
    ann[NOMINATED_PODS_ANNOTATION] = json.dumps(keys)
    ann[NOMINATED_UIDS_ANNOTATION] = json.dumps(uids)
    ann.update(annotations or {})
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": labels, "annotations": ann, "finalizers": [wk.TERMINATION_FINALIZER]},
        "spec": spec,
        "status": {"conditions": [make_condition("Launched", "Unknown", "Launching", "creating the instance", now)]},
    }


class Launcher:
    def __init__(self, store, claims, cloud, clock: Callable[[], float] | None = None,
                 decide: Callable[..., None] | None = None):
        self.store = store
        self.claims = claims
        self.cloud = cloud
        self.clock = clock or runtime.clock_proxy
        self.decide = decide or (lambda decision, message, **f: log.info("%s %s", decision, message))

    def launch(self, plan, nodepool, nodeclass, resolved, pods: list[dict], *, name: str | None = None,
               takeover: dict[str, str] | None = None, annotations: dict | None = None,
               replacing: list[str] | None = None) -> LaunchOutcome:
        """``replacing``: the NodeClaims this one replaces (a disruption's candidates, an interrupted node): the
        NodePool's limits are checked as if they were gone, as Karpenter's disruption simulation does (what they
        claim is the commit's ``headroom``)."""
        uids = sorted(pod_uid(p) for p in pods)
        keys = [pod_key(p) for p in pods]
        takeover = {u: c for u, c in (takeover or {}).items() if u in set(uids)}
        name = name or nodeclaim_name(nodepool.name, uids, list(takeover.values()), attempt=runtime.attempt_stamp(self.clock()))
        out = LaunchOutcome(name=name)
        limits = limits_of(nodepool)
        if self.claims is not None:
            headroom = self.claims.claimed(nodepool.name, replacing) if replacing and limits else None
            commit = self.claims.commit(nodepool.name, name, claim_request(plan, limits), limits, uids,
                                        takeover=takeover, headroom=headroom)
            if not commit.ok:
                out.duplicate = commit.duplicate
                out.taken = list(commit.taken_pods)
                if commit.limit_exceeded:
                    out.limit = commit.message
                if not (out.duplicate or out.taken or out.limit):
                    out.failed = commit.message or "launch claim refused"
                return out
        now = self.clock()
        token = launch_token(name, now)
        try:
            self.store.create(NodeClaim(nodeclaim_doc(name, plan, nodepool, nodeclass, keys, uids, now,
                                                      {**(annotations or {}), LAUNCH_TOKEN_ANNOTATION: token})))
        except AlreadyExists:
            out.duplicate = True
            return out
        except Exception:
            if self.claims is not None:
                self.claims.release(nodepool.name, name)
            raise
        claim = self.store.get("NodeClaim", name)
        request = CreateRequest(name=name, plan=plan, nodepool=nodepool, nodeclass=nodeclass, resolved=resolved,
                                labels=dict(claim.labels if claim else {}), client_token=token)

        def on_retry(message: str, unavailable: list) -> None:
            self.decide("insufficient-capacity", f"NodeClaim {name}: {message}; retrying with the remaining offerings",
                        nodeclaim=name, unavailable=unavailable)

        try:
            inst = self.cloud.create(request, on_retry)
        except NoCapacity as e:
            self.rollback(name, nodepool.name)
            out.failed = str(e)
            return out
        except LaunchFailed as e:  # the cloud answered: nothing launched
            self.rollback(name, nodepool.name)
            out.throttled = e.throttled
            out.failed = f"launch {'throttled' if e.throttled else 'failed'}: {e}"
            out.error = f"NodeClaim {name}: {e}"
            return out
        except Exception as e:  # maybe launched (a timeout after the call): the lifecycle sweep adopts or deletes it
            out.failed = f"launch failed: {e}"
            out.error = (f"NodeClaim {name}: {e} (record kept: the lifecycle sweep adopts an instance tagged for it, "
                         f"or deletes it)")
            self.decide("launch-unknown", f"NodeClaim {name}: launch outcome unknown ({e}); kept for the next "
                                          f"provisioning round to adopt or relaunch", nodeclaim=name)
            self._mark_unknown(name, str(e))
            return out
        it = next((t for t in plan.instance_types if t.name == inst.instance_type), None)
        try:
            self.mark_launched(name, nodepool.name, inst, it)
        except Exception as e:  # the instance runs: never roll it back; the lifecycle sweep adopts it
            out.error = f"NodeClaim {name}: instance {inst.instance_id} launched but not recorded ({e}); the lifecycle sweep adopts it"
            self.decide("launch-unrecorded", out.error, nodeclaim=name, instanceId=inst.instance_id)
        out.launched = Launched(nodeclaim=name, nodepool=nodepool.name, instance_id=inst.instance_id,
                                instance_type=inst.instance_type, zone=inst.zone, capacity_type=inst.capacity_type,
                                price=float(inst.price), image_id=inst.image_id, pods=keys)
        return out

    def nominate(self, nodeclaim, pods: list[dict], *, takeover: dict[str, str] | None = None) -> list[str]:
        """Reserve ``pods`` for the in-flight ``nodeclaim`` a round placed them on (its room left, not a launch),
        under the same conditions as a launch's reservations (:meth:`LaunchClaims.nominate`): later rounds count
        them against its room, and a pod a concurrent invocation reserved meanwhile is not taken.  Returns the uids
        refused (taken by another NodeClaim).  Without launch claims (no state table): nothing to record."""
        uids = [pod_uid(p) for p in pods]
        if self.claims is None or not uids:
            return []
        takeover = {u: c for u, c in (takeover or {}).items() if u in set(uids)}
        return self.claims.nominate(nodeclaim.nodepool_name, nodeclaim.name, uids, takeover=takeover)

    def _mark_unknown(self, name: str, why: str) -> None:
        """Best effort: the next provisioning round resolves a NodeClaim so marked at once (not after the lease)."""
        now = self.clock()

        def mutate(obj):
            if obj.status.get("providerID"):
                return obj
            set_condition(obj.status, make_condition("Launched", "Unknown", OUTCOME_UNKNOWN,
                                                     f"launch outcome unknown: {why}"[:512], now))
            return obj

        try:
            self.store.update("NodeClaim", name, mutate)
        except Exception as e:  # noqa: BLE001 - the lease resolves it later
            log.warning("NodeClaim %s: not marked %s: %s", name, OUTCOME_UNKNOWN, e)

    # -- an unknown launch outcome, resolved (Karpenter's launch reconciler) -----------------------------------
    def resolve(self, nc, nodepool, nodeclass, resolved, instance_types: list) -> tuple[str, str]:
        """A NodeClaim stuck launching (:func:`launch_pending`): ``(outcome, detail)``.

        Taken first by a conditional update of its Launched condition (reason ``Relaunching``, a new lease), so two
        rounds never relaunch it together.  Then the instance tagged ``karpenter.sh/nodeclaim=<name>`` (this
        deployment's, live) is adopted (``adopted``); else the same NodeClaim is launched again with its recorded
        launch token as ClientToken base, so EC2 answers a launch that did happen with its instance
        (``relaunched``).  Nothing to launch (no capacity, launch refused): the record and its launch claim are
        rolled back and its pods are free for the round (``failed``).  Throttled or unknown again: left for the next
        round (``unknown``).  ``skipped``: someone else has it."""
        name = nc.name
        now = self.clock()

        def take(obj):
            if not launch_pending(obj, now):
                raise _NotResolvable(name)
            set_condition(obj.status, make_condition("Launched", "Unknown", RELAUNCHING,
                                                     "resolving a launch whose outcome is unknown", now))
            return obj

        try:
            nc = self.store.update("NodeClaim", name, take)
        except _NotResolvable:
            return "skipped", "launched, deleting or being launched"
        except Exception as e:  # noqa: BLE001 - gone, or the store failed: the next round looks again
            return "skipped", str(e)
        if nc is None:
            return "skipped", "gone"
        types = {t.name: t for t in instance_types}
        live = sorted((d for d in self.cloud.instances_of(name).values()
                       if getattr(self.cloud, "owns", lambda _d: True)(d) and instance_state(d) not in GONE_STATES),
                      key=lambda d: (str(d.get("LaunchTime") or ""), d["InstanceId"]))
        if live:
            inst = self.adopt(name, nodepool.name, live[0], types.get(live[0].get("InstanceType")))
            return "adopted", inst.instance_id
        allowed = set()
        for r in nc.spec.get("requirements") or []:
            if r.get("key") == wk.INSTANCE_TYPE and r.get("operator") == "In":
                allowed = set(r.get("values") or [])
        reqs = Requirements.from_list([r for r in nc.spec.get("requirements") or [] if r.get("key") != wk.INSTANCE_TYPE])
        its = [t for t in instance_types if t.name in allowed]
        plan = NodeClaimPlan(name=name, nodepool=nodepool.name, requirements=reqs, instance_types=its,
                             instance_type="", zone="", capacity_type="", price=0.0,
                             pods=json.loads(nc.annotations.get(NOMINATED_PODS_ANNOTATION) or "[]"),
                             requests=parse_resource_list((nc.spec.get("resources") or {}).get("requests") or {}),
                             reason="relaunch of a launch whose outcome was unknown")
        token = nc.annotations.get(LAUNCH_TOKEN_ANNOTATION) or launch_token(name, now)
        request = CreateRequest(name=name, plan=plan, nodepool=nodepool, nodeclass=nodeclass, resolved=resolved,
                                labels=dict(nc.labels), client_token=token)
        try:
            inst = self.cloud.create(request, None)
        except NoCapacity as e:
            self.rollback(name, nodepool.name)
            return "failed", str(e)
        except LaunchFailed as e:
            if e.throttled:
                self._mark_unknown(name, str(e))
                return "unknown", str(e)
            self.rollback(name, nodepool.name)
            return "failed", str(e)
        except Exception as e:  # noqa: BLE001 - unknown again
            self._mark_unknown(name, str(e))
            return "unknown", str(e)
        it = types.get(inst.instance_type)
        self.mark_launched(name, nodepool.name, inst, it)
        return "relaunched", inst.instance_id

    def adopt(self, name: str, nodepool: str, desc: dict, it):
        """Write this deployment's instance ``desc`` (tagged for NodeClaim ``name``) on the record, as a launch
        would have (price from the catalog entry ``it``, 0 when unknown).  Returns the Instance."""
        inst = self.cloud.as_instance(desc)
        price = 0.0
        if it is not None:
            try:
                o = it.cheapest_offering(zones={inst.zone}, capacity_types={inst.capacity_type})
                price = float(o.price) if o else 0.0
            except Exception:  # noqa: BLE001
                price = 0.0
        inst.price = price
        self.mark_launched(name, nodepool, inst, it)
        return inst

    def rollback(self, name: str, nodepool: str) -> None:
        try:
            self.store.delete("NodeClaim", name)
        finally:
            if self.claims is not None:
                self.claims.release(nodepool, name)

    def mark_launched(self, name: str, nodepool: str, inst, it) -> None:
        """Write a launched instance on its NodeClaim (also the lifecycle sweep's adoption), then shrink the launch
        claim to what was launched (best effort: the claim is released with the NodeClaim anyway)."""
        now = self.clock()

        def mutate(obj):
            labels = obj.metadata.setdefault("labels", {})
            if it is not None:
                labels.update(it.labels)
            labels[wk.INSTANCE_TYPE] = inst.instance_type
            labels[wk.ZONE] = inst.zone
            labels[wk.CAPACITY_TYPE] = inst.capacity_type
            labels.update(inst.labels)   # what the launch adds: capacity reservation id/type, placement partition
            if nodepool:   # a manual NodeClaim may belong to no NodePool
                labels[wk.NODEPOOL] = nodepool
            ann = obj.metadata.setdefault("annotations", {})
            ann[PRICE_ANNOTATION] = repr(round(inst.price, 6))
            if inst.subnet_id:
                ann[SUBNET_ANNOTATION] = inst.subnet_id
            if inst.security_group_ids:
                ann[SECURITY_GROUPS_ANNOTATION] = json.dumps(sorted(inst.security_group_ids))
            st = obj.status
            st["providerID"] = provider_id(inst.zone, inst.instance_id)
            if inst.image_id:
                st["imageID"] = inst.image_id
            if it is not None:   # no vpc.amazonaws.com/efa unless requested: only then are EFA interfaces attached
                requests = (obj.spec.get("resources") or {}).get("requests") or {}
                st["capacity"] = {k: format_resource(k, v)
                                  for k, v in sorted(launched_resources(it.capacity, requests).items())}
                st["allocatable"] = {k: format_resource(k, v)
                                     for k, v in sorted(launched_resources(it.allocatable, requests).items())}
            set_condition(st, make_condition("Launched", "True", "Launched", f"instance {inst.instance_id} launched", now))
            return obj

        self.store.update("NodeClaim", name, mutate)
        if self.claims is not None and it is not None and nodepool:
            try:
                self.claims.adjust(nodepool, name, {"nodes": 1, **dict(it.capacity)})
            except Exception as e:  # noqa: BLE001
                log.warning("NodeClaim %s: launch claim not adjusted: %s", name, e)
