"""The scheduler's input, built from a :class:`~karpenter_lambda.api.snapshot.ClusterSnapshot` (pure).

One path for ``plan``, the provisioner and every disruption sweep:

* :func:`held_reservations` -- which pod nominations still protect their pod (issue: pods waiting on a full node).
  A nomination holds only while its NodeClaim is in flight (exists, not deleting, not Initialized) and still has
  room for the pod next to the pods already bound to its node (in nomination order: the pods it was launched for,
  then those a later round placed on it, which the provisioner reserves for it as well).  Once the node is
  initialized, or the kube-scheduler filled it with other pods, the pod is scheduled like any other pending pod
  against the nodes' real usage, and a new node is launched if none has room (as Karpenter, whose nominations are
  short-lived and whose scheduler reads the nodes' real pods).
* :func:`existing_nodes` -- the nodes and in-flight NodeClaims as the solver's :class:`ExistingNode` capacity.  A
  disruption's replacement (annotation ``karpenter-lambda.io/replaces``) carries, as placeholders, the requests of
  the pods still running on the nodes it replaces: until they move, no other pending pod takes the room launched
  for them (so they never need a second node).  Placeholders keep the pods' labels and affinities, so required
  anti-affinity sees them (topology spread counts them twice while the old node lives: conservative).
* :func:`nodepool_inputs`, :func:`scheduling_input` -- everything together.
"""

from __future__ import annotations

import json

from ..api import labels as wk
from ..api.kube import is_terminating, node_allocatable, node_name_of, node_ready, pod_uid
from ..api.quantity import QuantityError, parse_resource_list, resource_value
from ..api.snapshot import ClusterSnapshot
from .collector import paused
from .default_spread import apply_default_spread
from .existing_pods import facts_for
from .resources import PodSpecError, add, fits, pod_requests, subtract
from .model import ExistingNode, NodePoolInput, SchedulingInput
from .reschedule import is_reschedulable
from .volumes import apply_volumes, node_volume_room, pod_key_map

# snapshot attribute: the pods of each node summed once (existing_pods.facts_for), kept for every later simulation on
# the same snapshot (consolidation's validity tests) and carried to the snapshots it derives (apply_option)
POD_FACTS_CACHE = "_pod_facts"

# the annotations read here are defined once in api.labels (kept importable from this module)
NOMINATED_UIDS_ANNOTATION = wk.NOMINATED_UIDS_ANNOTATION
PRICE_ANNOTATION = wk.PRICE_ANNOTATION
REPLACES_ANNOTATION = wk.REPLACES_ANNOTATION

# Taints a node carries only while it comes up (Karpenter ignores them, and the NodeClaim's startup taints,
# when it simulates scheduling onto a managed node that is not initialized yet, and waits for them to go before the
# NodeClaim is Initialized): Karpenter's KnownEphemeralTaints, matched as corev1's MatchTaint does, on key and effect
# (the value is not compared): a taint of one of these keys with another effect (unreachable:NoExecute, an
# uninitialized:PreferNoSchedule) is an ordinary taint
EPHEMERAL_TAINTS = frozenset({
    ("node.kubernetes.io/not-ready", "NoSchedule"),
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoSchedule"),
    ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
    ("karpenter.sh/unregistered", "NoExecute"),
})
EPHEMERAL_TAINT_KEYS = frozenset(k for k, _ in EPHEMERAL_TAINTS)
# ... and the taints of these key prefixes, any effect (Karpenter's KnownEphemeralTaintKeyPrefixes: the Node Readiness
# Controller adds readiness.k8s.io/<rule> taints until the node meets its readiness rules)
EPHEMERAL_TAINT_PREFIXES = ("readiness.k8s.io/",)


def is_ephemeral_taint(taint: dict) -> bool:
    """Whether ``taint`` (a Node's taint) is one a node carries only while it comes up (above)."""
    key = taint.get("key")
    return (key, taint.get("effect")) in EPHEMERAL_TAINTS or (isinstance(key, str)
                                                              and key.startswith(EPHEMERAL_TAINT_PREFIXES))


