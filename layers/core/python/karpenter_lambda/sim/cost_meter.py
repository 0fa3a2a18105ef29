"""Counting what the functions would be billed for, inside the simulator (the model and prices: :mod:`.cost`).

``meter = CostMeter(functions)`` then, around each handler call, ``with meter.invocation("lifecycle"):`` (or
``meter.wrap_module(name, module)`` once, which makes ``module.handler`` do it).  While an invocation runs on its
thread the meter counts

* the thread's CPU time outside AWS calls (``time.thread_time``) and the handler's wall time;
* every AWS call it makes, by ``service:Operation`` (one wrapper of botocore's ``BaseClient._make_api_call``, so every
  session counts: boto3's, pynamodb's), with DynamoDB request units and SQS requests from its parameters and answer;
* every Kubernetes API request (``adapters.kube.client.KubeClient._call``);
* the bytes of its log lines (the handler module's Powertools logger, the package's loggers) and of what it prints
  (Powertools EMF metrics, whose metric names and dimensions are kept).

Calls made by the simulator itself (the simulated kubelet, kube-scheduler, moto set-up, the loop's own SQS receives)
are not counted; the watcher's (thread ``sim-watcher``) are counted apart: it is a real part of karpenter-lambda.
The two library wrappers are installed once per process and do nothing while no meter is attached.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
import threading
import time
from typing import Callable, Iterator

from . import cost
from .functions import SimFunction

# the watcher's threads (watcher/karpenter_lambda_watcher: run in "sim-watcher" by sim/feeds.py, its SQS sender, its
# reflectors and resync loop)
WATCHER_THREADS = ("sim-watcher", "sqs-sender", "resync")
WATCHER_THREAD_PREFIXES = ("reflector-",)
_PACKAGE_LOGGER = "karpenter_lambda"

_current: "CostMeter | None" = None     # the attached meter (one simulation at a time in a process)


class _CountingStream(io.TextIOBase):
    """Passes writes on to ``inner`` and counts their bytes (and keeps them when ``keep``)."""

    def __init__(self, inner, keep: bool = False):
        self.inner = inner
        self.bytes = 0
        self.kept = io.StringIO() if keep else None

    def write(self, s: str) -> int:
        self.bytes += len(s.encode("utf-8", "replace"))
        if self.kept is not None:
            self.kept.write(s)
        return self.inner.write(s) if self.inner is not None else len(s)

    def flush(self) -> None:
        if self.inner is not None and hasattr(self.inner, "flush"):
            self.inner.flush()


class _ByteCounter(logging.Handler):
    """A logging handler that only counts the bytes of the formatted lines (CloudWatch ingests each)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        self.bytes = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.bytes += len(self.format(record).encode("utf-8", "replace")) + 1
        except Exception:   # noqa: BLE001  (a bad log call must not fail the handler)
            pass


class _Running:
    """The counters of the invocation under way."""

    def __init__(self, usage: cost.FunctionUsage):
        self.usage = usage
        self.thread = threading.get_ident()
        self.calls: list[tuple[str, str]] = []
        self.aws_cpu = 0.0
        self.kube_calls = 0


