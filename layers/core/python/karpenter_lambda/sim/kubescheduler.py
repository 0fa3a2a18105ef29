"""A simple kube-scheduler for the simulated cluster.

``schedule_pending(target)`` does one scheduling pass over the pending pods
(no ``spec.nodeName``, ``schedulerName`` ``default-scheduler``, not terminal
or terminating), highest priority first, then oldest:

* candidate nodes: ``Ready=True``, not ``unschedulable``, not being deleted;
* filters: resource requests (containers, restartable init sidecars, the
  largest init container, overhead, and one ``pods`` slot) against allocatable
  minus the requests of the pods already bound there; ``nodeSelector``;
  required node affinity (terms ORed; In, NotIn, Exists, DoesNotExist, Gt, Lt;
  ``matchFields`` on ``metadata.name``); ``NoSchedule``/``NoExecute`` taints
  must be tolerated (``PreferNoSchedule`` is ignored); host ports;
* inter-pod constraints: required pod affinity and anti-affinity (any
  ``topologyKey``; ``labelSelector``; ``namespaces``/``namespaceSelector``,
  a namespaceSelector evaluated on the stored Namespaces' labels; the anti-affinity
  of pods already bound is honoured symmetrically; the first pod of a group
  that matches its own affinity term may go anywhere) and topology spread
  constraints with ``whenUnsatisfiable: DoNotSchedule`` (``maxSkew``,
  ``minDomains``, ``labelSelector``, ``matchLabelKeys``,
  ``nodeAffinityPolicy``/``nodeTaintsPolicy``; a node without the topology
  label is not a candidate);
* volumes (:mod:`.volumebinding`, loaded only when a pending pod uses a
  PersistentVolumeClaim): a missing claim or StorageClass keeps the pod
  Pending with Kubernetes' message; a bound volume's ``nodeAffinity``
  ("node(s) had volume node affinity conflict"), an unbound
  ``WaitForFirstConsumer`` claim's ``allowedTopologies`` or matching Available
  volume, and the node's CSINode attach limit per CSI driver ("node(s)
  exceed max volume count") filter nodes; binding such a pod first binds its
  claims, provisioning their volumes in the node's zone (:mod:`.storage`);
* default topology spread (``schedule_pending(..., default_spread=...)``: the
  ``PodTopologySpread`` plugin's ``defaultConstraints`` the cluster's
  kube-scheduler is configured with, ``KARPENTER_LAMBDA_SCHEDULER_CONFIG``): a
  pending pod without ``topologySpreadConstraints`` of its own gets them, with
  the label selector kube-scheduler deduces from the stored Services selecting
  it and its ReplicaSet / StatefulSet / ReplicationController
  (``scheduling/default_spread.inject_default_spread``, the function the
  provisioner's snapshot applies); the DoNotSchedule ones filter as above;
* score: least allocated (the node with the most free cpu+memory share wins,
  ties by name), like kube-scheduler's default;
* a pod that fits is bound (``pods/binding``); one that does not gets
  ``PodScheduled=False, reason=Unschedulable`` with a kube-scheduler-style
  message ("0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had
  untolerated taint {...}."), which is what the watcher forwards.  The status
  is only written when the message changes, so an unchanged pod keeps its
  resourceVersion.

Not modelled: preferred (anti-)affinity and ScheduleAnyway spread (scoring
only), preemption, volume capacity and ReadWriteOnce conflicts.

``target`` is the simulator's ``KubeAPIServer`` / ``ObjectStore`` (in-process)
or a :class:`karpenter_lambda.adapters.kube.client.KubeClient` (over HTTP).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from karpenter_lambda.api.kube import node_ready as _ready
from karpenter_lambda.api.kube import pod_key as _key
from karpenter_lambda.api.kube import SCHEDULING_GATED, SCHEDULING_GATED_MESSAGE, scheduling_gates
from karpenter_lambda.api.quantity import parse_resource_list
from karpenter_lambda.scheduling import predicates as P
from karpenter_lambda.scheduling.default_spread import inject_default_spread
from karpenter_lambda.scheduling.resources import add as _add
from karpenter_lambda.scheduling.resources import pod_requests as _pod_requests

from .volumebinding import ClientStorage, VolumeRules, uses_claims

__all__ = ["ScheduleResult", "schedule_pending", "pod_requests", "tolerates", "node_affinity_matches"]


@dataclass
class ScheduleResult:
    bound: list[tuple[str, str]] = field(default_factory=list)  # ("ns/name", node)
    unschedulable: dict[str, str] = field(default_factory=dict)  # "ns/name" -> message


# ----------------------------------------------------------------------------- pod math
# The same Kubernetes arithmetic the solver uses (scheduling.resources / scheduling.taints).


def pod_requests(pod: dict) -> dict[str, int]:
    """Effective requests in project units (cpu millicores, bytes, counts), with ``pods: 1``."""
    return _pod_requests(pod)


tolerates = P.tolerates_taint


def node_affinity_matches(pod: dict, node: dict) -> bool:
    """The pod's required node affinity against ``node`` (``scheduling.predicates.node_affinity_matches``)."""
    meta = node.get("metadata") or {}
    return P.node_affinity_matches(pod, meta.get("labels") or {}, meta.get("name"))


