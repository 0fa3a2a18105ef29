"""Server-side apply (``PATCH`` with ``application/apply-patch+yaml``), the subset ``kubectl apply --server-side`` needs.

* The object is created when absent (name and namespace from the URL), else the applied configuration is merged in
  with strategic merge (lists merged by key where :data:`.patches.SMP_MERGE_KEYS` has one, other lists atomic).
* Each Apply manager's fields are kept in ``metadata.managedFields`` (``operation: Apply``, ``fieldsType:
  FieldsV1``: ``f:`` fields, ``k:`` keyed list items, ``v:`` set values, as the real server writes them).  A field
  the manager applied before and no longer applies is removed, unless another manager also owns it.
* A field owned by another Apply manager with a different value is a conflict (409, one ``FieldManagerConflict``
  cause per field) unless ``force=true``, which moves the field to the applier.
* ``fieldManager`` is required (400).  ``status`` is ignored on the main resource and is all that is applied on
  ``/status``.

Simplifications: writes other than apply (POST, PUT, PATCH) record no ``Update`` manager, so an applier never
conflicts with them; a list merge key is one field (ports merge by ``containerPort`` only).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from .patches import SMP_MERGE_KEYS, SMP_PRIMITIVE_MERGE, strategic_merge_patch
from .resources import ResourceType, StoreError
from .store import ObjectStore

Path = tuple[str, ...]
_IDENTITY = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
             "deletionGracePeriodSeconds", "managedFields", "selfLink"}


def _applied_part(cfg: dict, subresource: str | None) -> dict:
    """What the manager owns of its configuration: no identity fields, status only on ``/status``."""
    out: dict = {}
    meta = {k: v for k, v in (cfg.get("metadata") or {}).items() if k not in _IDENTITY}
    if meta:
        out["metadata"] = meta
    for k, v in cfg.items():
        if k in ("apiVersion", "kind", "metadata"):
            continue
        if (k == "status") == (subresource == "status"):
            out[k] = v
    return out


def leaves(value: Any, prefix: Path = ()) -> list[Path]:
    """The leaf field paths of ``value`` (``f:``/``k:``/``v:`` tokens, ``.`` for a keyed list item itself)."""
    out: list[Path] = []
    field = prefix[-1][2:] if prefix and prefix[-1].startswith("f:") else ""
    if isinstance(value, dict) and value:
        for k, v in value.items():
            out.extend(leaves(v, prefix + ("f:" + k,)))
    elif isinstance(value, list) and field in SMP_MERGE_KEYS and value and all(
            isinstance(i, dict) and SMP_MERGE_KEYS[field] in i for i in value):
        key = SMP_MERGE_KEYS[field]
        for item in value:
            item_path = prefix + ("k:" + json.dumps({key: item[key]}, separators=(",", ":")),)
            out.append(item_path + (".",))
            for k, v in item.items():
                out.extend(leaves(v, item_path + ("f:" + k,)))
    elif isinstance(value, list) and field in SMP_PRIMITIVE_MERGE and value:
        out.extend(prefix + ("v:" + json.dumps(v, separators=(",", ":")),) for v in value)
    elif prefix:
        out.append(prefix)
    return out


def to_fields(paths: list[Path]) -> dict:
    tree: dict = {}
    for p in paths:
        node = tree
        for token in p:
            node = node.setdefault(token, {})
    return tree


def from_fields(tree: dict, prefix: Path = ()) -> list[Path]:
    if not tree:
        return [prefix] if prefix else []
    return [p for k, v in tree.items() for p in from_fields(v, prefix + (k,))]


def _step(cur: Any, token: str) -> tuple[Any, Any]:
    """The container and the key/index of ``token`` in ``cur`` (None when absent)."""
    if token.startswith("f:") and isinstance(cur, dict) and token[2:] in cur:
        return cur, token[2:]
    if token.startswith("k:") and isinstance(cur, list):
        want = json.loads(token[2:])
        for i, item in enumerate(cur):
            if isinstance(item, dict) and all(item.get(k) == v for k, v in want.items()):
                return cur, i
    if token.startswith("v:") and isinstance(cur, list):
        want = json.loads(token[2:])
        if want in cur:
            return cur, cur.index(want)
    return None, None


def _get(obj: Any, path: Path) -> tuple[bool, Any]:
    cur = obj
    for token in path:
        if token == ".":
            return True, cur
        parent, key = _step(cur, token)
        if parent is None:
            return False, None
        cur = parent[key]
    return True, cur


def _remove(obj: Any, path: Path) -> None:
    if path and path[-1] == ".":
        path = path[:-1]
    cur = obj
    for i, token in enumerate(path):
        parent, key = _step(cur, token)
        if parent is None:
            return
        if i == len(path) - 1:
            del parent[key]
            return
        cur = parent[key]


def _field_text(path: Path) -> str:
    out = ""
    for token in path:
        if token.startswith("f:"):
            out += "." + token[2:]
        elif token.startswith("k:"):
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(token[2:]).items()) + "]"
        elif token.startswith("v:"):
            out += f"[={token[2:]}]"
    return out


def server_side_apply(store: ObjectStore, rt: ResourceType, name: str, namespace: str | None, cfg: Any,
                      manager: str | None, force: bool, subresource: str | None = None) -> tuple[dict, bool]:
    """Apply ``cfg`` as ``manager``; returns (the object, created)."""
    if not manager:
        raise StoreError(400, "BadRequest", "PATCH, application/apply-patch+yaml: fieldManager is required for apply requests")
    if not isinstance(cfg, dict):
        raise StoreError(400, "BadRequest", "the apply configuration must be an object")
    meta = cfg.get("metadata") or {}
    if not isinstance(meta, dict):
        raise StoreError(400, "BadRequest", "metadata must be an object")
    if cfg.get("kind") not in (None, rt.kind) or cfg.get("apiVersion") not in (None, rt.api_version):
        raise StoreError(400, "BadRequest", f"the apply configuration is {cfg.get('apiVersion')}/{cfg.get('kind')}, "
                                            f"the URL names {rt.api_version}/{rt.kind}")
    if meta.get("name") not in (None, name):
        raise StoreError(400, "BadRequest", f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
    if rt.namespaced and namespace and meta.get("namespace") not in (None, namespace):
        raise StoreError(400, "BadRequest", f"the namespace of the object ({meta.get('namespace')}) does not match "
                                            f"the namespace on the request ({namespace})")
    applied = _applied_part(cfg, subresource)
    mine = leaves(applied)
    entry = {"manager": manager, "operation": "Apply", "apiVersion": cfg.get("apiVersion") or rt.api_version,
             "time": store.now_str(), "fieldsType": "FieldsV1", "fieldsV1": to_fields(mine)}
    if subresource:
        entry["subresource"] = subresource
    with store.lock:
        old = store.get(rt.plural, name, namespace)
        if old is None:
            if subresource:
                raise StoreError(404, "NotFound", f'{rt.plural} "{name}" not found')
            body = copy.deepcopy(applied)
            body.setdefault("metadata", {}).update({"name": name, "managedFields": [entry]})
            return store.create(rt.plural, body, namespace), True
        managers = [m for m in (old["metadata"].get("managedFields") or []) if isinstance(m, dict)]
        others = [m for m in managers if not (m.get("manager") == manager and m.get("operation") == "Apply"
                                              and m.get("subresource") == entry.get("subresource"))]
        previous = next((from_fields(m.get("fieldsV1") or {}) for m in managers if m not in others), [])
        mine_set = set(mine)
        conflicts: list[dict] = []
        for m in others:
            theirs = from_fields(m.get("fieldsV1") or {})
            clash = [p for p in theirs if p in mine_set and p[-1] != "." and _get(old, p) != _get(applied, p)]
            if clash and not force:
                conflicts.extend({"reason": "FieldManagerConflict", "field": _field_text(p),
                                  "message": f'conflict with "{m.get("manager")}" using {m.get("apiVersion")}'} for p in clash)
            elif clash:
                m["fieldsV1"] = to_fields([p for p in theirs if p not in set(clash)])
        if conflicts:
            raise StoreError(409, "Conflict", f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: "
                             + "; ".join(f"{c['message']}: {c['field']}" for c in conflicts), causes=conflicts)
        owned_by_others = {p for m in others for p in from_fields(m.get("fieldsV1") or {})}
        new = copy.deepcopy(old)
        for p in previous:
            if p not in mine_set and p not in owned_by_others:
                _remove(new, p)
        new = strategic_merge_patch(new, applied)
        new["metadata"]["managedFields"] = [m for m in others if m.get("fieldsV1")] + [entry]
        return store.update(rt.plural, new, namespace), False   # the whole object: managedFields change on /status too
