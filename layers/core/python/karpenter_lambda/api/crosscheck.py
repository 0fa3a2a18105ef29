"""Checks across the documents of one load (pure): the same object twice, and Scenario steps against the NodePools.

* **Duplicates.** Two documents naming the same object (kind, API group, namespace for namespaced kinds, name) are
  one error on the later one: ``FILE:DOC: Kind/name: duplicate of FILE:DOC``.  The API version does not count: a
  ``karpenter.sh/v1beta1`` and a ``karpenter.sh/v1`` NodePool named alike are the same object (the API server
  stores one).  The duplicate is left out before the v1beta1 conversion, so it cannot write into the other.
* **Scenario steps.** Each step that names a NodePool (``interrupt``, ``nodeUnhealthy``, ``delete`` of a NodePool)
  must name one that exists at that step (given, or applied by an earlier step, and not deleted since), and mean
  something there: a ``SpotInterruption`` or ``RebalanceRecommendation`` needs a NodePool whose requirements allow
  spot, a ``CapacityReservationInterruption`` one that allows reserved capacity.  Without any NodePool in the
  load (a Scenario validated on its own) there is nothing to check against and no step is refused.
* **Storage references** (warnings: the object may be in the cluster, not in the files). A claim (a
  PersistentVolumeClaim, a StatefulSet's ``volumeClaimTemplates``, a generic ephemeral volume's template) naming a
  StorageClass, or a PersistentVolumeClaim naming a volume (``volumeName``), that the load does not have, when the
  load has objects of that kind: ``simulate`` would leave its pods Pending ("StorageClass gp33 of PVC ... not
  found"), as a cluster without it would.  So is a pod volume naming a PersistentVolumeClaim (``claimName``) that
  the load does not have in the pod's namespace, when it has some there (a StatefulSet's claims count: the ones its
  controller makes from its ``volumeClaimTemplates``).
* **What the pods' admission would refuse** (warnings): RuntimeClasses, PriorityClasses and LimitRanges given
  with the workloads, checked in :mod:`.admission_hints`.
* **PodDisruptionBudgets that select nothing** (warnings): a budget whose selector matches the pods of none of the
  workloads given in its namespace, when some are given, protects nothing -- disruption may evict those pods all at
  once, which is usually a typo in the selector (``app: webb``).  A budget that, with the replicas of the workloads it selects, allows
  no eviction at all (``maxUnavailable: 0``, ``minAvailable`` equal to the replicas) is a warning too: Karpenter
  never drains those nodes for consolidation, and drift or expiration waits for the terminationGracePeriod.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import labels as L
from .errors import FieldError
from .updates import nodepool_update_errors
from .text import did_you_mean, near

#: kinds without a namespace (a ``metadata.namespace`` on them is ignored, as the API server ignores it)
CLUSTER_SCOPED = frozenset({
    "NodePool", "EC2NodeClass", "NodeClaim", "NodeOverlay", "OffPeakSchedule", "Scenario",
    "PersistentVolume", "StorageClass", "CSINode", "CSIDriver", "Node", "Namespace", "PriorityClass",
    "RuntimeClass", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "VolumeAttachment",
})


def identity(data: object) -> tuple[str, str, str, str] | None:
    """(API group, kind, namespace, name) of a manifest; None when it has no kind or name (reported elsewhere)."""
    if not isinstance(data, dict):
        return None
    kind, api_version = data.get("kind"), data.get("apiVersion")
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    name = meta.get("name")
    if not isinstance(kind, str) or not kind or not isinstance(name, str) or not name or not isinstance(api_version, str):
        return None
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    namespace = "" if kind in CLUSTER_SCOPED else (meta.get("namespace") or "default")
    return group, kind, str(namespace), name


def pod_specs(docs: list[object]):
    """(position in ``docs``, identity, where its pod spec sits, the pod spec) of every workload among ``docs`` (a Pod,
    a Deployment, a CronJob, ...; the spec ``{}`` when it is not a mapping)."""
    from .kuberules_objects import POD_SPEC_PATHS, get

    for pos, data in enumerate(docs):
        key = identity(data)
        if key is not None and key[1] in POD_SPEC_PATHS:
            spec = get(data, POD_SPEC_PATHS[key[1]])
            yield pos, key, POD_SPEC_PATHS[key[1]], spec if isinstance(spec, dict) else {}


def duplicates(docs: list[tuple[str, object]]) -> dict[int, str]:
    """Positions of the documents that repeat an earlier one -> the earlier one's label (``docs`` are (label, data))."""
    first: dict[tuple, str] = {}
    out: dict[int, str] = {}
    for pos, (label, data) in enumerate(docs):
        key = identity(data)
        if key is None:
            continue
        if key in first:
            out[pos] = first[key]
        else:
            first[key] = label
    return out


