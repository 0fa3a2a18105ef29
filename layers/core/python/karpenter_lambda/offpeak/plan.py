"""Off-peak scale-down: the state that should hold now, and the changes that get there (pure).

``plan_offpeak(OffPeakInput) -> OffPeakPlan``.  Every invocation computes what should hold at ``now`` from the
schedules, kube-downscaler annotations and what was recorded, so a missed or doubled invocation changes nothing:

* **Holds.** A Deployment/StatefulSet is *held* when an active :class:`~..api.objects.OffPeakSchedule` selects
  it (``spec.workloads``) or its kube-downscaler annotations (or its Namespace's) say it is down now
  (:mod:`.downscaler`).  Several holds on one workload: the **lowest replica count wins**.  A schedule does not
  take a workload created after its window started (it is left alone until the next window); a downscaler
  annotation does, as kube-downscaler would.
* **Never up.** A hold's target above the workload's own count (recorded or current) is capped at that count:
  off-peak only scales down (kube-downscaler's rule too).
* **Records.** The first time a workload is held, its replicas are recorded (``originalReplicas``, with its uid)
  before it is scaled; the record stays until the hold ends, when exactly that count is restored.  A workload
  scaled by hand during the window is scaled down again and the record is untouched; a workload deleted (or
  deleted and created again: another uid) is forgotten.  If the record store lost a record, the annotation
  :data:`ORIGINAL_ANNOTATION` the controller writes on the workload stands in for it, and so does
  kube-downscaler's ``downscaler/original-replicas`` (a workload kube-downscaler scaled down before the switch is
  restored to it when its downtime ends).
* **Autoscalers.** An HPA targeting a held workload: while the target is 0, Kubernetes' own rule holds it (an HPA
  does nothing while its target has 0 replicas), so the HPA is left as it is; for a target above 0 its
  ``minReplicas``/``maxReplicas`` are pinned to the target and the originals recorded and restored.  A KEDA
  ScaledObject: the annotation ``autoscaling.keda.sh/paused-replicas`` is set to the target (KEDA scales to it and
  pauses), its earlier value recorded and put back (or removed).  HPAs KEDA owns are left to KEDA.
* **NodePools.** ``spec.nodePools`` entries of the active schedules override ``spec.limits`` / ``spec.disruption``
  (several schedules on one NodePool: the lowest limit per resource, ``drain`` wins); the originals are recorded
  and restored.  ``drain: true`` holds the NodePool at zero (``limits`` cpu and memory ``0``) and asks the
  controller to drain its nodes; at the end the controller hands pending pods to provisioning itself.

Records are plain dicts (``key`` = ``Kind/namespace/name`` or ``NodePool/name``) so this module stays free of the
store; the controller persists them (record first, then act; act, then delete the record).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from ..api.labels import OFFPEAK_HELD_BY_ANNOTATION, OFFPEAK_ORIGINAL_ANNOTATION
from ..api.offpeak_types import WORKLOAD_KINDS
from ..api.quantity import parse_quantity
from ..api.times import format_time, to_datetime
from .downscaler import ORIGINAL_REPLICAS, downscaler_decision
from .window import Window, next_window, window_at

ORIGINAL_ANNOTATION = OFFPEAK_ORIGINAL_ANNOTATION      # the names the off-peak code has always used
HELD_BY_ANNOTATION = OFFPEAK_HELD_BY_ANNOTATION
KEDA_PAUSED = "autoscaling.keda.sh/paused-replicas"
DOWNSCALER_ORIGINAL = ORIGINAL_REPLICAS                # kube-downscaler's own record (a team switching over)
DOWNSCALER = "downscaler"
DRAIN_LIMITS = {"cpu": "0", "memory": "0"}


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def workload_key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace or 'default'}/{name}"


def key_of(obj: dict) -> str:
    m = _meta(obj)
    return workload_key(obj.get("kind", ""), m.get("namespace") or "default", m.get("name", ""))


def replicas_of(obj: dict) -> int:
    r = (obj.get("spec") or {}).get("replicas")
    return 1 if r is None else int(r)


# -- input / output ------------------------------------------------------------------------------------------
@dataclass
class OffPeakInput:
    schedules: list                      # api.offpeak.OffPeakSchedule
    workloads: list[dict]                # Deployments and StatefulSets (with kind set)
    namespaces: list[dict] = field(default_factory=list)
    hpas: list[dict] = field(default_factory=list)
    scaledobjects: list[dict] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    nodepools: list = field(default_factory=list)      # api.objects.NodePool
    now: datetime = None


@dataclass
class ScheduleState:
    name: str
    time_zone: str
    active: bool
    window: Window | None                 # the window holding now
    next: Window | None                   # the next window to start
    error: str | None = None

    def to_dict(self) -> dict:
        def w(x: Window | None):
            return None if x is None else {"start": format_time(x.start), "end": format_time(x.end),
                                           "startLocal": _local(x.start, self.time_zone),
                                           "endLocal": _local(x.end, self.time_zone)}
        return {"name": self.name, "timeZone": self.time_zone, "active": self.active, "window": w(self.window),
                "next": w(self.next), "error": self.error}


@dataclass
class Change:
    """One object to change: a workload's replicas, an autoscaler or a NodePool patch."""
    kind: str                  # Deployment | StatefulSet | HorizontalPodAutoscaler | ScaledObject | NodePool
    namespace: str
    name: str
    action: str                # scale-down | rescale | restore | pin | unpin | pause | unpause | override | drain
    frm: object = None         # replicas before (workloads) or the fields before (others)
    to: object = None          # replicas after, or the patch
    holders: tuple[str, ...] = ()
    key: str = ""              # the record this change belongs to

    def to_dict(self) -> dict:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name, "action": self.action,
                "from": self.frm, "to": self.to, "holders": list(self.holders), "record": self.key}


