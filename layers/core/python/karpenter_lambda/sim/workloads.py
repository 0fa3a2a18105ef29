"""A small workload controller for the simulator: Deployments, StatefulSets and ReplicaSets keep their replicas.

As the ReplicaSet / StatefulSet controllers would: missing pods are created (a pod deleted or evicted comes back
as a new pending pod with a fresh uid), surplus pods are deleted on scale-down (the newest first), a changed pod
template replaces the pods, and a deleted workload takes its pods with it.  Pods are made by the same expansion
``plan`` uses (:mod:`karpenter_lambda.api.workloads`), so names are deterministic.  A Job's pod that is evicted or
deleted before it finished comes back (the Job controller counts it as failed and starts another; simulated pods
never finish, and a Succeeded pod that still exists is never replaced).  CronJobs and bare Pods are created once.

Deployments and StatefulSets are also objects in the simulated API server (``deployments`` / ``statefulsets``),
and their ``spec.replicas`` is read from there on every reconcile: a scale through the API (``kubectl scale``, the
``scale`` subresource, a Lambda function) changes the pods, as it would in a cluster.  The pod template stays the
one of the manifest (``add``); a template patched through the API is not rolled out.  A workload deleted through
the API stops being reconciled and its pods are deleted (a stand-in for owner-reference garbage collection).
``status.replicas`` / ``readyReplicas`` / ``observedGeneration`` are written back after each reconcile that changes
them.  Each Deployment also has its apps/v1 ReplicaSet in the API server (``replicasets``), the one its pods'
ownerReferences name (:func:`karpenter_lambda.api.workloads.deployment_replicaset`: the Deployment's selector, the
template's labels, owned by the Deployment, ``spec.replicas`` kept equal to the Deployment's), created with the pods
and deleted with the Deployment (or when a new template gives the pods a new ReplicaSet: the old one is deleted, not
kept at 0 replicas as the Deployment controller's revision history keeps it), so the controllers' snapshot loader
finds it (a pod's default topology spread selector is deduced from its ReplicaSet, docs/scheduling.md).  ReplicaSets
given as manifests, Jobs, CronJobs and Pods stay in memory only.  Unlike the real controllers, the pods' owner
references carry ``plan``'s deterministic uid, not the API object's uid (the owner is found by name).

Storage: a StatefulSet's ``spec.volumeClaimTemplates`` give each pod a volume per template whose claim is
``<template>-<statefulset>-<ordinal>`` (:func:`karpenter_lambda.api.workloads.add_claim_volumes`), and the claims
(:func:`karpenter_lambda.api.workloads.stateful_claims`) are created before the pods when
missing (an existing claim is reused, and claims stay when the StatefulSet scales down or goes, Kubernetes' default
``Retain`` retention).  Every reconcile ends with a round of the storage controllers (:func:`.storage.sync`:
ephemeral volume claims, the PersistentVolume controller, ``Immediate`` provisioning).
"""

from __future__ import annotations

import copy
import json

from ..api.workloads import add_claim_volumes, claim_templates, expand, stateful_claims
from . import storage
from .kubeapi import StoreError

RECONCILED = ("Deployment", "StatefulSet", "ReplicaSet")
RESTARTED = ("Job",)   # missing pods are recreated; never scaled
IN_API = {"Deployment": "deployments", "StatefulSet": "statefulsets"}   # kept as API objects; replicas read from there


def _key(doc: dict) -> tuple[str, str, str]:
    meta = doc.get("metadata") or {}
    return doc.get("kind", ""), meta.get("namespace") or "default", meta.get("name", "")


def _owner_uid(pod: dict) -> str | None:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return refs[0].get("uid") if refs else None