# -- Scenario steps against the NodePools -----------------------------------------------------------------------
SPOT_ONLY = ("SpotInterruption", "RebalanceRecommendation")
RESERVED_ONLY = ("CapacityReservationInterruption",)


def capacity_types(nodepool: dict) -> set[str]:
    """The capacity types a NodePool manifest's requirements and template labels allow."""
    template = (nodepool.get("spec") or {}).get("template") or {}
    allowed = set(L.CAPACITY_TYPES)
    label = ((template.get("metadata") or {}).get("labels") or {}).get(L.CAPACITY_TYPE)
    if isinstance(label, str):
        allowed &= {label}
    for req in (template.get("spec") or {}).get("requirements") or []:
        if not isinstance(req, dict) or req.get("key") != L.CAPACITY_TYPE:
            continue
        values = {str(v) for v in req.get("values") or []}
        op = req.get("operator")
        if op == "In":
            allowed &= values
        elif op == "NotIn":
            allowed -= values
        elif op == "DoesNotExist":
            allowed = set()
    return allowed


@dataclass
class _Pools:
    docs: dict[str, dict]

    def check(self, name, where: str, errors: list[FieldError], step: str) -> dict | None:
        if not isinstance(name, str) or not name:
            return None
        if name not in self.docs:
            known = ", ".join(sorted(self.docs)) or "none"
            errors.append(FieldError(where, f"{step}: NodePool {name!r} does not exist at this step (NodePools: {known})"))
            return None
        return self.docs[name]


def _describe(i: int, raw: dict, action: str) -> str:
    return f"step {i} ({action} at {raw.get('at')})"


def scenario_step_errors(scenario: dict, nodepools: dict[str, dict]) -> list[FieldError]:
    """Each step of a Scenario manifest that names a NodePool that is not there, or asks of it what it cannot be
    (spot interruptions on a NodePool without spot).  ``nodepools``: name -> manifest of the NodePools given."""
    if not nodepools:
        return []
    pools = _Pools(dict(nodepools))
    errors: list[FieldError] = []
    steps = ((scenario.get("spec") or {}) if isinstance(scenario.get("spec"), dict) else {}).get("steps")
    for i, raw in enumerate(steps if isinstance(steps, list) else []):
        if not isinstance(raw, dict):
            continue
        for action in ("interrupt", "nodeUnhealthy", "delete", "apply"):
            args = raw.get(action)
            if not isinstance(args, dict):
                continue
            where, step = f"spec.steps[{i}].{action}", _describe(i, raw, action)
            if action == "apply":
                if args.get("kind") == "NodePool" and isinstance((args.get("metadata") or {}).get("name"), str):
                    before = pools.docs.get(args["metadata"]["name"])
                    if before is not None:   # an update: the CRD's transition rules (api/updates.py)
                        errors += [FieldError(f"{where}.{e.path}", f"{step}: NodePool {args['metadata']['name']!r}: "
                                                                     f"{e.message}")
                                   for e in nodepool_update_errors(before, args)]
                    pools.docs[args["metadata"]["name"]] = args
            elif action == "delete":
                if args.get("kind") == "NodePool" and pools.check(args.get("name"), f"{where}.name", errors, step):
                    pools.docs.pop(args["name"], None)
            else:
                pool = pools.check(args.get("nodePool"), f"{where}.nodePool", errors, step)
                kind = args.get("kind") if action == "interrupt" else None
                if pool is not None and (kind in SPOT_ONLY or kind in RESERVED_ONLY):
                    need = L.CAPACITY_TYPE_SPOT if kind in SPOT_ONLY else L.CAPACITY_TYPE_RESERVED
                    allowed = capacity_types(pool)
                    if need not in allowed:
                        errors.append(FieldError(
                            f"{where}.kind", f"{step}: {kind} on NodePool {args['nodePool']!r}, whose requirements allow no "
                                             f"{need} capacity ({L.CAPACITY_TYPE}: {', '.join(sorted(allowed)) or 'none'}): "
                                             f"EC2 never sends it to such nodes"))
    return errors


