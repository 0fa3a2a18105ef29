"""The two doors every external call of a handler goes through, with the faults of a plan on them: moto's
``BotocoreStubber.process_request`` (AWS) and ``KubeClient._call`` (Kubernetes), plus the API server's own fault
hook; crashes kill the rest of the invocation."""

from __future__ import annotations

import contextlib
import json
import threading
import time as _time
from collections import Counter

import boto3
import botocore.endpoint
from moto.core.botocore_stubber import BotocoreStubber

from ...adapters.kube.client import KubeClient
from .aws import _body, _ddb_error, _ec2_error, _ec2_fleet_ice, aws_operation, ddb_conflict
from .plan import FaultPlan, InjectedCrash, LambdaTimeout, is_write

# what ``faults_injected`` counts: faults that hit, nothing else (issue 29 item 5)
FAULT_KINDS = ("crash", "lambda_timeout", "slow_call", "ec2_ice", "ec2_throttle", "kube_500", "kube_503", "kube_429",
               "ddb_throttle", "ddb_conflict", "ddb_conditional", "sqs_duplicate", "eventbridge_lost", "kubelet_broken")
# consequences, counted apart: SQS giving a record again, a record dead-lettered, an invocation killed by its timeout
# because a concurrent invocation's hung call moved the clock past it (the hang is the fault, counted once)
RETRY_KINDS = ("sqs_redelivery", "sqs_dead_letter", "knock_on_timeout")
# what the scenario does to the cluster (not faults): two invocations at once, spot warnings and reclaims, load and
# NodePool changes, the planted states of a targeted run
EVENT_KINDS = ("concurrent_invocations", "spot_warning", "spot_reclaim", "scale", "nodepool_change", "planted")


class _Inv(threading.local):
    plan: FaultPlan | None = None
    calls: int = 0
    writes: int = 0
    dead: bool = False
    name: str = ""
    bypass: bool = False
    started: float = 0.0
    timeout: float | None = None