def scheduling_taints(node: dict, nodeclaim=None) -> list[dict]:
    """The taints the solver should honour on ``node``.

    A node that karpenter-lambda launched (``nodeclaim`` given) and that is not Initialized yet still carries
    the ephemeral taints above and its startup taints; both go away by themselves, so, as Karpenter does,
    they do not block placing pods there.  Otherwise the node's taints are taken as they are.
    """
    taints = list((node.get("spec") or {}).get("taints") or [])
    if nodeclaim is None or nodeclaim.is_true("Initialized"):
        return taints
    startup = {(t.get("key"), t.get("effect")) for t in (nodeclaim.spec.get("startupTaints") or [])}
    return [t for t in taints if not is_ephemeral_taint(t) and (t.get("key"), t.get("effect")) not in startup]


def limits_of(nodepool) -> dict[str, int]:
    out = {}
    for k, v in (nodepool.limits or {}).items():
        try:
            out[k] = resource_value(k, v)
        except QuantityError:
            continue
    return out


def claim_request(plan, limits: dict[str, int]) -> dict[str, int]:
    """What a NodeClaim counts against its NodePool until launched: the largest capacity among its options."""
    out = {"nodes": 1}
    keys = set(limits) | {"cpu", "memory"}
    keys.discard("nodes")
    for k in keys:
        vals = [it.capacity.get(k, 0) for it in plan.instance_types]
        out[k] = max(vals) if vals else 0
    return out


def price_of(nodeclaim) -> float | None:
    try:
        v = (nodeclaim.annotations or {}).get(PRICE_ANNOTATION) if nodeclaim is not None else None
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _requests(pod: dict) -> dict[str, int]:
    try:
        return pod_requests(pod)
    except PodSpecError:
        return {"pods": 1}


def _claim_allocatable(snap: ClusterSnapshot, nc) -> dict[str, int]:
    node = snap.node_of_nodeclaim(nc.name)
    if node is not None:
        alloc = node_allocatable(node)
        if alloc:
            return alloc
    try:
        return parse_resource_list(nc.status.get("allocatable") or {})
    except QuantityError:
        return {}


def _nomination_order(nc, uids: list[str]) -> list[str]:
    """``uids`` (a NodeClaim's reserved pods, in reservation order) in nomination order: the pods it was launched
    for first (its nominated-uids annotation), then those later rounds nominated to it, in the order they were."""
    try:
        order = json.loads((nc.annotations or {}).get(NOMINATED_UIDS_ANNOTATION) or "[]")
    except ValueError:
        order = []
    rank = {u: i for i, u in enumerate(order)}
    made = {u: i for i, u in enumerate(uids)}
    return sorted(uids, key=lambda u: (rank.get(u, len(rank)), made[u]))


def nodeclaim_in_flight(nc) -> bool:
    """A NodeClaim whose nominations can hold: it exists, is not deleting and is not Initialized."""
    return nc is not None and not nc.metadata.get("deletionTimestamp") and not nc.is_true("Initialized")


def in_flight_nodeclaim(snap: ClusterSnapshot, name: str):
    """The in-flight NodeClaim (:func:`nodeclaim_in_flight`) behind the solver's existing node ``name`` (a
    registered Node's name, or an unregistered NodeClaim's), else None: pods placed there are nominated to it and
    are reserved for it, so later rounds count them against its room."""
    nc = snap.nodeclaim_of_node(name) if name in snap.node_by_name else snap.nodeclaims.get(name)
    return nc if nodeclaim_in_flight(nc) else None


def held_reservations(snap: ClusterSnapshot) -> dict[str, str]:
    """Pod uid -> NodeClaim for the nominations that still protect their (pending) pod; see the module doc.

    A nomination is a pod reservation (``snap.reservations``): made when the NodeClaim was launched for the pod,
    or when a later round placed the pod in the room an in-flight NodeClaim had left (the provisioner reserves
    it then too); both are counted, in nomination order, against the NodeClaim's room."""
    held: dict[str, str] = {}
    for ncname, uids in snap.reserved_by_claim.items():
        nc = snap.nodeclaims.get(ncname)
        if not nodeclaim_in_flight(nc):
            continue
        pending = [u for u in _nomination_order(nc, uids) if u in snap.pods_by_uid and not node_name_of(snap.pods_by_uid[u])]
        alloc = _claim_allocatable(snap, nc)
        if not alloc:  # not launched yet: a concurrent invocation is launching it, its pods stay held
            held.update({u: ncname for u in pending})
            continue
        used: dict[str, int] = {}
        for p in snap.pods_of_nodeclaim(ncname):
            used = add(used, _requests(p))
        room = subtract(alloc, used)
        for u in pending:
            req = _requests(snap.pods_by_uid[u])
            # volume counts are not in a NodeClaim's allocatable: the plan that nominated the pod sized them
            if fits({k: v for k, v in req.items() if wk.volume_driver(k) is None}, room) is None:
                held[u] = ncname
                room = subtract(room, req)
    return held


