"""List + watch of one collection, like client-go's reflector: list page by page, watch from the list's
resourceVersion (with bookmarks), resume from the last seen resourceVersion after a dropped connection, relist
on 410 Gone.  Objects stay raw JSON (``_preload_content=False``), never the client's models.

The API server is read through the watcher's own client (``kubeclient.KubeHTTP``) or, when given one, the official
``kubernetes`` client's ``ApiClient`` (imported by whoever made it: ~18 MB, which the watcher in a pod does not
pay)."""

from __future__ import annotations

import json
import random
import threading
from typing import Any

from .kubeclient import ApiError, KubeHTTP, error_from
from .stats import Stats, log


class Gone(Exception):
    """The watch's resourceVersion is too old (410 Gone): relist."""


class Reflector:
    """List, then watch from the list's resourceVersion; resume after drops, relist on 410.

    ``handler`` gets ``on_list_begin()``, ``on_list_item(obj)`` per listed object, ``on_list_end()``, and
    ``on_event(type, obj)`` per watch event (bookmarks excluded)."""

    def __init__(self, name: str, list_fn, handler, stop_event: threading.Event, stats: Stats, watch_timeout: int, backoff_base: float, backoff_cap: float, page_size: int):
        self.name = name
        self.list_fn = list_fn
        self.handler = handler
        self.stop_event = stop_event
        self.stats = stats
        self.watch_timeout = watch_timeout
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.page_size = page_size
        self._resp = None
        self._failures = 0
        self.thread = threading.Thread(target=self._run, name=f"reflector-{name}", daemon=True)

    def interrupt(self) -> None:
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown()
            except Exception:
                pass

    def _backoff(self) -> None:
        self._failures += 1
        delay = random.uniform(self.backoff_base / 2, min(self.backoff_cap, self.backoff_base * 2 ** (self._failures - 1)))
        self.stop_event.wait(delay)

    def _list(self) -> str:
        """Page through the collection (``page_size`` objects in memory at a time) and sync the handler."""
        token = None
        rv = ""
        self.handler.on_list_begin()
        while True:
            kw: dict[str, Any] = {"limit": self.page_size, "_preload_content": False, "_request_timeout": (10, 60)}
            if token:
                kw["_continue"] = token
            resp = self.list_fn(**kw)
            try:
                doc = json.loads(resp.data)
            finally:
                resp.release_conn()
            for item in doc.get("items") or []:
                self.handler.on_list_item(item)
            meta = doc.get("metadata") or {}
            rv = rv or meta.get("resourceVersion") or ""
            token = meta.get("continue")
            del doc
            if not token:
                break
        self.handler.on_list_end()
        if rv:
            self.stats.note_synced(self.name, rv)
        self.stats.inc("lists")
        return rv

    def _watch(self, rv: str) -> str:
        resp = self.list_fn(
            watch=True,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=self.watch_timeout,
            _preload_content=False,
            _request_timeout=(10, self.watch_timeout + 60),
        )
        self._resp = resp
        try:
            buf = b""
            for chunk in resp.stream(amt=None, decode_content=False):
                if self.stop_event.is_set():
                    return rv
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    etype, obj = ev.get("type"), ev.get("object") or {}
                    if etype == "ERROR":
                        if obj.get("code") == 410:
                            raise Gone(obj.get("message") or "410 Gone")
                        raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
                    new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if etype != "BOOKMARK":
                        self.handler.on_event(etype, obj)
                    if new_rv:
                        rv = new_rv
                        self.stats.note_synced(self.name, rv)
                    self._failures = 0
            return rv
        finally:
            self._resp = None
            try:
                resp.release_conn()
            except Exception:
                pass

    def _run(self) -> None:
        rv = None
        while not self.stop_event.is_set():
            try:
                if rv is None:
                    rv = self._list()
                    self._failures = 0
                rv = self._watch(rv)
                if not self.stop_event.is_set():
                    self.stats.inc("watch_restarts")
            except Gone as e:
                log.info("watch expired, relisting", extra={"json": {"resource": self.name, "reason": str(e)}})
                self.stats.inc("relists_410")
                rv = None
            except ApiError as e:
                if e.status == 410:
                    self.stats.inc("relists_410")
                    rv = None
                    continue
                self.stats.inc("api_errors")
                self.stats.note_error(f"{self.name}: HTTP {e.status} {e.reason}")
                log.warning("API error", extra={"json": {"resource": self.name, "status": e.status, "reason": str(e.reason)}})
                self._backoff()
            except Exception as e:  # connection refused/reset, protocol errors, bad JSON: resume from rv
                if self.stop_event.is_set():
                    break
                self.stats.inc("connect_errors")
                self.stats.note_error(f"{self.name}: {type(e).__name__}: {e}")
                log.warning("watch connection failed", extra={"json": {"resource": self.name, "error": f"{type(e).__name__}: {e}", "resourceVersion": rv}})
                self._backoff()


_QUERY_NAMES = {
    "watch": "watch",
    "resource_version": "resourceVersion",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "timeout_seconds": "timeoutSeconds",
    "limit": "limit",
    "_continue": "continue",
}


def lister(api_client, path: str):
    """``GET path`` as a function of the list/watch options (``limit``, ``watch``, ``resource_version``, ...),
    returning the raw urllib3 response and raising :class:`ApiError` on a non-2xx status.  ``api_client``: a
    :class:`KubeHTTP`, or the official client's ``ApiClient`` (auth, TLS and token refresh its own; going through
    it rather than ``CoreV1Api`` keeps the generated API module out)."""

    def query(kw: dict) -> list:
        out = []
        for k, v in kw.items():
            if v is None:
                continue
            if isinstance(v, bool):
                v = "true" if v else "false"
            out.append((_QUERY_NAMES[k], v))
        return out

    if isinstance(api_client, KubeHTTP):
        def call_own(_request_timeout=None, _preload_content=False, **kw):
            return api_client.get(path, query(kw), timeout=_request_timeout)

        return call_own

    def call(_request_timeout=None, _preload_content=False, **kw):
        params = api_client.param_serialize(
            method="GET",
            resource_path=path,
            query_params=query(kw),
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        resp = api_client.call_api(*params, _request_timeout=_request_timeout)
        if not 200 <= resp.status <= 299:
            raise error_from(resp.status, resp.reason or "", resp.read() or b"")
        return resp.response

    return call
