"""Fault injection for the real handlers in a :class:`~karpenter_lambda.sim.world.World` (moto + local Kubernetes API).

:class:`FaultInjector` sits on the two doors every external call of a handler goes through:

* AWS: moto's ``BotocoreStubber.process_request`` (every in-process request of every boto3/botocore/pynamodb
  client: EC2, DynamoDB, SQS, SSM, ...);
* Kubernetes: ``KubeClient._call`` (every call the controllers make to the API server, before the client's own
  retry loop), plus the API server's own fault hook (:meth:`KubeAPIServer.add_fault`) for 5xx / 429 answers.

An invocation runs under :meth:`FaultInjector.invocation` with a :class:`FaultPlan`:

* ``crash_at=N`` -- the process dies at the N-th external call of the invocation (``crash_after``: the call is made
  and its answer lost, else it is never sent); every later call of the invocation fails too (the process is gone),
  so ``finally`` blocks cannot repair anything.  The crash is a ``BaseException`` (:class:`InjectedCrash`): no
  ``except Exception`` in the code under test can swallow it, as nothing survives a killed Lambda sandbox.
* ``aws_errors`` -- ``{(service, operation): (kind, times)}``: the next ``times`` calls get EC2 insufficient
  capacity (a CreateFleet answer whose ``Errors`` name every override), EC2 throttling (RequestLimitExceeded,
  503), DynamoDB throttling (ProvisionedThroughputExceededException), a transaction conflict
  (TransactionCanceledException / TransactionConflict), or a real conditional failure (``race``: a concurrent
  writer bumps the item's optimistic-locking ``version`` just before the call, so DynamoDB's own condition fails).
* ``kube_faults`` -- ``[(status, times, method)]`` answered by the API server.

Every fault that actually hits is counted in :attr:`FaultInjector.counts` (by kind); a planned fault the
invocation never reached is not.  :mod:`karpenter_lambda.sim.faults` also holds the scenario (:func:`run_seed`)
that ``bench/faults.py`` and ``tests/reliability`` run, and the ground-truth counters it reports.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import threading
import time as _time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import parse_qs

DISRUPTED_TAINT = "karpenter.sh/disrupted"


class InjectedCrash(BaseException):
    """The Lambda process died here (a BaseException: the code under test cannot catch it with ``except Exception``)."""


@dataclass
class FaultPlan:
    crash_at: int | None = None
    crash_after: bool = False
    crash_at_write: int | None = None   # crash at the N-th state-changing call instead (CreateFleet, PutItem, PATCH, ...)
    crash_on: tuple | None = None       # or at the first call of this (service, operation prefix), e.g. ("ec2", "CreateFleet")
    aws_errors: dict = field(default_factory=dict)      # (service, op) -> [kind, times]
    kube_faults: list = field(default_factory=list)     # (status, times, method)

    def describe(self) -> str:
        parts = []
        if self.crash_at:
            parts.append(f"crash@{self.crash_at}{'+' if self.crash_after else ''}")
        if self.crash_on:
            parts.append(f"crash@{self.crash_on[0]}.{self.crash_on[1]}{'+' if self.crash_after else ''}")
        if self.crash_at_write:
            parts.append(f"crash@write{self.crash_at_write}{'+' if self.crash_after else ''}")
        parts += [f"{k[0]}.{k[1]}:{v[0]}x{v[1]}" for k, v in self.aws_errors.items()]
        parts += [f"kube{s}x{t}{'/' + m if m else ''}" for s, t, m in self.kube_faults]
        return ",".join(parts) or "none"


def _header(request, name: str) -> str:
    v = request.headers.get(name)
    if isinstance(v, bytes):
        v = v.decode()
    return v or ""


def _body(request) -> str:
    b = request.body
    if b is None:
        return ""
    if isinstance(b, bytes):
        return b.decode("utf-8", "replace")
    if hasattr(b, "read"):
        data = b.read()
        try:
            b.seek(0)
        except Exception:  # noqa: BLE001
            pass
        return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
    return str(b)


def aws_operation(request) -> tuple[str, str]:
    """(service, operation) of an AWS request: JSON protocols name it in X-Amz-Target, query protocols in Action."""
    target = _header(request, "X-Amz-Target")
    if target:
        prefix, _, op = target.partition(".")
        svc = {"DynamoDB_20120810": "dynamodb", "AmazonSQS": "sqs", "AmazonSSM": "ssm"}.get(prefix, prefix.lower())
        return svc, op
    host = re.sub(r"^https?://", "", request.url).split("/")[0]
    svc = host.split(".")[0]
    action = parse_qs(_body(request)).get("Action", [""])[0]
    if not action:
        action = parse_qs(request.url.partition("?")[2]).get("Action", [""])[0]
    return svc, action


def _ec2_error(code: str, message: str, status: int) -> tuple:
    body = (f'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>{code}</Code><Message>{message}'
            f'</Message></Error></Errors><RequestID>fault-injected</RequestID></Response>')
    return status, {"Content-Type": "text/xml"}, body


def _ec2_fleet_ice(request) -> tuple:
    """A CreateFleet (type instant) answer with no instance and an InsufficientInstanceCapacity error per override."""
    q = parse_qs(_body(request))
    items = []
    for key, vals in q.items():
        m = re.match(r"LaunchTemplateConfigs\.(\d+)\.Overrides\.(\d+)\.InstanceType$", key)
        if not m:
            continue
        pre = f"LaunchTemplateConfigs.{m.group(1)}.Overrides.{m.group(2)}."
        ov = f"<instanceType>{vals[0]}</instanceType>"
        for fld, tag in (("SubnetId", "subnetId"), ("AvailabilityZone", "availabilityZone")):
            if q.get(pre + fld):
                ov += f"<{tag}>{q[pre + fld][0]}</{tag}>"
        lt = q.get(f"LaunchTemplateConfigs.{m.group(1)}.LaunchTemplateSpecification.LaunchTemplateId", [""])[0]
        ltn = q.get(f"LaunchTemplateConfigs.{m.group(1)}.LaunchTemplateSpecification.LaunchTemplateName", [""])[0]
        spec = (f"<launchTemplateId>{lt}</launchTemplateId>" if lt else "") + \
               (f"<launchTemplateName>{ltn}</launchTemplateName>" if ltn else "")
        items.append(f"<item><launchTemplateAndOverrides><launchTemplateSpecification>{spec}</launchTemplateSpecification>"
                     f"<overrides>{ov}</overrides></launchTemplateAndOverrides>"
                     f"<errorCode>InsufficientInstanceCapacity</errorCode><errorMessage>We currently do not have sufficient "
                     f"capacity in the Availability Zone you requested (fault injected).</errorMessage></item>")
    body = ('<?xml version="1.0" encoding="UTF-8"?><CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            '<requestId>fault-injected</requestId><fleetId>fleet-00000000-0000-0000-0000-000000000000</fleetId>'
            f'<errorSet>{"".join(items)}</errorSet><fleetInstanceSet/></CreateFleetResponse>')
    return 200, {"Content-Type": "text/xml"}, body


def _ddb_error(name: str, message: str, extra: dict | None = None) -> tuple:
    doc = {"__type": f"com.amazonaws.dynamodb.v20120810#{name}", "message": message, **(extra or {})}
    return 400, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps(doc)


WRITE_OPS = {"ec2": ("Create", "Run", "Terminate", "Delete", "Modify"),
             "dynamodb": ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"),
             "sqs": ("SendMessage", "DeleteMessage", "ChangeMessageVisibility"),
             "kube": ("BIND", "CREATE", "DELETE", "EVICT", "PATCH", "PUT")}


def is_write(what: tuple) -> bool:
    return str(what[1]).startswith(WRITE_OPS.get(what[0], ()))


class _Inv(threading.local):
    plan: FaultPlan | None = None
    calls: int = 0
    writes: int = 0
    dead: bool = False
    name: str = ""
    bypass: bool = False


class FaultInjector:
    """Installs the hooks (``install``/``uninstall`` or as a context manager) and runs invocations under plans."""

    def __init__(self, world):
        self.w = world
        self.counts: Counter = Counter()
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
        import botocore.endpoint
        from moto.core.botocore_stubber import BotocoreStubber

        from ..adapters.kube.client import KubeClient

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
        if (plan.crash_at is not None and inv.calls == plan.crash_at) or \
                (write and plan.crash_at_write is not None and inv.writes == plan.crash_at_write) or \
                (plan.crash_on is not None and what[0] == plan.crash_on[0] and str(what[1]).startswith(plan.crash_on[1])):
            inv.dead = True
            self.counts["crash"] += 1
            self.crash_points.add((inv.name, inv.calls))
            if write:
                self.write_crash_points.add((inv.name, inv.writes))
            self.crash_sites[f"{inv.name} {'after' if plan.crash_after else 'before'} {what[0]}.{what[1]}"] += 1
            self.log.append(f"crash {inv.name} at call {inv.calls} {'after' if plan.crash_after else 'before'} {what[0]}.{what[1]}")
            if plan.crash_after:
                call()
            raise InjectedCrash(f"{inv.name}: crash at external call {inv.calls} ({what[0]}.{what[1]})")
        return call()

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
            self.counts["ec2_ice"] += 1
            return _ec2_fleet_ice(request)
        if kind == "ec2_throttle":
            self.counts["ec2_throttle"] += 1
            return _ec2_error("RequestLimitExceeded", "Request limit exceeded (fault injected).", 503)
        if kind == "ddb_throttle":
            self.counts["ddb_throttle"] += 1
            return _ddb_error("ProvisionedThroughputExceededException", "Rate exceeded (fault injected)")
        if kind == "ddb_conflict":
            try:
                n = len(json.loads(_body(request)).get("TransactItems") or [])
            except ValueError:
                n = 1
            self.counts["ddb_conflict"] += 1
            return _ddb_error("TransactionCanceledException",
                              "Transaction cancelled, please refer cancellation reasons for specific reasons "
                              f"[{', '.join(['TransactionConflict'] * max(n, 1))}]",
                              {"CancellationReasons": [{"Code": "TransactionConflict",
                                                        "Message": "Transaction is ongoing for the item"}] * max(n, 1)})
        if kind == "ddb_race":
            if self._race(request):
                self.counts["ddb_conditional"] += 1
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
        import boto3

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
        server = self.w.server
        before = []
        for status, times, method in (plan.kube_faults if plan else []):
            server.add_fault(status=status, times=times, method=method, retry_after=1 if status == 429 else None)
            before.append(server._faults[-1])
        out = {"crashed": False, "error": None}
        try:
            yield out
        except InjectedCrash as e:
            out["crashed"] = True
            out["error"] = str(e)
        except Exception as e:  # noqa: BLE001 - a handler that raised: Lambda counts it failed, the event is retried
            out["error"] = f"{type(e).__name__}: {e}"
        finally:
            self.calls_seen[name] = max(self.calls_seen[name], inv.calls)
            self.writes_seen[name] = max(self.writes_seen[name], inv.writes)
            for f, (status, times, _m) in zip(before, plan.kube_faults if plan else []):
                taken = times - max(f["times"], 0)
                if taken:
                    self.counts[f"kube_{status}"] += taken
            if before:
                server.clear_faults()
            inv.plan, inv.calls, inv.writes, inv.dead, inv.name = None, 0, 0, False, ""

    def count(self, kind: str, n: int = 1) -> None:
        self.counts[kind] += n

    @property
    def total(self) -> int:
        return sum(self.counts.values())


# the calls where a crash splits state between EC2, DynamoDB and Kubernetes (a crash plan may aim at one of them)
CRITICAL_CALLS = [("ec2", "CreateFleet"), ("ec2", "TerminateInstances"), ("dynamodb", "TransactWriteItems"),
                  ("dynamodb", "PutItem"), ("dynamodb", "DeleteItem"), ("kube", "EVICT"), ("kube", "DELETE nodes"),
                  ("kube", "PATCH nodes")]


def random_plan(rng: random.Random, name: str, seen_calls: int, rate: float = 0.6, seen_writes: int = 0) -> FaultPlan | None:
    """A plan for one invocation of ``name``: nothing (1 - rate), a crash, or errors.  A crash lands at a random
    external call (45%), a random state-changing one (30%), or the first of one of CRITICAL_CALLS (25%: before or
    after CreateFleet, TerminateInstances, a store transaction, an eviction, a Node write), where a crash splits state."""
    if rng.random() > rate:
        return None
    plan = FaultPlan()
    r = rng.random()
    if r < 0.5:
        mode = rng.random()
        if mode < 0.3:
            plan.crash_at_write = rng.randint(1, max(seen_writes, 3))
        elif mode < 0.55:
            plan.crash_on = rng.choice(CRITICAL_CALLS)
        else:
            plan.crash_at = rng.randint(1, max(seen_calls, 8))
        plan.crash_after = rng.random() < 0.5
    elif r < 0.62 and name in ("provisioner", "consolidation", "drift", "interruption"):
        plan.aws_errors[("ec2", "CreateFleet")] = ["ice", rng.randint(1, 3)]
    elif r < 0.72:
        op = rng.choice(["CreateFleet", "DescribeInstances", "TerminateInstances", "CreateLaunchTemplate"])
        plan.aws_errors[("ec2", op)] = ["ec2_throttle", rng.randint(1, 6)]
    elif r < 0.86:
        plan.kube_faults.append((rng.choice([500, 503, 429]), rng.randint(1, 8), rng.choice([None, "GET", "PATCH", "POST", "DELETE"])))
    else:
        op = rng.choice(["PutItem", "UpdateItem", "TransactWriteItems", "GetItem", "Query", "DeleteItem"])
        kind = rng.choice(["ddb_throttle", "ddb_race"] + (["ddb_conflict"] if op == "TransactWriteItems" else []))
        if kind == "ddb_race" and op not in ("PutItem", "UpdateItem", "DeleteItem"):
            op = rng.choice(["PutItem", "UpdateItem", "DeleteItem"])
        plan.aws_errors[("dynamodb", op)] = [kind, rng.randint(1, 12) if kind == "ddb_throttle" else rng.randint(1, 2)]
    if rng.random() < 0.25 and plan.crash_at is None:   # sometimes a crash on top of the errors
        plan.crash_at = rng.randint(1, max(seen_calls, 8))
        plan.crash_after = rng.random() < 0.5
    return plan


# ==================================================================================================================
# The scenario: a cluster with Deployments, driven round by round through the real handlers with faults on, then
# settled with faults off, then counted from ground truth (moto's instances, the API server's pods and nodes, the store).
# ==================================================================================================================

MANIFESTS = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
        - key: karpenter.k8s.aws/instance-family
          operator: In
          values: ["m5", "c5", "m6i"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      expireAfter: 720h
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 30s
    budgets: [{nodes: "%(budget)d"}]
  limits:
    cpu: "%(cpu_limit)d"
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: test-cluster
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: test-cluster
"""