def _host_ports(pod: dict) -> frozenset:
    """(hostIP, protocol, hostPort) of the pod's ports with a hostPort: the solver's predicate."""
    return P.host_ports(pod.get("spec") or {})


# ----------------------------------------------------------------------------- inter-pod constraints
# (the predicates are the solver's: scheduling.predicates; a namespaceSelector selects among the stored Namespaces'
# labels, read once per pass when some pod has one)
_selector_matches = P.label_selector_matches
_ns = P.pod_namespace


def _labels(obj: dict) -> dict:
    return (obj.get("metadata") or {}).get("labels") or {}


def _required_terms(pod: dict, kind: str) -> list[dict]:
    aff = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return [t for t in aff.get("requiredDuringSchedulingIgnoredDuringExecution") or [] if t.get("topologyKey")]


class _Placement:
    """Where the non-terminal pods are bound, updated as the pass binds."""

    def __init__(self, nodes: list[dict], namespaces=None):
        self.node_labels = {n["metadata"]["name"]: _labels(n) for n in nodes}
        self.nodes = nodes
        self.pods: list[tuple[dict, str]] = []  # (pod, node name)
        self.namespaces = namespaces   # P.NamespaceLabels of the stored Namespaces, None when not read

    def term_matches(self, term: dict, owner_ns: str, pod: dict) -> bool:
        return P.affinity_term_matches(term, owner_ns, pod, self.namespaces)

    def add(self, pod: dict, node: str) -> None:
        if node in self.node_labels:
            self.pods.append((pod, node))

    def value(self, node: str, key: str) -> str | None:
        return self.node_labels.get(node, {}).get(key)


def _spread_constraints(pod: dict) -> list[dict]:
    return [c for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []
            if c.get("topologyKey") and (c.get("whenUnsatisfiable") or "DoNotSchedule") == "DoNotSchedule"]


