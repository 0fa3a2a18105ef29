"""List and watch: paging, and the chunked watch stream (mixin of :class:`~.handler._Handler`).

Both answer a ``meta.k8s.io`` Table when the Accept header asks for one (:mod:`.tables`): a list as one Table, a
watch as one single-row Table per event (the column definitions in the first only), as the real server does.
"""

from __future__ import annotations

import json
import socket
import time
from typing import TYPE_CHECKING, Any, Callable

from .resources import ResourceType, StoreError, status_doc
from .selectors import match_field_selector, match_label_selector, parse_field_selector, parse_label_selector
from .tables import table, table_version

if TYPE_CHECKING:
    from .handler import _Server


class _Streams:
    server: "_Server"
    headers: Any
    wfile: Any
    connection: Any
    close_connection: bool
    path: str
    _send_json: Callable[..., None]
    send_response: Callable[..., None]
    send_header: Callable[..., None]
    end_headers: Callable[..., None]

    def _list(self, rt: ResourceType, namespace: str | None, q: dict) -> None:
        store = self.server.api.store
        with store.lock:
            items = store.list(rt.plural, namespace, q.get("labelSelector"), q.get("fieldSelector"), shared=True)
            rv = store.resource_version
        # the stored objects are never changed in place: read (and sent) outside the lock, without their kind
        items = [{k: v for k, v in it.items() if k not in ("kind", "apiVersion")} for it in items]
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
        version = table_version(self.headers.get("Accept"))
        if version:
            self._send_json(200, table(rt, items, store.now(), version, q.get("includeObject") or "Metadata", meta))
            return
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

        version = table_version(self.headers.get("Accept"))
        include = q.get("includeObject") or "Metadata"
        first = [True]

        def send(etype: str, obj: dict) -> None:
            if version and etype in ("ADDED", "MODIFIED", "DELETED"):
                obj = table(rt, [obj], store.now(), version, include,
                            {"resourceVersion": obj["metadata"].get("resourceVersion", "")}, columns=first[0])
                first[0] = False
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
