"""Workloads against the NodePools of the same load: near misses that keep pods off every NodePool (pure; warnings).

Tolerations and node selectors are free-form, so a typo is a valid pod that no NodePool takes: ``plan`` then says
``taint nvidia.com/gpu=true:NoSchedule not tolerated`` or ``label acelerator does not have known values``, but only
``validate`` can point at the field.  With NodePools in the load, a warning for:

* a toleration whose ``key`` is no NodePool taint's but one typo from one (``nvidia.com/gpus``);
* a toleration of a NodePool taint's key with ``operator: Equal`` whose ``value`` is none of that key's taint values
  but one typo from one (``dedicated=gpus``);
* a toleration matching a NodePool taint's key and value but only for another ``effect`` (``NoExecute`` for a
  ``NoSchedule`` taint): the taint is not tolerated;
* a ``nodeSelector`` key, or a required node-affinity ``In`` expression's key, that no NodePool defines (template
  labels, requirements) but one typo from one that does (well-known keys are :mod:`.pod_hints`' business);
* such a key's value that no NodePool gives it, when every NodePool defining the key gives it a closed set of
  values, one typo from one of them (``accelerator: nvidai``);
* a ``DoNotSchedule`` topology spread constraint whose ``topologyKey`` (not a well-known label) no NodePool puts on
  its nodes: nodes without the key cannot take the pods, so none Karpenter launches can.

A near miss only: a toleration or label no NodePool knows at all is normal (taints of other node groups, the
node lifecycle's own ``node.kubernetes.io/not-ready``), so it is not reported.
"""

from __future__ import annotations

from . import labels as L
from .errors import FieldError
from .text import did_you_mean, near

__all__ = ["nodepool_hints"]


class _Pools:
    """What the NodePools of the load put on their nodes: taints (key, value, effect) and label values."""

    def __init__(self, nodepools: list[dict]):
        self.taints: list[tuple[str, str, str]] = []
        self.labels: dict[str, set | None] = {}   # key -> its values on the NodePools' nodes; None: any value
        for np_ in nodepools:
            template = _dict(_dict(np_.get("spec")).get("template"))
            spec = _dict(template.get("spec"))
            for t in spec.get("taints") or ():
                if isinstance(t, dict) and isinstance(t.get("key"), str):
                    self.taints.append((t["key"], str(t.get("value") or ""), str(t.get("effect") or "")))
            for key, value in _dict(_dict(template.get("metadata")).get("labels")).items():
                self._add(key, {str(value)})
            for r in spec.get("requirements") or ():
                if isinstance(r, dict) and isinstance(r.get("key"), str):
                    op = r.get("operator")
                    self._add(r["key"], {str(v) for v in r.get("values") or ()} if op == "In" else
                              None if op in ("Exists", "NotIn", "Gt", "Lt", "Gte", "Lte") else set())

    def _add(self, key: str, values: set | None) -> None:
        if key not in self.labels:
            self.labels[key] = values
        elif self.labels[key] is not None:
            self.labels[key] = None if values is None else self.labels[key] | values


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _taint(t: tuple[str, str, str]) -> str:
    return f"{t[0]}={t[1]}:{t[2]}" if t[1] else f"{t[0]}:{t[2]}"


def _tolerates(tol: dict, t: tuple[str, str, str]) -> bool:
    """Does the toleration ``tol`` tolerate the taint ``t`` (key, value, effect), as the scheduler matches them?"""
    key, op, effect = tol.get("key") or "", tol.get("operator") or "Equal", tol.get("effect") or ""
    if effect and effect != t[2]:
        return False
    if not key:
        return op == "Exists"
    return key == t[0] and (op == "Exists" or str(tol.get("value") or "") == t[1])