class WorkloadController:
    def __init__(self, server, emit=None, region: str = "us-east-1"):
        self.server = server
        self.region = region      # the zones of Immediate provisioning (storage.sync)
        self.emit = emit or (lambda *a: None)
        self.workloads: dict[tuple[str, str, str], dict] = {}
        self.owners: dict[tuple[str, str, str], set[str]] = {}   # every owner uid a workload's pods ever had
        self.replicasets: dict[tuple[str, str, str], set[str]] = {}   # a Deployment's ReplicaSets in the API server

    def add(self, doc: dict) -> None:
        """Add a workload, or replace it (an apply: the API object takes the manifest's labels, annotations, spec)."""
        key = _key(doc)
        self.workloads[key] = copy.deepcopy(doc)
        expanded = expand(doc)
        for p in expanded.pods:
            self.owners.setdefault(key, set()).add(_owner_uid(p))
        plural = IN_API.get(key[0])
        if plural is None:
            return
        if key[0] == "Deployment":   # its ReplicaSet is there before any of its pods is forwarded
            self._sync_replicasets(key, expanded.controllers)
        store = self.server.store
        body = _strip(doc)
        body.setdefault("metadata", {})["namespace"] = key[1]
        cur = store.get(plural, key[2], key[1])
        if cur is None:
            store.create(plural, body, key[1])
        else:
            body["status"] = cur.get("status") or {}
            store.update(plural, body, key[1])

    def _api_object(self, key: tuple[str, str, str]) -> dict | None:
        plural = IN_API.get(key[0])
        return self.server.store.get(plural, key[2], key[1]) if plural else None

    def replicas(self) -> list[dict]:
        out = []
        for key, doc in sorted(self.workloads.items()):
            kind, ns, name = key
            if kind in IN_API:
                obj = self._api_object(key)
                if obj is None:       # deleted through the API; the next reconcile forgets it
                    continue
                doc = obj
            spec = doc.get("spec") or {}
            n = spec.get("replicas", 1) if kind in RECONCILED else spec.get("parallelism", 1)
            out.append({"kind": kind, "namespace": ns, "name": name, "replicas": n})
        return out

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        return self.workloads.get((kind, namespace or "default", name))

    def scale(self, kind: str, namespace: str, name: str, replicas: int) -> None:
        key = (kind, namespace or "default", name)
        doc = self.get(kind, namespace, name)
        if doc is None or (kind in IN_API and self._api_object(key) is None):
            raise KeyError(f"{kind} {namespace or 'default'}/{name} does not exist")
        doc.setdefault("spec", {})["replicas"] = replicas
        if kind in IN_API:
            self.server.store.update_scale(IN_API[kind], name, {"spec": {"replicas": replicas}}, key[1], "merge")

    def delete(self, kind: str, namespace: str, name: str) -> None:
        key = (kind, namespace or "default", name)
        if key not in self.workloads:
            raise KeyError(f"{kind} {key[1]}/{name} does not exist")
        if kind in IN_API and self._api_object(key) is not None:
            self.server.store.delete(IN_API[kind], name, key[1])
        self._forget(key)

    def _forget(self, key: tuple[str, str, str]) -> int:
        """Drop a workload and delete its pods; returns how many pods were deleted."""
        kind, ns, name = key
        self.workloads.pop(key, None)
        owners = self.owners.pop(key, set())
        for rs in sorted(self.replicasets.pop(key, set())):   # the Deployment's ReplicaSet goes with it
            if self.server.store.get("replicasets", rs, ns) is not None:
                self.server.store.delete("replicasets", rs, ns)
        n = 0
        for p in self.server.store.list("pods", namespace=ns):
            if _owner_uid(p) in owners or (kind == "Pod" and p["metadata"]["name"] == name):
                self.server.store.delete("pods", p["metadata"]["name"], ns)
                n += 1
        return n

    def reconcile(self) -> int:
        """Converge every reconciled workload's pods; returns how many pods were created or deleted."""
        changed = 0
        pods = self.server.store.list("pods", shared=True)   # read only (deletes and creates go through the store)
        for key, doc in list(self.workloads.items()):
            if key[0] not in RECONCILED + RESTARTED:
                continue
            obj = None
            if key[0] in IN_API:
                obj = self._api_object(key)
                if obj is None:          # deleted through the API: its pods go too
                    changed += self._forget(key)
                    continue
                replicas = (obj.get("spec") or {}).get("replicas", 1)
                doc.setdefault("spec", {})["replicas"] = replicas
            expanded = expand(doc)
            desired = add_claim_volumes(expanded.pods, [doc])
            if key[0] == "Deployment":
                self._sync_replicasets(key, expanded.controllers)
            self.owners.setdefault(key, set()).update(_owner_uid(p) for p in desired)
            owners = self.owners[key]
            want = {p["metadata"]["name"]: p for p in desired}
            live = [p for p in pods if (p["metadata"].get("namespace") or "default") == key[1] and _owner_uid(p) in owners]
            have = {p["metadata"]["name"] for p in live if not (p["metadata"].get("deletionTimestamp"))}
            surplus = [] if key[0] in RESTARTED else sorted(
                (p for p in live if p["metadata"]["name"] not in want),
                key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True)
            for p in surplus:
                self.server.store.delete("pods", p["metadata"]["name"], key[1])
                changed += 1
            self._create_claims(doc, list(want.values()))
            for name, pod in want.items():
                if name not in have and self.server.store.get("pods", name, key[1]) is None:
                    pods.append(self.server.store.create("pods", _strip(pod), key[1]))
                    changed += 1
            if obj is not None:
                ready = sum(1 for p in live if p["metadata"]["name"] in want and _ready(p))
                self._write_status(key, obj, len(want), ready)
        storage.sync(self.server.store, self.region, pods)
        return changed

    def _sync_replicasets(self, key: tuple[str, str, str], wanted: list[dict]) -> None:
        """The Deployment's current ReplicaSet in the API server (created, or its ``spec.replicas`` set to the
        Deployment's); one of an earlier template is deleted."""
        store, ns = self.server.store, key[1]
        names = self.replicasets.setdefault(key, set())
        keep = set()
        for rs in wanted:
            name = rs["metadata"]["name"]
            keep.add(name)
            names.add(name)
            cur = store.get("replicasets", name, ns)
            replicas = rs["spec"].get("replicas", 1)
            if cur is None:
                store.create("replicasets", _strip(rs), ns)
            elif (cur.get("spec") or {}).get("replicas") != replicas:
                store.patch("replicasets", name, {"spec": {"replicas": replicas}}, ns, "merge")
        for name in sorted(names - keep):
            if store.get("replicasets", name, ns) is not None:
                store.delete("replicasets", name, ns)
            names.discard(name)

    def _create_claims(self, doc: dict, pods: list[dict]) -> None:
        """The claims of a StatefulSet's pods, created when missing (an existing claim is the pod's, as in Kubernetes)."""
        if not claim_templates(doc):
            return
        ns = (doc.get("metadata") or {}).get("namespace") or "default"
        have = {c["metadata"]["name"] for c in self.server.store.list("persistentvolumeclaims", namespace=ns)}
        for pod in pods:
            for claim in stateful_claims(doc, pod):
                if claim["metadata"]["name"] not in have:
                    self.server.store.create("persistentvolumeclaims", claim, ns)
                    have.add(claim["metadata"]["name"])

    def _write_status(self, key: tuple[str, str, str], obj: dict, replicas: int, ready: int) -> None:
        status = {"replicas": replicas, "readyReplicas": ready, "observedGeneration": obj["metadata"].get("generation", 1)}
        if key[0] == "Deployment":
            status["availableReplicas"] = ready
        cur = obj.get("status") or {}
        if all(cur.get(k) == v for k, v in status.items()):
            return
        try:
            self.server.store.patch(IN_API[key[0]], key[2], {"status": status}, key[1], "merge", subresource="status")
        except StoreError:   # deleted meanwhile: the next reconcile forgets it
            pass


def _ready(pod: dict) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def _strip(obj: dict) -> dict:
    d = json.loads(json.dumps(obj))
    d.pop("status", None)
    meta = d.setdefault("metadata", {})
    for k in ("resourceVersion", "creationTimestamp", "uid"):
        meta.pop(k, None)
    return d
