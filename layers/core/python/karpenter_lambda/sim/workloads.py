"""A small workload controller for the simulator: Deployments, StatefulSets and ReplicaSets keep their replicas.

As the ReplicaSet / StatefulSet controllers would: missing pods are created (a pod deleted or evicted comes back
as a new pending pod with a fresh uid), surplus pods are deleted on scale-down (the newest first), a changed pod
template replaces the pods, and a deleted workload takes its pods with it.  Pods are made by the same expansion
``plan`` uses (:mod:`karpenter_lambda.api.workloads`), so names are deterministic.  A Job's pod that is evicted or
deleted before it finished comes back (the Job controller counts it as failed and starts another; simulated pods
never finish, and a Succeeded pod that still exists is never replaced).  CronJobs and bare Pods are created once.
"""

from __future__ import annotations

import copy
import json

from ..api.workloads import expand

RECONCILED = ("Deployment", "StatefulSet", "ReplicaSet")
RESTARTED = ("Job",)   # missing pods are recreated; never scaled


def _key(doc: dict) -> tuple[str, str, str]:
    meta = doc.get("metadata") or {}
    return doc.get("kind", ""), meta.get("namespace") or "default", meta.get("name", "")


def _owner_uid(pod: dict) -> str | None:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return refs[0].get("uid") if refs else None


class WorkloadController:
    def __init__(self, server, emit=None):
        self.server = server
        self.emit = emit or (lambda *a: None)
        self.workloads: dict[tuple[str, str, str], dict] = {}
        self.owners: dict[tuple[str, str, str], set[str]] = {}   # every owner uid a workload's pods ever had

    def add(self, doc: dict) -> None:
        key = _key(doc)
        self.workloads[key] = copy.deepcopy(doc)
        for p in expand(doc).pods:
            self.owners.setdefault(key, set()).add(_owner_uid(p))

    def replicas(self) -> list[dict]:
        out = []
        for (kind, ns, name), doc in sorted(self.workloads.items()):
            spec = doc.get("spec") or {}
            n = spec.get("replicas", 1) if kind in RECONCILED else spec.get("parallelism", 1)
            out.append({"kind": kind, "namespace": ns, "name": name, "replicas": n})
        return out

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        return self.workloads.get((kind, namespace or "default", name))

    def scale(self, kind: str, namespace: str, name: str, replicas: int) -> None:
        doc = self.get(kind, namespace, name)
        if doc is None:
            raise KeyError(f"{kind} {namespace or 'default'}/{name} does not exist")
        doc.setdefault("spec", {})["replicas"] = replicas

    def delete(self, kind: str, namespace: str, name: str) -> None:
        key = (kind, namespace or "default", name)
        if key not in self.workloads:
            raise KeyError(f"{kind} {key[1]}/{name} does not exist")
        del self.workloads[key]
        owners = self.owners.pop(key, set())
        for p in self.server.store.list("pods", namespace=key[1]):
            if _owner_uid(p) in owners or (kind == "Pod" and p["metadata"]["name"] == name):
                self.server.store.delete("pods", p["metadata"]["name"], key[1])

    def reconcile(self) -> int:
        """Converge every reconciled workload's pods; returns how many pods were created or deleted."""
        changed = 0
        pods = self.server.store.list("pods")
        for key, doc in list(self.workloads.items()):
            if key[0] not in RECONCILED + RESTARTED:
                continue
            desired = expand(doc).pods
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
            for name, pod in want.items():
                if name not in have and self.server.store.get("pods", name, key[1]) is None:
                    self.server.store.create("pods", _strip(pod), key[1])
                    changed += 1
        return changed


def _strip(obj: dict) -> dict:
    d = json.loads(json.dumps(obj))
    d.pop("status", None)
    meta = d.setdefault("metadata", {})
    for k in ("resourceVersion", "creationTimestamp", "uid"):
        meta.pop(k, None)
    return d