class _InterPod:
    """Per pending pod: the inter-pod and spread facts that do not depend on the candidate node."""

    def __init__(self, pod: dict, spec: dict, placement: _Placement):
        self.placement = placement
        self.anti: list[tuple[str, set]] = []      # (key, domains holding a matching pod)
        for t in _required_terms(pod, "podAntiAffinity"):
            key = t["topologyKey"]
            self.anti.append((key, {placement.value(n, key) for q, n in placement.pods
                                    if placement.term_matches(t, _ns(pod), q)} - {None}))
        # anti-affinity of bound pods that the incoming pod matches: (key, domain)
        self.existing_anti: list[tuple[str, str]] = []
        for q, n in placement.pods:
            for t in _required_terms(q, "podAntiAffinity"):
                v = placement.value(n, t["topologyKey"])
                if v is not None and placement.term_matches(t, _ns(q), pod):
                    self.existing_anti.append((t["topologyKey"], v))
        self.affinity: list[tuple[str, set, bool]] = []  # (key, domains with a match, anywhere allowed)
        for t in _required_terms(pod, "podAffinity"):
            key = t["topologyKey"]
            matches = [(q, n) for q, n in placement.pods if placement.term_matches(t, _ns(pod), q)]
            self.affinity.append((key, {placement.value(n, key) for _q, n in matches} - {None},
                                  not matches and placement.term_matches(t, _ns(pod), pod)))
        self.spread: list[tuple[str, dict, int, int]] = []  # (key, counts per domain, min count, max skew)
        for c in _spread_constraints(pod):
            key = c["topologyKey"]
            extra = {k: _labels(pod)[k] for k in c.get("matchLabelKeys") or [] if k in _labels(pod)}
            sel = c.get("labelSelector")
            eligible = [n for n in placement.nodes if key in _labels(n)
                        and (c.get("nodeAffinityPolicy") == "Ignore" or _node_selects(pod, spec, n))
                        and (c.get("nodeTaintsPolicy") != "Honor" or _taints_tolerated(spec, n))]
            counts = {_labels(n)[key]: 0 for n in eligible}
            names = {n["metadata"]["name"] for n in eligible}
            for q, n in placement.pods:
                if n in names and _ns(q) == _ns(pod) and _selector_matches(sel, _labels(q), extra):
                    counts[placement.value(n, key)] += 1
            self_match = 1 if _selector_matches(sel, _labels(pod), extra) else 0
            low = min(counts.values()) if counts else 0
            if c.get("minDomains") and len(counts) < int(c["minDomains"]):
                low = 0
            self.spread.append((key, counts, low - self_match, int(c.get("maxSkew") or 1)))

    def check(self, node: dict) -> str | None:
        labels = _labels(node)
        for key, domains in self.anti:
            if key in labels and labels[key] in domains:
                return "node(s) didn't match pod anti-affinity rules"
        for key, v in self.existing_anti:
            if labels.get(key) == v:
                return "node(s) didn't satisfy existing pods anti-affinity rules"
        for key, domains, anywhere in self.affinity:
            if not anywhere and labels.get(key) not in domains:
                return "node(s) didn't match pod affinity rules"
        for key, counts, low, skew in self.spread:
            if key not in labels:
                return "node(s) didn't match pod topology spread constraints (missing required label)"
            if counts.get(labels[key], 0) - low > skew:
                return "node(s) didn't match pod topology spread constraints"
        return None


def _node_selects(pod: dict, spec: dict, node: dict) -> bool:
    return P.node_selector_matches(spec, _labels(node)) and node_affinity_matches(pod, node)


def _taints_tolerated(spec: dict, node: dict) -> bool:
    return P.untolerated_hard(spec.get("tolerations"), (node.get("spec") or {}).get("taints")) is None


# ----------------------------------------------------------------------------- access


class _StoreAccess:
    def __init__(self, store):
        self.store = store
        self.storage = store

    def pods(self):
        return self.store.list("pods", shared=True)     # read only: a bind or a condition is a write

    def nodes(self):
        return self.store.list("nodes", shared=True)

    def namespaces(self):
        return self.store.list("namespaces", shared=True)

    def services(self):
        return self.store.list("services", shared=True)

    def controllers(self):
        """ReplicaSets, StatefulSets and ReplicationControllers (when the server keeps them), with apiVersion and kind."""
        from .kubeapi import RESOURCES

        return [o for plural in _CONTROLLER_PLURALS if plural in RESOURCES for o in self.store.list(plural, shared=True)]

    def bind(self, ns, name, node):
        self.store.bind(ns, name, node)

    def set_condition(self, ns, name, conds):
        self.store.patch("pods", name, {"status": {"conditions": conds}}, ns, patch_type="strategic", subresource="status")