class FaultInjector:
    """Installs the hooks (``install``/``uninstall`` or as a context manager) and runs invocations under plans."""

    def __init__(self, world, timeouts: dict[str, int] | None = None):
        self.w = world
        self.timeouts = dict(timeouts or {})     # invocation name -> its function's Lambda timeout (seconds)
        self.counts: Counter = Counter()         # injected faults that hit, by kind (FAULT_KINDS)
        self.retries: Counter = Counter()        # RETRY_KINDS
        self.events: Counter = Counter()         # EVENT_KINDS
        self.last_fault_at: float | None = None  # virtual time of the latest fault that hit
        self.calls_seen: Counter = Counter()     # max external calls seen per invocation name
        self.writes_seen: Counter = Counter()    # max state-changing calls seen per invocation name
        self.log: list[str] = []
        self.crash_points: set = set()          # (invocation name, external call number) where a crash hit
        self.write_crash_points: set = set()    # (invocation name, state-changing call number)
        self.crash_sites: Counter = Counter()   # "provisioner after ec2.CreateFleet": how often
        self._inv = _Inv()
        self._lock = threading.RLock()           # moto is not thread-safe: every request atomic (as real AWS)
        self._saved: list = []

    # -- install ------------------------------------------------------------------------------------------------
    def __enter__(self):
        self.install()
        return self

    def __exit__(self, *exc):
        self.uninstall()

    def install(self) -> None:
        inj = self
        orig_process = BotocoreStubber.process_request
        orig_call = KubeClient._call

        def process_request(stub, request):
            with inj._lock:
                return inj._aws(lambda: orig_process(stub, request), request)

        def kube_call(client, op, fn, *args, **kw):
            return inj._external(("kube", op), lambda: orig_call(client, op, fn, *args, **kw))

        class _NoSleepTime:       # botocore's retry back-off in real seconds would only slow the run down
            def __getattr__(self, name):
                return getattr(_time, name)

            @staticmethod
            def sleep(_s):
                return None

        self._saved = [(BotocoreStubber, "process_request", orig_process), (KubeClient, "_call", orig_call),
                       (botocore.endpoint, "time", botocore.endpoint.time)]
        BotocoreStubber.process_request = process_request
        KubeClient._call = kube_call
        botocore.endpoint.time = _NoSleepTime()
        kube = self.w.env.kube
        self._saved.append((kube, "_sleep", kube._sleep))
        kube._sleep = lambda _s: None

    def uninstall(self) -> None:
        for obj, name, value in reversed(self._saved):
            setattr(obj, name, value)
        self._saved = []

    # -- the doors ----------------------------------------------------------------------------------------------
    def _external(self, what: tuple, call):
        inv = self._inv
        if inv.plan is None or inv.bypass:
            return call()
        if inv.dead:
            raise InjectedCrash(f"{inv.name}: process already dead ({what[0]}.{what[1]})")
        inv.calls += 1
        plan = inv.plan
        write = is_write(what)
        inv.writes += write
        self._check_timeout(what)
        if plan.hang_at is not None and inv.calls == plan.hang_at:
            return self._hang(what, call, plan)
        if (plan.crash_at is not None and inv.calls == plan.crash_at) or \
                (write and plan.crash_at_write is not None and inv.writes == plan.crash_at_write) or \
                (plan.crash_on is not None and what[0] == plan.crash_on[0] and str(what[1]).startswith(plan.crash_on[1])):
            inv.dead = True
            self.count("crash")
            self.crash_points.add((inv.name, inv.calls))
            if write:
                self.write_crash_points.add((inv.name, inv.writes))
            self.crash_sites[f"{inv.name} {'after' if plan.crash_after else 'before'} {what[0]}.{what[1]}"] += 1
            self.log.append(f"crash {inv.name} at call {inv.calls} {'after' if plan.crash_after else 'before'} {what[0]}.{what[1]}")
            if plan.crash_after:
                call()
            raise InjectedCrash(f"{inv.name}: crash at external call {inv.calls} ({what[0]}.{what[1]})")
        return call()

    def _check_timeout(self, what: tuple) -> None:
        """Past the function's timeout on the virtual clock (a hung call of a concurrent invocation moved it, or
        this invocation's own): Lambda has killed the process; this call never goes out."""
        inv = self._inv
        if inv.timeout is not None and self.w.clock() - inv.started > inv.timeout:
            inv.dead = True
            self.retry("knock_on_timeout")
            self.crash_sites[f"{inv.name} timeout before {what[0]}.{what[1]}"] += 1
            raise LambdaTimeout(f"{inv.name}: timed out after {inv.timeout:.0f}s (before {what[0]}.{what[1]})")

    def _hang(self, what: tuple, call, plan: FaultPlan):
        """The call stalls ``plan.hang_seconds`` on the virtual clock; if that crosses the function's timeout the
        invocation dies during it (the call took effect or not: ``hang_after``), else it answers late."""
        inv = self._inv
        left = (inv.started + inv.timeout - self.w.clock()) if inv.timeout is not None else None
        if left is None or plan.hang_seconds <= left:
            self.w.clock.advance(plan.hang_seconds)
            self.count("slow_call")
            return call()
        self.w.clock.advance(max(left, 0.0) + 0.001)
        inv.dead = True
        self.count("lambda_timeout")
        self.crash_sites[f"{inv.name} timeout {'after' if plan.hang_after else 'before'} {what[0]}.{what[1]}"] += 1
        self.log.append(f"timeout {inv.name} at call {inv.calls} ({what[0]}.{what[1]})")
        if plan.hang_after:
            call()
        raise LambdaTimeout(f"{inv.name}: timed out after {inv.timeout:.0f}s in {what[0]}.{what[1]}")

    def _aws(self, call, request):
        inv = self._inv
        if inv.plan is None or inv.bypass:
            return call()
        svc, op = aws_operation(request)
        injected = self._aws_error(svc, op, request)
        if injected is not None:
            return self._external((svc, op), lambda: injected)
        return self._external((svc, op), call)

    def _aws_error(self, svc: str, op: str, request):
        plan = self._inv.plan
        ent = plan.aws_errors.get((svc, op))
        if not ent or ent[1] <= 0 or self._inv.dead:
            return None
        kind = ent[0]
        if plan.crash_at is not None and self._inv.calls + 1 == plan.crash_at:
            return None     # the crash wins at its call
        ent[1] -= 1
        if kind == "ice":
            self.count("ec2_ice")
            return _ec2_fleet_ice(request)
        if kind == "ec2_throttle":
            self.count("ec2_throttle")
            return _ec2_error("RequestLimitExceeded", "Request limit exceeded (fault injected).", 503)
        if kind == "ddb_throttle":
            self.count("ddb_throttle")
            return _ddb_error("ProvisionedThroughputExceededException", "Rate exceeded (fault injected)")
        if kind == "ddb_conflict":
            self.count("ddb_conflict")
            return ddb_conflict(request)
        if kind == "ddb_race":
            if self._race(request):
                self.count("ddb_conditional")
            else:
                ent[1] += 1   # nothing versioned to race on: keep the fault for a later call
            return None
        return None

    def _race(self, request) -> bool:
        """A concurrent writer: bump the target item's ``version`` so the caller's own condition really fails."""
        try:
            doc = json.loads(_body(request))
        except ValueError:
            return False
        if "ConditionExpression" not in doc:
            return False
        table = doc.get("TableName")
        key = doc.get("Key")
        item = doc.get("Item")
        ddb = boto3.client("dynamodb", region_name=self.w.region)
        self._inv.bypass = True
        try:
            if key is None and item is not None:
                schema = ddb.describe_table(TableName=table)["Table"]["KeySchema"]
                key = {k["AttributeName"]: item[k["AttributeName"]] for k in schema if k["AttributeName"] in item}
            if not key:
                return False
            cur = ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
            if not cur or "version" not in cur:
                return False
            ddb.update_item(TableName=table, Key=key, UpdateExpression="SET #v = #v + :one",
                            ExpressionAttributeNames={"#v": "version"}, ExpressionAttributeValues={":one": {"N": "1"}})
            return True
        finally:
            self._inv.bypass = False

    # -- invocations --------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def invocation(self, name: str, plan: FaultPlan | None):
        """Run the body as one invocation under ``plan``; yields a dict whose ``crashed`` says how it ended."""
        inv = self._inv
        inv.plan, inv.calls, inv.writes, inv.dead, inv.name = (plan or FaultPlan()), 0, 0, False, name
        inv.started, inv.timeout = self.w.clock(), self.timeouts.get(name)
        server = self.w.server
        before = []
        for status, times, method in (plan.kube_faults if plan else []):
            server.add_fault(status=status, times=times, method=method, retry_after=1 if status == 429 else None)
            before.append(server._faults[-1])
        out = {"crashed": False, "error": None, "timed_out": False}
        try:
            yield out
            if inv.timeout is not None and self.w.clock() - inv.started > inv.timeout:
                self.retry("knock_on_timeout")
                raise LambdaTimeout(f"{name}: returned after its {inv.timeout:.0f}s timeout")   # the answer is lost
        except InjectedCrash as e:
            out["crashed"] = True
            out["timed_out"] = isinstance(e, LambdaTimeout)
            out["error"] = str(e)
        except Exception as e:  # noqa: BLE001 - a handler that raised: Lambda counts it failed, the event is retried
            out["error"] = f"{type(e).__name__}: {e}"
        finally:
            self.calls_seen[name] = max(self.calls_seen[name], inv.calls)
            self.writes_seen[name] = max(self.writes_seen[name], inv.writes)
            for f, (status, times, _m) in zip(before, plan.kube_faults if plan else []):
                taken = times - max(f["times"], 0)
                if taken:
                    self.count(f"kube_{status}", taken)
            if before:
                server.clear_faults()
            inv.plan, inv.calls, inv.writes, inv.dead, inv.name = None, 0, 0, False, ""

    def count(self, kind: str, n: int = 1) -> None:
        """An injected fault that hit (FAULT_KINDS)."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"{kind} is not a fault kind (FAULT_KINDS); retries and scenario events are counted apart")
        self.counts[kind] += n
        self.last_fault_at = self.w.clock()

    def retry(self, kind: str, n: int = 1) -> None:
        self.retries[kind] += n

    def event(self, kind: str, n: int = 1) -> None:
        self.events[kind] += n

    @property
    def total(self) -> int:
        """Injected faults that hit: ``faults_injected`` (retries and scenario events are not faults)."""
        return sum(self.counts.values())