@dataclass
class OffPeakPlan:
    schedules: list[ScheduleState]
    changes: list[Change] = field(default_factory=list)        # in order: records put before, deleted after
    put_records: list[dict] = field(default_factory=list)     # written BEFORE the changes
    delete_records: list[str] = field(default_factory=list)   # deleted AFTER the changes succeed
    drain_nodepools: list[str] = field(default_factory=list)  # held at zero: their nodes are to be drained
    restored_nodepools: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)         # {object, reason}

    def to_dict(self) -> dict:
        return {"schedules": [s.to_dict() for s in self.schedules], "changes": [c.to_dict() for c in self.changes],
                "putRecords": self.put_records, "deleteRecords": self.delete_records,
                "drainNodePools": self.drain_nodepools, "restoredNodePools": self.restored_nodepools,
                "skipped": self.skipped}


def _local(t: datetime, tz: str) -> str:
    return t.astimezone(ZoneInfo(tz)).isoformat()


# -- the plan ------------------------------------------------------------------------------------------------
def schedule_states(schedules: list, now: datetime) -> list[ScheduleState]:
    out = []
    for s in schedules:
        try:
            w = window_at(s.schedule, s.time_zone, s.duration_seconds, now)
            nxt = next_window(s.schedule, s.time_zone, s.duration_seconds, now)
            out.append(ScheduleState(s.name, s.time_zone, w is not None, w, nxt))
        except (ValueError, KeyError) as e:        # validated on apply; a stored bad one holds nothing
            out.append(ScheduleState(s.name, getattr(s, "time_zone", "UTC"), False, None, None, error=str(e)))
    return out