class _ClientAccess:
    def __init__(self, client):
        self.client = client
        self.storage = ClientStorage(client)

    def pods(self):
        return self.client.list_pods()

    def nodes(self):
        return self.client.list_nodes()

    def namespaces(self):
        return self.client.list_namespaces()

    def services(self):
        return _typed(_listed(getattr(self.client, "list_services", None)), "v1", "Service")

    def controllers(self):
        """ReplicaSets, StatefulSets and ReplicationControllers; list items carry no apiVersion or kind: added."""
        out = []
        for plural, (api_version, kind) in _CONTROLLER_PLURALS.items():
            out.extend(_typed(_listed(getattr(self.client, f"list_{plural}", None)), api_version, kind))
        return out

    def bind(self, ns, name, node):
        self.client.bind_pod(ns, name, node)

    def set_condition(self, ns, name, conds):
        self.client.patch_pod_status(ns, name, {"status": {"conditions": conds}})


# the controllers a pod's default spread selector is deduced from (kube-scheduler's helper.DefaultSelector)
_CONTROLLER_PLURALS = {"replicasets": ("apps/v1", "ReplicaSet"), "statefulsets": ("apps/v1", "StatefulSet"),
                       "replicationcontrollers": ("v1", "ReplicationController")}


def _listed(lister) -> list[dict]:
    """``lister()``, or none when the client has no such method or the server does not serve the resource (404)."""
    if lister is None:
        return []
    try:
        return lister()
    except Exception as e:   # the client's KubeError; only "not served" is taken as none
        if getattr(e, "status", None) == 404:
            return []
        raise


def _typed(items: list[dict], api_version: str, kind: str) -> list[dict]:
    return [{**o, "apiVersion": o.get("apiVersion") or api_version, "kind": o.get("kind") or kind} for o in items]


def _access(target: Any):
    if hasattr(target, "list_pods") and hasattr(target, "bind_pod"):
        return _ClientAccess(target)
    store = getattr(target, "store", target)
    return _StoreAccess(store)


# ----------------------------------------------------------------------------- the pass


