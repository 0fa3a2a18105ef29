"""Existing and in-flight nodes as the solver sees them (Karpenter's ``existingnode.go``).

Both kinds come in as :class:`~.model.ExistingNode` (an in-flight node is a launched NodeClaim whose Node has not
registered yet, with the labels and allocatable its plan promised) and are the same to the scheduler: fixed labels,
taints, allocatable, and what the pods already on them use.  :func:`can_add` is the one test of whether a pod class
may go to such a node at all (its taints tolerated, its required node affinity met by the node's labels);
resources, host ports and topology are checked by the placement for every kind of node.
"""

from __future__ import annotations

from ..api import labels as L
from ..api.kube import pod_key
from ..api.quantity import resource_value
from .existing_pods import PodsOnNode, matches, summarize
from .model import ExistingNode, SchedulingError, SimNode
from .podfacts import PodClass
from .predicates import host_ports, labels_match
from .resources import PodSpecError, pod_requests
from .taints import untolerated

__all__ = ["node_facts", "build_existing_nodes", "can_add"]


def node_facts(en: ExistingNode, namespaces: dict | None = None) -> PodsOnNode | None:
    """The node's pods summed (``existing_pods.PodsOnNode``): the caller's when made from exactly ``en.pods``, else
    summed here (and kept on ``en``; ``namespaces``: the namespaces' labels); None when a pod does not parse (the
    caller then reports it pod by pod)."""
    f = en.pod_facts
    if not matches(f, en.pods):
        f = en.pod_facts = summarize(en.pods or (), namespaces)
    return f


def build_existing_nodes(existing: list, rindex: list, rpos: dict, pool_by_name: dict,
                         namespaces: dict | None = None) -> list[SimNode]:
    """The solver's nodes for the existing and in-flight nodes: labels completed from the node's fields, what its
    pods use (as a vector over ``rindex``) and their host ports (``namespaces``: for :func:`node_facts`)."""
    nodes: list[SimNode] = []
    for i, en in enumerate(existing):
        if not isinstance(en, ExistingNode):
            raise SchedulingError(f"existing_nodes[{i}]: must be an ExistingNode")
        alloc = {}
        where = f"existing_nodes[{i}] ({en.name})"
        for k, v in (en.allocatable or {}).items():
            try:
                alloc[k] = v if isinstance(v, int) else resource_value(k, v)
            except ValueError as e:
                raise SchedulingError(f"{where}: allocatable.{k}: {e}") from None
        used = [0] * len(rindex)
        extra_used = {}
        ports = set()
        facts = node_facts(en, namespaces)
        if facts is not None:
            for k, v in facts.used.items():
                if k in rpos:
                    used[rpos[k]] += v
                else:
                    extra_used[k] = extra_used.get(k, 0) + v
            ports = set(facts.ports)
        for j, p in enumerate(() if facts is not None else en.pods or []):
            try:
                for k, v in pod_requests(p).items():
                    if k in rpos:
                        used[rpos[k]] += v
                    else:
                        extra_used[k] = extra_used.get(k, 0) + v
                ports |= host_ports(p.get("spec") or {})
            except (PodSpecError, ValueError, AttributeError) as e:
                raise SchedulingError(f"{where}: pods[{j}] {pod_key(p) if isinstance(p, dict) else ''}: {e}") from None
        labels = dict(en.labels or {})
        labels = L.normalize_labels(labels)
        labels.setdefault(L.HOSTNAME, en.name)
        if en.zone and L.ZONE not in labels:
            labels[L.ZONE] = en.zone
        if en.capacity_type and L.CAPACITY_TYPE not in labels:
            labels[L.CAPACITY_TYPE] = en.capacity_type
        if en.instance_type and L.INSTANCE_TYPE not in labels:
            labels[L.INSTANCE_TYPE] = en.instance_type
        if en.nodepool and L.NODEPOOL not in labels:
            labels[L.NODEPOOL] = en.nodepool
        # a volume-count resource the node does not list (no CSINode limit for that driver) has no known limit
        cap = tuple(alloc.get(r, L.VOLUME_NO_LIMIT if L.volume_driver(r) else 0) for r in rindex)
        n = SimNode(en.name, True, pool_by_name.get(en.nodepool or labels.get(L.NODEPOOL, "")), None, labels,
                  list(en.taints or []), cap, used)
        n.ports = ports
        n.existing = en
        nodes.append(n)
    return nodes


def can_add(node: SimNode, c: PodClass) -> bool:
    """May pods of class ``c`` go to this existing or in-flight node: every taint tolerated (PreferNoSchedule only
    once relaxed) and the class's node requirements met by the node's labels?"""
    return not untolerated(c.tolerations, node.taints, c.tolerate_pns) and labels_match(c.reqs, node.labels) is None