BUDGET = 2
CPU_LIMIT = 1000
SPOT_WARNING_SECONDS = 120.0
ROUND_SECONDS = 60.0
SETTLE_JUMP = 16 * 60.0   # past the registration timeout (15 min) and the orphan GC age (30 s)
COUNTER_KEYS = ("faults_injected", "leaked_instances", "lost_pods", "stuck_pods", "stranded_taints", "budget_overruns",
                "double_launches")
LOSS_KEYS = COUNTER_KEYS[1:]


def deployment(name: str, replicas: int, cpu: str, memory: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx",
                                                           "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}}


def _iid(provider_id: str | None) -> str:
    return (provider_id or "").rsplit("/", 1)[-1]


class FaultRun:
    """One seed: ``run()`` returns the counters (COUNTER_KEYS) plus detail for a finding."""

    def __init__(self, seed: int, rounds: int = 24, settle_rounds: int = 40, rate: float = 0.7, verbose: bool = False):
        self.seed = seed
        self.rng = random.Random(seed)
        self.rounds = rounds
        self.settle_rounds = settle_rounds
        self.rate = rate
        self.verbose = verbose
        self.faults_on = rate > 0
        self.budget_overruns = 0
        self.overrun_detail: list = []
        self.interrupted: set[str] = set()        # instances AWS takes back (their nodes are not disruption's)
        self.reclaims: list[tuple[float, str, bool]] = []   # (due, iid, lose the state-change event)
        self.redeliver: list[tuple[str, dict]] = []        # (function, SQS event) to deliver again
        self.errors: Counter = Counter()
        self.settled = False

    # -- set-up ------------------------------------------------------------------------------------------------
    def run(self, before_measure=None) -> dict:
        """``before_measure(self)`` runs after the settle, before the counters (tests plant losses with it)."""
        import sys

        saved = sys.stdout
        try:
            return self._run(before_measure)
        finally:
            sys.stdout = saved   # handlers redirect stdout; two at once in threads can leave it redirected

    def _run(self, before_measure) -> dict:
        from .world import World

        text = MANIFESTS % {"budget": BUDGET, "cpu_limit": CPU_LIMIT}
        with World(text) as w:
            self.w = w
            from .workloads import WorkloadController

            self.wc = WorkloadController(w.server)
            self.deploys = {}
            for i in range(self.rng.randint(2, 4)):
                name = f"app{i}"
                self.deploys[name] = self.rng.randint(2, 8)
                self.wc.add(deployment(name, self.deploys[name], self.rng.choice(["250m", "500m", "1", "1500m"]),
                                       self.rng.choice(["256Mi", "1Gi", "2Gi"])))
            self._setup_interruption_queue()
            with FaultInjector(w) as inj:
                self.inj = inj
                for _ in range(self.rounds):
                    self._round()
                self.faults_on = False
                self._settle()
                if before_measure is not None:
                    before_measure(self)
                result = self.measure()
                result["faults"] = dict(inj.counts)
                result["faults_injected"] = inj.total
                result["crash_points"] = sorted(inj.crash_points)
                result["calls_seen"] = dict(inj.calls_seen)
                result["writes_seen"] = dict(inj.writes_seen)
                result["write_crash_points"] = sorted(inj.write_crash_points)
                result["crash_sites"] = dict(inj.crash_sites)
        return result

    def _settle(self) -> None:
        """Faults off: rounds until nothing changes (three equal rounds), then past the registration timeout and
        the GC period in one step (the scheduled functions would find nothing to do meanwhile), then rounds until
        quiet again.  At most ``settle_rounds`` rounds."""
        self.faults_on = False
        n = 0
        for phase in range(2):
            quiet, last = 0, None
            while n < self.settle_rounds:
                sig = self._round()
                n += 1
                quiet = quiet + 1 if sig == last else 0
                last = sig
                if quiet >= 2:
                    break
            if phase == 0:
                self.w.clock.advance(SETTLE_JUMP)
        self.settled = quiet >= 2
        self.settle_count = n

    def _setup_interruption_queue(self) -> None:
        from .simulator import load_module, repo_root

        w = self.w
        self.iq_url = w.sqs.create_queue(QueueName=f"{w.cluster}-interruption", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
        self.interruption = load_module(repo_root() / "functions" / "interruption" / "handler.py", "faults_interruption_handler")
        h = getattr(getattr(self.interruption, "logger", None), "registered_handler", None)
        if h is not None and hasattr(h, "setStream"):
            h.setStream(w.logs)

    # -- one round ---------------------------------------------------------------------------------------------
    def _plan(self, name: str):
        if not self.faults_on:
            return None
        return random_plan(self.rng, name, self.inj.calls_seen[name], self.rate, self.inj.writes_seen[name])

    def _invoke(self, name: str, fn, plan=None) -> dict:
        with self.inj.invocation(name, plan if plan is not None else self._plan(name)) as out:
            out["response"] = fn()
        if out["error"] and not out["crashed"]:
            self.errors[f"{name}: {out['error'][:120]}"] += 1
        self._observe(name)
        return out

    def _concurrently(self, calls: list[tuple[str, callable]]) -> list[dict]:
        """Two invocations at once (threads); each under its own plan."""
        plans = [self._plan(n) for n, _ in calls]
        outs: list = [None] * len(calls)

        def go(i):
            outs[i] = self._invoke(calls[i][0], calls[i][1], plans[i] or FaultPlan())

        import sys

        saved = sys.stdout
        threads = [threading.Thread(target=go, args=(i,)) for i in range(len(calls))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sys.stdout = saved        # redirect_stdout is not thread-safe: two handlers at once may leave it swapped
        self.inj.count("concurrent_invocations")
        return outs

    def _round(self):
        w, rng = self.w, self.rng
        self._aws_reclaims()
        self.wc.reconcile()
        w.schedule()
        if self.faults_on and rng.random() < 0.4:          # load changes: scale a Deployment
            name = rng.choice(sorted(self.deploys))
            self.deploys[name] = rng.randint(0, 10)
            self.wc.scale("Deployment", "default", name, self.deploys[name])
            self.wc.reconcile()
            w.schedule()
        if self.faults_on and rng.random() < 0.06:         # a NodePool change: every node drifts (replacements)
            self._drift_nodepool()
        self._provision()
        self._kubelets()
        self._invoke("lifecycle", w.sweep)
        self._kubelets()
        if self.faults_on and rng.random() < 0.2:
            self._concurrently([("consolidation", lambda: w.invoke("consolidation")),
                                (rng.choice(["lifecycle", "consolidation", "drift"]),
                                 lambda: w.invoke("drift") if rng.random() < 0.3 else w.sweep())])
        else:
            self._invoke("consolidation", lambda: w.invoke("consolidation"))
            self._invoke("drift", lambda: w.invoke("drift"))
        if self.faults_on and rng.random() < 0.25:
            self._interrupt()
        self._deliver_interruptions()
        self._invoke("lifecycle", w.sweep)
        self._kubelets()
        w.schedule()
        self._pod_gc()
        w.clock.advance(ROUND_SECONDS)
        return self._signature()

    def _drift_nodepool(self) -> None:
        self.generation = getattr(self, "generation", 0) + 1

        def mutate(np):
            labels = np.spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
            labels["faults.example.com/generation"] = str(self.generation)

        self.w.store.update("NodePool", "default", mutate)

    def _provision(self) -> None:
        w, rng = self.w, self.rng
        pending = [p for p in w.server.store.list("pods") if not (p.get("spec") or {}).get("nodeName")
                   and not p["metadata"].get("deletionTimestamp")]
        todo = [r for r in self.redeliver if r[0] == "provisioner"]
        self.redeliver = [r for r in self.redeliver if r[0] != "provisioner"]
        for _fn, ev in todo:                              # SQS redelivery of records that failed or crashed
            self.inj.count("sqs_redelivery") if self.faults_on else None
            self._provision_event(ev)
        if not pending:
            return
        ev = w.sqs_event(pending)
        if self.faults_on and rng.random() < 0.15:       # duplicate delivery at once (two pollers got the batch)
            self.inj.count("sqs_duplicate")
            outs = self._concurrently([("provisioner", lambda: w.provision(ev)), ("provisioner", lambda: w.provision(ev))])
            for o in outs:
                self._after_provision(ev, o)
            return
        out = self._provision_event(ev)
        if self.faults_on and rng.random() < 0.15 and not out["crashed"]:   # at-least-once: delivered again later
            self.inj.count("sqs_duplicate")
            self._provision_event(ev)

    def _provision_event(self, ev: dict) -> dict:
        out = self._invoke("provisioner", lambda: self.w.provision(ev))
        self._after_provision(ev, out)
        return out

    def _after_provision(self, ev: dict, out: dict) -> None:
        if out["crashed"] or out["error"]:
            self.redeliver.append(("provisioner", ev))
            return
        failed = {f["itemIdentifier"] for f in (out.get("response") or {}).get("batchItemFailures", [])}
        if failed:
            self.redeliver.append(("provisioner", {"Records": [r for r in ev["Records"] if r["messageId"] in failed]}))

    def _kubelets(self) -> None:
        """Every running instance's kubelet registers a Ready Node (as userData makes it)."""
        w = self.w
        have = {(n.get("spec") or {}).get("providerID") for n in w.server.store.list("nodes")}
        for inst in w.instances(states=("running",)):
            pid = f"aws:///{inst['Placement']['AvailabilityZone']}/{inst['InstanceId']}"
            if pid not in have and inst["InstanceId"] not in self.interrupted:
                try:
                    w.join(inst, ready=True)
                except Exception as e:  # noqa: BLE001 - e.g. its NodeClaim vanished meanwhile
                    self.errors[f"join: {e}"[:120]] += 1

    def _pod_gc(self) -> None:
        names = {n["metadata"]["name"] for n in self.w.server.store.list("nodes")}
        for p in self.w.server.store.list("pods"):
            node = (p.get("spec") or {}).get("nodeName")
            if node and node not in names:
                self.w.server.store.delete("pods", p["metadata"]["name"], p["metadata"].get("namespace") or "default")

    # -- interruptions -----------------------------------------------------------------------------------------
    def _interrupt(self) -> None:
        from .interruption_events import spot_warning

        running = [i for i in self.w.instances(states=("running",)) if i["InstanceId"] not in self.interrupted]
        if not running:
            return
        inst = self.rng.choice(running)
        iid = inst["InstanceId"]
        self.interrupted.add(iid)
        lose_state = self.rng.random() < 0.3
        self.reclaims.append((self.w.clock.now() + SPOT_WARNING_SECONDS, iid, lose_state))
        if self.rng.random() < 0.3:
            self.inj.count("eventbridge_lost")          # the warning never reaches the queue
            return
        body = json.dumps(spot_warning(iid, self.w.clock.isoformat()))
        self.w.sqs.send_message(QueueUrl=self.iq_url, MessageBody=body)
        if self.rng.random() < 0.3:
            self.inj.count("sqs_duplicate")             # EventBridge -> SQS is at-least-once
            self.w.sqs.send_message(QueueUrl=self.iq_url, MessageBody=body)

    def _aws_reclaims(self) -> None:
        from . import nodes as simnodes
        from .interruption_events import state_change

        now = self.w.clock.now()
        due = [r for r in self.reclaims if r[0] <= now]
        self.reclaims = [r for r in self.reclaims if r[0] > now]
        for _t, iid, lose in due:
            r = self.w.ec2.describe_instances(InstanceIds=[iid])["Reservations"]
            state = r[0]["Instances"][0]["State"]["Name"] if r else "terminated"
            if state not in ("shutting-down", "terminated"):
                self.w.ec2.terminate_instances(InstanceIds=[iid])
            for n in self.w.server.store.list("nodes"):
                if (n.get("spec") or {}).get("providerID", "").endswith("/" + iid):
                    simnodes.set_node_ready(self.w.server, n["metadata"]["name"], False)
            if lose:
                self.inj.count("eventbridge_lost")
            else:
                self.w.sqs.send_message(QueueUrl=self.iq_url, MessageBody=json.dumps(
                    state_change(iid, "shutting-down", self.w.clock.isoformat())))

    def _deliver_interruptions(self) -> None:
        from .simulator import _LambdaContext, _sqs_record

        w = self.w
        msgs = []
        while True:
            got = w.sqs.receive_message(QueueUrl=self.iq_url, MaxNumberOfMessages=10, VisibilityTimeout=30,
                                        AttributeNames=["All"]).get("Messages", [])
            if not got:
                break
            msgs.extend(got)
        if not msgs:
            return
        ev = {"Records": [_sqs_record(m, self.iq_url, w.region) for m in msgs]}

        def call():
            with contextlib.redirect_stdout(w.logs):
                return self.interruption.handler(ev, _LambdaContext(f"{w.cluster}-interruption"))

        out = self._invoke("interruption", call)
        failed = {f["itemIdentifier"] for f in (out.get("response") or {}).get("batchItemFailures", [])} \
            if not (out["crashed"] or out["error"]) else {r["messageId"] for r in ev["Records"]}
        for r in ev["Records"]:
            if r["messageId"] in failed:   # visible again at once (the queue redelivers it next round)
                w.sqs.change_message_visibility(QueueUrl=self.iq_url, ReceiptHandle=r["receiptHandle"], VisibilityTimeout=0)
                if self.faults_on:
                    self.inj.count("sqs_redelivery")
            else:
                w.sqs.delete_message(QueueUrl=self.iq_url, ReceiptHandle=r["receiptHandle"])

    # -- observation and counters ------------------------------------------------------------------------------
    def _observe(self, after: str) -> None:
        """Budget check after every invocation: nodes of the NodePool tainted for disruption (not AWS's reclaims)."""
        n = 0
        names = []
        for node in self.w.server.store.list("nodes"):
            if _iid((node.get("spec") or {}).get("providerID")) in self.interrupted:
                continue
            if any(t.get("key") == DISRUPTED_TAINT for t in (node.get("spec") or {}).get("taints") or []):
                n += 1
                names.append(node["metadata"]["name"])
        if n > BUDGET:
            self.budget_overruns += 1
            self.overrun_detail.append(f"after {after} at {self.w.clock.isoformat()}: {n} disrupting {names}")

    def _signature(self):
        w = self.w
        pods = tuple(sorted((p["metadata"]["name"], (p.get("spec") or {}).get("nodeName") or "") for p in w.server.store.list("pods")))
        insts = tuple(sorted(i["InstanceId"] for i in w.instances()))
        claims = tuple(sorted((nc.name, bool(nc.metadata.get("deletionTimestamp"))) for nc in w.store.list("NodeClaim")))
        taints = tuple(sorted(n["metadata"]["name"] for n in w.server.store.list("nodes")
                              if any(t.get("key") == DISRUPTED_TAINT for t in (n.get("spec") or {}).get("taints") or [])))
        return pods, insts, claims, taints

    def measure(self) -> dict:
        w = self.w
        resp = w.ec2.describe_instances()
        every = [i for r in resp["Reservations"] for i in r["Instances"]]
        tags = {i["InstanceId"]: {t["Key"]: t["Value"] for t in i.get("Tags") or []} for i in every}
        ours = [i for i in every if "karpenter.sh/nodepool" in tags[i["InstanceId"]]]
        per_claim = Counter(tags[i["InstanceId"]].get("karpenter.sh/nodeclaim", "") for i in ours)
        double = {k: v for k, v in per_claim.items() if k and v > 1}
        claims = w.store.list("NodeClaim")
        live_iids = {_iid(nc.status.get("providerID")) for nc in claims if not nc.metadata.get("deletionTimestamp")}
        running = {i["InstanceId"]: i for i in ours if i["State"]["Name"] in ("pending", "running")}
        leaked = sorted(iid for iid in running if iid not in live_iids)

        nodes = {n["metadata"]["name"]: n for n in w.server.store.list("nodes")}
        pods = [p for p in w.server.store.list("pods") if not p["metadata"].get("deletionTimestamp")]
        lost, stuck = {}, []
        for name in self.deploys:
            obj = w.server.store.get("deployments", name, "default") or {}
            replicas = int((obj.get("spec") or {}).get("replicas") or 0)
            mine = [p for p in pods if (p["metadata"].get("labels") or {}).get("app") == name]
            ok = pend = 0
            for p in mine:
                node = (p.get("spec") or {}).get("nodeName")
                if not node:
                    pend += 1
                    continue
                n = nodes.get(node)
                if n is not None and _iid((n.get("spec") or {}).get("providerID")) in running:
                    ok += 1
            if replicas - ok - pend > 0:
                lost[name] = replicas - ok - pend
            stuck += [p["metadata"]["name"] for p in mine if not (p.get("spec") or {}).get("nodeName")]
        by_iid = {_iid(nc.status.get("providerID")): nc for nc in claims}
        stranded = []
        for n in nodes.values():
            if not any(t.get("key") == DISRUPTED_TAINT for t in (n.get("spec") or {}).get("taints") or []):
                continue
            nc = by_iid.get(_iid((n.get("spec") or {}).get("providerID")))
            if nc is None or not nc.metadata.get("deletionTimestamp"):
                stranded.append(n["metadata"]["name"])
        out = {"seed": self.seed, "leaked_instances": len(leaked), "lost_pods": sum(lost.values()), "stuck_pods": len(stuck),
               "stranded_taints": len(stranded), "budget_overruns": self.budget_overruns,
               "double_launches": sum(v - 1 for v in double.values())}
        out["detail"] = {"leaked": leaked, "lost": lost, "stuck": stuck[:20], "stranded": stranded, "double": double,
                         "overruns": self.overrun_detail[:10], "errors": dict(self.errors.most_common(10)),
                         "settled": self.settled, "settle_rounds": getattr(self, "settle_count", 0),
                         "instances": len(running), "nodeclaims": len(claims),
                         "virtual_minutes": round(w.clock.elapsed / 60, 1)}
        return out


def run_seed(seed: int, **kw) -> dict:
    return FaultRun(seed, **kw).run()
