"""What a PersistentVolume or a StorageClass asks of the node of a pod using it (pure), read once for the scheduler
(``scheduling/volumes.py``) and for ``validate``'s warnings (``api/volume_zones.py``).

As Karpenter's ``volumetopology.go``: a volume's ``spec.nodeAffinity.required.nodeSelectorTerms[0]`` match
expressions (the first term only; a ``local`` or ``hostPath`` volume's hostname requirement dropped, the node it names
being the one going away), and a class's ``allowedTopologies[0].matchLabelExpressions`` as ``In`` requirements.
"""

from __future__ import annotations

from . import labels as L

__all__ = ["volume_requirements", "class_requirements"]


def volume_requirements(pv: dict) -> list[dict]:
    """The NodeSelectorRequirement dicts a PersistentVolume asks of its node."""
    spec = pv.get("spec") or {}
    terms = (((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")) or []
    if not isinstance(terms, list) or not terms or not isinstance(terms[0], dict):
        return []
    out = [r for r in terms[0].get("matchExpressions") or () if isinstance(r, dict)]
    if spec.get("local") or spec.get("hostPath"):
        out = [r for r in out if r.get("key") != L.HOSTNAME]
    return out


def class_requirements(sc: dict) -> list[dict]:
    """The ``In`` NodeSelectorRequirement dicts a StorageClass's allowed topologies ask of the node (unbound claims)."""
    topos = sc.get("allowedTopologies") or []
    if not isinstance(topos, list) or not topos or not isinstance(topos[0], dict):
        return []
    return [{"key": e.get("key"), "operator": "In", "values": list(e.get("values") or [])}
            for e in topos[0].get("matchLabelExpressions") or () if isinstance(e, dict)]
