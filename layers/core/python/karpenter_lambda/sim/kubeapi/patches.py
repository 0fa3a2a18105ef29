"""The three PATCH bodies: JSON merge patch (RFC 7386), strategic merge patch, JSON patch (RFC 6902)."""

from __future__ import annotations

import copy
from typing import Any

from .resources import StoreError


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (``null`` deletes a key, lists are replaced)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# list fields merged by key under strategic merge patch (by field name, whatever the parent)
SMP_MERGE_KEYS = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ports": "containerPort",
    "addresses": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
}
SMP_PRIMITIVE_MERGE = {"finalizers"}


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch, enough of it for the objects this server holds.

    Maps merge like a merge patch; the list fields in ``SMP_MERGE_KEYS`` merge
    item by item on their key (``$patch: delete`` in an item removes it);
    ``finalizers`` merges as a set (remove with ``$deleteFromPrimitiveList/finalizers``);
    other lists are replaced.  ``$patch: replace`` on a map replaces it.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k == "$patch" or k.startswith("$setElementOrder/") or k == "$retainKeys":
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            key = k.split("/", 1)[1]
            if isinstance(out.get(key), list):
                out[key] = [x for x in out[key] if x not in (v or [])]
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict):
            if v.get("$patch") == "delete":
                out.pop(k, None)
            else:
                out[k] = strategic_merge_patch(out.get(k), v)
        elif isinstance(v, list) and k in SMP_MERGE_KEYS and isinstance(out.get(k), list):
            mk = SMP_MERGE_KEYS[k]
            items = list(out[k])
            for item in v:
                if not isinstance(item, dict) or mk not in item:
                    items = copy.deepcopy(v)
                    break
                idx = next((i for i, cur in enumerate(items) if isinstance(cur, dict) and cur.get(mk) == item[mk]), None)
                if item.get("$patch") == "delete":
                    if idx is not None:
                        items.pop(idx)
                elif idx is None:
                    items.append({kk: copy.deepcopy(vv) for kk, vv in item.items() if kk != "$patch"})
                else:
                    items[idx] = strategic_merge_patch(items[idx], item)
            out[k] = items
        elif isinstance(v, list) and k in SMP_PRIMITIVE_MERGE and isinstance(out.get(k), list):
            merged = list(out[k])
            for x in v:
                if x not in merged:
                    merged.append(x)
            out[k] = merged
        else:
            out[k] = copy.deepcopy(v)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise StoreError(422, "Invalid", f"json patch path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _jp_parent(doc: Any, parts: list[str], path: str):
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise StoreError(422, "Invalid", f"json patch path {path!r} does not exist")
    return cur


def _jp_get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _jp_parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise StoreError(422, "Invalid", f"json patch path {path!r} does not exist")


def _jp_remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _jp_parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise StoreError(422, "Invalid", f"json patch remove: path {path!r} does not exist")


def _jp_add(doc: Any, path: str, value: Any, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent = _jp_parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise StoreError(422, "Invalid", f"json patch replace: path {path!r} does not exist")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(copy.deepcopy(value))
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = copy.deepcopy(value)
            else:
                parent.insert(int(last), copy.deepcopy(value))
        else:
            raise StoreError(422, "Invalid", f"json patch: index in {path!r} out of range")
    else:
        raise StoreError(422, "Invalid", f"json patch path {path!r} does not exist")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch: add, remove, replace, move, copy, test."""
    if not isinstance(ops, list):
        raise StoreError(400, "BadRequest", "json patch body must be a list of operations")
    doc = copy.deepcopy(target)
    for i, op in enumerate(ops):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise StoreError(400, "BadRequest", f"json patch operation {i}: needs 'op' and 'path'")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _jp_add(doc, path, op.get("value"))
        elif kind == "remove":
            _jp_remove(doc, path)
        elif kind == "replace":
            doc = _jp_add(doc, path, op.get("value"), replace=True)
        elif kind == "move":
            val = _jp_remove(doc, op["from"])
            doc = _jp_add(doc, path, val)
        elif kind == "copy":
            doc = _jp_add(doc, path, copy.deepcopy(_jp_get(doc, op["from"])))
        elif kind == "test":
            if _jp_get(doc, path) != op.get("value"):
                raise StoreError(422, "Invalid", f"json patch test failed at {path!r}")
        else:
            raise StoreError(400, "BadRequest", f"json patch operation {i}: unknown op {kind!r}")
    return doc