def existing_nodes(snap: ClusterSnapshot, held: dict[str, str] | None = None, exclude: set[str] | frozenset = frozenset()
                   ) -> list[ExistingNode]:
    """Nodes (not deleting, not cordoned) and launched-but-unregistered NodeClaims as solver capacity.

    ``held`` (from :func:`held_reservations`) adds each in-flight NodeClaim's protected pending pods to its
    capacity; ``exclude`` names nodes or NodeClaims left out (disruption candidates).
    """
    held = held or {}
    held_by_claim: dict[str, list[dict]] = {}
    for uid, ncname in held.items():
        pod = snap.pods_by_uid.get(uid)
        if pod is not None:
            held_by_claim.setdefault(ncname, []).append(pod)
    for name, pods in replacement_placeholders(snap, exclude).items():
        held_by_claim.setdefault(name, []).extend(pods)
    out: list[ExistingNode] = []
    registered: set[str] = set()
    facts = snap.__dict__.setdefault(POD_FACTS_CACHE, {})
    for n in snap.nodes:
        meta, spec = n.get("metadata") or {}, n.get("spec") or {}
        name = meta.get("name")
        nc = snap.nodeclaim_of_node(name)
        if nc is not None:
            registered.add(nc.name)
        if name in exclude or (nc is not None and nc.name in exclude):
            continue
        if is_terminating(n) or spec.get("unschedulable"):
            continue
        if nc is not None and nc.metadata.get("deletionTimestamp"):
            continue
        labels = meta.get("labels") or {}
        en = ExistingNode(
            name=name, labels=dict(labels), taints=scheduling_taints(n, nc),
            allocatable={**node_allocatable(n), **node_volume_room(snap, name)},
            pods=list(snap.pods_by_node.get(name, [])) + (held_by_claim.get(nc.name, []) if nc is not None else []),
            nodepool=labels.get(wk.NODEPOOL), in_flight=False, instance_type=labels.get(wk.INSTANCE_TYPE),
            zone=labels.get(wk.ZONE), capacity_type=labels.get(wk.CAPACITY_TYPE), price=price_of(nc),
            initialized=nc.is_true("Initialized") if nc is not None else node_ready(n),
        )
        en.pod_facts = facts_for(en.pods, facts, snap.namespace_labels)
        out.append(en)
    for nc in snap.nodeclaims.values():
        if nc.name in registered or nc.name in exclude or nc.metadata.get("deletionTimestamp") or nc.status.get("nodeName"):
            continue
        try:
            alloc = parse_resource_list(nc.status.get("allocatable") or {})
        except QuantityError:
            alloc = {}
        if not alloc:  # not launched yet: nothing to place on
            continue
        labels = dict(nc.labels)
        en = ExistingNode(
            name=nc.name, labels=labels, taints=list(nc.spec.get("taints") or []), allocatable=alloc,
            pods=held_by_claim.get(nc.name, []), nodepool=labels.get(wk.NODEPOOL), in_flight=True,
            instance_type=labels.get(wk.INSTANCE_TYPE), zone=labels.get(wk.ZONE),
            capacity_type=labels.get(wk.CAPACITY_TYPE), price=price_of(nc), initialized=False,
        )
        out.append(en)
    return out


