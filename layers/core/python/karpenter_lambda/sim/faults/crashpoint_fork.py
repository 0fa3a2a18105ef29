"""Each crash point of :mod:`.crashpoints` runs in a forked copy of one set-up world: moto's state (in-process) and
the local Kubernetes API's store are copied with the process, so every run starts from exactly the same state
without paying for the set-up again, and several runs can go at once (one per core).

The API server's serving thread does not survive a fork and its listening socket would be shared: each child
closes its copy of the socket and serves the copied store on a port of its own
(``KARPENTER_LAMBDA_KUBE_ENDPOINT`` points the controllers at it); the controllers' environment is dropped on
both sides, so no client keeps a connection to another process's server."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Callable

from .crashpoints import Call

Result = tuple[list[Call], bool, list[str]]


@dataclass
class Child:
    pid: int
    fd: int


def _own_server(server) -> None:
    """In the child: the copied store served on a new port, the controllers pointed at it."""
    httpd = server._httpd
    if httpd is not None:
        httpd.socket.close()
    server._httpd, server._thread, server._connections, server.port = None, None, set(), 0
    os.environ["KARPENTER_LAMBDA_KUBE_ENDPOINT"] = server.start()


def _rebase_process_caches(since: float) -> None:
    """Process caches kept for a span of real time (the instance-type catalog, spot prices: 300 s) see the child
    start at the checkpoint, however long the runs before it took: every run finds them as the set-up left them."""
    from ...adapters.aws import ec2_catalog
    from ...cloudprovider import catalog

    delta = time.monotonic() - since
    for cache in (getattr(catalog, "_catalog_cache", None), getattr(ec2_catalog, "_cache", None)):
        for key, value in list((cache or {}).items()):
            if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], float):
                cache[key] = (value[0] + delta, value[1])


PRELOADED = ("adapters", "api", "catalog", "cloudprovider", "controllers", "disruption", "offpeak", "scheduling")


def checkpoint() -> float:
    """Before the first fork: every module of the controllers' packages imported (a child imports nothing from
    disk, so all runs execute the same code even if the files change meanwhile); the time the children rebase
    process caches to."""
    import importlib
    import pkgutil

    root = importlib.import_module("karpenter_lambda")
    for name in PRELOADED:
        pkg = importlib.import_module(f"karpenter_lambda.{name}")
        for info in pkgutil.walk_packages(pkg.__path__, f"{root.__name__}.{name}."):
            try:
                importlib.import_module(info.name)
            except Exception:  # noqa: BLE001 - an optional module (extra not installed) is simply not preloaded
                pass
    return time.monotonic()


def start(run: Callable[[], Result], server, since: float | None = None) -> Child:
    """``run()`` in a forked child (process caches rebased to ``since``, :func:`checkpoint`); :func:`collect`
    returns its (calls, died, problems)."""
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # the child: never returns
        os.close(r)
        code = 0
        try:
            _own_server(server)
            if since is not None:
                _rebase_process_caches(since)
            calls, died, problems = run()
            payload = {"calls": [[c.index, c.service, c.op] for c in calls], "died": died, "problems": problems}
        except BaseException as e:  # noqa: BLE001 - reported to the parent as the run's problem
            tb = traceback.format_exc().strip().splitlines()
            payload = {"calls": [], "died": False, "problems": [f"harness error: {type(e).__name__}: {e} "
                                                                 f"({' | '.join(tb[-3:])})"]}
            code = 1
        with os.fdopen(w, "wb") as f:
            f.write(json.dumps(payload).encode())
        os._exit(code)
    os.close(w)
    return Child(pid, r)


def collect(child: Child) -> Result:
    with os.fdopen(child.fd, "rb") as f:
        data = f.read()
    os.waitpid(child.pid, 0)
    payload = json.loads(data or b'{"calls": [], "died": false, "problems": ["the child died without an answer"]}')
    calls = [Call(int(i), str(s), str(o)) for i, s, o in payload["calls"]]
    return calls, bool(payload["died"]), list(payload["problems"])