def _holds(inp: OffPeakInput, states: dict[str, ScheduleState], ns_index: dict[str, dict],
           recorded: dict[str, dict]) -> tuple[dict[str, tuple[int, list[str]]], list[dict]]:
    """key -> (target replicas, holders) for every workload that should be held now."""
    holds: dict[str, tuple[int, list[str]]] = {}
    skipped = []

    def add(key: str, target: int, holder: str):
        cur = holds.get(key)
        if cur is None:
            holds[key] = (target, [holder])
        else:
            holds[key] = (min(cur[0], target), cur[1] + [holder])

    for w in inp.workloads:
        if w.get("kind") not in WORKLOAD_KINDS:
            continue
        m = _meta(w)
        ns = m.get("namespace") or "default"
        key = key_of(w)
        ns_obj = ns_index.get(ns)
        ns_labels = (_meta(ns_obj).get("labels") or {}) if ns_obj else {}
        created = to_datetime(m.get("creationTimestamp"))
        for s in inp.schedules:
            st = states.get(s.name)
            if st is None or not st.active:
                continue
            for target in s.workloads:
                if not target.matches(w, ns_labels):
                    continue
                holder = f"OffPeakSchedule/{s.name}"
                rec = recorded.get(key)
                already = rec is not None and holder in (rec.get("holders") or [])
                if not already and created is not None and created > st.window.start:
                    skipped.append({"object": key, "reason": f"created {format_time(created)}, after {holder}'s window "
                                                              f"started {format_time(st.window.start)}: left alone"})
                    break
                add(key, target.replicas, holder)
                break
        d = downscaler_decision(w, ns_obj, inp.now)
        if d is not None:
            if d.error:
                skipped.append({"object": key, "reason": d.error})
            elif d.replicas is not None:
                add(key, d.replicas, f"{DOWNSCALER} ({d.source})")
    return holds, skipped


def _annotation_record(w: dict) -> dict | None:
    """A record rebuilt from the workload's own annotation (when the store lost it)."""
    ann = _meta(w).get("annotations") or {}
    raw = ann.get(ORIGINAL_ANNOTATION, ann.get(DOWNSCALER_ORIGINAL))
    if raw is None:
        return None
    try:
        original = int(raw)
    except ValueError:
        return None
    m = _meta(w)
    return {"key": key_of(w), "kind": w.get("kind"), "namespace": m.get("namespace") or "default",
            "name": m.get("name"), "uid": m.get("uid"), "originalReplicas": original,
            "holders": [h for h in (ann.get(HELD_BY_ANNOTATION) or "").split(",") if h], "fromAnnotation": True}


def _autoscalers_of(w: dict, hpas: list[dict], sos: list[dict]) -> tuple[dict | None, dict | None]:
    m = _meta(w)
    ns, name, kind = m.get("namespace") or "default", m.get("name"), w.get("kind")

    def targets(obj):
        ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
        return ((_meta(obj).get("namespace") or "default") == ns and ref.get("name") == name
                and (ref.get("kind") or "Deployment") == kind)

    so = next((o for o in sos if targets(o)), None)
    hpa = None
    for h in hpas:
        owners = _meta(h).get("ownerReferences") or []
        if targets(h) and not any(o.get("kind") == "ScaledObject" for o in owners):
            hpa = h
            break
    return hpa, so


def plan_offpeak(inp: OffPeakInput) -> OffPeakPlan:
    now = inp.now
    states = schedule_states(inp.schedules, now)
    by_name = {s.name: s for s in states}
    plan = OffPeakPlan(schedules=states)
    ns_index = {_meta(n).get("name"): n for n in inp.namespaces}
    recorded = {r["key"]: r for r in inp.records if r.get("kind") in WORKLOAD_KINDS}
    live = {key_of(w): w for w in inp.workloads if w.get("kind") in WORKLOAD_KINDS}
    for key, w in live.items():       # the annotation stands in for a lost record
        if key not in recorded:
            rec = _annotation_record(w)
            if rec is not None:
                recorded[key] = rec

    # records of workloads that are gone (or were replaced by another object of the same name): forgotten
    for key, rec in sorted(recorded.items()):
        w = live.get(key)
        if w is None or (rec.get("uid") and _meta(w).get("uid") and rec["uid"] != _meta(w).get("uid")):
            if not rec.get("fromAnnotation"):
                plan.delete_records.append(key)
            plan.skipped.append({"object": key, "reason": "deleted (or re-created) since it was recorded: forgotten"})
            recorded.pop(key)
    holds, skipped = _holds(inp, by_name, ns_index, recorded)
    plan.skipped.extend(skipped)

    for key in sorted(set(holds) | set(recorded)):
        w = live.get(key)
        if w is None:
            continue
        m = _meta(w)
        kind, ns, name = w.get("kind"), m.get("namespace") or "default", m.get("name")
        current = replicas_of(w)
        rec = recorded.get(key)
        hpa, so = _autoscalers_of(w, inp.hpas, inp.scaledobjects)
        if key in holds:
            target, holders = holds[key]
            new = rec is None or rec.get("fromAnnotation")
            # off-peak never scales a workload up: a target above what it had is capped at that (as kube-downscaler)
            target = min(target, int(rec["originalReplicas"]) if rec else current)
            rec = copy.deepcopy(rec) if rec else {"key": key, "kind": kind, "namespace": ns, "name": name,
                                                  "uid": m.get("uid"), "originalReplicas": current,
                                                  "since": format_time(now)}
            rec.pop("fromAnnotation", None)
            changed = new or sorted(rec.get("holders") or []) != sorted(holders) or rec.get("target") != target
            rec["holders"], rec["target"] = sorted(holders), target
            _hold_autoscalers(plan, rec, hpa, so, target, key)
            if changed or rec.get("_dirty"):
                rec.pop("_dirty", None)
                plan.put_records.append(rec)
            if current != target:
                action = "scale-down" if new else "rescale"
                plan.changes.append(Change(kind, ns, name, action, current, target, tuple(rec["holders"]), key))
        else:
            original = int(rec.get("originalReplicas", current))
            if current != original:
                plan.changes.append(Change(kind, ns, name, "restore", current, original,
                                           tuple(rec.get("holders") or ()), key))
            _release_autoscalers(plan, rec, hpa, so, key)
            if not rec.get("fromAnnotation"):
                plan.delete_records.append(key)
            else:
                plan.changes.append(Change(kind, ns, name, "forget-annotation", None, None, (), key))
    _plan_nodepools(inp, by_name, plan)
    return plan


