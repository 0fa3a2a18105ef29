"""The watcher's own Kubernetes API access: ``GET`` with a bearer token over TLS, raw urllib3 responses.

The watcher only lists and watches two collections, so it does not need the official client: in kubernetes 37 that
package imports every API and model class (~18 MB of the watcher's ~65 MB), and ``ApiClient`` alone imports the
models too.  :class:`KubeHTTP` is what the watcher uses in a pod (and against a plain URL, ``KUBE_API_URL``); the
official client is still accepted by :func:`reflector.lister` (a kubeconfig on a developer's machine, the
simulator's embedded watcher), imported only then.

In a pod (client-go's ``rest.InClusterConfig``): the API server is ``https://$KUBERNETES_SERVICE_HOST:
$KUBERNETES_SERVICE_PORT`` (an IPv6 host in brackets), the CA bundle and the token are the service account's
files; the token is a bound, rotating one, so the file is read again when the copy in memory is a minute old
(client-go re-reads it on the same period; the kubelet rotates it well before it expires)."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Callable, Iterable, Mapping
from urllib.parse import urlencode

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_REREAD_SECONDS = 60.0


class ApiError(Exception):
    """A non-2xx answer of the API server: ``status`` (HTTP code), ``reason`` (its Status message or the HTTP
    reason)."""

    def __init__(self, status: int, reason: str):
        super().__init__(f"HTTP {status}: {reason}")
        self.status = status
        self.reason = reason


def error_from(status: int, http_reason: str, body: bytes) -> ApiError:
    """The :class:`ApiError` of a failed response: the Status object's ``message`` when the body is one."""
    reason = http_reason or ""
    try:
        doc = json.loads(body or b"{}")
        if isinstance(doc, dict) and doc.get("message"):
            reason = str(doc["message"])
    except ValueError:
        if body:
            reason = f"{reason} ({body[:200].decode('utf-8', 'replace')})"
    return ApiError(status, reason)


class KubeHTTP:
    """``GET`` against one API server.  ``host``: its URL (``https://...`` or ``http://...``); ``token`` or
    ``token_file`` (read again every :data:`TOKEN_REREAD_SECONDS` of ``clock``); ``ca_file``: the CA bundle that
    verifies an HTTPS server (None: the system's)."""

    def __init__(self, host: str, *, token: str | None = None, token_file: str | None = None,
                 ca_file: str | None = None, clock: Callable[[], float] = time.monotonic):
        import urllib3   # (boto3's dependency too: no more than the watcher already loads)

        if not host.startswith(("https://", "http://")):
            raise ValueError(f"Kubernetes API URL must start with https:// or http://, got {host!r}")
        self.host = host.rstrip("/")
        self._token = token
        self._token_file = token_file
        self._token_read = None   # clock reading when the file was last read
        self._clock = clock
        self._lock = threading.Lock()
        kw = {"ca_certs": ca_file, "cert_reqs": "CERT_REQUIRED"} if self.host.startswith("https://") else {}
        self._pool = urllib3.PoolManager(num_pools=2, maxsize=4, retries=False, **kw)

    @classmethod
    def in_cluster(cls, env: Mapping[str, str] | None = None, sa_dir: str | None = None,
                   clock: Callable[[], float] = time.monotonic) -> "KubeHTTP | None":
        """The client of the pod's own cluster, or None when not in a pod (no service host or no token file).
        ``env``: the environment (default ``os.environ``); ``sa_dir``: the service account's files (default
        :data:`SA_DIR`)."""
        env = os.environ if env is None else env
        sa_dir = SA_DIR if sa_dir is None else sa_dir
        host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
        token_file = os.path.join(sa_dir, "token")
        if not host or not port or not os.path.isfile(token_file):
            return None
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"   # an IPv6 service address
        ca = os.path.join(sa_dir, "ca.crt")
        return cls(f"https://{host}:{port}", token_file=token_file, ca_file=ca if os.path.isfile(ca) else None,
                   clock=clock)

    def token(self) -> str | None:
        """The bearer token: the file's content, read again once the copy is :data:`TOKEN_REREAD_SECONDS` old."""
        if self._token_file is None:
            return self._token
        with self._lock:
            now = self._clock()
            if self._token_read is None or now - self._token_read >= TOKEN_REREAD_SECONDS:
                try:
                    with open(self._token_file, encoding="utf-8") as f:
                        self._token = f.read().strip()
                    self._token_read = now
                except OSError:
                    if self._token is None:
                        raise   # never read: nothing to fall back on
            return self._token

    def get(self, path: str, query: Iterable[tuple[str, object]] = (), timeout: tuple[float, float] | None = None):
        """``GET path?query``: the urllib3 response, its body not read yet (``.data``, ``.stream()``,
        ``.release_conn()``); raises :class:`ApiError` on a non-2xx status."""
        import urllib3

        headers = {"Accept": "application/json"}
        token = self.token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        qs = urlencode([(k, v) for k, v in query])
        url = f"{self.host}{path}" + (f"?{qs}" if qs else "")
        t = urllib3.Timeout(connect=timeout[0], read=timeout[1]) if timeout else urllib3.Timeout(connect=10, read=60)
        resp = self._pool.request("GET", url, headers=headers, preload_content=False, timeout=t, redirect=False)
        if not 200 <= resp.status <= 299:
            try:
                body = resp.read()
            finally:
                resp.release_conn()
            raise error_from(resp.status, resp.reason or "", body)
        return resp

    def close(self) -> None:
        self._pool.clear()
