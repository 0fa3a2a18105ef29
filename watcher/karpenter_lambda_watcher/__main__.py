"""``python -m karpenter_lambda_watcher``: the container entry point.

Environment:
  POD_QUEUE_URL      (required) SQS queue for pending pods
  CLUSTER_NAME       (required) cluster name put in every message
  EVENT_QUEUE_URL    (optional) SQS queue for node / pod-bound / pod-deleted events; unset = not watched
  AWS_REGION         region of the queues (else from the queue URL)
  SQS_ENDPOINT_URL   (optional) custom SQS endpoint (moto_server, VPC endpoint)
  KUBE_API_URL       (optional) plain http(s) API URL without auth (tests, a local proxy);
                     otherwise the pod's service account (token and CA files, the watcher's own
                     client), falling back to ~/.kube/config (the official client, off a cluster)
  HEALTH_PORT        (optional, default 8080; 0 disables) serves GET /healthz
  LOG_LEVEL          (optional, default INFO)
  RESYNC_SECONDS     (optional, default 60; 0 disables) re-send pods still pending this long after
                     their last send, marked "resync": true
  RESYNC_MAX_PODS    (optional, default 50000) bound of the map of pending pods kept for resync
  SUBMIT_QUEUE_MAX   (optional, default 10000) messages waiting for the SQS sender at most; beyond,
                     new ones are dropped, counted (submit_dropped) and logged by pod (resync re-sends them)
  WATCH_TIMEOUT_SECONDS, FLUSH_INTERVAL_SECONDS, DEDUPE_SIZE (optional tuning)
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from .messages import iso_time
from .watcher import Stats, run


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": iso_time(record.created, millis=False),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        extra = getattr(record, "json", None)
        if isinstance(extra, dict):
            out.update(extra)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(level: str = "INFO") -> None:
    h = logging.StreamHandler(sys.stdout)
    h.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [h]
    root.setLevel(level.upper())
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("botocore").setLevel(logging.WARNING)


def _health_server(port: int, stats: Stats, stop: threading.Event):
    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            ok = self.path.startswith("/healthz") and not stop.is_set() and stats.lists > 0
            body = json.dumps({"ok": ok, **stats.as_dict()}).encode()
            self.send_response(200 if ok else 503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = HTTPServer(("0.0.0.0", port), H)
    threading.Thread(target=srv.serve_forever, daemon=True, name="healthz").start()
    return srv


def _api_client():
    """The watcher's API access: ``KUBE_API_URL`` (a plain URL, no auth: tests, a local proxy), else the pod's
    service account (``kubeclient.KubeHTTP.in_cluster``), else a kubeconfig through the official client (a
    developer's machine; only then is ``kubernetes`` imported)."""
    from .kubeclient import KubeHTTP

    url = os.environ.get("KUBE_API_URL")
    if url:
        return KubeHTTP(url)
    own = KubeHTTP.in_cluster()
    if own is not None:
        return own
    try:
        from kubernetes import client as k8s, config
    except ImportError:
        raise RuntimeError("not in a pod (no KUBERNETES_SERVICE_HOST or no service-account token) and KUBE_API_URL "
                           "is not set: set KUBE_API_URL (e.g. `kubectl proxy` and KUBE_API_URL=http://127.0.0.1:8001), "
                           "or install the `kubernetes` package to use ~/.kube/config") from None
    config.load_kube_config()
    return k8s.ApiClient()


def _region_from_url(url: str) -> str | None:
    # https://sqs.<region>.amazonaws.com/<account>/<name>
    parts = url.split("//", 1)[-1].split(".")
    if len(parts) > 2 and parts[0] == "sqs":
        return parts[1]
    return None


def _env_number(name: str, default: str, kind=float, minimum: float = 0):
    """``kind(os.environ[name])``, at least ``minimum``; raises ValueError naming the variable."""
    raw = os.environ.get(name, "").strip() or default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or value != value or value < minimum:
        what = "an integer" if kind is int else "a number"
        raise ValueError(f"{name} must be {what} >= {minimum:g}, got {raw!r}")
    return value


def main(argv=None) -> int:
    setup_logging(os.environ.get("LOG_LEVEL", "INFO"))
    log = logging.getLogger("karpenter_lambda_watcher")
    queue_url = os.environ.get("POD_QUEUE_URL", "")
    cluster = os.environ.get("CLUSTER_NAME", "")
    if not queue_url or not cluster:
        log.error("POD_QUEUE_URL and CLUSTER_NAME must be set")
        return 2
    try:
        resync_seconds = _env_number("RESYNC_SECONDS", "60")
        resync_max_pods = _env_number("RESYNC_MAX_PODS", "50000", int, 1)
        submit_queue_max = _env_number("SUBMIT_QUEUE_MAX", "10000", int, 1)
    except ValueError as e:
        log.error(str(e))
        return 2
    try:
        api = _api_client()
    except (RuntimeError, ValueError) as e:
        log.error(str(e))
        return 2
    import boto3

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or _region_from_url(queue_url) or "us-east-1"
    sqs = boto3.client("sqs", region_name=region, endpoint_url=os.environ.get("SQS_ENDPOINT_URL") or None)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stats = Stats()
    port = int(os.environ.get("HEALTH_PORT", "8080"))
    if port:
        _health_server(port, stats, stop)
    run(
        api,
        sqs,
        queue_url,
        cluster,
        stop,
        os.environ.get("EVENT_QUEUE_URL") or None,
        watch_timeout=int(os.environ.get("WATCH_TIMEOUT_SECONDS", "300")),
        flush_interval=float(os.environ.get("FLUSH_INTERVAL_SECONDS", "1.0")),
        dedupe_size=int(os.environ.get("DEDUPE_SIZE", "10000")),
        resync_seconds=resync_seconds,
        resync_max_pods=resync_max_pods,
        submit_queue_max=submit_queue_max,
        stats=stats,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
