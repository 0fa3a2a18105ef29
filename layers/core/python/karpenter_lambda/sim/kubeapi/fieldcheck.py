"""``fieldValidation``: unknown fields in a request body, against the kind's schema (:mod:`.schemas`).

``Strict`` answers 400 ``strict decoding error: unknown field "spec.foo"``; ``Warn`` keeps the request and sends one
``Warning: 299`` header per field; ``Ignore`` or no parameter checks nothing (the real server warns by default; here
only a request that asks is checked, so the simulator's own traffic pays nothing).  Only unknown fields are checked:
a wrong type is taken as sent, as the store has always done.
"""

from __future__ import annotations

from typing import Any

from . import schemas
from .resources import ResourceType, StoreError

_DIRECTIVES = ("$patch", "$retainKeys", "$setElementOrder/", "$deleteFromPrimitiveList/")


def _resolve(node: dict, every: dict[str, dict]) -> dict:
    while True:
        if "$ref" in node:
            node = every.get(node["$ref"].rsplit("/", 1)[-1], {})
        elif len(node.get("allOf") or []) == 1:
            node = {**node["allOf"][0], **{k: v for k, v in node.items() if k != "allOf"}}
        else:
            return node


def unknown_fields(value: Any, node: dict, every: dict[str, dict], path: str = "") -> list[str]:
    """Dotted paths of the fields of ``value`` that the schema ``node`` does not have."""
    node = _resolve(node, every)
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out: list[str] = []
    if isinstance(value, dict):
        props = node.get("properties")
        extra = node.get("additionalProperties")
        for k, v in value.items():
            if k.startswith(_DIRECTIVES):   # strategic merge patch directives
                continue
            sub = f"{path}.{k}" if path else k
            if props is not None and k in props:
                out.extend(unknown_fields(v, props[k], every, sub))
            elif isinstance(extra, dict):
                out.extend(unknown_fields(v, extra, every, sub))
            elif props is not None:
                out.append(sub)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            out.extend(unknown_fields(item, node["items"], every, f"{path}[{i}]"))
    return out


def check(rt: ResourceType, body: Any, directive: str | None, model: str | None = None) -> list[str]:
    """Apply ``fieldValidation=directive`` to ``body``: raise 400 (Strict) or return the warnings (Warn)."""
    if directive in (None, "", "Ignore") or not isinstance(body, dict):
        return []
    if directive not in ("Strict", "Warn"):
        raise StoreError(400, "BadRequest", f"fieldValidation: Invalid value: {directive!r}: "
                                            "must be one of Ignore, Warn or Strict")
    every = schemas.schemas()
    fields = unknown_fields(body, every[schemas.model_schema(model) if model else schemas.schema_name(rt)], every)
    if fields and directive == "Strict":
        raise StoreError(400, "BadRequest", "strict decoding error: " + ", ".join(f'unknown field "{f}"' for f in fields))
    return [f'unknown field "{f}"' for f in fields]