class CostMeter:
    def __init__(self, functions: list[SimFunction], clock: Callable[[], float] = lambda: 0.0):
        self.clock = clock        # virtual seconds since the start (metrics are billed by the hour they have data in)
        self.usage = cost.Usage()
        for fn in functions:
            f = self.usage.functions.get(fn.name)
            if f is None:
                self.usage.functions[fn.name] = cost.FunctionUsage(fn.name, fn.memory_mb, fn.architecture, fn.interval_seconds)
            elif fn.interval_seconds is not None:
                f.interval_seconds = fn.interval_seconds
        self.usage.queue_sources = len({fn.queue for fn in functions if fn.queue})
        self._running: _Running | None = None
        self._lock = threading.Lock()
        self.since = 0.0          # virtual seconds at the last reset: the month is extrapolated from what follows
        # when a list: one {function, at, awsCalls, kubeCalls, billedMs} per invocation (bench/control_plane_cost.py
        # reports the calls of a skipped sweep and of a full one); None: not kept
        self.invocation_log: list[dict] | None = None

    # -- attach / detach ----------------------------------------------------------------------------------------
    def attach(self) -> "CostMeter":
        global _current
        _install()
        _current = self
        return self

    def detach(self) -> None:
        global _current
        if _current is self:
            _current = None

    def set_interval(self, name: str, seconds: float) -> None:
        if name in self.usage.functions:
            self.usage.functions[name].interval_seconds = seconds

    def reset(self, at: float = 0.0) -> None:
        """Forget what was counted so far; count from ``at`` virtual seconds (a benchmark measures a settled cluster)."""
        self.since = at
        for f in self.usage.functions.values():
            fresh = cost.FunctionUsage(f.name, f.memory_mb, f.architecture, f.interval_seconds)
            self.usage.functions[f.name] = fresh
        self.usage.metrics.clear()
        self.usage.watcher_calls.clear()
        self.usage.watcher_sqs_requests = 0
        if self.invocation_log is not None:
            self.invocation_log.clear()

    def report(self, elapsed_seconds: float) -> dict:
        return cost.monthly(self.usage, elapsed_seconds - self.since)

    # -- one invocation -----------------------------------------------------------------------------------------
    def wrap_module(self, name: str, module) -> None:
        """``module.handler`` counted as function ``name`` from now on (once per module)."""
        handler = module.handler
        if getattr(handler, "karpenter_lambda_metered", None) is self:
            return
        logger = getattr(getattr(module, "logger", None), "registered_handler", None)

        def metered(event, context):
            with self.invocation(name, logger):
                return handler(event, context)

        metered.karpenter_lambda_metered = self
        metered.__wrapped__ = handler
        module.handler = metered

    @contextlib.contextmanager
    def invocation(self, name: str, log_handler: logging.Handler | None = None) -> Iterator[None]:
        usage = self.usage.functions.get(name)
        if usage is None or self._running is not None:   # unknown, or nested in another invocation: not counted apart
            yield
            return
        run = self._running = _Running(usage)
        out = _CountingStream(sys.stdout, keep=True)
        counter = _ByteCounter()
        pkg = logging.getLogger(_PACKAGE_LOGGER)
        pkg.addHandler(counter)
        logged = _CountingStream(getattr(log_handler, "stream", None)) if log_handler is not None else None
        if logged is not None:
            log_handler.setStream(logged)
        saved_stdout, sys.stdout = sys.stdout, out
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        try:
            yield
        finally:
            cpu_ms = max(0.0, time.thread_time() - cpu0 - run.aws_cpu) * 1000.0
            wall_ms = (time.perf_counter() - wall0) * 1000.0
            sys.stdout = saved_stdout
            pkg.removeHandler(counter)
            if logged is not None:
                log_handler.setStream(logged.inner)
            self._running = None
            usage.invocations += 1
            usage.cpu_ms += cpu_ms
            usage.wall_ms += wall_ms
            usage.kube_calls += run.kube_calls
            billed = cost.billed_ms(cpu_ms, usage.memory_mb, run.calls, run.kube_calls)
            usage.billed_ms += billed
            if self.invocation_log is not None:
                self.invocation_log.append({"function": name, "at": self.clock(), "awsCalls": len(run.calls),
                                            "kubeCalls": run.kube_calls, "billedMs": billed})
            usage.log_bytes += out.bytes + counter.bytes + (logged.bytes if logged is not None else 0)
            hour = int(self.clock() // 3600)
            usage.hours.add(hour)
            # deployed, every function's metrics carry its own ``service`` dimension (infra/functions.py sets
            # POWERTOOLS_SERVICE_NAME per function; the simulator does not): one metric per function and name
            for m in emf_metrics(out.kept.getvalue()):
                self.usage.metrics.setdefault((name, *m), (name, set()))[1].add(hour)

    # -- what the library wrappers report -----------------------------------------------------------------------
    def _aws(self, service: str, operation: str, params: dict, response: dict | None, cpu: float) -> None:
        run = self._running
        if run is not None and run.thread == threading.get_ident():
            run.calls.append((service, operation))
            run.aws_cpu += cpu
            u = run.usage
            u.aws_calls[f"{service}:{operation}"] += 1
            if service == "dynamodb":
                r, w = cost.request_units(operation, params, response)
                u.rru += r
                u.wru += w
            elif service == "sqs":
                u.sqs_requests += cost.sqs_requests(operation, params)
            elif service == "events" and operation == "PutEvents":
                u.events_put += len(params.get("Entries") or [])
        elif _is_watcher(threading.current_thread().name):
            with self._lock:
                self.usage.watcher_calls[f"{service}:{operation}"] += 1
                if service == "sqs":
                    self.usage.watcher_sqs_requests += cost.sqs_requests(operation, params)

    def _kube(self) -> None:
        run = self._running
        if run is not None and run.thread == threading.get_ident():
            run.kube_calls += 1


def _is_watcher(thread_name: str) -> bool:
    return thread_name in WATCHER_THREADS or thread_name.startswith(WATCHER_THREAD_PREFIXES)


def emf_metrics(text: str) -> set[tuple]:
    """The metrics of the Powertools EMF documents in ``text`` (one JSON document a line): (namespace, name,
    ((dimension, value), ...)) each."""
    out: set[tuple] = set()
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{") or '"_aws"' not in line:
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        for directive in ((doc.get("_aws") or {}).get("CloudWatchMetrics") or []):
            ns = directive.get("Namespace", "")
            for dims in directive.get("Dimensions") or [[]]:
                key = tuple((d, str(doc.get(d, ""))) for d in dims)
                for m in directive.get("Metrics") or []:
                    out.add((ns, m.get("Name", ""), key))
    return out


# -- the library wrappers (installed once per process; inert without an attached meter) ----------------------------

def _install() -> None:
    import botocore.client

    from ..adapters.kube.client import KubeClient

    api_call = botocore.client.BaseClient._make_api_call
    if not getattr(api_call, "karpenter_lambda_cost", False):
        botocore.client.BaseClient._make_api_call = _metered_api_call(api_call)
    kube_call = KubeClient._call
    if not getattr(kube_call, "karpenter_lambda_cost", False):
        KubeClient._call = _metered_kube_call(kube_call)


# DynamoDB writes made through botocore in this process since the wrapper was installed (metered or not): the
# simulation reads the NodeClaims again for its cost timeline only when this moved (sim/results.py)
DYNAMODB_WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
_dynamodb_writes = 0
_counting = False


def dynamodb_writes() -> int | None:
    """How many DynamoDB write calls this process made since the wrapper was installed; None before that (then no
    caller may conclude that nothing was written)."""
    return _dynamodb_writes if _counting else None


def _metered_api_call(original: Callable) -> Callable:
    global _counting
    _counting = True

    def _make_api_call(client, operation_name, api_params):
        if operation_name in DYNAMODB_WRITE_OPERATIONS and client.meta.service_model.service_name == "dynamodb":
            global _dynamodb_writes
            _dynamodb_writes += 1
        meter = _current
        if meter is None:
            return original(client, operation_name, api_params)
        service = client.meta.service_model.service_name
        cpu0 = time.thread_time()
        response = None
        try:
            response = original(client, operation_name, api_params)
            return response
        finally:
            meter._aws(service, operation_name, api_params or {}, response, time.thread_time() - cpu0)

    _make_api_call.karpenter_lambda_cost = True
    return _make_api_call


def _metered_kube_call(original: Callable) -> Callable:
    def _call(client, op, fn, *args, **kw):
        meter = _current
        if meter is not None:
            meter._kube()
        return original(client, op, fn, *args, **kw)

    _call.karpenter_lambda_cost = True
    return _call


def attach(sim) -> CostMeter:
    """The simulation's meter, made and attached once: every handler module the simulation loaded counted by its
    function's name (``sim.scheduled``, ``sim.provisioner``, ``sim.interruption``)."""
    from .environment import repo_root
    from .functions import load_functions

    meter = getattr(sim, "cost_meter", None)
    if meter is None:
        meter = sim.cost_meter = CostMeter(load_functions(repo_root()), clock=lambda: sim.clock.elapsed)
    meter.attach()
    for name, mod, interval in getattr(sim, "scheduled", []):
        meter.set_interval(name, interval)
        meter.wrap_module(name, mod)
    queue_attrs = {"pod": "provisioner", "interruption": "interruption"}   # FeedsMixin._load_functions keeps them so
    for fn in load_functions(repo_root()):
        mod = getattr(sim, queue_attrs.get(fn.queue or "", ""), None)
        if mod is not None:
            meter.wrap_module(fn.name, mod)
    return meter
