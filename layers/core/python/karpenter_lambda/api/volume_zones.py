"""Warnings for workloads whose volumes are in zones no node shares (pure): ``validate`` reports them.

A pod's node must be in the zone of every volume it mounts (scheduling/volumes.py): a bound claim's PersistentVolume
says its zone, an unbound claim its StorageClass's allowed topologies (``api/storage.py``; ``topology.kubernetes.io/zone``
or the EBS CSI driver's ``topology.ebs.csi.aws.com/zone``).  Two claims
whose zones have nothing in common (volumes restored from snapshots into different zones, a class allowed in one
zone and a volume in another) make a pod that never schedules: ``plan`` and ``simulate`` say so for the pod;
``validate`` warns about the workload when the claims, volumes and classes are among the objects given.  A claim
the load does not have, or one whose volume or class names no zone, constrains nothing here.

The claims of a pod: its ``persistentVolumeClaim`` volumes; for a StatefulSet, also each replica's claims from
``volumeClaimTemplates`` (``<template>-<statefulset>-<ordinal>``, as its controller names them).
"""

from __future__ import annotations

from . import labels as L
from .errors import FieldError
from .kuberules_objects import POD_SPEC_PATHS, get
from .storage import class_requirements, volume_requirements

__all__ = ["volume_zone_warnings"]

#: replicas of one StatefulSet looked at (its claims are named per ordinal)
MAX_ORDINALS = 1000


def _zones(expressions: list[dict]) -> frozenset | None:
    """The zones ``In`` expressions on the zone key allow, or None when they name none."""
    out = None
    for e in expressions:
        if isinstance(e.get("key"), str) and L.normalize_key(e["key"]) == L.ZONE and e.get("operator") == "In" \
                and isinstance(e.get("values"), list):
            vals = frozenset(str(v) for v in e["values"])
            out = vals if out is None else out & vals
    return out


class _Storage:
    """The load's claims, volumes and classes, and the zones each claim allows."""

    def __init__(self, docs: list[object]):
        self.claims: dict = {}
        self.volumes: dict = {}
        self.classes: dict = {}
        for data in docs:
            kind = data.get("kind") if isinstance(data, dict) else None
            name = get(data, "metadata.name") if kind else None
            if not isinstance(name, str):
                continue
            if kind == "PersistentVolumeClaim":
                self.claims[(get(data, "metadata.namespace") or "default", name)] = get(data, "spec") or {}
            elif kind == "PersistentVolume":
                self.volumes[name] = _zones(volume_requirements(data))
            elif kind == "StorageClass":
                self.classes[name] = _zones(class_requirements(data))

    def zones(self, namespace: str, claim: str) -> tuple[frozenset, str] | None:
        """(zones, what says so) for a claim the load has whose volume or class names zones, else None."""
        spec = self.claims.get((namespace, claim))
        if not isinstance(spec, dict):
            return None
        volume, klass = spec.get("volumeName"), spec.get("storageClassName")
        if isinstance(volume, str) and volume:
            z = self.volumes.get(volume)
            return (z, f"PV {volume}") if z is not None else None
        z = self.classes.get(klass) if isinstance(klass, str) else None
        return (z, f"StorageClass {klass}") if z is not None else None


def _pod_claims(doc: dict, path: str) -> list[tuple[str | None, list[str]]]:
    """[(replica name or None, its claim names)] of a workload's pods."""
    volumes = get(doc, f"{path}.volumes")
    direct = [get(v, "persistentVolumeClaim.claimName") for v in (volumes if isinstance(volumes, list) else ())]
    direct = [c for c in direct if isinstance(c, str) and c]
    if doc.get("kind") != "StatefulSet":
        return [(None, direct)] if len(direct) > 1 else []
    name = get(doc, "metadata.name")
    templates = [get(t, "metadata.name") for t in get(doc, "spec.volumeClaimTemplates") or ()]
    templates = [t for t in templates if isinstance(t, str) and t]
    replicas = get(doc, "spec.replicas")
    count = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1
    return [(f"{name}-{i}", direct + [f"{t}-{name}-{i}" for t in templates])
            for i in range(min(max(count, 0), MAX_ORDINALS))] if len(direct) + len(templates) > 1 else []


def volume_zone_warnings(docs: list[object]) -> list[tuple[int, FieldError]]:
    """(position in ``docs``, warning) per workload whose pod (or a StatefulSet replica) mounts claims whose zones
    have nothing in common (see the module doc); one warning per workload, naming its first such pod."""
    storage = _Storage(docs)
    if not storage.claims:
        return []
    out: list[tuple[int, FieldError]] = []
    for pos, data in enumerate(docs):
        kind = data.get("kind") if isinstance(data, dict) else None
        path = POD_SPEC_PATHS.get(kind) if isinstance(kind, str) else None
        if path is None:
            continue
        namespace = get(data, "metadata.namespace") or "default"
        bad = []
        for replica, claims in _pod_claims(data, path):
            known = [(c, storage.zones(namespace, c)) for c in claims]
            known = [(c, z) for c, z in known if z is not None]
            if len(known) > 1 and not frozenset.intersection(*(z for _, (z, _) in known)):
                bad.append((replica, known))
        if bad:
            replica, known = bad[0]
            said = " and ".join(f"PVC {c} ({why}: {', '.join(sorted(z)) or 'no zone'})" for c, (z, why) in known)
            who = f"replica {replica}" if replica else "its pods"
            more = f" (and {len(bad) - 1} more replica(s))" if len(bad) > 1 else ""
            where = "spec.volumeClaimTemplates" if get(data, "spec.volumeClaimTemplates") else f"{path}.volumes"
            out.append((pos, FieldError(where, f"{who}{more}: {said} are in zones no node shares: no node can mount "
                                               f"them all, so the pod never schedules")))
    return out
