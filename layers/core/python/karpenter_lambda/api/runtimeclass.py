"""The RuntimeClass admission controller (pure): what the API server does to a pod naming ``spec.runtimeClassName``.

Kubernetes (``plugin/pkg/admission/runtimeclass``), when a pod is created:

* ``overhead.podFixed`` of the class becomes the pod's ``spec.overhead`` (what the scheduler and Karpenter add to the
  pod's requests); a pod that sets another ``overhead`` itself is refused;
* ``scheduling.nodeSelector`` is merged into the pod's ``nodeSelector``; a key the pod selects with another value is
  refused (the pod could never run on the class's nodes);
* ``scheduling.tolerations`` are added to the pod's (those it does not already have);
* a class that does not exist refuses the pod.

Where the input gives no RuntimeClass at all, nothing is known of the cluster's: a pod naming one is taken as it is
(no overhead), and ``validate``, ``plan`` and ``simulate`` warn that its class is not counted (a cluster's API
server would refuse it if the class were missing there too).

A cluster does this before the watcher ever sees a pod, so the Lambda functions read pods that already carry it;
``plan`` and ``simulate``, which build pods from workload manifests, apply it themselves with the RuntimeClasses given
(:func:`admit`), and ``validate`` warns of what the API server would refuse (``admission_hints.runtime_class_warnings``).
"""

from __future__ import annotations

import copy

from .kube import by_name

__all__ = ["admit", "runtime_classes", "NOT_FOUND"]

NOT_FOUND = "RuntimeClass {name} not found"


def runtime_classes(docs) -> dict[str, dict]:
    """{name: RuntimeClass manifest} of the ``RuntimeClass`` documents among ``docs`` (dicts)."""
    return by_name(docs, "RuntimeClass")


def admit(pod: dict, classes: dict[str, dict]) -> tuple[dict, str | None]:
    """(the pod as admitted, None) or (the pod unchanged, why the API server refuses it).  A pod without
    ``runtimeClassName`` is returned as it is; so is the pod itself when nothing changes.  ``pod`` is not modified."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    name = spec.get("runtimeClassName")
    if not isinstance(name, str) or not name:
        return pod, None
    if not classes:
        return pod, None   # no RuntimeClass given at all: nothing known of any (validate warns), the pod as it is
    rc = classes.get(name)
    if rc is None:
        return pod, NOT_FOUND.format(name=name)
    fixed = ((rc.get("overhead") or {}).get("podFixed")) if isinstance(rc.get("overhead"), dict) else None
    scheduling = rc.get("scheduling") if isinstance(rc.get("scheduling"), dict) else {}
    selector = scheduling.get("nodeSelector") if isinstance(scheduling.get("nodeSelector"), dict) else {}
    tolerations = [t for t in scheduling.get("tolerations") or () if isinstance(t, dict)]
    if not fixed and not selector and not tolerations:
        return pod, None
    out_spec = dict(spec)
    if fixed:
        own = spec.get("overhead")
        if own and own != fixed:
            return pod, (f"spec.overhead {own} does not match RuntimeClass {name}'s overhead.podFixed {fixed}: the API "
                         "server refuses the pod (leave overhead unset)")
        out_spec["overhead"] = dict(fixed)
    if selector:
        merged = dict(spec.get("nodeSelector") or {})
        for k, v in selector.items():
            if k in merged and merged[k] != v:
                return pod, (f"nodeSelector {k}={merged[k]} conflicts with RuntimeClass {name}'s scheduling.nodeSelector "
                             f"{k}={v}: the API server refuses the pod")
            merged[k] = v
        out_spec["nodeSelector"] = merged
    if tolerations:
        have = [t for t in spec.get("tolerations") or () if isinstance(t, dict)]
        out_spec["tolerations"] = have + [copy.deepcopy(t) for t in tolerations if t not in have]
    out = dict(pod)
    out["spec"] = out_spec
    return out, None
