"""Expand workload manifests into the pods they would create (pure).

`plan` and `simulate` take ordinary Kubernetes manifests.  A Pod stands for
itself; a Deployment, ReplicaSet or StatefulSet stands for ``spec.replicas``
pods (default 1); a Job for ``spec.parallelism`` pods (default 1, never more
than ``completions``); a CronJob for one run of its job template.  A suspended
Job or CronJob (``spec.suspend: true``, or a CronJob whose job template is
suspended) stands for no pod: its controller creates none.  DaemonSets
are returned separately: they are not pending pods but per-node overhead.

Every pod built here (a Pod, or a controller's) is defaulted as the API server
defaults a created pod where it changes scheduling: with ``spec.hostNetwork:
true``, each container port without a ``hostPort`` gets ``hostPort =
containerPort`` (:func:`default_host_network_ports`; ``SetDefaults_Pod``), so two
such pods listening on one port are never put on one node (kube-scheduler's
NodePorts filter).  Since Kubernetes 1.28 the API server no longer does this to
pod templates, only to pods: a DaemonSet is returned as it is.

Generated pods get the controller's pod template (labels, annotations, spec),
an ownerReference to the controller (so pods of one controller are recognised
as identical), deterministic names and UIDs (uuid5 of cluster-local identity),
and the ``PodScheduled=False/Unschedulable`` condition the watcher would see.

``Workloads.controllers`` holds the controller objects the pods name as their controller owner, as the API server
would hold them: a Deployment's ReplicaSet (the one its pods' ownerReferences name, as the Deployment controller
creates it: ``apps/v1``, selector the Deployment's, labels the template's, owned by the Deployment) and each
StatefulSet or ReplicaSet itself.  They are what a pod's default topology spread selector is deduced from
(``scheduling/default_spread.py``: kube-scheduler's ``DefaultSelector`` reads the pod's ReplicaSet / StatefulSet).
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from dataclasses import dataclass, field

from .errors import ValidationIssue
from .kube import SCHEDULING_GATED, SCHEDULING_GATED_MESSAGE, scheduling_gates
from .labels import POD_TEMPLATE_HASH

_NS = uuid.UUID("6f1c1f0e-7d0a-4a8e-9d43-6b9e0b8f1a21")

CONTROLLER_KINDS = {"Deployment", "ReplicaSet", "StatefulSet", "Job", "CronJob"}
WORKLOAD_KINDS = CONTROLLER_KINDS | {"Pod", "DaemonSet"}


@dataclass
class Workloads:
    pods: list[dict] = field(default_factory=list)
    daemonsets: list[dict] = field(default_factory=list)
    issues: list[ValidationIssue] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # "Kind/name" of objects that are not workloads
    # the ReplicaSets / StatefulSets the pods are owned by (a Deployment's ReplicaSet, a StatefulSet, a ReplicaSet)
    controllers: list[dict] = field(default_factory=list)


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(_NS, "/".join(parts)))


def _short_hash(*parts: str, n: int = 10) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:n]


def _replica_names(prefix: str, count: int) -> list[str]:
    """``count`` pod names ``<prefix>-<5 hex>``, each replica's suffix hashed from its index, distinct: a suffix another
    replica already took is hashed again (as the API server retries a generated name that exists; 5 hex digits
    collide within a few hundred replicas).  The same names for the first replicas whatever ``count``."""
    names: list[str] = []
    seen: set[str] = set()
    for i in range(count):
        name, salt = f"{prefix}-{_short_hash(prefix, str(i), n=5)}", 0
        while name in seen:
            salt += 1
            name = f"{prefix}-{_short_hash(prefix, str(i), str(salt), n=5)}"
        seen.add(name)
        names.append(name)
    return names


def unschedulable_condition(pod: dict | None = None) -> dict:
    """A pending pod's PodScheduled condition as the kube-scheduler leaves it: ``Unschedulable``, or, for a pod with
    scheduling gates, ``SchedulingGated`` (never tried: neither scheduled nor provisioned for until they go)."""
    if pod is not None and scheduling_gates(pod):
        return {"type": "PodScheduled", "status": "False", "reason": SCHEDULING_GATED, "message": SCHEDULING_GATED_MESSAGE}
    return {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/0 nodes are available"}


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def default_host_network_ports(spec) -> None:
    """What the API server does to a pod it creates with ``hostNetwork: true`` (``SetDefaults_Pod``,
    ``defaultHostNetworkPorts``): every container's and init container's port without a ``hostPort`` (or with 0) gets
    ``hostPort = containerPort``, since the container listens on the node's own network.  In place; an explicit
    ``hostPort`` is kept, and anything malformed (refused by ``validate``) is left alone."""
    if not isinstance(spec, dict) or spec.get("hostNetwork") is not True:
        return
    for group in ("containers", "initContainers"):
        containers = spec.get(group)
        for c in containers if isinstance(containers, list) else ():
            ports = c.get("ports") if isinstance(c, dict) else None
            for port in ports if isinstance(ports, list) else ():
                if isinstance(port, dict) and not port.get("hostPort") and port.get("containerPort") is not None:
                    port["hostPort"] = port["containerPort"]


def _pod_from_template(owner: dict, template: dict, name: str, owner_ref: dict) -> dict:
    meta = _dict(owner.get("metadata"))
    namespace = meta.get("namespace") or "default"
    tmeta = copy.deepcopy(_dict(template.get("metadata")))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": _uid(namespace, "Pod", name),
            "labels": tmeta.get("labels") or {},
            "annotations": tmeta.get("annotations") or {},
            "ownerReferences": [owner_ref],
        },
        "spec": copy.deepcopy(_dict(template.get("spec"))),
        "status": {"phase": "Pending"},
    }
    default_host_network_ports(pod["spec"])
    pod["status"]["conditions"] = [unschedulable_condition(pod)]
    return pod


def _owner_ref(kind: str, api_version: str, namespace: str, name: str) -> dict:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": _uid(namespace, kind, name),
        "controller": True,
        "blockOwnerDeletion": True,
    }


#: the most pods one workload expands to (``plan`` and ``simulate``): a typo such as ``replicas: 30000000`` is refused
#: with a message instead of building millions of pods (Karpenter's own scheduling benchmark stops at about 40,000)
MAX_PODS_PER_WORKLOAD = 100_000


def _int_field(doc: dict, path: str, default: int, issues: list, where: tuple, prefix: str = "") -> int:
    """The count at ``path`` in ``doc`` (``default`` when absent); an issue (named ``prefix.path``) and 0 when it is
    not a non-negative integer, or more pods than one workload may expand to."""
    cur = doc
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is None:
            return default
    file, index, kind, name = where
    path = f"{prefix}.{path}" if prefix else path
    if isinstance(cur, bool) or not isinstance(cur, int) or cur < 0:
        issues.append(ValidationIssue(file, index, kind, name, path, f"must be a non-negative integer, got {cur!r}"))
        return 0
    if cur > MAX_PODS_PER_WORKLOAD:
        issues.append(ValidationIssue(file, index, kind, name, path,
                                      f"{cur:,} pods: plan and simulate expand at most {MAX_PODS_PER_WORKLOAD:,} pods "
                                      "per workload; lower it to plan or simulate this workload"))
        return 0
    return cur


def _suspended(spec) -> bool:
    """A Job spec (or a CronJob's) with ``suspend: true``: its controller creates no pod."""
    return isinstance(spec, dict) and spec.get("suspend") is True


def _job_pods(job_spec: dict, path: str, issues: list, where: tuple) -> int:
    """How many pods a Job spec (at ``path``: ``spec``, ``spec.jobTemplate.spec``) runs at once: ``parallelism``
    (default 1), never more than ``completions``."""
    replicas = _int_field(job_spec, "parallelism", 1, issues, where, path)
    comp = job_spec.get("completions")
    if isinstance(comp, int) and not isinstance(comp, bool) and comp >= 0:
        replicas = min(replicas, comp)
    return replicas


def expand(doc: dict, file: str = "<input>", index: int = 0, out: Workloads | None = None) -> Workloads:
    """Expand one manifest dict into ``out`` (created when None) and return it."""
    out = out if out is not None else Workloads()
    kind = doc.get("kind", "")
    meta = _dict(doc.get("metadata"))
    name = meta.get("name", "")
    namespace = meta.get("namespace") or "default"
    where = (file, index, kind, name)
    if kind not in WORKLOAD_KINDS:
        out.ignored.append(f"{kind}/{name}")
        return out
    if not name:
        out.issues.append(ValidationIssue(file, index, kind, name, "metadata.name", "Required value"))
        return out
    if kind == "Pod":
        pod = copy.deepcopy(doc)
        if not isinstance(pod.get("metadata"), dict):
            pod["metadata"] = {}
        pmeta = pod["metadata"]
        if not pmeta.get("namespace"):
            pmeta["namespace"] = "default"
        pmeta.setdefault("uid", _uid(namespace, "Pod", name))
        if not isinstance(pod.get("spec"), dict):
            pod["spec"] = {}
        default_host_network_ports(pod["spec"])
        if not pod["spec"].get("nodeName"):
            if not isinstance(pod.get("status"), dict):
                pod["status"] = {}
            pod["status"].setdefault("conditions", [unschedulable_condition(pod)])
            pod["status"].setdefault("phase", "Pending")
        out.pods.append(pod)
        return out
    if kind == "DaemonSet":
        ds = copy.deepcopy(doc)
        if not isinstance(ds.get("metadata"), dict):
            ds["metadata"] = {}
        ds["metadata"].setdefault("namespace", "default")
        ds["metadata"].setdefault("uid", _uid(namespace, "DaemonSet", name))
        out.daemonsets.append(ds)
        return out
    spec = _dict(doc.get("spec"))
    api_version = doc.get("apiVersion", "apps/v1")
    if kind == "CronJob":
        job_spec = _dict(_dict(spec.get("jobTemplate")).get("spec"))
        template = _dict(job_spec.get("template"))
        replicas = _job_pods(job_spec, "spec.jobTemplate.spec", out.issues, where)
        if _suspended(spec) or _suspended(job_spec):
            return out   # no Job is created (a suspended CronJob), or each one it creates is suspended: no pod
        job_name = f"{name}-{_short_hash(namespace, name, n=8)}"
        ref = _owner_ref("Job", "batch/v1", namespace, job_name)
        for pod_name in _replica_names(job_name, replicas):
            out.pods.append(_pod_from_template(doc, template, pod_name, ref))
        return out
    template = spec.get("template")
    if not isinstance(template, dict):
        out.issues.append(ValidationIssue(file, index, kind, name, "spec.template", "Required value: a pod template"))
        return out
    if kind == "Job":
        replicas = _job_pods(spec, "spec", out.issues, where)
        if _suspended(spec):
            replicas = 0   # the Job controller creates no pod while the Job is suspended
    else:
        replicas = _int_field(doc, "spec.replicas", 1, out.issues, where)
    if kind == "Deployment":
        rs_name = f"{name}-{_short_hash(namespace, name, str(template))}"
        ref = _owner_ref("ReplicaSet", "apps/v1", namespace, rs_name)
        out.controllers.append(deployment_replicaset(doc, rs_name, replicas))
        # the Deployment controller labels its pods (and its ReplicaSet's) pod-template-hash=<the ReplicaSet's hash>:
        # what a topology spread's matchLabelKeys: [pod-template-hash] reads
        tmeta = _dict(template.get("metadata"))
        hashed = {**_dict(tmeta.get("labels")), POD_TEMPLATE_HASH: rs_name.rsplit("-", 1)[1]}
        labelled = {**template, "metadata": {**tmeta, "labels": hashed}}
        for pod_name in _replica_names(rs_name, replicas):
            out.pods.append(_pod_from_template(doc, labelled, pod_name, ref))
    elif kind == "StatefulSet":
        ref = _owner_ref(kind, api_version, namespace, name)
        out.controllers.append(_controller_itself(doc, namespace))
        for i in range(replicas):
            out.pods.append(_pod_from_template(doc, template, f"{name}-{i}", ref))
    else:  # ReplicaSet, Job
        ref = _owner_ref(kind, api_version, namespace, name)
        if kind == "ReplicaSet":
            out.controllers.append(_controller_itself(doc, namespace))
        for pod_name in _replica_names(name, replicas):
            out.pods.append(_pod_from_template(doc, template, pod_name, ref))
    return out


def deployment_replicaset(doc: dict, rs_name: str, replicas: int) -> dict:
    """The ReplicaSet a Deployment's pods are owned by (named ``rs_name``), as the Deployment controller creates it:
    ``apps/v1``, the pods' owner uid, labels from the pod template, ``spec.selector`` the Deployment's, the template,
    ``replicas``, a controller reference to the Deployment; its labels, selector and template carry
    ``pod-template-hash`` (the part of ``rs_name`` after the Deployment's name), as its pods do."""
    meta = doc.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    spec = doc.get("spec") or {}
    template = copy.deepcopy(_dict(spec.get("template")))
    # the Deployment controller adds pod-template-hash to the ReplicaSet's labels, selector and pod template
    template_hash = {POD_TEMPLATE_HASH: rs_name.rsplit("-", 1)[1]}
    tmeta = template.setdefault("metadata", {}) if isinstance(template.get("metadata"), dict) or \
        "metadata" not in template else {}
    if isinstance(tmeta, dict):
        tmeta["labels"] = {**_dict(tmeta.get("labels")), **template_hash}
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": rs_name,
            "namespace": namespace,
            "uid": _uid(namespace, "ReplicaSet", rs_name),
            "labels": dict(_dict(tmeta.get("labels")) if isinstance(tmeta, dict) else template_hash),
            "ownerReferences": [_owner_ref("Deployment", doc.get("apiVersion") or "apps/v1", namespace, meta.get("name", ""))],
        },
        "spec": {"replicas": replicas, "template": template},
    }
    if spec.get("selector") is not None:
        selector = copy.deepcopy(spec["selector"])
        if isinstance(selector, dict):
            selector["matchLabels"] = {**_dict(selector.get("matchLabels")), **template_hash}
        rs["spec"]["selector"] = selector
    return rs