# -- storage references -------------------------------------------------------------------------------------------
def _claim_specs(doc: dict):
    """(path, claim spec) of every claim ``doc`` makes or is: a PVC, a StatefulSet's templates, ephemeral volumes."""
    from .kuberules_objects import POD_SPEC_PATHS, get

    kind = doc.get("kind")
    if kind == "PersistentVolumeClaim":
        yield "spec", doc.get("spec")
    if kind == "StatefulSet":
        for i, t in enumerate(get(doc, "spec.volumeClaimTemplates") or ()):
            yield f"spec.volumeClaimTemplates[{i}].spec", t.get("spec") if isinstance(t, dict) else None
    path = POD_SPEC_PATHS.get(kind) if isinstance(kind, str) else None
    volumes = get(doc, f"{path}.volumes") if path else None
    for i, v in enumerate(volumes if isinstance(volumes, list) else ()):
        tpl = get(v, "ephemeral.volumeClaimTemplate.spec") if isinstance(v, dict) else None
        if tpl is not None:
            yield f"{path}.volumes[{i}].ephemeral.volumeClaimTemplate.spec", tpl


def storage_reference_warnings(docs: list[object]) -> list[tuple[int, FieldError]]:
    """(position in ``docs``, warning) per claim naming a StorageClass or volume the load does not have, when the
    load has some of that kind (see the module doc)."""
    names: dict[str, set] = {"StorageClass": set(), "PersistentVolume": set()}
    for data in docs:
        key = identity(data)
        if key is not None and key[1] in names:
            names[key[1]].add(key[3])
    out: list[tuple[int, FieldError]] = []
    for pos, data in enumerate(docs):
        if not isinstance(data, dict):
            continue
        for path, spec in _claim_specs(data):
            if not isinstance(spec, dict):
                continue
            for field, kind, many in (("storageClassName", "StorageClass", "StorageClasses"),
                                      ("volumeName", "PersistentVolume", "PersistentVolumes")):
                ref = spec.get(field)
                if names[kind] and isinstance(ref, str) and ref and ref not in names[kind]:
                    known = ", ".join(sorted(names[kind]))
                    hint = did_you_mean(near(ref, names[kind]))
                    out.append((pos, FieldError(f"{path}.{field}", f"no {kind} {ref} among the objects given "
                                                                    f"({many}: {known}): its claims stay Pending{hint}")))
    return out + _claim_name_warnings(docs)


def _given_claims(docs: list[object]) -> dict[str, set]:
    """namespace -> the PersistentVolumeClaims the load has there: the PVCs given and those each StatefulSet's
    controller makes from its templates (``<template>-<statefulset>-<ordinal>``)."""
    from .kuberules_objects import get

    claims: dict[str, set] = {}
    for data in docs:
        key = identity(data)
        if key is None:
            continue
        if key[1] == "PersistentVolumeClaim":
            claims.setdefault(key[2], set()).add(key[3])
        elif key[1] == "StatefulSet":
            replicas = get(data, "spec.replicas")
            replicas = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1
            for tpl in get(data, "spec.volumeClaimTemplates") or ():
                name = get(tpl, "metadata.name")
                if isinstance(name, str) and name:
                    claims.setdefault(key[2], set()).update(f"{name}-{key[3]}-{i}" for i in range(min(replicas, 1000)))
    return claims


def _claim_name_warnings(docs: list[object]) -> list[tuple[int, FieldError]]:
    """A pod volume's ``persistentVolumeClaim.claimName`` that is not among the claims given in its namespace, when
    some are given there: ``plan`` and ``simulate`` leave the pods Pending (\"PVC data-db not found\"), as the
    kube-scheduler does."""
    from .kuberules_objects import get

    claims = _given_claims(docs)
    out: list[tuple[int, FieldError]] = []
    for pos, key, path, spec in pod_specs(docs):
        if not claims.get(key[2]):
            continue
        given = claims[key[2]]
        volumes = spec.get("volumes")
        for i, vol in enumerate(volumes if isinstance(volumes, list) else ()):
            ref = get(vol, "persistentVolumeClaim.claimName")
            if isinstance(ref, str) and ref and ref not in given:
                hint = did_you_mean(near(ref, given))
                listed = sorted(given)
                shown = ", ".join(listed[:8]) + (f", ... ({len(listed)} in all)" if len(listed) > 8 else "")
                out.append((pos, FieldError(f"{path}.volumes[{i}].persistentVolumeClaim.claimName",
                                            f"no PersistentVolumeClaim {ref} among the objects given in namespace "
                                            f"{key[2]} (PersistentVolumeClaims: {shown}): its pods stay Pending{hint}")))
    return out


