"""NodeOverlay (karpenter.sh/v1alpha1): its spec schema and the price-change rule.  Pure: no I/O.

Karpenter's CRD (kubernetes-sigs/karpenter ``pkg/apis/crds/karpenter.sh_nodeoverlays.yaml``) and runtime validation
(``pkg/apis/v1alpha1/nodeoverlay_validation.go``):

* ``requirements`` (required, at most 100): node selector requirements (``key``, ``operator``, ``values``; no
  ``minValues``) over the instance types' labels, ``karpenter.sh/nodepool`` and ``karpenter.sh/capacity-type``
  included; In and NotIn need a value, Gt/Lt/Gte/Lte exactly one non-negative integer.
* ``price`` (``^\\d+(\\.\\d+)?$``, absolute) or ``priceAdjustment`` (``+0.5``, ``-0.5``, ``+10%``, ``-10%``; a
  decrease in percent is at most ``-100%``), never both.
* ``capacity``: extended resources added to the selected instance types; ``cpu``, ``memory``,
  ``ephemeral-storage`` and ``pods`` are refused.
* ``weight`` 1..10000 (unset = 0): the higher applies first; equal weights in reverse name order, and an overlay that
  changes the same offering's price (or the same resource) as an overlay of equal weight already applied is a
  conflict and not applied at all (:mod:`karpenter_lambda.catalog.overlay`).

:mod:`.validation` builds the NodeOverlay schema with :func:`spec_schema`, handing in its requirement check (the
label-domain rules NodePools use, with ``karpenter.sh/nodepool`` allowed), so this module does not import it.
"""

from __future__ import annotations

import re
from typing import Callable

from .errors import FieldError
from .quantity import QuantityError, parse_quantity
from .schema import Int, List, Map, Node, Obj, OneOf, Str, describe, join
from .validators import label_key_problem

__all__ = ["RESTRICTED_CAPACITY", "PRICE_RE", "PRICE_ADJUSTMENT_RE", "adjusted_price", "spec_schema", "MAX_WEIGHT"]

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
RESTRICTED_CAPACITY = ("cpu", "memory", "ephemeral-storage", "pods")
MAX_WEIGHT = 10000
PRICE_RE = re.compile(r"^[0-9]+(\.[0-9]+)?$")
# the CRD's pattern: a signed amount, a +N% increase, a -N% decrease below 100 (two integer digits) or exactly -100%
PRICE_ADJUSTMENT_RE = re.compile(r"^(([+-][0-9]*\.?[0-9]+)|(\+[0-9]*\.?[0-9]+%)|(-[0-9]{1,2}(\.[0-9]+)?%)|(-100%))$")


def adjusted_price(price: float, change: str | None) -> float:
    """The price after a NodeOverlay's change (Karpenter's ``cloudprovider.AdjustedPrice``).

    ``change`` without a sign is an absolute price (``spec.price``); ``+x`` / ``-x`` adds to the price; ``+x%`` /
    ``-x%`` scales it; an adjusted price below zero is zero.  None or "" leaves the price as it is.
    """
    if not change:
        return price
    if not change.startswith(("+", "-")):
        return float(change)
    if change.endswith("%"):
        out = price * (1 + float(change[:-1]) / 100)
    else:
        out = price + float(change)
    return out if out >= 0 else 0.0


def _capacity_value(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return f"must be a quantity such as 1, 100Mi or 2Gi, got {describe(value)}"
    try:
        q = parse_quantity(value)
    except QuantityError as e:
        return str(e)
    if q < 0:
        return f"{value!r} must not be negative"
    return None


def _capacity_key(k: str) -> str | None:
    if label_key_problem(k):
        return f"invalid resource name {k!r}"
    if k in RESTRICTED_CAPACITY:
        return (f"invalid resource restricted: {k!r} cannot be set by a NodeOverlay (capacity adds extended resources "
                f"only, never {', '.join(RESTRICTED_CAPACITY)})")
    return None


def _overlay_requirement_check(req: dict, path: str, errors: list[FieldError]) -> None:
    """The overlay's own rule on top of the NodePool ones: NotIn needs a value too."""
    values = req.get("values") if isinstance(req.get("values"), list) else []
    if req.get("operator") == "NotIn" and not values:
        errors.append(FieldError(join(path, "values"), "requirements with operator 'NotIn' must have a value defined"))


def _spec_check(spec: dict, path: str, errors: list[FieldError]) -> None:
    if "price" in spec and "priceAdjustment" in spec:
        errors.append(FieldError(join(path, "priceAdjustment"), "cannot set both 'price' and 'priceAdjustment'"))


def spec_schema(requirement_check: Callable[[dict, str, list], None]) -> Obj:
    """The NodeOverlay spec; ``requirement_check`` is the NodePool requirement rule (key syntax, restricted label
    domains with ``karpenter.sh/nodepool`` allowed, values, operator arity)."""
    requirement = Obj(
        {
            "key": Str(max_len=316),
            "operator": Str(enum=OPERATORS),
            "values": List(Str()),
        },
        required=("key", "operator"),
        checks=[requirement_check, _overlay_requirement_check],
    )
    fields: dict[str, Node] = {
        "requirements": List(requirement, max_items=100),
        "price": Str(pattern=PRICE_RE.pattern, pattern_msg="must be a non-negative decimal price such as 0.25 (no sign, no unit)"),
        "priceAdjustment": Str(
            pattern=PRICE_ADJUSTMENT_RE.pattern,
            pattern_msg="must be a signed amount (+0.5, -0.25) or a signed percentage (+10%, -15%; at most -100%)",
        ),
        "capacity": Map(OneOf(_capacity_value), key_check=_capacity_key),
        "weight": Int(minimum=1, maximum=MAX_WEIGHT),
    }
    return Obj(fields, required=("requirements",), checks=[_spec_check])
