"""Default topology spread constraints: kube-scheduler's cluster defaults on the pods that declare none (pure).

Karpenter's ``pkg/controllers/provisioning/scheduling/defaultconstraints.go`` (``DefaultTopologySpreadInjector``,
v1.15), called from ``provisioner.go`` ``NewScheduler`` right after the volume topology; the deduction is
kube-scheduler's ``helper.DefaultSelector`` (``k8s.io/kubernetes/pkg/scheduler/framework/plugins/helper``).  The
constraints come from the scheduler config (``api/scheduler_config.py``, ``ClusterSnapshot.default_spread``).

* A pod that declares **no** ``topologySpreadConstraints`` gets a copy of every default constraint; a pod with any of
  its own keeps exactly those (all or nothing, as the PodTopologySpread plugin).
* Each copy carries the label selector :func:`default_selector` deduces for the pod, which kube-scheduler forbids in
  the config and deduces per pod, so the solver counts the pods kube-scheduler will count:

  1. ``matchLabels``: the selectors of every Service in the pod's namespace whose selector matches the pod's labels,
     merged in the order given (a later Service wins a key).  A Service without a selector matches nothing; one with
     an empty selector matches every pod but adds nothing.
  2. the pod's controller (the ownerReference with ``controller: true``), looked up by name in the pod's namespace:
     an ``apps/v1`` ReplicaSet or StatefulSet adds its ``spec.selector`` as ``matchExpressions`` (each matchLabels
     entry an ``In`` expression, then its matchExpressions), ANDed with the Services' labels; a ``v1``
     ReplicationController's ``spec.selector`` map overwrites ``matchLabels`` keys.  Any other owner, another API
     version (``extensions/v1beta1``), an owner not in the snapshot, or a selector with an unknown operator adds
     nothing.  An ownerReference without ``apiVersion`` (which the API server refuses) is read as the kind's own
     version, as ``api/kube.py`` reads DaemonSet owners.
  3. nothing at all (no labels, no expressions): the pod is **not** defaulted (upstream's ``selector.Empty()``).

* Only the snapshot's copies of the pods change (``apply_default_spread``), never the cluster's objects.  Pods of
  one workload share one computed selector and one constraints list (the solver reads a spec's parts by identity:
  ``podfacts.build_classes``).  Nothing mutates these lists: preference relaxation drops a ScheduleAnyway
  constraint in the class's own state (``preferences.relax``), so sharing cannot leak a relaxation to other pods
  (upstream deep-copies per pod because its relaxation edits the pod).

DaemonSet and mirror pods (never provisioned for, never rescheduled) and terminal pods are left as they are.
"""

from __future__ import annotations

from typing import Iterable

from ..api.kube import is_daemon_pod, is_terminal
from ..api.selectors import OPERATORS
from ..api.snapshot import ClusterSnapshot
from .collector import paused

__all__ = ["ControllerIndex", "SUPPORTED_CONTROLLERS", "apply_default_spread", "controller_ref", "default_selector",
           "default_spread_applied", "inject_default_spread"]

_APPLIED = "_default_spread_applied"   # snapshot attribute: apply_default_spread ran on it

REPLICA_SET = ("apps", "v1", "ReplicaSet")
STATEFUL_SET = ("apps", "v1", "StatefulSet")
REPLICATION_CONTROLLER = ("", "v1", "ReplicationController")
# the (group, version, kind) whose selectors helper.DefaultSelector reads
SUPPORTED_CONTROLLERS = (REPLICA_SET, STATEFUL_SET, REPLICATION_CONTROLLER)
_DEFAULT_VERSION = {kind: (group, version) for group, version, kind in SUPPORTED_CONTROLLERS}


def _group_version(api_version: object, kind: object) -> tuple[str, str] | None:
    """``apiVersion`` as (group, version), as ``schema.ParseGroupVersion`` ("v1" is the core group; more than one
    '/' does not parse: None); a missing one is the kind's own (module doc)."""
    if api_version is None or api_version == "":
        return _DEFAULT_VERSION.get(kind) if isinstance(kind, str) else None
    if not isinstance(api_version, str):
        return None
    parts = api_version.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    return None


class ControllerIndex:
    """The snapshot's ReplicaSets, StatefulSets and ReplicationControllers by (namespace, kind, name); objects of
    another kind or API version are left out."""

    __slots__ = ("_by_key",)

    def __init__(self, controllers: Iterable[dict] = ()):
        self._by_key: dict[tuple, dict] = {}
        for obj in controllers:
            if not isinstance(obj, dict):
                continue
            kind = obj.get("kind")
            gv = _group_version(obj.get("apiVersion"), kind)
            if gv is None or (*gv, kind) not in SUPPORTED_CONTROLLERS:
                continue
            meta = obj.get("metadata") or {}
            self._by_key[(meta.get("namespace") or "default", kind, meta.get("name"))] = obj

    def get(self, namespace: str, kind: str, name: object) -> dict | None:
        return self._by_key.get((namespace, kind, name))


