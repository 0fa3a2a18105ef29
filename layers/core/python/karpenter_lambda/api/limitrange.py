"""The LimitRanger admission (pure): what the API server does to a pod's containers in a namespace with LimitRanges.

A container without a request gets one from the namespace's LimitRange, so a workload that sets no resources still
asks its nodes for them; a node sized without them is too small.  Kubernetes
(``pkg/apis/core/v1/defaults.go`` ``SetDefaults_LimitRangeItem``, ``plugin/pkg/admission/limitranger``), for the
``Container`` items:

* the item is defaulted when stored: a resource with ``max`` but no ``default`` gets ``default: max``; with
  ``default`` (a limit) but no ``defaultRequest`` gets ``defaultRequest: default``; with ``min`` but still no
  ``defaultRequest`` gets ``defaultRequest: min``;
* at pod creation each container (and init container) missing a limit for a resource gets the item's ``default``,
  and missing a request gets the item's ``defaultRequest`` (a container with only a limit already has that limit as
  its request: the pod's own defaulting);
* a container whose request is below ``min``, or whose request or limit is above ``max``, refuses the pod
  ("maximum cpu usage per Container is 2, but limit is 4").

``plan`` and ``simulate`` apply it to the pods they build (:func:`admit`, with the LimitRanges given in the pod's
namespace); a cluster applies it before the watcher sees a pod.  ``Pod`` and ``PersistentVolumeClaim`` items and
ratios (``maxLimitRequestRatio``) are not applied (they refuse, never change, a pod; a note in docs/cli.md).
"""

from __future__ import annotations

from .quantity import QuantityError, resource_value

__all__ = ["admit", "limit_ranges", "container_item"]

_GROUPS = ("initContainers", "containers")


def limit_ranges(docs) -> dict[str, list[dict]]:
    """{namespace: [LimitRange manifest, ...]} of the ``LimitRange`` documents among ``docs`` (dicts)."""
    out: dict[str, list[dict]] = {}
    for d in docs:
        if isinstance(d, dict) and d.get("kind") == "LimitRange":
            out.setdefault((d.get("metadata") or {}).get("namespace") or "default", []).append(d)
    return out


def container_item(item: dict) -> dict[str, dict]:
    """A ``Container`` item's ``default``, ``defaultRequest``, ``min`` and ``max``, defaulted as the API server stores
    them (see the module doc)."""
    default = dict(item.get("default") or {})
    request = dict(item.get("defaultRequest") or {})
    low, high = dict(item.get("min") or {}), dict(item.get("max") or {})
    for k, v in high.items():
        default.setdefault(k, v)
    for k, v in default.items():
        request.setdefault(k, v)
    for k, v in low.items():
        request.setdefault(k, v)
    return {"default": default, "defaultRequest": request, "min": low, "max": high}


def _items(ranges: list[dict]) -> list[dict[str, dict]]:
    return [container_item(i) for r in ranges for i in ((r.get("spec") or {}).get("limits") or ())
            if isinstance(i, dict) and i.get("type") == "Container"]


def _value(name: str, q) -> int | None:
    try:
        return resource_value(name, q)
    except (QuantityError, TypeError, ValueError):
        return None


def admit(pod: dict, ranges: list[dict]) -> tuple[dict, str | None]:
    """(the pod as admitted, None) or (the pod unchanged, why the API server refuses it); ``ranges``: the
    LimitRanges of the pod's namespace.  ``pod`` is not modified; without a ``Container`` item it is returned as is."""
    items = _items(ranges)
    if not items:
        return pod, None
    spec = dict(pod.get("spec") or {})
    for group in _GROUPS:
        containers = spec.get(group)
        if not isinstance(containers, list):
            continue
        new = []
        for c in containers:
            if not isinstance(c, dict):
                new.append(c)
                continue
            res = dict(c.get("resources") or {})
            limits, requests = dict(res.get("limits") or {}), dict(res.get("requests") or {})
            for k, v in limits.items():
                requests.setdefault(k, v)   # the pod's own defaulting, before admission
            for item in items:
                for k, v in item["default"].items():
                    limits.setdefault(k, v)
                for k, v in item["defaultRequest"].items():
                    requests.setdefault(k, v)
            for item in items:
                problem = _bounds(c.get("name"), item, requests, limits)
                if problem:
                    return pod, problem
            if limits or requests:
                res = {**res, **({"limits": limits} if limits else {}), **({"requests": requests} if requests else {})}
                c = {**c, "resources": res}
            new.append(c)
        spec[group] = new
    out = dict(pod)
    out["spec"] = spec
    return out, None


def _bounds(name, item: dict, requests: dict, limits: dict) -> str | None:
    for k, low in item["min"].items():
        lv, rv = _value(k, low), _value(k, requests.get(k)) if k in requests else None
        if lv is not None and rv is not None and rv < lv:
            return f"minimum {k} usage per Container is {low}, but request is {requests[k]} (container {name})"
    for k, high in item["max"].items():
        hv = _value(k, high)
        for what, values in (("limit", limits), ("request", requests)):
            v = _value(k, values.get(k)) if k in values else None
            if hv is not None and v is not None and v > hv:
                return f"maximum {k} usage per Container is {high}, but {what} is {values[k]} (container {name})"
    return None
