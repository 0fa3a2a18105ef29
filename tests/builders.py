"""Small builders for pure tests, like Karpenter's ``test.Pod(...)`` / ``test.NodePool(...)`` (issue 22 item 5).

Each returns the package's real type with sensible defaults, every field overridable by keyword:

    pod("web-1", cpu="1", node="node-a")                  -> a Pod dict (Running and Ready when bound)
    nodepool(budgets=[{"nodes": "0"}])                     -> api.objects.NodePool (tests/manifests.py defaults)
    nodeclass()                                            -> api.objects.EC2NodeClass
    nodeclaim("a", instance_type="c5.xlarge")              -> api.objects.NodeClaim (initialized, priced)
    node("node-a", instance_type="c5.xlarge")              -> a Node dict (Ready, allocatable from the catalog)
    claimed_node("a", ...)                                 -> (NodeClaim "a", its Node "node-a")
    snapshot(claimed_node("a"), pods=[...])                -> api.snapshot.ClusterSnapshot at ``T0``

The instance types come from a small fixed catalog (:func:`instance_types`): a dozen us-east-1 types described as
DescribeInstanceTypes would, built by the real ``catalog.build_instance_types`` with the bundled on-demand prices
(spot estimated), offered in three zones.  Times are epoch seconds; ``T0`` is the snapshot's "now".
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

import manifests
from karpenter_lambda.api import labels as L
from karpenter_lambda.api.objects import EC2NodeClass, NodeClaim, NodePool
from karpenter_lambda.api.snapshot import ClusterSnapshot
from karpenter_lambda.api.times import format_time
from karpenter_lambda.catalog import PriceBook, build_instance_types
from karpenter_lambda.catalog.types import InstanceType
from karpenter_lambda.scheduling.volumes import apply_volumes

REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
T0 = 1_796_000_000.0          # the snapshots' "now": 2026-11-30T00:53:20Z
DAY = 86_400.0
LONG_AGO = T0 - 10 * DAY      # when the builders' nodes were created and last saw a pod event (expireAfter defaults to 720h)

# (name, vCPUs, memory MiB, architecture): enough families, sizes and shapes for consolidation choices
CATALOG = (
    ("c5.large", 2, 4096, "x86_64"), ("c5.xlarge", 4, 8192, "x86_64"), ("c5.2xlarge", 8, 16384, "x86_64"),
    ("m5.large", 2, 8192, "x86_64"), ("m5.xlarge", 4, 16384, "x86_64"), ("m5.2xlarge", 8, 32768, "x86_64"),
    ("m6i.large", 2, 8192, "x86_64"), ("m6i.xlarge", 4, 16384, "x86_64"),
    ("r5.large", 2, 16384, "x86_64"), ("r5.xlarge", 4, 32768, "x86_64"),
    ("m6g.large", 2, 8192, "arm64"), ("m6g.xlarge", 4, 16384, "arm64"),
)


def describe(name: str, vcpus: int, mib: int, arch: str) -> dict:
    """One DescribeInstanceTypes entry (the fields the catalog reads)."""
    return {"InstanceType": name, "CurrentGeneration": True, "Hypervisor": "nitro",
            "SupportedUsageClasses": ["on-demand", "spot"], "SupportedVirtualizationTypes": ["hvm"],
            "ProcessorInfo": {"SupportedArchitectures": [arch]}, "VCpuInfo": {"DefaultVCpus": vcpus},
            "MemoryInfo": {"SizeInMiB": mib}}


@lru_cache(maxsize=None)
def _catalog() -> tuple[InstanceType, ...]:
    raw = [describe(*t) for t in CATALOG]
    offerings = [{"InstanceType": t[0], "Location": z, "LocationType": "availability-zone"} for t in CATALOG for z in ZONES]
    return tuple(build_instance_types(raw, offerings, PriceBook.from_bundled(REGION), REGION))


def instance_types(*names: str) -> list[InstanceType]:
    """The fixed catalog (every type, or the named ones), sorted by name.  Shared objects: do not mutate."""
    return _types(*names)


def _types(*names: str) -> list[InstanceType]:
    types = list(_catalog())
    if not names:
        return types
    by_name = {t.name: t for t in types}
    return [by_name[n] for n in names]


def instance_type(name: str) -> InstanceType:
    return _types(name)[0]


def price(name: str, zone: str = ZONES[0], capacity_type: str = L.CAPACITY_TYPE_ON_DEMAND) -> float:
    """The catalog's hourly price of one offering."""
    return next(o.price for o in _types(name)[0].offerings if o.zone == zone and o.capacity_type == capacity_type)


