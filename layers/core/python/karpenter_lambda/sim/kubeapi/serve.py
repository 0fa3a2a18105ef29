"""Serve a finished simulation's cluster to kubectl: ``simulate --serve``.

:func:`serve_store` puts an :class:`~.store.ObjectStore` (the run's objects, its clock frozen at the end of the run)
behind a new :class:`~karpenter_lambda.sim.kubeapi.KubeAPIServer` on 127.0.0.1, writes a kubeconfig for it and
serves until SIGINT or SIGTERM.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Callable, TextIO

import yaml

from . import KubeAPIServer
from .store import ObjectStore


def kubeconfig(url: str, cluster: str) -> str:
    """A kubeconfig for the local server: no authentication, namespace ``default``."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": url}}],
        "users": [{"name": "karpenter-lambda-simulate", "user": {}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": "karpenter-lambda-simulate",
                                                   "namespace": "default"}}],
        "current-context": cluster,
        "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def start_store_server(store: ObjectStore, port: int = 0, k8s_version: str = "1.31") -> KubeAPIServer:
    """A started API server answering from ``store`` (its objects and clock as they are)."""
    server = KubeAPIServer(port=port, k8s_version=k8s_version)
    server.store = store
    server.start()
    return server


def write_kubeconfig(path: str | os.PathLike, url: str, cluster: str) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(kubeconfig(url, cluster), encoding="utf-8")
    os.chmod(tmp, 0o600)
    tmp.replace(p)   # whole or absent: a reader polling for the file never sees half of it
    return p.resolve()


def serve_store(store: ObjectStore, kubeconfig_path: str | os.PathLike, cluster: str, port: int = 0,
                k8s_version: str = "1.31", err: TextIO | None = None,
                wait: Callable[[threading.Event], None] | None = None) -> int:
    """Serve ``store`` until SIGINT/SIGTERM (or ``wait`` returns); instructions go to ``err``.  Returns 0."""
    server = start_store_server(store, port, k8s_version)
    stop = threading.Event()
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        path = write_kubeconfig(kubeconfig_path, server.url or "", cluster)
        if err is not None:
            err.write(f"serving the simulated cluster at {server.url} (the clock stays at the end of the run)\n"
                      f"kubeconfig written to {path}\n\n"
                      f"  export KUBECONFIG={path}\n"
                      f"  kubectl get nodes,pods -o wide\n\n"
                      "Ctrl-C to stop\n")
            err.flush()
        if wait is not None:
            wait(stop)
        else:
            while not stop.wait(0.5):
                pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stop()
    return 0