def _hold_autoscalers(plan: OffPeakPlan, rec: dict, hpa: dict | None, so: dict | None, target: int, key: str) -> None:
    if so is not None:
        sm = _meta(so)
        ann = sm.get("annotations") or {}
        if "scaledObject" not in rec:
            rec["scaledObject"] = {"name": sm.get("name"), "pausedReplicas": ann.get(KEDA_PAUSED)}
            rec["_dirty"] = True
        if ann.get(KEDA_PAUSED) != str(target):
            plan.changes.append(Change("ScaledObject", sm.get("namespace") or "default", sm.get("name"), "pause",
                                       ann.get(KEDA_PAUSED), {"metadata": {"annotations": {KEDA_PAUSED: str(target)}}},
                                       tuple(rec["holders"]), key))
    if hpa is not None and target > 0:
        hm, hs = _meta(hpa), hpa.get("spec") or {}
        if "hpa" not in rec:
            rec["hpa"] = {"name": hm.get("name"), "minReplicas": hs.get("minReplicas"),
                          "maxReplicas": hs.get("maxReplicas")}
            rec["_dirty"] = True
        if hs.get("minReplicas") != target or hs.get("maxReplicas") != target:
            plan.changes.append(Change("HorizontalPodAutoscaler", hm.get("namespace") or "default", hm.get("name"),
                                       "pin", {"minReplicas": hs.get("minReplicas"), "maxReplicas": hs.get("maxReplicas")},
                                       {"spec": {"minReplicas": target, "maxReplicas": target}},
                                       tuple(rec["holders"]), key))


def _release_autoscalers(plan: OffPeakPlan, rec: dict, hpa: dict | None, so: dict | None, key: str) -> None:
    saved_so = rec.get("scaledObject")
    if saved_so and so is not None and _meta(so).get("name") == saved_so.get("name"):
        orig = saved_so.get("pausedReplicas")
        if (_meta(so).get("annotations") or {}).get(KEDA_PAUSED) != orig:
            plan.changes.append(Change("ScaledObject", _meta(so).get("namespace") or "default", saved_so["name"],
                                       "unpause", (_meta(so).get("annotations") or {}).get(KEDA_PAUSED),
                                       {"metadata": {"annotations": {KEDA_PAUSED: orig}}}, (), key))
    saved_hpa = rec.get("hpa")
    if saved_hpa and hpa is not None and _meta(hpa).get("name") == saved_hpa.get("name"):
        hs = hpa.get("spec") or {}
        want = {"minReplicas": saved_hpa.get("minReplicas"), "maxReplicas": saved_hpa.get("maxReplicas")}
        if {"minReplicas": hs.get("minReplicas"), "maxReplicas": hs.get("maxReplicas")} != want:
            plan.changes.append(Change("HorizontalPodAutoscaler", _meta(hpa).get("namespace") or "default",
                                       saved_hpa["name"], "unpin",
                                       {"minReplicas": hs.get("minReplicas"), "maxReplicas": hs.get("maxReplicas")},
                                       {"spec": want}, (), key))