def iso(t: float) -> str:
    return format_time(t)


# -- Karpenter objects -----------------------------------------------------------------------------------------
def nodepool(name: str = "default", *, policy: str | None = "WhenEmptyOrUnderutilized",
             consolidate_after: str | None = "0s", budgets=None, capacity_types: Iterable[str] | None = ("on-demand",),
             **kw) -> NodePool:
    """A NodePool from the shared manifest (tests/manifests.py): consolidating, on-demand, amd64, no budget set
    (Karpenter's default 10%) unless ``budgets`` says; any ``manifests.nodepool`` keyword passes through."""
    return NodePool(manifests.nodepool(name, policy=policy, consolidate_after=consolidate_after, budgets=budgets,
                                       capacity_types=capacity_types, **kw))


def nodeclass(name: str = "default", **kw) -> EC2NodeClass:
    return EC2NodeClass(manifests.nodeclass(name, **kw))


def _offer_labels(name: str, zone: str, capacity_type: str, nodepool: str) -> dict:
    return {**_types(name)[0].labels, L.ZONE: zone, L.CAPACITY_TYPE: capacity_type, L.NODEPOOL: nodepool,
            L.NODE_INITIALIZED: "true", L.NODE_REGISTERED: "true"}


def nodeclaim(name: str = "default-a", *, instance_type: str = "m5.large", zone: str = ZONES[0],
              capacity_type: str = L.CAPACITY_TYPE_ON_DEMAND, nodepool: str = "default", node_name: str | None = None,
              price_per_hour: float | None = None, created: float = LONG_AGO, initialized: bool = True,
              last_pod_event: float | None = LONG_AGO, labels: dict | None = None, annotations: dict | None = None,
              spec: dict | None = None, status: dict | None = None, deleting: bool = False,
              nodeclass: str = "default") -> NodeClaim:
    """A launched NodeClaim: labelled as its instance type and offering, priced from the catalog, registered to
    ``node_name`` (default ``node-<name>``) and initialized long ago."""
    node_name = node_name or f"node-{name}"
    p = price(instance_type, zone, capacity_type) if price_per_hour is None else price_per_hour
    meta = {"name": name, "creationTimestamp": iso(created),
            "labels": {**_offer_labels(instance_type, zone, capacity_type, nodepool), L.HOSTNAME: node_name, **(labels or {})},
            "annotations": {L.PRICE_ANNOTATION: repr(p), **(annotations or {})}}
    if deleting:
        meta["deletionTimestamp"] = iso(T0)
    conds = [{"type": "Launched", "status": "True", "lastTransitionTime": iso(created)},
             {"type": "Registered", "status": "True", "lastTransitionTime": iso(created)}]
    if initialized:
        conds.append({"type": "Initialized", "status": "True", "lastTransitionTime": iso(created)})
    st = {"providerID": provider_id(name, zone), "nodeName": node_name, "conditions": conds}
    if last_pod_event is not None:
        st["lastPodEventTime"] = iso(last_pod_event)
    return NodeClaim({"apiVersion": manifests.NODEPOOL_API, "kind": "NodeClaim", "metadata": meta,
                      "spec": {"nodeClassRef": {**manifests.NODECLASS_REF, "name": nodeclass}, **(spec or {})},
                      "status": {**st, **(status or {})}})


def provider_id(nodeclaim_name: str, zone: str = ZONES[0]) -> str:
    return f"aws:///{zone}/i-{nodeclaim_name}"


