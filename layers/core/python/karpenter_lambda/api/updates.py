"""What an update of a stored object may not change (the CRDs' transition rules, CEL ``oldSelf``), apart from what
``api/validation.py`` checks of an object on its own.

Karpenter v1.14.1's NodePool CRD (``pkg/apis/crds/karpenter.sh_nodepools.yaml``): a NodePool cannot move between
static (``spec.replicas`` set) and dynamic provisioning, and its ``nodeClassRef`` group and kind are immutable.
(A NodeClaim's whole spec is immutable: ``cli/store_cmds.py``.)  Used by ``apply`` against the stored object and by
``simulate`` / ``validate`` for a Scenario's ``apply`` steps against the NodePool before them."""

from __future__ import annotations

from .errors import FieldError

STATIC_TRANSITION = ("Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) "
                     "provisioning modes")


def nodepool_update_errors(old: dict, new: dict) -> list[FieldError]:
    """The transition rules ``new`` (a NodePool manifest) breaks as an update of ``old``."""
    def spec(doc):
        s = doc.get("spec") if isinstance(doc, dict) else None
        return s if isinstance(s, dict) else {}

    def ref(doc):
        t = spec(doc).get("template")
        ts = (t.get("spec") if isinstance(t, dict) else None) or {}
        r = ts.get("nodeClassRef") if isinstance(ts, dict) else None
        return r if isinstance(r, dict) else {}

    errors = []
    if ("replicas" in spec(old)) != ("replicas" in spec(new)):
        errors.append(FieldError("spec", f"{STATIC_TRANSITION}: delete the NodePool and create it again"))
    for field in ("group", "kind"):
        if ref(old) and ref(new) and ref(old).get(field) != ref(new).get(field):
            errors.append(FieldError(f"spec.template.spec.nodeClassRef.{field}",
                                     f"nodeClassRef.{field} is immutable"))
    return errors
