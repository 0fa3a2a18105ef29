"""Pod resource requests and resource-list arithmetic (``dict[str, int]``; cpu in millicores)."""

from __future__ import annotations

from ..api.quantity import QuantityError, resource_value

__all__ = ["pod_requests", "add", "subtract", "fits", "merge_max", "PodSpecError"]


POD_LEVEL_RESOURCES = ("cpu", "memory")   # and hugepages-<size>: what pod-level resources may set


class PodSpecError(ValueError):
    """A pod whose resources cannot be read (names the field)."""


_VALUES: dict = {}


def _value(name: str, q) -> int:
    key = (name, q) if isinstance(q, (str, int)) and not isinstance(q, bool) else None
    if key is not None:
        hit = _VALUES.get(key)
        if hit is not None:
            return hit
    v = resource_value(name, q)
    if key is not None and len(_VALUES) < 50000:
        _VALUES[key] = v
    return v


def _container_requests(c: dict, where: str) -> dict[str, int]:
    res = c.get("resources") or {}
    req = res.get("requests")
    lim = res.get("limits") or {}
    out: dict[str, int] = {}
    try:
        # Kubernetes defaults a missing request to the limit.
        for name, q in lim.items():
            out[name] = _value(name, q)
        for name, q in (req or {}).items():
            out[name] = _value(name, q)
    except QuantityError as e:
        raise PodSpecError(f"{where}.resources: {e}") from None
    return out


def pod_requests(pod: dict) -> dict[str, int]:
    """Effective requests of a pod as Kubernetes computes them (KEP-753 sidecars included).

    ``max(sum(containers) + sum(restartable init containers), largest init step) + overhead``, where an
    init step is a regular init container plus the restartable init containers started before it;
    ``pods`` is 1.  Pod-level resources (``spec.resources``, Kubernetes 1.32+, on by default from 1.34): a request
    (or a limit, its default) set there for cpu, memory or a hugepages size is the pod's, whatever its containers
    ask, as the kube-scheduler counts it (the overhead still comes on top).
    """
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    for i, c in enumerate(spec.get("containers") or []):
        for k, v in _container_requests(c, f"spec.containers[{i}]").items():
            total[k] = total.get(k, 0) + v
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for i, c in enumerate(spec.get("initContainers") or []):
        r = _container_requests(c, f"spec.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":
            for k, v in r.items():
                sidecars[k] = sidecars.get(k, 0) + v
            step = sidecars
        else:
            step = dict(sidecars)
            for k, v in r.items():
                step[k] = step.get(k, 0) + v
        for k, v in step.items():
            if v > init_max.get(k, 0):
                init_max[k] = v
    for k, v in sidecars.items():
        total[k] = total.get(k, 0) + v
    for k, v in init_max.items():
        if v > total.get(k, 0):
            total[k] = v
    if spec.get("resources"):
        for k, v in _container_requests(spec, "spec").items():
            if k in POD_LEVEL_RESOURCES or k.startswith("hugepages-"):
                total[k] = v
    try:
        for k, q in (spec.get("overhead") or {}).items():
            total[k] = total.get(k, 0) + _value(k, q)
    except QuantityError as e:
        raise PodSpecError(f"spec.overhead: {e}") from None
    total["pods"] = 1
    return total


def add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def subtract(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return out


def merge_max(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        if v > out.get(k, 0):
            out[k] = v
    return out


def fits(requests: dict[str, int], available: dict[str, int]) -> str | None:
    """None when ``requests`` fit in ``available``; else the first resource that does not fit."""
    for k, v in requests.items():
        if v > 0 and v > available.get(k, 0):
            return k
    return None