def _toleration(tol: dict, where: str, untolerated: list, out: list[FieldError]) -> None:
    """``untolerated``: the NodePools' taints none of the pod's tolerations tolerates (a near miss of a taint some
    other toleration does tolerate is no mistake: a pod may tolerate one taint for several effects)."""
    key, op = tol.get("key"), tol.get("operator") or "Equal"
    if not isinstance(key, str) or not key or not untolerated:
        return
    same_key = [t for t in untolerated if t[0] == key]
    if not same_key:
        close = near(key, {t[0] for t in untolerated})
        if close:
            taints = ", ".join(_taint(t) for t in untolerated if t[0] in close)
            out.append(FieldError(f"{where}.key", f"toleration key {key} matches no taint of the NodePools given, so "
                                                  f"their taint {taints} is not tolerated{did_you_mean(close)}"))
        return
    value = str(tol.get("value") or "")
    matching = same_key if op == "Exists" else [t for t in same_key if t[1] == value]
    if not matching:
        close = near(value, {t[1] for t in same_key if t[1]})
        if close:
            out.append(FieldError(f"{where}.value", f"toleration {key}={value} matches no taint of the NodePools "
                                                    f"given ({', '.join(_taint(t) for t in same_key)})"
                                                    f"{did_you_mean(close)}"))
        return
    effect = tol.get("effect")
    if isinstance(effect, str) and effect:
        out.append(FieldError(f"{where}.effect", f"toleration of {key} only for effect {effect}: the NodePools' taint "
                                                 f"{', '.join(_taint(t) for t in matching)} is not tolerated (leave "
                                                 "effect empty to tolerate every effect)"))


def _label(key, values: list, where: str, pools: _Pools, out: list[FieldError]) -> None:
    if not isinstance(key, str) or key in L.WELL_KNOWN or key in L.NORMALIZED:
        return
    if key not in pools.labels:
        close = near(key, pools.labels)
        if close:
            out.append(FieldError(where, f"no NodePool given labels its nodes {key}{did_you_mean(close)}"))
        return
    known = pools.labels[key]
    if not known:
        return
    bad = [v for v in values if isinstance(v, str) and v not in known]
    close = sorted({a for v in bad for a in near(v, known)})
    if bad and close and len(bad) == len(values):
        out.append(FieldError(where, f"no NodePool given labels its nodes {key}={', '.join(bad)}: their values are "
                                     f"{', '.join(sorted(known))}{did_you_mean(close)}"))


def nodepool_hints(spec, path: str, nodepools: list[dict]) -> list[FieldError]:
    """The warnings above for one pod spec at ``path`` against ``nodepools`` (NodePool manifests, v1)."""
    out: list[FieldError] = []
    if not isinstance(spec, dict) or not nodepools:
        return out
    pools = _Pools(nodepools)
    tolerations = [t for t in spec.get("tolerations") or () if isinstance(t, dict)] \
        if isinstance(spec.get("tolerations"), list) else []
    untolerated = [t for t in pools.taints if not any(_tolerates(tol, t) for tol in tolerations)]
    for i, tol in enumerate(spec.get("tolerations") or ()):
        if isinstance(tol, dict):
            _toleration(tol, f"{path}.tolerations[{i}]", untolerated, out)
    for key, value in _dict(spec.get("nodeSelector")).items():
        _label(key, [value], f"{path}.nodeSelector[{key}]", pools, out)
    required = _dict(_dict(_dict(spec.get("affinity")).get("nodeAffinity"))
                     .get("requiredDuringSchedulingIgnoredDuringExecution"))
    for i, term in enumerate(required.get("nodeSelectorTerms") or ()):
        for j, e in enumerate(_dict(term).get("matchExpressions") or ()):
            if isinstance(e, dict) and e.get("operator") == "In" and isinstance(e.get("values"), list):
                _label(e.get("key"), e["values"], f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuring"
                                                  f"Execution.nodeSelectorTerms[{i}].matchExpressions[{j}]", pools, out)
    for i, c in enumerate(spec.get("topologySpreadConstraints") or ()):
        if isinstance(c, dict) and c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule":
            _topology_key(c.get("topologyKey"), f"{path}.topologySpreadConstraints[{i}].topologyKey", pools, out)
    return out


def _topology_key(key, where: str, pools: _Pools, out: list[FieldError]) -> None:
    """A ``DoNotSchedule`` spread's key no NodePool puts on its nodes: a node without it cannot take the pod, so none
    Karpenter launches can (``plan``: "node has no rack label")."""
    if not isinstance(key, str) or not key or key in L.WELL_KNOWN or key in L.NORMALIZED or key in pools.labels:
        return
    close = near(key, pools.labels)
    hint = did_you_mean(close) or " (add it to a NodePool's labels or requirements)"
    out.append(FieldError(where, f"no NodePool given labels its nodes {key}: a node without it cannot take these "
                                 f"pods (whenUnsatisfiable: DoNotSchedule), so none Karpenter launches can{hint}"))
