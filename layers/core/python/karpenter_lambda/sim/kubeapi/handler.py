"""The HTTP side of the local API server: routing, discovery, list paging and chunked watch streams.

Requests go to the :class:`~.store.ObjectStore` of the :class:`~karpenter_lambda.sim.kubeapi.KubeAPIServer` that
owns the HTTP server (``server.api``); the groups served are ``api.served``.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from .resources import SCALABLE, ResourceType, StoreError, status_doc
from .selectors import match_field_selector, match_label_selector, parse_field_selector, parse_label_selector

if TYPE_CHECKING:
    from . import KubeAPIServer


_PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    api: "KubeAPIServer"

    def handle_error(self, request, client_address):  # a client that went away is not worth a traceback
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the headers and the body go out in separate writes; with Nagle's algorithm the body waits for the
    # client's delayed ACK of the headers, 40 ms on Linux for every response on a kept-alive connection.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format, *args):  # noqa: A002 - silence the default stderr log
        pass

    def setup(self):
        super().setup()
        self.server.api._connections.add(self.connection)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.api._connections.discard(self.connection)

    # every verb goes through one dispatcher
    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_DELETE(self):
        self._dispatch("DELETE")

    # -- plumbing --------------------------------------------------------------------------
    def _send_json(self, code: int, body: Any, headers: dict | None = None) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.server.api._log(self.command, self.path, code)   # before the reply: a client that got it sees it logged
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise StoreError(400, "BadRequest", f"request body is not valid JSON: {e}") from None

    def _dispatch(self, method: str) -> None:
        api = self.server.api
        try:
            fault = api._take_fault(method, self.path)
            if fault is not None:
                if method in ("POST", "PUT", "PATCH"):
                    self._read_body()
                headers = {"Retry-After": fault["retry_after"]} if fault.get("retry_after") is not None else None
                self._send_json(fault["status"], status_doc(fault["status"], fault["reason"], fault["message"]), headers)
                return
            self._route(method)
        except StoreError as e:
            headers = {"Retry-After": e.retry_after} if e.retry_after is not None else None
            self._send_json(e.code, e.status(), headers)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # a bug in the server: answer 500 rather than hang the client
            try:
                self._send_json(500, status_doc(500, "InternalError", f"{type(e).__name__}: {e}"))
            except OSError:
                pass

    def _route(self, method: str) -> None:
        api = self.server.api
        store = api.store
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        path = url.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        if method == "GET" and path in ("/healthz", "/readyz", "/livez"):
            data = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(data)
            return
        if method == "GET" and path == "/version":
            self._send_json(200, api.version_info)
            return
        if method == "GET" and parts == ["api"]:
            self._send_json(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
            return
        if method == "GET" and parts == ["apis"]:
            versions: dict[str, list[str]] = {}
            for g, v in api.served:
                if g:
                    versions.setdefault(g, []).append(v)
            self._send_json(
                200,
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [
                        {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                         "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}}
                        for g, vs in sorted(versions.items())
                    ],
                },
            )
            return
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        gv = api.served.get((group, version))
        if gv is None:
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        if not rest:
            if method != "GET":
                raise StoreError(405, "MethodNotAllowed", "discovery is read-only")
            self._send_json(
                200,
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{group}/{version}" if group else version,
                    "resources": [
                        {
                            "name": r.plural,
                            "singularName": r.kind.lower(),
                            "namespaced": r.namespaced,
                            "kind": r.kind,
                            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                        }
                        for r in gv.values()
                    ]
                    + [
                        {"name": f"{r.plural}/scale", "singularName": "", "namespaced": r.namespaced, "group": "autoscaling",
                         "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}
                        for r in gv.values() if r.plural in SCALABLE
                    ],
                },
            )
            return
        namespace = None
        if group == "" and rest[0] == "namespaces" and len(rest) >= 3 and rest[2] in gv and gv[rest[2]].namespaced:
            namespace, rest = rest[1], rest[2:]
        elif group and rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        plural = rest[0]
        rt = gv.get(plural)
        if rt is None or (group == "" and plural == "bindings"):
            if plural == "bindings" and namespace and method == "POST":
                body = self._read_body() or {}
                pod_name = (body.get("metadata") or {}).get("name")
                target = (body.get("target") or {}).get("name")
                store.bind(namespace, pod_name or "", target or "")
                self._send_json(201, body)
                return
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if len(rest) > 3:
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        if rt.namespaced is False:
            namespace = None

        if name is None:
            if method == "GET":
                if q.get("watch") in ("true", "1"):
                    self._watch(rt, namespace, q)
                else:
                    self._list(rt, namespace, q)
                return
            if method == "POST":
                if rt.namespaced and not namespace:
                    raise StoreError(405, "MethodNotAllowed", f"create {rt.plural} needs a namespace in the path")
                obj = store.create(rt.plural, self._read_body(), namespace)
                self._send_json(201, obj)
                return
            raise StoreError(405, "MethodNotAllowed", f"{method} is not supported on a collection")

        if sub == "binding" and rt.plural == "pods" and method == "POST":
            body = self._read_body() or {}
            target = (body.get("target") or {}).get("name")
            store.bind(namespace or "default", name, target or "")
            self._send_json(201, body)
            return
        if sub == "eviction" and rt.plural == "pods" and method == "POST":
            self._read_body()
            store.evict(namespace or "default", name)
            self._send_json(201, status_doc(201, "", "", success=True))
            return
        if sub == "scale" and rt.plural in SCALABLE:
            if method == "GET":
                self._send_json(200, store.get_scale(rt.plural, name, namespace))
            elif method in ("PUT", "PATCH"):
                ptype = None
                if method == "PATCH":
                    ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
                    ptype = _PATCH_TYPES.get(ctype)
                    if ptype is None:
                        raise StoreError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted media types include: {', '.join(_PATCH_TYPES)}")
                self._send_json(200, store.update_scale(rt.plural, name, self._read_body(), namespace, ptype))
            else:
                raise StoreError(405, "MethodNotAllowed", f"{method} is not supported on {rt.plural}/scale")
            return
        if sub not in (None, "status"):
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        if method == "GET":
            self._send_json(200, store.must_get(rt.plural, name, namespace))
        elif method == "PUT":
            body = self._read_body()
            if not isinstance(body, dict):
                raise StoreError(400, "BadRequest", "PUT body must be a JSON object")
            body.setdefault("metadata", {})
            if body["metadata"].get("name") not in (None, name):
                raise StoreError(400, "BadRequest", f"the name of the object ({body['metadata'].get('name')}) does not match the name on the URL ({name})")
            body["metadata"]["name"] = name
            if namespace:
                body["metadata"]["namespace"] = namespace
            self._send_json(200, store.update(rt.plural, body, namespace, subresource=sub))
        elif method == "PATCH":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            ptype = _PATCH_TYPES.get(ctype)
            if ptype is None:
                raise StoreError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted media types include: {', '.join(_PATCH_TYPES)}")
            self._send_json(200, store.patch(rt.plural, name, self._read_body(), namespace, ptype, subresource=sub))
        elif method == "DELETE":
            self._read_body()
            self._send_json(200, store.delete(rt.plural, name, namespace))
        else:
            raise StoreError(405, "MethodNotAllowed", f"{method} is not supported")

    def _list(self, rt: ResourceType, namespace: str | None, q: dict) -> None:
        store = self.server.api.store
        with store.lock:
            items = store.list(rt.plural, namespace, q.get("labelSelector"), q.get("fieldSelector"))
            rv = store.resource_version
        for it in items:
            it.pop("kind", None)
            it.pop("apiVersion", None)
        meta: dict = {"resourceVersion": str(rv)}
        limit = int(q.get("limit") or 0)
        cont = q.get("continue")
        if cont:
            try:
                start_after = json.loads(cont)
                items = [it for it in items if [it["metadata"].get("namespace", ""), it["metadata"]["name"]] > start_after]
            except (ValueError, TypeError, KeyError):
                raise StoreError(400, "BadRequest", f"invalid continue token {cont!r}") from None
        if limit > 0 and len(items) > limit:
            last = items[limit - 1]["metadata"]
            meta["continue"] = json.dumps([last.get("namespace", ""), last["name"]], separators=(",", ":"))
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        self._send_json(200, {"kind": rt.kind + "List", "apiVersion": rt.api_version, "metadata": meta, "items": items})

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _watch(self, rt: ResourceType, namespace: str | None, q: dict) -> None:
        api = self.server.api
        store = api.store
        lterms = parse_label_selector(q.get("labelSelector"))
        fterms = parse_field_selector(q.get("fieldSelector"))
        timeout = float(q.get("timeoutSeconds") or api.default_watch_timeout)
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        rv_param = q.get("resourceVersion") or ""
        deadline = time.monotonic() + timeout
        generation = api._watch_generation

        def matches(obj: dict, ns: str) -> bool:
            if namespace and ns != namespace:
                return False
            return match_label_selector(lterms, obj["metadata"].get("labels")) and match_field_selector(fterms, obj)

        initial: list[tuple[str, dict]] = []
        gone = False
        with store.lock:
            if rv_param in ("", "0"):
                last = store.resource_version
                for obj in store.list(rt.plural, namespace):
                    if matches(obj, obj["metadata"].get("namespace", "")):
                        initial.append(("ADDED", obj))
            else:
                try:
                    last = int(rv_param)
                except ValueError:
                    raise StoreError(400, "BadRequest", f"invalid resourceVersion {rv_param!r}") from None
                gone = store.events_after(last) is None
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        api._log("GET", self.path, 200)
        api._watch_count += 1

        def send(etype: str, obj: dict) -> None:
            self._chunk(json.dumps({"type": etype, "object": obj}, separators=(",", ":")).encode() + b"\n")

        def send_gone() -> None:
            send("ERROR", status_doc(410, "Expired", f"too old resource version: {last} ({store.compacted_rv + 1})"))

        try:
            if gone:
                send_gone()
            else:
                for etype, obj in initial:
                    send(etype, obj)
                last_bookmark = time.monotonic()
                while True:
                    with store.lock:
                        while True:
                            if api._stopping or api._watch_generation != generation:
                                break
                            evs = store.events_after(last)
                            if evs is None or evs:
                                break
                            left = deadline - time.monotonic()
                            if left <= 0:
                                break
                            store.cond.wait(min(left, 0.25))
                    if api._stopping or api._watch_generation != generation:
                        # cut the stream without the terminating chunk: the client sees a broken connection
                        self.close_connection = True
                        try:
                            self.connection.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                        return
                    if evs is None:
                        send_gone()
                        break
                    for ev in evs:
                        last = ev.rv
                        if ev.plural == rt.plural and matches(ev.obj, ev.namespace):
                            send(ev.type, ev.obj)
                    if time.monotonic() >= deadline:
                        break
                    if bookmarks and time.monotonic() - last_bookmark > api.bookmark_interval:
                        send("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(last)}})
                        last_bookmark = time.monotonic()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
        finally:
            api._watch_count -= 1