def schedule_pending(target: Any, scheduler_name: str = "default-scheduler", default_spread=()) -> ScheduleResult:
    """One scheduling pass; see the module docstring.  Returns what was bound and what was not.

    ``default_spread``: the kube-scheduler's configured default topology spread constraints (``SchedulerConfig
    .default_constraints``); empty (the default): none, the pods are taken as they are."""
    acc = _access(target)
    result = ScheduleResult()
    nodes = [n for n in acc.nodes() if not (n.get("metadata") or {}).get("deletionTimestamp")]
    pods = acc.pods()
    used: dict[str, dict[str, int]] = {n["metadata"]["name"]: {} for n in nodes}
    ports: dict[str, set] = {n["metadata"]["name"]: set() for n in nodes}
    namespaces = None
    if any(P.has_namespace_selector(p) for p in pods):
        namespaces = P.NamespaceLabels({(ns.get("metadata") or {}).get("name"): (ns.get("metadata") or {}).get("labels") or {}
                                        for ns in acc.namespaces()})
    placement = _Placement(nodes, namespaces)
    pending = []
    for p in pods:
        phase = (p.get("status") or {}).get("phase")
        node = (p.get("spec") or {}).get("nodeName")
        if phase in ("Succeeded", "Failed"):
            continue
        if node:
            if node in used:
                used[node] = _add(used[node], pod_requests(p))
                ports[node] |= _host_ports(p)
            if not (p.get("metadata") or {}).get("deletionTimestamp"):
                placement.add(p, node)
            continue
        if (p.get("metadata") or {}).get("deletionTimestamp"):
            continue
        if ((p.get("spec") or {}).get("schedulerName") or "default-scheduler") != scheduler_name:
            continue
        if scheduling_gates(p):   # not scheduled until its gates are removed
            cur = next((c for c in (p.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), None)
            if not cur or cur.get("reason") != SCHEDULING_GATED:
                meta = p.get("metadata") or {}
                acc.set_condition(meta.get("namespace") or "default", meta.get("name"), [
                    {"type": "PodScheduled", "status": "False", "reason": SCHEDULING_GATED,
                     "message": SCHEDULING_GATED_MESSAGE, "lastProbeTime": None}])
            continue
        pending.append(p)
    if default_spread and pending:   # the PodTopologySpread plugin's defaults, on the pods without constraints
        pending = inject_default_spread(pending, tuple(default_spread), acc.services(), acc.controllers())
    pending.sort(key=lambda p: (-int((p.get("spec") or {}).get("priority") or 0), (p.get("metadata") or {}).get("creationTimestamp") or "", _key(p)))
    alloc = {n["metadata"]["name"]: {"pods": 110, **parse_resource_list((n.get("status") or {}).get("allocatable"))} for n in nodes}
    volumes = VolumeRules.load(acc.storage, placement.pods) if any(uses_claims(p) for p in pending) else None

    # As the kube-scheduler re-queues unschedulable pods when a pod is bound (pod events), pods that failed are
    # tried again in the same pass while binds make progress: a pod with required affinity to a pod bound later in
    # the queue is placed, whatever the creation order.
    failed: dict[str, tuple[dict, str]] = {}
    queue = pending
    while queue:
        progress, retry = False, []
        for pod in queue:
            spec = pod.get("spec") or {}
            req = pod_requests(pod)
            want_ports = _host_ports(pod)
            reasons: Counter = Counter()
            best = None
            best_score = None
            key = _key(pod)
            ns, pname = key.split("/", 1)
            claims = volumes.prefilter(pod) if volumes is not None and uses_claims(pod) else None
            if isinstance(claims, str):    # no node can take it: the pre-filter's message
                failed[key] = (pod, f"0/{len(nodes)} nodes are available: {claims}.")
                retry.append(pod)
                continue
            inter = _InterPod(pod, spec, placement)
            for node in nodes:
                name = node["metadata"]["name"]
                why = (_filter(pod, spec, req, want_ports, node, alloc[name], used[name], ports[name])
                       or (volumes.filter(claims, node) if claims is not None else None) or inter.check(node))
                if why:
                    reasons[why] += 1
                    continue
                score = _score(req, alloc[name], used[name])
                if best_score is None or score > best_score:
                    best, best_score = name, score
            if best is not None:
                if claims is not None:
                    volumes.bind(claims, next(n for n in nodes if n["metadata"]["name"] == best))
                acc.bind(ns, pname, best)
                placement.add(pod, best)
                used[best] = _add(used[best], req)
                ports[best] |= want_ports
                result.bound.append((key, best))
                failed.pop(key, None)
                progress = True
                continue
            msg = f"0/{len(nodes)} nodes are available"
            if reasons:
                msg += ": " + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
            msg += "."
            failed[key] = (pod, msg)
            retry.append(pod)
        if not progress or not retry:
            break
        queue = retry
    for key, (pod, msg) in failed.items():
        ns, pname = key.split("/", 1)
        result.unschedulable[key] = msg
        cur = next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if cur and cur.get("status") == "False" and cur.get("reason") == "Unschedulable" and cur.get("message") == msg:
            continue
        acc.set_condition(
            ns,
            pname,
            [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg, "lastProbeTime": None}],
        )
    return result


def _filter(pod, spec, req, want_ports, node, alloc, used, used_ports) -> str | None:
    nspec = node.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    if not _ready(node):
        return "node(s) were not ready"
    if nspec.get("unschedulable"):
        return "node(s) were unschedulable"
    if not P.node_selector_matches(spec, labels) or not node_affinity_matches(pod, node):
        return "node(s) didn't match Pod's node affinity/selector"
    t = P.untolerated_hard(spec.get("tolerations"), nspec.get("taints"))
    if t is not None:
        return f"node(s) had untolerated taint {{{t.get('key')}: {t.get('value') or ''}}}"
    if P.ports_conflict(used_ports, want_ports) is not None:
        return "node(s) didn't have free ports for the requested pod ports"
    for r in sorted(req):
        if req[r] and used.get(r, 0) + req[r] > alloc.get(r, 0):
            return "Too many pods" if r == "pods" else f"Insufficient {r}"
    return None


def _score(req, alloc, used) -> float:
    shares = []
    for r in ("cpu", "memory"):
        cap = alloc.get(r, 0)
        if cap > 0:
            shares.append((cap - used.get(r, 0) - req.get(r, 0)) / cap)
    return sum(shares) / len(shares) if shares else 0.0
