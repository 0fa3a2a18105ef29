"""The object routes of the local API server: collections, objects and their subresources.

A mixin of :class:`~.handler._Handler` (``self._send_json``, ``self._body``, ``self.headers``).  Every write honours
``dryRun=All`` (query, or ``dryRun: [All]`` in the DeleteOptions of a DELETE or an eviction): it is validated and
answered as if done, inside :meth:`.store.ObjectStore.dry_run`, so nothing changes, no watch sees an event and the
resourceVersion does not move; the answer carries the object's current resourceVersion (none for a create), as
the real server's.  ``fieldValidation`` is checked by :mod:`.fieldcheck`; server-side apply is :mod:`.apply`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from . import fieldcheck
from .apply import server_side_apply
from .resources import SCALABLE, ResourceType, StoreError, status_doc
from .tables import table, table_version

if TYPE_CHECKING:
    from .store import ObjectStore

PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
}
Result = tuple[int, Any]


def dry_run_asked(q: dict, body: Any = None) -> bool:
    """``dryRun=All`` in the query, or in a DeleteOptions / Eviction body; 400 for any other value."""
    values = [q["dryRun"]] if q.get("dryRun") else []
    if isinstance(body, dict):
        opts = body.get("deleteOptions") if body.get("kind") == "Eviction" else body
        if isinstance(opts, dict) and isinstance(opts.get("dryRun"), list):
            values.extend(opts["dryRun"])
    for v in values:
        if v != "All":
            raise StoreError(400, "BadRequest", f'dryRun: Unsupported value: "{v}": supported values: "All"')
    return bool(values)


class _ObjectRoutes:
    headers: Any
    _send_json: Callable[..., None]
    _body: Callable[..., Any]
    _warnings: list[str]

    def _patch_type(self) -> str:
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        ptype = PATCH_TYPES.get(ctype)
        if ptype is None:   # the body was read before routing: the connection stays in step
            raise StoreError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
                                                          f"accepted media types include: {', '.join(PATCH_TYPES)}")
        return ptype

    def _check_fields(self, rt: ResourceType, body: Any, q: dict, model: str | None = None) -> None:
        self._warnings.extend(fieldcheck.check(rt, body, q.get("fieldValidation"), model))

    def _write(self, store: "ObjectStore", dry: bool, rt: ResourceType, name: str | None, namespace: str | None,
               op: Callable[[], Result]) -> Result:
        """Run ``op``; under dry run, undo it and give the answer the resourceVersion the object has now."""
        if not dry:
            return op()
        with store.dry_run():
            before = store.get(rt.plural, name, namespace) if name else None
            code, out = op()
        meta = out.get("metadata") if isinstance(out, dict) and out.get("kind") == rt.kind else None
        if isinstance(meta, dict):
            if before is None:
                meta.pop("resourceVersion", None)
            else:
                meta["resourceVersion"] = before["metadata"]["resourceVersion"]
        return code, out

    def _answer_object(self, store: "ObjectStore", rt: ResourceType, code: int, obj: Any, q: dict) -> None:
        version = table_version(self.headers.get("Accept"))
        if version and isinstance(obj, dict) and obj.get("kind") == rt.kind:
            obj = table(rt, [obj], store.now(), version, q.get("includeObject") or "Metadata",
                        {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion", "")})
        self._send_json(code, obj)

    def _objects(self, method: str, store: "ObjectStore", rt: ResourceType, namespace: str | None,
                 name: str | None, sub: str | None, q: dict, path: str) -> None:
        if name is None:
            if method == "POST":
                if rt.namespaced and not namespace:
                    raise StoreError(405, "MethodNotAllowed", f"create {rt.plural} needs a namespace in the path")
                body = self._body()
                self._check_fields(rt, body, q)
                dry = dry_run_asked(q)
                self._send_json(*self._write(store, dry, rt, None, namespace,
                                             lambda: (201, store.create(rt.plural, body, namespace))))
                return
            raise StoreError(405, "MethodNotAllowed", f"{method} is not supported on a collection")
        if rt.plural == "pods" and sub in ("binding", "eviction") and method == "POST":
            body = self._body() or {}
            dry = dry_run_asked(q, body)
            ns = namespace or "default"
            if sub == "binding":
                target = (body.get("target") or {}).get("name")
                self._send_json(*self._write(store, dry, rt, name, ns,
                                             lambda: (store.bind(ns, name, target or ""), (201, body))[1]))
            else:
                self._check_fields(rt, body, q, "V1Eviction")
                self._send_json(*self._write(store, dry, rt, name, ns, lambda: (
                    store.evict(ns, name), (201, status_doc(201, "", "", success=True)))[1]))
            return
        if sub == "scale" and rt.plural in SCALABLE:
            self._scale(method, store, rt, namespace, name, q)
            return
        if sub not in (None, "status"):
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({path})")
        if method == "GET":
            self._answer_object(store, rt, 200, store.must_get(rt.plural, name, namespace), q)
        elif method == "PUT":
            body = self._body()
            if not isinstance(body, dict):
                raise StoreError(400, "BadRequest", "PUT body must be a JSON object")
            self._check_fields(rt, body, q)
            body.setdefault("metadata", {})
            if body["metadata"].get("name") not in (None, name):
                raise StoreError(400, "BadRequest", f"the name of the object ({body['metadata'].get('name')}) does not "
                                                    f"match the name on the URL ({name})")
            body["metadata"]["name"] = name
            if namespace:
                body["metadata"]["namespace"] = namespace
            dry = dry_run_asked(q)
            self._send_json(*self._write(store, dry, rt, name, namespace,
                                         lambda: (200, store.update(rt.plural, body, namespace, subresource=sub))))
        elif method == "PATCH":
            ptype = self._patch_type()
            body = self._body(yaml_ok=ptype == "apply")
            if ptype != "json":
                self._check_fields(rt, body, q)
            dry = dry_run_asked(q)
            if ptype == "apply":
                def op() -> Result:
                    obj, created = server_side_apply(store, rt, name, namespace, body, q.get("fieldManager"),
                                                     q.get("force") in ("true", "1"), sub)
                    return (201 if created else 200), obj
                self._send_json(*self._write(store, dry, rt, name, namespace, op))
            else:
                self._send_json(*self._write(store, dry, rt, name, namespace, lambda: (
                    200, store.patch(rt.plural, name, body, namespace, ptype, subresource=sub))))
        elif method == "DELETE":
            dry = dry_run_asked(q, self._body())
            self._send_json(*self._write(store, dry, rt, name, namespace,
                                         lambda: (200, store.delete(rt.plural, name, namespace))))
        else:
            raise StoreError(405, "MethodNotAllowed", f"{method} is not supported")

    def _scale(self, method: str, store: "ObjectStore", rt: ResourceType, namespace: str | None, name: str,
               q: dict) -> None:
        if method == "GET":
            self._send_json(200, store.get_scale(rt.plural, name, namespace))
            return
        if method not in ("PUT", "PATCH"):
            raise StoreError(405, "MethodNotAllowed", f"{method} is not supported on {rt.plural}/scale")
        ptype = self._patch_type() if method == "PATCH" else None
        if ptype == "apply":
            raise StoreError(415, "UnsupportedMediaType", "server-side apply is not served on the scale subresource")
        body = self._body()
        if ptype != "json":
            self._check_fields(rt, body, q, "V1Scale")
        dry = dry_run_asked(q)
        code, scale = self._write(store, dry, rt, None, namespace,
                                  lambda: (200, store.update_scale(rt.plural, name, body, namespace, ptype)))
        if dry and isinstance(scale, dict):
            scale["metadata"]["resourceVersion"] = store.must_get(rt.plural, name, namespace)["metadata"]["resourceVersion"]
        self._send_json(code, scale)
