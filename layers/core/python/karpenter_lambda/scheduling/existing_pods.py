"""What the solver needs of the pods already running on a node, summed once per set of pods.

Every scheduling simulation starts from the existing nodes: their used resources, host ports, the required
anti-affinity their pods own, and each pod's namespace and labels for the topology counts.  Provisioning asks this
once per invocation; consolidation asks it for every validity test (dozens per sweep, on the same 20,000 pods), so
:func:`summarize` does it once per node and the caller keeps the answer (:func:`facts_for`, a cache that lives on
the snapshot: ``inputs.existing_nodes`` attaches it to each ``ExistingNode`` as ``pod_facts``).

A summary names the very pod objects it was made from (``source``): it is used only for a node whose pods are those
objects, in that order (the solver checks, and sums again otherwise), and because it holds them, the ``id`` of a pod
in a cache key can never be reused by another object while the entry lives.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import topology as T
from .predicates import host_ports
from .resources import PodSpecError, pod_requests


@dataclass(frozen=True)
class PodsOnNode:
    source: tuple          # the pods summed, in order (identity-checked by the solver)
    used: dict             # resource -> requests summed
    ports: frozenset       # (hostIP, protocol, hostPort) of every pod
    anti: tuple            # (constraint, selector, namespaces) of each pod's required anti-affinity, per pod
    labelsets: tuple       # (namespace, sorted label items, labels, pods with exactly those)


def summarize(pods, namespaces: dict | None = None) -> PodsOnNode | None:
    """The summary, or None when a pod's requests or host ports do not parse (the solver then reports that pod).
    ``namespaces``: the namespaces' labels for the anti-affinity's namespaceSelectors (``topology.pod_constraints``)."""
    used: dict = {}
    ports: set = set()
    anti: list = []
    sets: dict = {}
    for p in pods:
        if not isinstance(p, dict):
            return None
        try:
            for k, v in pod_requests(p).items():
                used[k] = used.get(k, 0) + v
            ports |= host_ports(p.get("spec") or {})
        except (PodSpecError, ValueError, AttributeError):
            return None
        # only a required pod anti-affinity is kept: a pod without one is not parsed (most pods, and those whose
        # only constraints are topology spreads, such as the scheduler config's defaults)
        if ((p.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity"):
            try:
                for con, sel, nss in T.pod_constraints(p, namespaces):
                    if con.kind == T.ANTI and con.required:
                        anti.append((con, sel, nss))
            except ValueError:
                pass   # as the solver: a pod whose constraints do not parse owns none
        meta = p.get("metadata") or {}
        ns, labels = meta.get("namespace") or "default", meta.get("labels") or {}
        lk = (ns, tuple(sorted(labels.items())))
        hit = sets.get(lk)
        if hit is None:
            sets[lk] = [labels, 1]
        else:
            hit[1] += 1
    return PodsOnNode(tuple(pods), used, frozenset(ports), tuple(anti),
                      tuple((ns, items, labels, n) for (ns, items), (labels, n) in sets.items()))


def matches(summary: PodsOnNode | None, pods) -> bool:
    """Whether ``summary`` was made from exactly these pod objects, in this order."""
    if summary is None:
        return False
    pods = pods or ()
    src = summary.source
    return len(src) == len(pods) and all(a is b for a, b in zip(src, pods))


def facts_for(pods: list, cache: dict, namespaces: dict | None = None) -> PodsOnNode | None:
    """``summarize(pods, namespaces)`` through ``cache`` (keyed by the pods' identities; see the module doc: the
    cache lives on one snapshot, whose namespaces are ``namespaces``)."""
    key = tuple(map(id, pods))
    hit = cache.get(key)
    if hit is None or not matches(hit, pods):
        hit = summarize(pods, namespaces)
        if hit is not None:
            cache[key] = hit
    return hit
