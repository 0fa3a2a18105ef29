"""Convert Karpenter v1beta1 NodePools and EC2NodeClasses to v1 (pure), by Karpenter's v1 migration rules.

``convert_documents(docs)`` takes the documents of one input (every file together: a NodePool's kubelet
moves to the EC2NodeClass it references, which may be in another file) and returns a :class:`Conversion`:
the documents with every ``karpenter.sh/v1beta1`` NodePool and ``karpenter.k8s.aws/v1beta1`` EC2NodeClass
replaced by its v1 form (others untouched, same order), one warning per converted object naming what
changed, and the errors (a field that cannot be converted, named by its path).

NodePool (``karpenter.sh/v1beta1`` -> ``karpenter.sh/v1``):

* ``spec.disruption.consolidationPolicy: WhenUnderutilized`` (also v1beta1's default when a disruption block omits
  it) -> ``WhenEmptyOrUnderutilized``; ``spec.disruption.consolidateAfter`` is kept with either policy (v1 allows
  it with both; v1beta1 refused it with WhenUnderutilized) and set to ``0s`` for WhenUnderutilized without it (v1
  requires it in a disruption block; WhenUnderutilized did not wait);
* ``spec.disruption.expireAfter`` -> ``spec.template.spec.expireAfter``;
* ``spec.template.spec.nodeClassRef {apiVersion, kind, name}`` -> ``{group, kind, name}`` (kind defaults to
  EC2NodeClass, group to karpenter.k8s.aws);
* ``spec.template.spec.kubelet`` -> the referenced EC2NodeClass's ``spec.kubelet`` (that EC2NodeClass must be
  in the same input; two NodePools sharing it must agree, and a kubelet already on it must be the same);
* ``spec.template.spec.resources`` (in the v1beta1 schema, never used for NodePools) is dropped.

EC2NodeClass (``karpenter.k8s.aws/v1beta1`` -> ``karpenter.k8s.aws/v1``):

* no ``amiSelectorTerms``: ``amiFamily`` (v1beta1 default AL2) becomes the only term ``alias: <family>@latest``
  and ``amiFamily`` is dropped; a family without alias (Custom, Ubuntu) is an error naming ``spec.amiFamily``;
* ``amiSelectorTerms`` given without ``amiFamily``: ``amiFamily: AL2`` is written (v1beta1's default; v1
  requires it when no alias term is given);
* ``spec.metadataOptions.httpPutResponseHopLimit`` unset: ``2`` is written (v1beta1's default; v1's is 1).

Nothing here reads files or imports anything outside ``api``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from .objects import ALIAS_FAMILIES, AWS_GROUP, KARPENTER_GROUP

__all__ = ["V1BETA1", "Conversion", "ConversionMessage", "is_v1beta1", "convert_documents"]

#: (apiVersion, kind) of the objects converted here.
NODEPOOL_V1BETA1 = (f"{KARPENTER_GROUP}/v1beta1", "NodePool")
NODECLASS_V1BETA1 = (f"{AWS_GROUP}/v1beta1", "EC2NodeClass")
V1BETA1 = (NODEPOOL_V1BETA1, NODECLASS_V1BETA1)

#: amiFamily -> alias family (the inverse of ALIAS_FAMILIES).
_ALIAS_OF = {family: alias for alias, family in ALIAS_FAMILIES.items()}
V1BETA1_DEFAULT_AMI_FAMILY = "AL2"
V1BETA1_DEFAULT_HOP_LIMIT = 2


@dataclass(frozen=True)
class ConversionMessage:
    """A warning or error about the document at ``position`` in the input list."""

    position: int
    path: str
    message: str


@dataclass
class Conversion:
    docs: list = field(default_factory=list)
    warnings: list[ConversionMessage] = field(default_factory=list)
    errors: list[ConversionMessage] = field(default_factory=list)
    converted: set[int] = field(default_factory=set)  # positions of the documents converted


def is_v1beta1(doc) -> bool:
    return isinstance(doc, dict) and (doc.get("apiVersion"), doc.get("kind")) in V1BETA1


def _dict(parent: dict, key: str) -> dict | None:
    value = parent.get(key)
    return value if isinstance(value, dict) else None


def _name(doc: dict) -> str:
    meta = doc.get("metadata")
    return meta.get("name", "") if isinstance(meta, dict) and isinstance(meta.get("name"), str) else ""


def _nodepool(doc: dict, changes: list[str], errors: list[tuple[str, str]]) -> tuple[dict, object]:
    """The v1 NodePool and its v1beta1 kubelet (None when absent)."""
    out = copy.deepcopy(doc)
    out["apiVersion"] = f"{KARPENTER_GROUP}/v1"
    changes.append(f"apiVersion {NODEPOOL_V1BETA1[0]} -> {out['apiVersion']}")
    spec = _dict(out, "spec")
    if spec is None:
        return out, None
    template = _dict(spec, "template")
    tspec = _dict(template, "spec") if template is not None else None
    disruption = _dict(spec, "disruption")
    if disruption is not None:
        policy = disruption.get("consolidationPolicy", "WhenUnderutilized")  # v1beta1's default
        if policy == "WhenUnderutilized":
            if "consolidationPolicy" in disruption:
                changes.append("spec.disruption.consolidationPolicy WhenUnderutilized -> WhenEmptyOrUnderutilized")
            else:
                changes.append("spec.disruption.consolidationPolicy set to WhenEmptyOrUnderutilized (v1beta1's default WhenUnderutilized)")
            disruption["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
            if "consolidateAfter" in disruption:
                changes.append("spec.disruption.consolidateAfter kept (v1 allows it with WhenEmptyOrUnderutilized)")
            else:  # v1 needs it in a disruption block; WhenUnderutilized consolidated at once
                disruption["consolidateAfter"] = "0s"
                changes.append("spec.disruption.consolidateAfter set to 0s (WhenUnderutilized did not wait)")
        if "expireAfter" in disruption:
            value = disruption.pop("expireAfter")
            if tspec is None:
                errors.append(("spec.disruption.expireAfter", "cannot be converted: v1 moves it to spec.template.spec.expireAfter and spec.template.spec is missing"))
            elif "expireAfter" in tspec and tspec["expireAfter"] != value:
                errors.append(("spec.disruption.expireAfter", f"cannot be converted: spec.template.spec.expireAfter is already {tspec['expireAfter']!r}"))
            else:
                tspec["expireAfter"] = value
                changes.append("spec.disruption.expireAfter -> spec.template.spec.expireAfter")
    kubelet = None
    if tspec is not None:
        ref = tspec.get("nodeClassRef")
        if isinstance(ref, dict) and ("apiVersion" in ref or "group" not in ref):
            api_version = ref.pop("apiVersion", None)
            group = api_version.split("/", 1)[0] if isinstance(api_version, str) and api_version else AWS_GROUP
            new = {"group": group, "kind": ref.pop("kind", "EC2NodeClass")}
            new.update(ref)  # name, anything else (validation names unknown fields)
            tspec["nodeClassRef"] = new
            changes.append("spec.template.spec.nodeClassRef {apiVersion, kind, name} -> {group, kind, name}")
        if "resources" in tspec:
            tspec.pop("resources")
            changes.append("spec.template.spec.resources dropped (not in v1)")
        if "kubelet" in tspec:
            kubelet = tspec.pop("kubelet")
    return out, kubelet


def _nodeclass(doc: dict, changes: list[str], errors: list[tuple[str, str]]) -> dict:
    out = copy.deepcopy(doc)
    out["apiVersion"] = f"{AWS_GROUP}/v1"
    changes.append(f"apiVersion {NODECLASS_V1BETA1[0]} -> {out['apiVersion']}")
    spec = _dict(out, "spec")
    if spec is None:
        return out
    terms = spec.get("amiSelectorTerms")
    family = spec.get("amiFamily")
    if not terms:
        chosen = family if family is not None else V1BETA1_DEFAULT_AMI_FAMILY
        alias = _ALIAS_OF.get(chosen) if isinstance(chosen, str) else None
        if alias is None:
            errors.append(("spec.amiFamily", f"cannot be converted: {chosen!r} has no v1 amiSelectorTerms alias "
                                             f"(aliases: {', '.join(sorted(_ALIAS_OF))}); give spec.amiSelectorTerms"))
        else:
            spec.pop("amiFamily", None)
            spec["amiSelectorTerms"] = [{"alias": f"{alias}@latest"}]
            was = f"amiFamily {chosen}" if family is not None else f"no amiFamily (v1beta1 default {chosen})"
            changes.append(f"spec.{was} -> spec.amiSelectorTerms [{{alias: {alias}@latest}}]")
    elif family is None:
        spec["amiFamily"] = V1BETA1_DEFAULT_AMI_FAMILY
        changes.append(f"spec.amiFamily set to {V1BETA1_DEFAULT_AMI_FAMILY} (v1beta1's default; v1 needs it without an alias term)")
    meta_opts = spec.get("metadataOptions")
    if meta_opts is None:
        meta_opts = spec["metadataOptions"] = {}
    if isinstance(meta_opts, dict) and "httpPutResponseHopLimit" not in meta_opts:
        meta_opts["httpPutResponseHopLimit"] = V1BETA1_DEFAULT_HOP_LIMIT
        changes.append(f"spec.metadataOptions.httpPutResponseHopLimit set to {V1BETA1_DEFAULT_HOP_LIMIT} (v1beta1's default; v1's is 1)")
    return out


def convert_documents(docs: list) -> Conversion:
    """Convert every v1beta1 NodePool / EC2NodeClass in ``docs`` (see the module doc)."""
    result = Conversion(docs=list(docs))
    changes: dict[int, list[str]] = {}
    kubelets: list[tuple[int, str, object]] = []  # (NodePool position, EC2NodeClass name, kubelet)
    for pos, doc in enumerate(docs):
        if not is_v1beta1(doc):
            continue
        errs: list[tuple[str, str]] = []
        ch = changes.setdefault(pos, [])
        if doc["kind"] == "NodePool":
            new, kubelet = _nodepool(doc, ch, errs)
            if kubelet is not None:
                ref = (((new.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef")
                target = ref.get("name") if isinstance(ref, dict) else None
                kubelets.append((pos, target if isinstance(target, str) else "", kubelet))
        else:
            new = _nodeclass(doc, ch, errs)
        result.docs[pos] = new
        result.converted.add(pos)
        result.errors += [ConversionMessage(pos, path, msg) for path, msg in errs]
    # NodePool kubelets onto their EC2NodeClasses (v1beta1 or v1, anywhere in the input)
    classes = {_name(d): i for i, d in enumerate(result.docs)
               if isinstance(d, dict) and d.get("kind") == "EC2NodeClass" and str(d.get("apiVersion", "")).startswith(AWS_GROUP + "/")}
    given_by: dict[str, int] = {}
    for pos, target, kubelet in kubelets:
        path = "spec.template.spec.kubelet"
        if target not in classes:
            result.errors.append(ConversionMessage(pos, path, (
                f"cannot be converted alone: v1 moves kubelet to the EC2NodeClass's spec.kubelet, and EC2NodeClass "
                f"{target!r} is not in the input; give it with this NodePool (or move the kubelet to it yourself)")))
            continue
        cpos = classes[target]
        nc = result.docs[cpos]
        if cpos not in result.converted:  # a v1 EC2NodeClass is changed too: copy before writing
            nc = result.docs[cpos] = copy.deepcopy(nc)
        spec = nc.setdefault("spec", {}) if isinstance(nc.get("spec", {}), dict) else None
        if spec is None:
            continue  # validation reports the bad spec
        if "kubelet" in spec and spec["kubelet"] != kubelet:
            other = given_by.get(target)
            by = (f"NodePool {_name(result.docs[other])!r}'s kubelet" if other is not None
                  else "the kubelet already on it")
            result.errors.append(ConversionMessage(pos, path, (
                f"cannot be converted: EC2NodeClass {target!r} gets {by}, which differs from this one "
                f"(v1 has one kubelet per EC2NodeClass; give each NodePool its own EC2NodeClass)")))
            continue
        if "kubelet" not in spec:
            spec["kubelet"] = copy.deepcopy(kubelet)
            changes.setdefault(cpos, []).append(f"spec.kubelet from NodePool {_name(result.docs[pos])!r}")
        given_by.setdefault(target, pos)
        changes[pos].append(f"spec.template.spec.kubelet -> EC2NodeClass {target!r} spec.kubelet")
    for pos in sorted(changes):
        doc = docs[pos]
        head = f"converted from {doc.get('apiVersion')}" if pos in result.converted else "changed by the v1beta1 conversion"
        result.warnings.append(ConversionMessage(pos, "", f"{head}: " + "; ".join(changes[pos])))
    return result