def replacement_placeholders(snap: ClusterSnapshot, exclude=frozenset()) -> dict[str, list[dict]]:
    """Replacement NodeClaim -> placeholder pods (the requests of the reschedulable pods still on what it replaces).

    A replaced node named in ``exclude`` is the subject of the caller's own simulation (its pods are being placed):
    its pods are not held a second time."""
    out: dict[str, list[dict]] = {}
    for nc in snap.nodeclaims.values():
        replaced = wk.decode_replaces((nc.annotations or {}).get(REPLACES_ANNOTATION))
        if not replaced or nc.metadata.get("deletionTimestamp"):
            continue
        for old in replaced:
            node = snap.node_of_nodeclaim(old)
            if old not in snap.nodeclaims or old in exclude or ((node or {}).get("metadata") or {}).get("name") in exclude:
                continue
            for p in snap.pods_of_nodeclaim(old):
                if not is_reschedulable(p):
                    continue
                meta = p.get("metadata") or {}
                spec = {k: v for k, v in (p.get("spec") or {}).items() if k != "nodeName"}
                out.setdefault(nc.name, []).append({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"placeholder-{meta.get('name')}", "namespace": meta.get("namespace") or "default",
                                 "uid": f"placeholder-{pod_uid(p)}", "labels": dict(meta.get("labels") or {})},
                    "spec": spec, "status": {"phase": "Running"}})
    return out


def nodepool_inputs(snap: ClusterSnapshot) -> tuple[list[NodePoolInput], list[str]]:
    """(NodePools with their instance types, heaviest weight first; problems of the NodePools left out).  Static
    NodePools (``spec.replicas``) are left out: their size is the static controller's, never sized for pods (by the
    provisioner or by a disruption's replacements); their nodes still take pods as existing capacity."""
    inputs, problems = [], []
    for np in sorted(snap.nodepools.values(), key=lambda n: (-n.weight, n.name)):
        if np.replicas is not None:
            problems.append(f"NodePool {np.name} is static (spec.replicas: {np.replicas}): not provisioned for pods")
            continue
        if np.name in snap.nodepool_problems:
            problems.append(snap.nodepool_problems[np.name])
            continue
        if np.name in snap.instance_types:
            inputs.append(NodePoolInput(nodepool=np, instance_types=snap.instance_types[np.name]))
    return inputs, problems


def scheduling_input(snap: ClusterSnapshot, pods: list[dict], *, held: dict[str, str] | None = None,
                     exclude: set[str] | frozenset = frozenset(), max_instance_types: int = 60
                     ) -> tuple[SchedulingInput, list[str]]:
    """The solver's input for ``pods`` against the snapshot; returns (input, problems of NodePools left out).

    Each of ``pods`` is taken as the snapshot holds it after :func:`~.volumes.apply_volumes` and
    :func:`~.default_spread.apply_default_spread` (run here if nobody did): what its volumes ask and the default
    topology spread constraints it gets are in it; what keeps one from being scheduled is passed as ``pod_problems``.
    The collector is paused meanwhile (scheduling/collector.py)."""
    with paused():
        return _scheduling_input(snap, pods, held, exclude, max_instance_types)


def _scheduling_input(snap: ClusterSnapshot, pods: list[dict], held: dict[str, str] | None,
                      exclude: set[str] | frozenset, max_instance_types: int) -> tuple[SchedulingInput, list[str]]:
    apply_volumes(snap)
    apply_default_spread(snap)   # after the volume topology, as Karpenter's NewScheduler
    uids = [pod_uid(p) for p in pods]
    # the snapshot's copies of the pods (the volume step's, the default spread's) for pods the caller took before
    if snap.pod_notes or snap.pod_problems or snap.pvcs or snap.default_spread:
        by_uid = snap.pods_by_uid
        pods = [by_uid.get(u, p) for u, p in zip(uids, pods)]
    inputs, problems = nodepool_inputs(snap)
    existing = existing_nodes(snap, held, exclude)
    keys = set(uids)
    return SchedulingInput(pods=list(pods), nodepools=inputs, existing_nodes=existing, daemonsets=list(snap.daemonsets),
                           nodepool_usage={k: dict(v) for k, v in snap.usage.items()},
                           max_instance_types=max_instance_types,
                           pod_problems=pod_key_map(snap, {u: t for u, t in snap.pod_problems.items() if u in keys}),
                           pod_notes=pod_key_map(snap, {u: t for u, t in snap.pod_notes.items() if u in keys}),
                           namespaces=snap.namespace_labels), problems






__all__ = ["EPHEMERAL_TAINT_KEYS", "NOMINATED_UIDS_ANNOTATION", "PRICE_ANNOTATION", "claim_request", "existing_nodes",
           "held_reservations", "in_flight_nodeclaim", "limits_of", "nodeclaim_in_flight", "nodepool_inputs", "pod_uid",
           "price_of", "scheduling_input", "scheduling_taints"]