def controller_ref(pod: dict) -> dict | None:
    """The pod's controller: its ownerReference with ``controller: true`` (``metav1.GetControllerOf``)."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def _selector_requirements(selector: object) -> list[dict] | None:
    """A metav1.LabelSelector as requirements (matchLabels as ``In``, sorted by key, then its matchExpressions,
    copied); None when an operator is unknown (``LabelSelectorAsSelector`` fails: upstream adds nothing)."""
    if not isinstance(selector, dict):
        return []
    out = [{"key": k, "operator": "In", "values": [v]} for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or ():
        if not isinstance(expr, dict) or expr.get("operator") not in OPERATORS:
            return None
        out.append({"key": expr.get("key"), "operator": expr.get("operator"), "values": list(expr.get("values") or ())})
    return out


def _owner_contribution(pod: dict, namespace: str, controllers: ControllerIndex) -> tuple[dict, list[dict]]:
    """(matchLabels a ReplicationController overwrites, matchExpressions a ReplicaSet / StatefulSet adds)."""
    ref = controller_ref(pod)
    if ref is None:
        return {}, []
    kind = ref.get("kind")
    gv = _group_version(ref.get("apiVersion"), kind)
    if gv is None or (*gv, kind) not in SUPPORTED_CONTROLLERS:
        return {}, []
    owner = controllers.get(namespace, kind, ref.get("name"))
    if owner is None:   # deleted while its pods linger: upstream goes on without it
        return {}, []
    selector = (owner.get("spec") or {}).get("selector")
    if kind == "ReplicationController":
        return (dict(selector) if isinstance(selector, dict) else {}), []
    return {}, _selector_requirements(selector) or []


def _as_index(controllers: ControllerIndex | Iterable[dict]) -> ControllerIndex:
    return controllers if isinstance(controllers, ControllerIndex) else ControllerIndex(controllers)


def default_selector(pod: dict, services: Iterable[dict], controllers: ControllerIndex | Iterable[dict]
                     ) -> dict | None:
    """The label selector kube-scheduler deduces for ``pod``'s default spread constraints (module doc), or None
    when it deduces none (the pod is then not defaulted).  ``services``: Service dicts (those of other namespaces
    are skipped); ``controllers``: a :class:`ControllerIndex` or the controller dicts."""
    meta = pod.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    labels = meta.get("labels") or {}
    match_labels: dict = {}
    for svc in services:
        if ((svc.get("metadata") or {}).get("namespace") or "default") != namespace:
            continue
        selector = (svc.get("spec") or {}).get("selector")
        if not isinstance(selector, dict):   # no selector: the Service selects nothing
            continue
        if all(labels.get(k) == v for k, v in selector.items()):
            match_labels.update(selector)
    owner_labels, expressions = _owner_contribution(pod, namespace, _as_index(controllers))
    match_labels.update(owner_labels)
    if not match_labels and not expressions:
        return None
    out: dict = {}
    if match_labels:
        out["matchLabels"] = match_labels
    if expressions:
        out["matchExpressions"] = expressions
    return out


def inject_default_spread(pods: list[dict], constraints: Iterable[dict], services: list[dict],
                          controllers: ControllerIndex | Iterable[dict]) -> list[dict]:
    """``pods`` with the default ``constraints`` given to every pod that declares none and has a deduced selector
    (module doc).  Same length and order; such a pod is a shallow copy with a new ``spec`` (the same metadata), the
    others are the same objects.  Pods with the same namespace, controller and labels share one selector, and pods
    with equal selectors one constraints list."""
    constraints = tuple(constraints)
    if not constraints:
        return list(pods)
    index = _as_index(controllers)
    by_ns: dict[str, list[dict]] = {}
    for svc in services:
        by_ns.setdefault((svc.get("metadata") or {}).get("namespace") or "default", []).append(svc)
    by_inputs: dict[tuple, list | None] = {}   # (namespace, controller, labels) -> the constraints list (None: none)
    by_selector: dict[str, list] = {}          # the selector's text -> the constraints list
    out: list[dict] = []
    for pod in pods:
        spec = pod.get("spec") or {}
        if spec.get("topologySpreadConstraints") or is_daemon_pod(pod) or is_terminal(pod):
            out.append(pod)
            continue
        meta = pod.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        ref = controller_ref(pod)
        owner = (ref.get("uid"), ref.get("apiVersion"), ref.get("kind"), ref.get("name")) if ref is not None else None
        key = (namespace, owner, tuple(sorted((meta.get("labels") or {}).items())))
        if key in by_inputs:
            cons = by_inputs[key]
        else:
            selector = default_selector(pod, by_ns.get(namespace, ()), index)
            cons = None
            if selector is not None:
                text = repr(sorted(selector.items()))
                cons = by_selector.get(text)
                if cons is None:
                    cons = by_selector[text] = [{**c, "labelSelector": selector} for c in constraints]
            by_inputs[key] = cons
        if cons is None:
            out.append(pod)
            continue
        copy = dict(pod)
        copy["spec"] = {**spec, "topologySpreadConstraints": cons}
        out.append(copy)
    return out


def apply_default_spread(snap: ClusterSnapshot) -> None:
    """Give the snapshot's pods the default spread constraints (``snap.default_spread``) over its Services and
    workload controllers, once per snapshot; a no-op when there are none.  The pods' cached views are recomputed.
    Run by ``scheduling_input`` after the volume step (upstream injects after the volume topology), and meant for
    the snapshot loader likewise, so every decision on the snapshot (the provisioner, the disruption simulations
    reading ``pods_by_node``) sees the same pods."""
    if not snap.default_spread or snap.__dict__.get(_APPLIED):
        return
    snap.__dict__[_APPLIED] = True
    with paused():   # new pod copies, nothing to collect (scheduling/collector.py)
        pods = inject_default_spread(snap.pods, snap.default_spread, snap.services, snap.workload_controllers)
        if all(a is b for a, b in zip(pods, snap.pods)):
            return
        snap.pods = pods
        for attr in ("pods_by_uid", "pods_by_node"):
            snap.__dict__.pop(attr, None)


def default_spread_applied(snap: ClusterSnapshot) -> bool:
    """Did :func:`apply_default_spread` run on the snapshot (with default constraints to give)?"""
    return bool(snap.__dict__.get(_APPLIED))

