"""OpenAPI documents: ``/openapi/v3`` (the index), ``/openapi/v3/{api/v1,apis/GROUP/VERSION}`` and ``/openapi/v2``.

What reads them:

* ``kubectl apply`` (validation ``Strict``, its default) looks in the group-version document for the PATCH operation
  of the kind (``x-kubernetes-group-version-kind``) and its ``fieldValidation`` parameter: found, it leaves the
  validation to the server (``fieldValidation=Strict``, :mod:`.fieldcheck`); ``--dry-run=server`` likewise looks for
  ``dryRun``.  Its client-side apply reads the list fields' merge keys (``x-kubernetes-patch-merge-key``).
* ``kubectl explain pod.spec`` reads the kind's schema (found by its GVK) and follows ``$ref``/``allOf``.
* ``/openapi/v2`` is JSON only (kubectl asks for protobuf there, gets 406 and uses v3, which it prefers anyway).

Schemas come from :mod:`.schemas`; documents are built once per process, on first request.
"""

from __future__ import annotations

import functools
import hashlib
import json

from . import schemas
from .resources import RESOURCES, SCALABLE, STATUS_SUBRESOURCE, ResourceType

_QUERY = {
    "dryRun": "When present, indicates that modifications should not be persisted. Valid value: All.",
    "fieldManager": "fieldManager is a name associated with the actor or entity that is making these changes.",
    "fieldValidation": "How the server handles unknown fields in the request body: Ignore, Warn or Strict.",
    "force": "Force is going to \"force\" Apply requests (re-acquire conflicting fields owned by other people).",
    "labelSelector": "A selector to restrict the list of returned objects by their labels.",
    "fieldSelector": "A selector to restrict the list of returned objects by their fields.",
    "limit": "limit is a maximum number of responses to return for a list call.",
    "continue": "The continue option should be set when retrieving more results from the server.",
    "watch": "Watch for changes to the described resources and return them as a stream of add, update, and remove "
             "notifications.",
    "resourceVersion": "resourceVersion sets a constraint on what resource versions a request may be served from.",
    "timeoutSeconds": "Timeout for the list/watch call.",
    "allowWatchBookmarks": "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
}
_BOOL_QUERY = {"force", "watch", "allowWatchBookmarks"}
_INT_QUERY = {"limit", "timeoutSeconds"}
_PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json",
                "application/strategic-merge-patch+json", "application/apply-patch+yaml"]


def _param(name: str, v2: bool, where: str = "query") -> dict:
    kind = "boolean" if name in _BOOL_QUERY else "integer" if name in _INT_QUERY else "string"
    p = {"name": name, "in": where, "description": _QUERY.get(name, f"name of the {name}")}
    if where == "path":
        p["required"] = True
    if v2:
        p["type"] = kind
        p["uniqueItems"] = True
    else:
        p["schema"] = {"type": kind, "uniqueItems": True}
    return p


def _ref(name: str, v2: bool) -> dict:
    return {"$ref": ("#/definitions/" if v2 else schemas.REF_PREFIX) + schemas.model_schema(name)}