# -- PodDisruptionBudgets ---------------------------------------------------------------------------------------------
def pdb_warnings(docs: list[object]) -> list[tuple[int, FieldError]]:
    """(position in ``docs``, warning) per PodDisruptionBudget selecting the pods of none of the workloads given in
    its namespace, when some are given there (see the module doc)."""
    from .kuberules_objects import POD_SPEC_PATHS, get
    from .selectors import Selector

    pods: dict[str, list[tuple[str, dict, int]]] = {}   # namespace -> [(Kind/name, pod labels, pods)]
    for data in docs:
        key = identity(data)
        if key is None or key[1] not in POD_SPEC_PATHS:
            continue
        spec_path = POD_SPEC_PATHS[key[1]]
        labels = get(data, "metadata.labels" if key[1] == "Pod" else spec_path.rsplit(".", 1)[0] + ".metadata.labels")
        pods.setdefault(key[2], []).append((f"{key[1]}/{key[3]}", labels if isinstance(labels, dict) else {},
                                            _pod_count(data, key[1])))
    out: list[tuple[int, FieldError]] = []
    for pos, data in enumerate(docs):
        key = identity(data)
        if key is None or key[1] != "PodDisruptionBudget" or not pods.get(key[2]):
            continue
        selector = get(data, "spec.selector")
        try:
            sel = Selector(selector if isinstance(selector, dict) else None)
        except ValueError:
            continue   # an unknown operator: an error of its own
        chosen = [(name, n) for name, labels, n in pods[key[2]] if sel.matches(labels)]
        if not chosen:
            given = ", ".join(name for name, _, _ in pods[key[2]])
            out.append((pos, FieldError("spec.selector", f"selects the pods of none of the workloads given in namespace "
                                                          f"{key[2]} ({given}): it protects nothing")))
            continue
        spec = get(data, "spec") if isinstance(get(data, "spec"), dict) else {}
        total = sum(n for _, n in chosen)
        allowed = _disruptions_allowed(spec, total)
        if total and allowed is not None and allowed <= 0:
            field = "maxUnavailable" if "maxUnavailable" in spec else "minAvailable"
            what = ", ".join(f"{name}: {n}" for name, n in chosen)
            out.append((pos, FieldError(f"spec.{field}", f"allows no eviction of its {total} pod(s) ({what}; {field} "
                                                          f"{spec[field]}): Karpenter never drains their nodes for "
                                                          "consolidation, and drift or expiration waits until the "
                                                          "NodePool's terminationGracePeriod (forever without one)")))
    return out


def _pod_count(doc: dict, kind: str) -> int:
    """How many pods a workload manifest stands for (replicas; parallelism for a Job; 1 for a Pod; 0 for a DaemonSet,
    whose pods Karpenter's drain leaves to the end)."""
    from .kuberules_objects import get

    if kind == "DaemonSet":
        return 0
    path = {"Job": "spec.parallelism", "CronJob": "spec.jobTemplate.spec.parallelism"}.get(kind, "spec.replicas")
    n = get(doc, path) if kind != "Pod" else 1
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 1


def _disruptions_allowed(spec: dict, total: int) -> int | None:
    """The disruption controller's allowed disruptions for ``total`` healthy pods (percentages rounded up, as it
    does), or None when the budget is unreadable (an error of its own)."""
    import math

    def scaled(v) -> int | None:
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, str) and v.endswith("%") and v[:-1].isdigit():
            return math.ceil(int(v[:-1]) * total / 100)
        return None

    if "maxUnavailable" in spec:
        return scaled(spec["maxUnavailable"])
    if "minAvailable" in spec:
        m = scaled(spec["minAvailable"])
        return None if m is None else total - m
    return None
