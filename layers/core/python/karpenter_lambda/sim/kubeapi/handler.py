"""The HTTP side of the local API server: reading requests, top-level routes (health, version, discovery, OpenAPI).

Requests go to the :class:`~.store.ObjectStore` of the :class:`~karpenter_lambda.sim.kubeapi.KubeAPIServer` that
owns the HTTP server (``server.api``); the groups served are ``api.served``.  The object routes are
:class:`.routes._ObjectRoutes`, list and watch :class:`.streams._Streams`.  A request's body is read whole before
anything is answered, errors included, so a kept-alive connection never reads a left-over body as a request.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import yaml

from . import discovery, openapi
from .resources import StoreError, status_doc
from .routes import _ObjectRoutes, dry_run_asked
from .streams import _Streams

if TYPE_CHECKING:
    from . import KubeAPIServer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    api: "KubeAPIServer"

    def handle_error(self, request, client_address):  # a client that went away is not worth a traceback
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(_ObjectRoutes, _Streams, BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the headers and the body go out in separate writes; with Nagle's algorithm the body waits for the
    # client's delayed ACK of the headers, 40 ms on Linux for every response on a kept-alive connection.
    disable_nagle_algorithm = True
    server: _Server
    _raw: bytes = b""
    _warnings: list[str]

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
        self._send_bytes(code, json.dumps(body, separators=(",", ":")).encode(), headers)

    def _send_bytes(self, code: int, data: bytes, headers: dict | None = None, ctype: str = "application/json") -> None:
        self.server.api._log(self.command, self.path, code)   # before the reply: a client that got it sees it logged
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        for w in self._warnings:
            self.send_header("Warning", '299 - "' + w.replace('"', '\\"') + '"')
        self.end_headers()
        self.wfile.write(data)

    def _read_raw(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _body(self, yaml_ok: bool = False) -> Any:
        """The request body (read before routing) as JSON, or YAML for ``application/yaml`` and apply patches."""
        raw = self._raw
        if not raw:
            return None
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if yaml_ok or ctype == "application/yaml":
            try:
                return yaml.safe_load(raw)
            except yaml.YAMLError as e:
                raise StoreError(400, "BadRequest", f"request body is not valid YAML: {e}") from None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise StoreError(400, "BadRequest", f"request body is not valid JSON: {e}") from None

    def _dispatch(self, method: str) -> None:
        api = self.server.api
        self._warnings = []
        try:
            self._raw = self._read_raw() if method in ("POST", "PUT", "PATCH", "DELETE") else b""
            fault = api._take_fault(method, self.path)
            if fault is not None:
                headers = {"Retry-After": fault["retry_after"]} if fault.get("retry_after") is not None else None
                self._send_json(fault["status"], status_doc(fault["status"], fault["reason"], fault["message"]), headers)
                return
            self._route(method)
        except StoreError as e:
            headers = {"Retry-After": e.retry_after} if e.retry_after is not None else None
            self._warnings = []
            self._send_json(e.code, e.status(), headers)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # a bug in the server: answer 500 rather than hang the client
            try:
                self._send_json(500, status_doc(500, "InternalError", f"{type(e).__name__}: {e}"))
            except OSError:
                pass

    def _openapi(self, path: str) -> None:
        api = self.server.api
        version = f"{api.version_info['major']}.{api.version_info['minor']}"
        if path == "/openapi/v2":
            accept = self.headers.get("Accept") or "*/*"
            if not any(a.split(";")[0].strip() in ("application/json", "*/*", "application/*") for a in accept.split(",")):
                raise StoreError(406, "NotAcceptable", f"only application/json is served here, not {accept}")
            self._send_bytes(200, openapi.v2_document(version))
        elif path == "/openapi/v3":
            self._send_json(200, openapi.v3_index(version))
        else:
            gv = openapi.v3_lookup(path[len("/openapi/v3/"):]) if path.startswith("/openapi/v3/") else None
            doc = openapi.v3_document(*gv, version) if gv else b""
            if not doc:
                raise StoreError(404, "NotFound", f"the server could not find the requested resource ({path})")
            self._send_bytes(200, doc)

    def _route(self, method: str) -> None:
        api = self.server.api
        store = api.store
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        path = url.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        if method == "GET" and path in ("/healthz", "/readyz", "/livez"):
            self._send_bytes(200, b"ok", ctype="text/plain")
            return
        if method == "GET" and path == "/version":
            self._send_json(200, api.version_info)
            return
        if method == "GET" and parts[:1] == ["openapi"]:
            self._openapi(path)
            return
        if method == "GET" and parts == ["api"]:
            self._send_json(200, discovery.api_versions())
            return
        if method == "GET" and parts == ["apis"]:
            self._send_json(200, discovery.api_group_list(api.served))
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
            self._send_json(200, discovery.resource_list(group, version, gv))
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
                body = self._body() or {}
                pod_name = (body.get("metadata") or {}).get("name")
                target = (body.get("target") or {}).get("name")
                dry = dry_run_asked(q, body)
                self._send_json(*self._write(store, dry, api.served[("", "v1")]["pods"], pod_name, namespace,
                                             lambda: (store.bind(namespace, pod_name or "", target or ""), (201, body))[1]))
                return
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if len(rest) > 3:
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        if rt.namespaced is False:
            namespace = None
        if name is None and method == "GET":
            if q.get("watch") in ("true", "1"):
                self._watch(rt, namespace, q)
            else:
                self._list(rt, namespace, q)
            return
        self._objects(method, store, rt, namespace, name, sub, q, url.path)