# -- Kubernetes objects ----------------------------------------------------------------------------------------
def node(name: str = "node-default-a", *, instance_type: str = "m5.large", zone: str = ZONES[0],
         capacity_type: str = L.CAPACITY_TYPE_ON_DEMAND, nodepool: str = "default", nodeclaim: str | None = None,
         ready: bool = True, labels: dict | None = None, annotations: dict | None = None, taints: list | None = None,
         unschedulable: bool = False) -> dict:
    """A registered Node of the catalog's instance type: allocatable as the catalog computes it, Ready."""
    a = _types(instance_type)[0].allocatable
    spec: dict = {"providerID": provider_id(nodeclaim or name.removeprefix("node-"), zone)}
    if taints:
        spec["taints"] = list(taints)
    if unschedulable:
        spec["unschedulable"] = True
    alloc = {"cpu": f"{a[L.RESOURCE_CPU]}m", "memory": str(a[L.RESOURCE_MEMORY]), "pods": str(a.get(L.RESOURCE_PODS, 110))}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {**_offer_labels(instance_type, zone, capacity_type, nodepool),
                                                   L.HOSTNAME: name, **(labels or {})},
                         "annotations": dict(annotations or {})},
            "spec": spec,
            "status": {"allocatable": alloc, "capacity": dict(alloc),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def claimed_node(name: str = "default-a", *, node_name: str | None = None, ready: bool = True,
                 node_annotations: dict | None = None, node_labels: dict | None = None, taints: list | None = None,
                 **claim_kw) -> tuple[NodeClaim, dict]:
    """A NodeClaim and its Node, consistent (same type, zone, capacity type, NodePool and provider id)."""
    node_name = node_name or f"node-{name}"
    nc = nodeclaim(name, node_name=node_name, **claim_kw)
    n = node(node_name, nodeclaim=name, ready=ready, annotations=node_annotations, labels=node_labels, taints=taints,
             **{k: claim_kw[k] for k in ("instance_type", "zone", "capacity_type", "nodepool") if k in claim_kw})
    return nc, n


def pod(name: str = "p", *, cpu: str = "500m", memory: str = "512Mi", node: str | None = None,
        namespace: str = "default", app: str | None = None, owner: str | None = "ReplicaSet",
        labels: dict | None = None, annotations: dict | None = None, phase: str | None = None,
        created: float = LONG_AGO, uid: str | None = None, **spec) -> dict:
    """A Pod requesting ``cpu``/``memory``, owned by a ReplicaSet ``app`` (``owner=None``: a bare pod;
    ``"DaemonSet"``: a DaemonSet pod).  Bound to ``node`` and Running/Ready when given, else Pending."""
    app = app or name.rsplit("-", 1)[0]
    meta: dict = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}",
                  "labels": {"app": app, **(labels or {})}, "annotations": dict(annotations or {}),
                  "creationTimestamp": iso(created)}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": app, "uid": f"{owner.lower()}-{app}",
                                    "controller": True}]
    body = {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
            **spec}
    status: dict = {"phase": phase or ("Running" if node else "Pending")}
    if node:
        body["nodeName"] = node
        status.update(startTime=iso(created), conditions=[
            {"type": "Ready", "status": "True"},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": iso(created)}])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body, "status": status}


def pdb(name: str = "pdb", *, app: str, namespace: str = "default", **spec) -> dict:
    """A PodDisruptionBudget selecting ``app=<app>`` (``maxUnavailable=0``, ``minAvailable=2``, ...)."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": app}}, **spec}}


# -- the snapshot ----------------------------------------------------------------------------------------------
def snapshot(*members, now: float = T0, nodepools: Iterable[NodePool] | None = None,
             nodeclasses: Iterable[EC2NodeClass] | None = None, pods: Iterable[dict] = (), pdbs: Iterable[dict] = (),
             daemonsets: Iterable[dict] = (), reservations: dict | None = None,
             instance_types: dict[str, list] | None = None, storage: Iterable[dict] = ()) -> ClusterSnapshot:
    """A ClusterSnapshot at ``now``: ``members`` are (NodeClaim, Node) pairs from :func:`claimed_node`, lone
    NodeClaims or Nodes; NodePools default to one :func:`nodepool`, EC2NodeClasses to one :func:`nodeclass`, and
    every NodePool is offered the whole fixed catalog unless ``instance_types`` says otherwise.  ``storage``: PVCs,
    PVs, StorageClasses and CSINodes (:func:`pvc`, :func:`pv`, :func:`storageclass`, :func:`csinode`), applied to
    the pods as the snapshot loader does (``scheduling.volumes.apply_volumes``)."""
    pools = list(nodepools) if nodepools is not None else [nodepool()]
    classes = list(nodeclasses) if nodeclasses is not None else [nodeclass()]
    by_kind: dict[str, list] = {}
    for doc in storage:
        by_kind.setdefault(doc["kind"], []).append(doc)
    snap = ClusterSnapshot(now=now, nodepools={p.name: p for p in pools}, nodeclasses={c.name: c for c in classes},
                           pods=list(pods), pdbs=list(pdbs), daemonsets=list(daemonsets),
                           reservations=dict(reservations or {}), pvcs=by_kind.get("PersistentVolumeClaim", []),
                           pvs=by_kind.get("PersistentVolume", []), storageclasses=by_kind.get("StorageClass", []),
                           csinodes=by_kind.get("CSINode", []))
    for m in members:
        for x in (m if isinstance(m, tuple) else (m,)):
            if isinstance(x, NodeClaim):
                snap.nodeclaims[x.name] = x
            else:
                snap.nodes.append(x)
    snap.instance_types = (dict(instance_types) if instance_types is not None
                           else {p.name: _types() for p in pools})
    apply_volumes(snap)
    return snap


# -- storage ---------------------------------------------------------------------------------------------------
def pv(name: str, *, zone: str | None = ZONES[0], driver: str = L.EBS_CSI_DRIVER, claim: str | None = None,
       namespace: str = "default", zone_key: str = L.ZONE, **spec) -> dict:
    """A PersistentVolume of ``driver`` whose node affinity requires ``zone`` (None: no node affinity), bound to
    ``claim`` when given."""
    body: dict = {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                  "csi": {"driver": driver, "volumeHandle": f"vol-{name}"}, **spec}
    if zone is not None:
        body["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": zone_key, "operator": "In", "values": [zone]}]}]}}
    if claim:
        body["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": namespace, "name": claim}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": body,
            "status": {"phase": "Bound" if claim else "Available"}}


def pvc(name: str, *, volume: str | None = None, storage_class: str | None = "gp3", namespace: str = "default") -> dict:
    """A PersistentVolumeClaim of ``storage_class``, bound to PV ``volume`` when given."""
    spec: dict = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": spec, "status": {"phase": "Bound" if volume else "Pending"}}


def storageclass(name: str = "gp3", *, zones: Iterable[str] | None = None, provisioner: str = L.EBS_CSI_DRIVER,
                 binding: str = "WaitForFirstConsumer", default: bool = False) -> dict:
    """A StorageClass (``WaitForFirstConsumer`` by default) whose allowedTopologies are ``zones`` when given."""
    doc: dict = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                 "metadata": {"name": name, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}
                              if default else {}},
                 "provisioner": provisioner, "volumeBindingMode": binding}
    if zones is not None:
        doc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": L.ZONE, "values": list(zones)}]}]
    return doc


def csinode(node_name: str, count: int | None, driver: str = L.EBS_CSI_DRIVER) -> dict:
    """A node's CSINode listing ``driver`` with ``allocatable.count`` (None: no count)."""
    d: dict = {"name": driver, "nodeID": node_name}
    if count is not None:
        d["allocatable"] = {"count": count}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node_name},
            "spec": {"drivers": [d]}}


def with_claims(p: dict, *claims: str) -> dict:
    """``p`` with one volume per claim name (``persistentVolumeClaim.claimName``)."""
    p["spec"]["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return p


__all__ = ["CATALOG", "DAY", "LONG_AGO", "REGION", "T0", "ZONES", "claimed_node", "describe", "instance_type",
           "instance_types", "iso", "node", "nodeclaim", "nodeclass", "nodepool", "pdb", "pod", "price", "provider_id",
           "snapshot", "pv", "pvc", "storageclass", "csinode", "with_claims"]