# -- NodePools -----------------------------------------------------------------------------------------------
def _min_quantity(a: str, b: str) -> str:
    try:
        return a if parse_quantity(str(a)) <= parse_quantity(str(b)) else b
    except ValueError:
        return a


def nodepool_overrides(schedules: list, states: dict[str, ScheduleState]) -> dict[str, dict]:
    """NodePool name -> {limits, disruption, drain, holders} from the active schedules (merged)."""
    out: dict[str, dict] = {}
    for s in schedules:
        st = states.get(s.name)
        if st is None or not st.active:
            continue
        for o in s.nodepools:
            cur = out.setdefault(o.name, {"limits": None, "disruption": None, "drain": False, "holders": []})
            cur["holders"].append(f"OffPeakSchedule/{s.name}")
            if o.drain:
                cur["drain"] = True
            if o.limits:
                lim = dict(cur["limits"] or {})
                for r, q in o.limits.items():
                    lim[r] = _min_quantity(str(q), lim[r]) if r in lim else str(q)
                cur["limits"] = lim
            if o.disruption:
                cur["disruption"] = {**(cur["disruption"] or {}), **o.disruption}
    for cur in out.values():
        if cur["drain"]:
            cur["limits"] = dict(DRAIN_LIMITS)
    return out


def _plan_nodepools(inp: OffPeakInput, states: dict[str, ScheduleState], plan: OffPeakPlan) -> None:
    want = nodepool_overrides(inp.schedules, states)
    recorded = {r["key"]: r for r in inp.records if r.get("kind") == "NodePool"}
    pools = {np.name: np for np in inp.nodepools}
    for name in sorted(set(want) | {r["name"] for r in recorded.values()}):
        key = f"NodePool/{name}"
        np = pools.get(name)
        rec = recorded.get(key)
        if np is None:
            if rec is not None:
                plan.delete_records.append(key)
                plan.skipped.append({"object": key, "reason": "NodePool deleted since it was recorded: forgotten"})
            elif name in want:
                plan.skipped.append({"object": key, "reason": f"no NodePool {name!r} ({', '.join(want[name]['holders'])})"})
            continue
        spec = np.spec
        if name in want:
            w = want[name]
            if rec is None:
                rec = {"key": key, "kind": "NodePool", "name": name, "since": format_time(inp.now),
                       "original": {"limits": copy.deepcopy(spec.get("limits")),
                                    "disruption": copy.deepcopy(spec.get("disruption"))}}
            target = {}
            if w["limits"] is not None:
                target["limits"] = w["limits"]
            if w["disruption"] is not None:
                target["disruption"] = {**(rec["original"].get("disruption") or {}), **w["disruption"]}
            if (sorted(rec.get("holders") or []) != sorted(w["holders"]) or rec.get("drain") != w["drain"]
                    or key not in recorded):
                rec = {**rec, "holders": sorted(w["holders"]), "drain": w["drain"]}
                plan.put_records.append(rec)
            now_fields = {k: spec.get(k) for k in target}
            if now_fields != target:
                plan.changes.append(Change("NodePool", "", name, "drain" if w["drain"] else "override",
                                           now_fields, target, tuple(w["holders"]), key))
            if w["drain"]:
                plan.drain_nodepools.append(name)
        else:
            orig = rec.get("original") or {}
            target = {k: orig.get(k) for k in ("limits", "disruption")}
            now_fields = {k: spec.get(k) for k in target}
            if now_fields != target:
                plan.changes.append(Change("NodePool", "", name, "restore", now_fields, target,
                                           tuple(rec.get("holders") or ()), key))
            if rec.get("drain"):
                plan.restored_nodepools.append(name)
            plan.delete_records.append(key)
