"""The Priority admission (pure): what the API server does to a pod's ``priorityClassName``.

Kubernetes (``plugin/pkg/admission/priority``), when a pod is created:

* a ``priorityClassName`` resolves to its PriorityClass's ``value`` (the built-in ``system-node-critical`` is
  2000001000, ``system-cluster-critical`` 2000000000), which becomes ``spec.priority``, and the class's
  ``preemptionPolicy`` (default ``PreemptLowerPriority``) the pod's;
* a pod without one gets the ``globalDefault`` class (the lowest value when several are), else priority 0;
* a class that does not exist refuses the pod (``no PriorityClass with name X was found``), and so does a pod that
  sets ``spec.priority`` to something else.

Where the input gives no PriorityClass at all, nothing is known of the cluster's: a pod naming one other than the
built-in ones keeps its priority (0 unless set), and ``validate`` warns.

The priority orders the kube-scheduler's queue and weighs a pod in Karpenter's disruption cost (consolidation
prefers nodes whose pods matter less).  ``simulate`` applies it with the PriorityClasses given (:func:`admit`); a
cluster does before the watcher sees a pod.
"""

from __future__ import annotations

from .kube import by_name

__all__ = ["admit", "priority_classes", "BUILTIN"]

#: the classes every cluster has
BUILTIN = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def priority_classes(docs) -> dict[str, dict]:
    """{name: PriorityClass manifest} of the ``PriorityClass`` documents among ``docs`` (dicts)."""
    return by_name(docs, "PriorityClass")


def _value(doc: dict) -> int:
    v = doc.get("value")
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def admit(pod: dict, classes: dict[str, dict]) -> tuple[dict, str | None]:
    """(the pod as admitted, None) or (the pod unchanged, why the API server refuses it).  ``pod`` is not
    modified; a pod left at priority 0 with no class at all is returned as it is."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    name = spec.get("priorityClassName")
    policy = None
    if isinstance(name, str) and name:
        if name in BUILTIN:
            value = BUILTIN[name]
        elif name in classes:
            value, policy = _value(classes[name]), classes[name].get("preemptionPolicy")
        elif not classes:
            return pod, None   # no PriorityClass given at all: nothing known of any (validate warns), as it is
        else:
            return pod, f"no PriorityClass with name {name} was found"
    else:
        defaults = sorted((c for c in classes.values() if c.get("globalDefault") is True), key=_value)
        if not defaults:
            return pod, None
        name, value = defaults[0]["metadata"]["name"], _value(defaults[0])
        policy = defaults[0].get("preemptionPolicy")
    own = spec.get("priority")
    if own is not None and own != value:
        return pod, (f"the integer value of priority ({own}) must not be provided in pod spec; priority admission "
                     f"controller computed {value} from the given PriorityClass name")
    out = dict(pod)
    out["spec"] = {**spec, "priorityClassName": name, "priority": value,
                   "preemptionPolicy": spec.get("preemptionPolicy") or policy or "PreemptLowerPriority"}
    return out, None
