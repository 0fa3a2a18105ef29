"""Static-drift hashes of a NodePool's template and an EC2NodeClass's spec.

Karpenter stamps every NodeClaim with ``karpenter.sh/nodepool-hash`` (and the
AWS provider with ``karpenter.k8s.aws/ec2nodeclass-hash``); when the owner's
current hash differs, the NodeClaim is *drifted* and gets replaced.  Karpenter
hashes with hashstructure (``SlicesAsSets``, ``IgnoreZeroValue``, ``ZeroNil``);
fields tagged ``hash:"ignore"`` are left out.  We follow the same inputs and
options, with our own encoding (sorted JSON -> sha256 -> first 8 bytes as an
unsigned decimal, the same shape as Karpenter's ``fmt.Sprint(uint64)``).  The
numbers are therefore NOT equal to Karpenter's, only stable among ourselves.

NodePool (``NodePool.Hash``, K:pkg/apis/v1/nodepool.go): ``spec.template``
(metadata labels + annotations, and the template spec: taints, startupTaints,
nodeClassRef, expireAfter, terminationGracePeriod) EXCEPT ``requirements``
(``hash:"ignore"``; requirement drift is checked separately).  Disruption,
limits, weight and replicas are outside the template and never drift nodes.

EC2NodeClass (``EC2NodeClass.Hash``, A:pkg/apis/v1/ec2nodeclass.go): the whole
spec EXCEPT the dynamically resolved selectors (subnetSelectorTerms,
securityGroupSelectorTerms, capacityReservationSelectorTerms, amiSelectorTerms,
placementGroupSelector), ``ipPrefixCount`` and the literal ``amiFamily``; the
*resolved* AMI family (amiFamily, else the alias family) is hashed instead, so
omitting ``amiFamily: AL2023`` next to ``alias: al2023@latest`` does not drift.

CRD defaults are applied first: ``expireAfter`` omitted hashes like ``720h``,
``metadataOptions`` omitted like its four defaults.  Map key order and list
order never change a hash (lists are sets); zero values (``""``, ``0``,
``false``, ``null``, empty lists/maps) in struct fields are the same as absent.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .kubelet_config import MAPPED
from .objects import ALIAS_FAMILIES, EC2NodeClass, NodePool
from .validation import apply_defaults

__all__ = [
    "NODEPOOL_HASH_VERSION",
    "EC2NODECLASS_HASH_VERSION",
    "NODEPOOL_HASH_EXCLUDED",
    "EC2NODECLASS_HASH_EXCLUDED",
    "nodepool_hash",
    "ec2nodeclass_hash",
    "nodepool_hash_input",
    "ec2nodeclass_hash_input",
    "stable_hash",
]

# Bumped (as Karpenter does) when a default changes for a hashed field or fields join/leave the hash.
NODEPOOL_HASH_VERSION = "v3"
EC2NODECLASS_HASH_VERSION = "v4"

NODEPOOL_HASH_EXCLUDED = ("requirements",)
EC2NODECLASS_HASH_EXCLUDED = (
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "capacityReservationSelectorTerms",
    "amiSelectorTerms",
    "placementGroupSelector",
    "ipPrefixCount",
    "amiFamily",
)

# Fields whose value is a free-form map (entries kept even when their value is zero), not a struct.
_MAP_FIELDS = frozenset(
    {"labels", "annotations", "tags", "systemReserved", "kubeReserved", "evictionHard", "evictionSoft", "evictionSoftGracePeriod", "limits", "requests"}
)


def _is_zero(v: Any) -> bool:
    return v is None or v is False or v == "" or (isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0) or v == [] or v == {}


def _canonical(value: Any, is_map: bool = False, raw: bool = False) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if raw:   # a value of an open map (the kubelet's own fields): every entry counts, zero or not
                out[k] = _canonical(v, raw=True)
                continue
            if k == "kubelet" and not is_map and isinstance(v, dict):
                c = _kubelet(v)
            else:
                c = _canonical(v, is_map=k in _MAP_FIELDS and not is_map)
            if not is_map and _is_zero(c):
                continue  # IgnoreZeroValue on struct fields
            out[k] = c
        return out
    if isinstance(value, list):
        items = [_canonical(v, raw=raw) for v in value]
        return sorted(items, key=lambda x: json.dumps(x, sort_keys=True, separators=(",", ":")))  # SlicesAsSets
    return value


def _kubelet(kubelet: dict) -> dict:
    """``spec.kubelet``: Karpenter's twelve fields as struct fields (zero values dropped, the hashes of v1.14 kept);
    every other KubeletConfiguration field is an entry of Karpenter v1.15's open map, hashed as given: ``false`` or
    ``0`` there is a setting that differs from the kubelet's default, so setting or removing it drifts."""
    out = {}
    for k, v in kubelet.items():
        if k in MAPPED:
            c = _canonical(v, is_map=k in _MAP_FIELDS)
            if _is_zero(c):
                continue
        else:
            c = _canonical(v, raw=True)
        out[k] = c
    return out


def stable_hash(value: Any) -> str:
    """sha256 of canonical JSON, first 8 bytes as an unsigned decimal string."""
    data = json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return str(int.from_bytes(hashlib.sha256(data).digest()[:8], "big"))


def _doc(obj: Any, kind: str) -> dict:
    doc = obj.doc if hasattr(obj, "doc") else obj
    return apply_defaults(kind, doc)


def nodepool_hash_input(np: NodePool | dict) -> dict:
    """What goes into :func:`nodepool_hash` (defaults applied, exclusions removed)."""
    doc = _doc(np, "NodePool")
    template = (doc.get("spec") or {}).get("template") or {}
    meta = template.get("metadata") or {}
    spec = {k: v for k, v in (template.get("spec") or {}).items() if k not in NODEPOOL_HASH_EXCLUDED}
    return {"metadata": {"labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {}}, "spec": spec}


def nodepool_hash(np: NodePool | dict) -> str:
    """Static-drift hash of a NodePool's ``spec.template`` (see module doc for what is in and out)."""
    return stable_hash(nodepool_hash_input(np))


def _resolved_ami_family(spec: dict) -> str:
    fam = spec.get("amiFamily")
    if isinstance(fam, str) and fam:
        return fam
    for term in spec.get("amiSelectorTerms") or []:
        if isinstance(term, dict) and isinstance(term.get("alias"), str):
            return ALIAS_FAMILIES.get(term["alias"].split("@", 1)[0].lower(), "Custom")
    return "Custom"


def ec2nodeclass_hash_input(nc: EC2NodeClass | dict) -> dict:
    """What goes into :func:`ec2nodeclass_hash` (defaults applied, exclusions removed)."""
    spec = _doc(nc, "EC2NodeClass").get("spec") or {}
    return {
        "spec": {k: v for k, v in spec.items() if k not in EC2NODECLASS_HASH_EXCLUDED},
        "amiFamily": _resolved_ami_family(spec),
    }


def ec2nodeclass_hash(nc: EC2NodeClass | dict) -> str:
    """Static-drift hash of an EC2NodeClass's spec (see module doc for what is in and out)."""
    return stable_hash(ec2nodeclass_hash_input(nc))