def _controller_itself(doc: dict, namespace: str) -> dict:
    """A StatefulSet or ReplicaSet as the pods' owner: the manifest, with its namespace, apiVersion and the uid the
    pods' ownerReferences carry."""
    obj = copy.deepcopy(doc)
    obj.setdefault("apiVersion", "apps/v1")
    meta = obj.setdefault("metadata", {})
    meta["namespace"] = namespace
    meta["uid"] = _uid(namespace, obj.get("kind", ""), meta.get("name", ""))   # the pods' ownerReferences' uid
    return obj


def expand_all(objects, file_of=None) -> Workloads:
    """Expand many manifests (dicts or objects with ``.doc``)."""
    out = Workloads()
    for i, obj in enumerate(objects):
        doc = obj.doc if hasattr(obj, "doc") else obj
        expand(doc, file_of(obj) if file_of else "<input>", i, out)
    return out


# -- a StatefulSet's claims (volumeClaimTemplates): not added by expand(); the simulator's workload controller uses them
def claim_templates(doc: dict) -> list[dict]:
    """A StatefulSet's ``spec.volumeClaimTemplates`` (each with a name); none for any other kind."""
    if doc.get("kind") != "StatefulSet":
        return []
    return [t for t in (doc.get("spec") or {}).get("volumeClaimTemplates") or []
            if isinstance(t, dict) and (t.get("metadata") or {}).get("name")]