def _op(action: str, gvk: ResourceType | tuple[str, str, str], model: str, query: list[str], v2: bool,
        body_types: list[str] | None = None, op_id: str = "") -> dict:
    group, version, kind = (gvk.group, gvk.version, gvk.kind) if isinstance(gvk, ResourceType) else gvk
    op: dict = {"operationId": op_id, "parameters": [_param(q, v2) for q in query],
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": {"group": group, "kind": kind, "version": version}}
    if v2:
        op["responses"] = {"200": {"description": "OK", "schema": _ref(model, v2)}}
        op["consumes"] = body_types or ["*/*"]
        op["produces"] = ["application/json"]
        if body_types:
            op["parameters"].append({"name": "body", "in": "body", "required": True, "schema": _ref(model, v2)})
    else:
        op["responses"] = {"200": {"description": "OK", "content": {"application/json": {"schema": _ref(model, v2)}}}}
        if body_types:
            body = {"type": "object"} if "application/apply-patch+yaml" in body_types else _ref(model, v2)
            op["requestBody"] = {"content": {t: {"schema": body} for t in body_types}, "required": True}
    return op


def _paths(rt: ResourceType, v2: bool) -> dict[str, dict]:
    base = "/api/v1" if not rt.group else f"/apis/{rt.group}/{rt.version}"
    ns = "/namespaces/{namespace}" if rt.namespaced else ""
    collection, one = f"{base}{ns}/{rt.plural}", f"{base}{ns}/{rt.plural}/{{name}}"
    path_params = ([_param("namespace", v2, "path")] if rt.namespaced else [])
    model = schemas.schema_name(rt)
    write = ["dryRun", "fieldManager", "fieldValidation"]
    kind = rt.kind
    out: dict[str, dict] = {
        collection: {
            "parameters": path_params,
            "get": _op("list", rt, model, ["labelSelector", "fieldSelector", "limit", "continue", "watch",
                                            "resourceVersion", "timeoutSeconds", "allowWatchBookmarks"], v2,
                       op_id=f"list{kind}"),
            "post": _op("post", rt, model, write, v2, ["application/json", "application/yaml"], f"create{kind}"),
        },
        one: {
            "parameters": path_params + [_param("name", v2, "path")],
            "get": _op("get", rt, model, [], v2, op_id=f"read{kind}"),
            "put": _op("put", rt, model, write, v2, ["application/json", "application/yaml"], f"replace{kind}"),
            "patch": _op("patch", rt, model, write + ["force"], v2, _PATCH_TYPES, f"patch{kind}"),
            "delete": _op("delete", rt, model, ["dryRun"], v2, op_id=f"delete{kind}"),
        },
    }
    if rt.plural in STATUS_SUBRESOURCE:
        out[one + "/status"] = {
            "parameters": path_params + [_param("name", v2, "path")],
            "get": _op("get", rt, model, [], v2, op_id=f"read{kind}Status"),
            "put": _op("put", rt, model, write, v2, ["application/json"], f"replace{kind}Status"),
            "patch": _op("patch", rt, model, write + ["force"], v2, _PATCH_TYPES, f"patch{kind}Status"),
        }
    if rt.plural in SCALABLE:
        scale = ("autoscaling", "v1", "Scale")
        out[one + "/scale"] = {
            "parameters": path_params + [_param("name", v2, "path")],
            "get": _op("get", scale, "V1Scale", [], v2, op_id=f"read{kind}Scale"),
            "put": _op("put", scale, "V1Scale", write, v2, ["application/json"], f"replace{kind}Scale"),
            "patch": _op("patch", scale, "V1Scale", write + ["force"], v2, _PATCH_TYPES, f"patch{kind}Scale"),
        }
    if rt.plural == "pods":
        out[one + "/eviction"] = {
            "parameters": path_params + [_param("name", v2, "path")],
            "post": _op("post", ("policy", "v1", "Eviction"), "V1Eviction", write, v2, ["application/json"],
                        "createPodEviction"),
        }
        out[one + "/binding"] = {
            "parameters": path_params + [_param("name", v2, "path")],
            "post": _op("post", ("", "v1", "Binding"), "V1Binding", write, v2, ["application/json"], "createPodBinding"),
        }
    return out


def _served(group: str, version: str) -> list[ResourceType]:
    return [r for r in RESOURCES.values() if (r.group, r.version) == (group, version)]


def _doc_path(group: str, version: str) -> str:
    return "api/v1" if not group else f"apis/{group}/{version}"


@functools.lru_cache(maxsize=None)
def v3_document(group: str, version: str, k8s_version: str) -> bytes:
    """The OpenAPI v3 document of one group/version, as JSON bytes (b"" when it is not served)."""
    served = _served(group, version)
    if not served:
        return b""
    paths: dict[str, dict] = {}
    for rt in served:
        paths.update(_paths(rt, v2=False))
    names = [schemas.schema_name(rt) for rt in served] + [schemas.model_schema(m) for m in schemas.EXTRA_MODELS.values()]
    doc = {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": f"v{k8s_version}"}, "paths": paths,
           "components": {"schemas": schemas.referenced(names)}}
    return json.dumps(doc, separators=(",", ":")).encode()


def v3_index(k8s_version: str) -> dict:
    """``/openapi/v3``: every group/version document with its ``serverRelativeURL`` (a content hash, as the real one)."""
    out = {}
    for group, version in sorted({(r.group, r.version) for r in RESOURCES.values()}):
        path = _doc_path(group, version)
        digest = hashlib.sha512(v3_document(group, version, k8s_version)).hexdigest().upper()
        out[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": out}


def v3_lookup(path: str) -> tuple[str, str] | None:
    """``api/v1`` -> ("", "v1"), ``apis/apps/v1`` -> ("apps", "v1"); None for any other path."""
    parts = [p for p in path.split("/") if p]
    if parts == ["api", "v1"]:
        return ("", "v1")
    if len(parts) == 3 and parts[0] == "apis":
        return (parts[1], parts[2])
    return None


@functools.lru_cache(maxsize=None)
def v2_document(k8s_version: str) -> bytes:
    """The Swagger 2.0 document of everything served, as JSON bytes."""
    paths: dict[str, dict] = {}
    for rt in RESOURCES.values():
        paths.update(_paths(rt, v2=True))
    names = [schemas.schema_name(rt) for rt in RESOURCES.values()] + [schemas.model_schema(m) for m in schemas.EXTRA_MODELS.values()]
    text = json.dumps(schemas.referenced(names), separators=(",", ":")).replace(schemas.REF_PREFIX, "#/definitions/")
    doc = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": f"v{k8s_version}"}, "paths": paths,
           "definitions": json.loads(text)}
    return json.dumps(doc, separators=(",", ":")).encode()
