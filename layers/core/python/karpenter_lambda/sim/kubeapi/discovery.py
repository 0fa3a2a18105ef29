"""Discovery documents: ``/api``, ``/apis``, ``/api/v1`` and ``/apis/{group}/{version}``, as kubectl reads them.

Each resource lists its verbs, ``shortNames`` (``kubectl get po``) and ``categories`` (``kubectl get all``); the
subresources follow their resource: ``pods/binding``, ``pods/eviction`` (group ``policy``, version ``v1``, kind
``Eviction``: ``kubectl drain`` evicts only when discovery lists it, else it deletes and bypasses the
PodDisruptionBudgets), ``{plural}/status`` where the real API server has one, ``{plural}/scale`` (autoscaling/v1).
"""

from __future__ import annotations

from .resources import SCALABLE, STATUS_SUBRESOURCE, ResourceType

OBJECT_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def api_versions() -> dict:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}


def api_group_list(served: dict[tuple[str, str], dict[str, ResourceType]]) -> dict:
    versions: dict[str, list[str]] = {}
    for g, v in served:
        if g:
            versions.setdefault(g, []).append(v)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
             "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}}
            for g, vs in sorted(versions.items())
        ],
    }


def _resource(r: ResourceType) -> dict:
    out: dict = {"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced, "kind": r.kind,
                 "verbs": list(OBJECT_VERBS)}
    if r.short_names:
        out["shortNames"] = list(r.short_names)
    if r.categories:
        out["categories"] = list(r.categories)
    return out


def _subresources(r: ResourceType) -> list[dict]:
    out: list[dict] = []
    if r.plural == "pods" and r.group == "":
        out.append({"name": "pods/binding", "singularName": "", "namespaced": True, "kind": "Binding", "verbs": ["create"]})
        out.append({"name": "pods/eviction", "singularName": "", "namespaced": True, "group": "policy", "version": "v1",
                    "kind": "Eviction", "verbs": ["create"]})
    if r.plural in SCALABLE:
        out.append({"name": f"{r.plural}/scale", "singularName": "", "namespaced": r.namespaced, "group": "autoscaling",
                    "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]})
    if r.plural in STATUS_SUBRESOURCE:
        out.append({"name": f"{r.plural}/status", "singularName": "", "namespaced": r.namespaced, "kind": r.kind,
                    "verbs": ["get", "patch", "update"]})
    return out


def resource_list(group: str, version: str, resources: dict[str, ResourceType]) -> dict:
    """The APIResourceList of one group/version: each resource followed by its subresources."""
    items: list[dict] = []
    if group == "":
        items.append({"name": "bindings", "singularName": "binding", "namespaced": True, "kind": "Binding", "verbs": ["create"]})
    for r in resources.values():
        items.append(_resource(r))
        items.extend(_subresources(r))
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}" if group else version,
            "resources": items}
