"""The served kinds' schemas, generated from the official ``kubernetes`` client's models.

The client's models are pydantic classes generated from the Kubernetes OpenAPI document (field names, types,
descriptions, required fields); pydantic writes their JSON Schema, and this module turns it back into the
OpenAPI v3 dialect of the real API server: ``nullable`` unions unwrapped, ``$ref`` with a description wrapped in
``allOf``, int-or-string as ``x-kubernetes-int-or-string``, ``x-kubernetes-group-version-kind`` on the top-level
kinds, and the strategic-merge keys (``x-kubernetes-patch-merge-key``) of the list fields this server merges by key
(:data:`.patches.SMP_MERGE_KEYS`), so ``kubectl apply`` computes its patches as against a real server.

Schema names come from the client's class names (``V1Pod`` -> ``io.k8s.api.v1.Pod``, ``CoreV1Event`` ->
``io.k8s.api.core.v1.Event``) where the real server writes ``io.k8s.api.core.v1.Pod``: kubectl reads only the last
part (``kubectl explain`` shows ``<PodSpec>``).  KEDA's ScaledObject (no model in the client) is an
object that keeps unknown fields.  Generated once per process, on first use (~0.5 s).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from .patches import SMP_MERGE_KEYS, SMP_PRIMITIVE_MERGE
from .resources import RESOURCES, ResourceType

# the client's model of each served kind
MODELS: dict[str, str] = {
    "pods": "V1Pod", "nodes": "V1Node", "namespaces": "V1Namespace", "events": "CoreV1Event",
    "configmaps": "V1ConfigMap", "services": "V1Service", "persistentvolumeclaims": "V1PersistentVolumeClaim",
    "persistentvolumes": "V1PersistentVolume", "storageclasses": "V1StorageClass", "csinodes": "V1CSINode",
    "daemonsets": "V1DaemonSet", "deployments": "V1Deployment", "replicasets": "V1ReplicaSet",
    "statefulsets": "V1StatefulSet", "poddisruptionbudgets": "V1PodDisruptionBudget", "jobs": "V1Job",
    "leases": "V1Lease", "horizontalpodautoscalers": "V2HorizontalPodAutoscaler",
}
# the other kinds the routes take or answer: (group, version, kind) -> model
EXTRA_MODELS: dict[tuple[str, str, str], str] = {
    ("policy", "v1", "Eviction"): "V1Eviction",
    ("autoscaling", "v1", "Scale"): "V1Scale",
    ("", "v1", "Binding"): "V1Binding",
    ("meta.k8s.io", "v1", "Status"): "V1Status",
    ("meta.k8s.io", "v1", "DeleteOptions"): "V1DeleteOptions",
}
UNMODELLED = "ScaledObject"   # KEDA's CRD: an object with metadata that keeps unknown fields
REF_PREFIX = "#/components/schemas/"


def _description(text: str | None) -> str | None:
    if not text:
        return None
    return text.split("\n\nAttributes:")[0].strip() or None


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _clean(node: Any) -> Any:
    """One pydantic JSON Schema node in the API server's OpenAPI v3 dialect."""
    if isinstance(node, list):
        return [_clean(x) for x in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    description = _description(node.pop("description", None))
    node.pop("title", None)
    if node.get("default", 0) is None:
        node.pop("default")
    if node.get("additionalProperties") is False:   # the real documents leave closed objects implicit
        node.pop("additionalProperties")
    any_of = node.pop("anyOf", None)
    if any_of is not None:
        options = [o for o in any_of if o != {"type": "null"}]
        types = sorted(o.get("type", "") for o in options)
        if types == ["integer", "string"]:
            node.update({"type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": True})
        elif len(options) == 1:
            node.update(options[0])
        else:
            node["anyOf"] = options
    out = {k: _clean(v) for k, v in node.items()}
    if "$ref" in out and description:
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    if description:
        out["description"] = description
    return out


def _merge_keys(schemas: dict[str, dict]) -> None:
    """``x-kubernetes-patch-*`` on the list fields that strategic merge patch merges by key or as a set."""
    for schema in schemas.values():
        for field, prop in (schema.get("properties") or {}).items():
            if prop.get("type") != "array":
                continue
            item_ref = (prop.get("items") or {}).get("$ref")
            key = SMP_MERGE_KEYS.get(field)
            if key and item_ref and key in (schemas.get(_ref_name(item_ref), {}).get("properties") or {}):
                prop.update({"x-kubernetes-patch-merge-key": key, "x-kubernetes-patch-strategy": "merge",
                             "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key]})
            elif field in SMP_PRIMITIVE_MERGE and not item_ref:
                prop.update({"x-kubernetes-patch-strategy": "merge", "x-kubernetes-list-type": "set"})


def _gvk(group: str, version: str, kind: str) -> dict:
    return {"group": group, "version": version, "kind": kind}


@functools.lru_cache(maxsize=1)
def schemas() -> dict[str, dict]:
    """Every schema by name (refs as ``#/components/schemas/NAME``); the top-level kinds carry their GVK."""
    import kubernetes.client.models as models
    from pydantic.json_schema import models_json_schema

    names = list(MODELS.values()) + list(EXTRA_MODELS.values())
    _, top = models_json_schema([(getattr(models, n), "serialization") for n in names], by_alias=True,
                                ref_template=REF_PREFIX + "{model}")
    defs = top["$defs"]
    renames = {name: _api_name(name) for name in defs}
    text = _REF.sub(lambda m: m.group(1) + renames.get(m.group(2), m.group(2)) + '"', json.dumps(defs))
    out = {renames[name]: _clean(s) for name, s in json.loads(text).items()}
    _merge_keys(out)
    for plural, name in MODELS.items():
        rt = RESOURCES[plural]
        out[_api_name(name)]["x-kubernetes-group-version-kind"] = [_gvk(rt.group, rt.version, rt.kind)]
    for (group, version, kind), name in EXTRA_MODELS.items():
        out[_api_name(name)]["x-kubernetes-group-version-kind"] = [_gvk(group, version, kind)]
    scaled = RESOURCES["scaledobjects"]
    out[UNMODELLED] = {
        "type": "object", "description": "KEDA's ScaledObject (stored only: nothing acts on it here).",
        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                       "metadata": {"allOf": [{"$ref": REF_PREFIX + "V1ObjectMeta"}]},
                       "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                       "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        "x-kubernetes-group-version-kind": [_gvk(scaled.group, scaled.version, scaled.kind)],
    }
    return out


def schema_name(rt: ResourceType) -> str:
    return _api_name(MODELS[rt.plural]) if rt.plural in MODELS else UNMODELLED


def model_schema(model: str) -> str:
    """The schema name of a client model (``V1Eviction`` -> ``io.k8s.api.v1.Eviction``)."""
    return _api_name(model)


_REF = re.compile(r'("' + re.escape(REF_PREFIX) + r')([A-Za-z0-9_]+)"')
_CLASS = re.compile(r"^([A-Z][a-z]+)?(V\d+(?:alpha\d+|beta\d+)?)([A-Z].*)$")


def _api_name(model: str) -> str:
    """A client class name as a dotted schema name whose last part is the Go type's (``CoreV1Event`` ->
    ``io.k8s.api.core.v1.Event``): kubectl explain shows that last part."""
    m = _CLASS.match(model)
    if not m:
        return model
    prefix, version, kind = m.groups()
    return ".".join(["io.k8s.api"] + ([prefix.lower()] if prefix else []) + [version.lower(), kind])


def referenced(names: list[str]) -> dict[str, dict]:
    """``names`` and every schema they reference, transitively."""
    every = schemas()
    out: dict[str, dict] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in out or name not in every:
            continue
        out[name] = every[name]
        todo.extend(_refs(every[name]))
    return out


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [_ref_name(node["$ref"])] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []
