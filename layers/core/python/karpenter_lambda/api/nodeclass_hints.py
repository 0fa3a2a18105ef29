"""Warnings for EC2NodeClasses that are valid but cannot do what they say (pure): ``validate`` reports them as
warnings (Karpenter's CRD takes them).

**An alias version that names no release.** Karpenter's CRD takes any ``family@version``; the version is ``latest``
or a release, read from an SSM parameter whose path names it (``adapters/aws/amis.alias_parameters``), so a typo
(``al2023@latst``) resolves no AMI and the class never becomes ready: every launch of its NodePools fails.  A version
that is neither ``latest`` nor in its family's release format (AL2 / AL2023: ``vYYYYMMDD``; Bottlerocket:
``[v]MAJOR.MINOR.PATCH``) is a warning; Windows aliases take ``latest`` only, which the CRD rules already refuse.

**An ssmParameter that is never read.** The CRD's exclusivity rules leave ``ssmParameter`` out, so a term may hold it
beside an ``alias`` or an ``id``; Karpenter then resolves the alias alone (``DescribeImageQueries``), or the term's
id (``id`` comes first), and never reads the parameter (``adapters/aws/amis.py`` does the same).  A warning says so.
Likewise ``name``, ``tags`` or ``owner`` beside an ``ssmParameter``: Karpenter selects the parameter's image alone and
never applies them (they do not narrow it).
"""

from __future__ import annotations

import re

from .errors import FieldError
from .text import one_edit

__all__ = ["nodeclass_hints", "RELEASE_FORMATS"]

#: alias family -> (pattern of a release, an example)
RELEASE_FORMATS = {
    "al2": (re.compile(r"^v\d{8}$"), "v20240807"),
    "al2023": (re.compile(r"^v\d{8}$"), "v20240807"),
    "bottlerocket": (re.compile(r"^v?\d+\.\d+\.\d+$"), "v1.20.3"),
}


def nodeclass_hints(doc) -> list[FieldError]:
    """The warnings for one EC2NodeClass document, in field order."""
    spec = doc.get("spec") if isinstance(doc, dict) else None
    terms = spec.get("amiSelectorTerms") if isinstance(spec, dict) else None
    out: list[FieldError] = []
    for i, term in enumerate(terms if isinstance(terms, list) else ()):
        ignored = _ignored_ssm_parameter(term) if isinstance(term, dict) else None
        if ignored:
            out.append(FieldError(f"spec.amiSelectorTerms[{i}].ssmParameter", ignored))
        for field, why in (_ignored_beside_ssm_parameter(term) if isinstance(term, dict) and not ignored else ()):
            out.append(FieldError(f"spec.amiSelectorTerms[{i}].{field}", why))
        alias = term.get("alias") if isinstance(term, dict) else None
        if not isinstance(alias, str) or "@" not in alias:
            continue
        family, version = alias.split("@", 1)
        known = RELEASE_FORMATS.get(family.lower())
        if known is None or version == "latest" or known[0].match(version):
            continue
        hint = " (did you mean latest?)" if version.lower() == "latest" or one_edit(version, "latest") else ""
        out.append(FieldError(f"spec.amiSelectorTerms[{i}].alias",
                              f"version {version!r} of alias {alias} is neither latest nor a release of {family} (such "
                              f"as {known[1]}): no AMI will match it, so the class never becomes ready{hint}"))
    return out


def _ignored_ssm_parameter(term: dict) -> str | None:
    """Why the term's ssmParameter is never read (an alias or an id beside it), or None."""
    param, alias, image = term.get("ssmParameter"), term.get("alias"), term.get("id")
    if not isinstance(param, str) or not param:
        return None
    if isinstance(alias, str) and alias:
        return (f"ssmParameter {param} is never read: with the alias {alias} Karpenter resolves the alias's AMIs "
                f"alone; remove ssmParameter, or the alias to launch the parameter's AMI (then set amiFamily)")
    if isinstance(image, str) and image:
        return (f"ssmParameter {param} is never read: Karpenter takes this term's id ({image}) and ignores "
                f"ssmParameter; remove one of them, or give ssmParameter a term of its own to select both AMIs")
    return None


def _ignored_beside_ssm_parameter(term: dict) -> list[tuple[str, str]]:
    """(field, why) for each of ``name``, ``tags``, ``owner`` that an ``ssmParameter`` in the same term makes
    Karpenter ignore (``DescribeImageQueries`` takes the parameter's image id alone)."""
    param = term.get("ssmParameter")
    if not isinstance(param, str) or not param:
        return []
    return [(f, f"{f} is not applied: a term with ssmParameter {param} selects the parameter's AMI alone (Karpenter "
                f"ignores {f} there); give {f} a term of its own to select more AMIs, or remove it")
            for f in ("name", "tags", "owner") if term.get(f)]