def _ordinal(doc: dict, pod: dict) -> str:
    return pod["metadata"]["name"][len((doc.get("metadata") or {}).get("name", "")) + 1:]


def stateful_claims(doc: dict, pod: dict) -> list[dict]:
    """The PersistentVolumeClaims a StatefulSet's pod uses, one per ``volumeClaimTemplates`` entry, named
    ``<template>-<statefulset>-<ordinal>`` and labelled with the StatefulSet's selector, as its controller makes them."""
    meta = doc.get("metadata") or {}
    selector = ((doc.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    out = []
    for t in claim_templates(doc):
        tmeta = t.get("metadata") or {}
        claim_meta = {"name": f"{tmeta['name']}-{meta.get('name')}-{_ordinal(doc, pod)}",
                      "namespace": meta.get("namespace") or "default",
                      "labels": {**(tmeta.get("labels") or {}), **selector}}
        if tmeta.get("annotations"):
            claim_meta["annotations"] = dict(tmeta["annotations"])
        out.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": claim_meta,
                    "spec": copy.deepcopy(t.get("spec") or {})})
    return out


def add_claim_volumes(pods: list[dict], docs) -> list[dict]:
    """Give the pods of StatefulSets with ``volumeClaimTemplates`` (among ``docs``) a volume per template (replacing a
    volume of the same name in the pod template) whose claim is the pod's own; in place, returns ``pods``."""
    sts = {((d.get("metadata") or {}).get("namespace") or "default", (d.get("metadata") or {}).get("name")): d
           for d in docs if claim_templates(d)}
    if not sts:
        return pods
    for pod in pods:
        ref = next((r for r in (pod.get("metadata") or {}).get("ownerReferences") or [] if r.get("kind") == "StatefulSet"), None)
        doc = sts.get(((pod.get("metadata") or {}).get("namespace") or "default", ref.get("name"))) if ref else None
        if doc is None:
            continue
        spec = pod.setdefault("spec", {})
        names = {t["metadata"]["name"] for t in claim_templates(doc)}
        volumes = [v for v in spec.get("volumes") or [] if v.get("name") not in names]
        for t, claim in zip(claim_templates(doc), stateful_claims(doc, pod)):
            volumes.append({"name": t["metadata"]["name"], "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}})
        spec["volumes"] = volumes
    return pods
