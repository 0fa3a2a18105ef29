"""Exhaustive crash points (issue 29 item 4): for each handler step, a crash before and after every external call.

For every scenario of :mod:`.crashpoint_scenarios` (one step of one function: the provisioner on pending pods, the
interruption handler on each message kind, the lifecycle, disruption and off-peak sweeps):

1. **record** -- the scenario runs from scratch (a new :class:`~karpenter_lambda.sim.world.World`) and every external
   call the step's invocation makes is recorded in order: each AWS operation (EC2, DynamoDB, SQS, SSM, IAM, ...;
   moto's ``BotocoreStubber.process_request``, which every boto3/pynamodb request goes through) and each Kubernetes
   API call (``KubeClient._call``).  The run then recovers and its end state is checked (the baseline must pass);
2. **crash** -- the scenario runs again from scratch once per (call index, ``before`` | ``after``): the process dies
   exactly there (``after``: the call was made and its answer lost).  The crash is a ``BaseException``
   (:class:`ProcessDied`), every later call of the invocation fails too, and the controllers' environment is
   dropped (a new sandbox: nothing cached survives);
3. **recover** -- the system carries on as deployed: the message is delivered again (SQS), the watcher resends
   pending pods, kubelets join, the scheduled sweeps run, AWS does what it announced (a spot instance is reclaimed
   two minutes after its warning), one virtual minute per round until nothing changes, then past the registration
   timeout and again until quiet;
4. **check** the end state (:func:`.crashpoint_scenarios.end_state_problems`): no leaked instance, no lost or
   stuck pod, no stranded ``karpenter.sh/disrupted`` taint, no disruption-budget slot held, at most one instance per
   NodeClaim, the DynamoDB NodePool usage equal to the live NodeClaims' launch claims (+ the scenario's own check).

**Equivalent points.**  A crash point leaves behind exactly the writes made before it.  Two points after the same
number of state-changing calls (every call but a read: ``Describe*``/``Get*``/``List*``/``Query``/``Scan`` on AWS,
``GET``/``LIST`` on Kubernetes) leave identical external state, and the process dies with its caches, so their
recoveries are identical runs.  ``literal=False`` (the default) runs one point per class -- ``after`` the write that
closes it (the answer-lost case), ``before`` the first write for the class with none -- and reports every other
point of the class as equal to it (``result: "same as #<index> <when>"``); ``literal=True`` runs every point.

``run_matrix(scenarios, literal=False) -> CrashMatrix``; ``CrashMatrix.rows`` is the coverage table (function, step,
index, call, when, result, problems); ``bench/crashpoints.py`` prints it (``--json``).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Protocol

from moto.core.botocore_stubber import BotocoreStubber

from ...adapters.kube.client import KubeClient
from ...controllers import environment
from .aws import aws_operation

READ_PREFIXES = {"kube": ("GET", "LIST", "WATCH")}
AWS_READ_PREFIXES = ("Describe", "Get", "List", "Query", "Scan", "BatchGet")
BEFORE, AFTER = "before", "after"


class ProcessDied(BaseException):
    """The Lambda process died at this call (no ``except Exception`` in the code under test can catch it)."""


def is_read(service: str, op: str) -> bool:
    """A call that changes nothing anywhere (anything else counts as a write, to be safe)."""
    return bool(op) and str(op).startswith(READ_PREFIXES.get(service, AWS_READ_PREFIXES))


def _operation(request) -> tuple[str, str]:
    """(service, operation); REST-protocol services (EKS) are named by method and path: ``GET /clusters``."""
    svc, op = aws_operation(request)
    if not op:
        path = "/" + re.sub(r"^https?://[^/]+", "", request.url).lstrip("/").split("/")[0].split("?")[0]
        method = str(getattr(request, "method", "") or "").upper()
        op = f"{'Get' if method == 'GET' else method.title()} {path}"
    return svc, op


@dataclass(frozen=True)
class Call:
    index: int            # 1-based position in the invocation
    service: str          # ec2, dynamodb, sqs, ssm, iam, kube, ...
    op: str               # CreateFleet, PutItem, "PATCH nodes/...", ...

    @property
    def site(self) -> str:
        """The call without object names (``kube.PATCH nodes``), stable from run to run."""
        op = self.op
        if self.service == "kube":
            verb, _, rest = op.partition(" ")
            op = f"{verb} {rest.split('/')[0].split(' ')[0]}"
        return f"{self.service}.{op}"

    @property
    def write(self) -> bool:
        return not is_read(self.service, self.op)


class CrashDoors:
    """The two doors every external call goes through, watched while :meth:`armed` (the step's invocation):
    calls are recorded, and the one at ``target`` = (index, when) kills the process."""

    def __init__(self):
        self.calls: list[Call] = []
        self.target: tuple[int, str] | None = None
        self.hit: Call | None = None
        self._armed = False
        self._saved: list = []

    def __enter__(self) -> "CrashDoors":
        doors = self
        orig_process, orig_call = BotocoreStubber.process_request, KubeClient._call

        def process_request(stub, request):
            if not doors._armed:
                return orig_process(stub, request)
            return doors._door(_operation(request), lambda: orig_process(stub, request))

        def kube_call(client, op, fn, *args, **kw):
            if not doors._armed:
                return orig_call(client, op, fn, *args, **kw)
            return doors._door(("kube", op), lambda: orig_call(client, op, fn, *args, **kw))

        self._saved = [(BotocoreStubber, "process_request", orig_process), (KubeClient, "_call", orig_call)]
        BotocoreStubber.process_request = process_request
        KubeClient._call = kube_call
        return self

    def __exit__(self, *exc) -> None:
        for obj, name, value in reversed(self._saved):
            setattr(obj, name, value)
        self._saved = []

    def _door(self, what: tuple, call: Callable):
        if self.hit is not None:
            raise ProcessDied(f"process already dead ({what[0]}.{what[1]})")
        c = Call(len(self.calls) + 1, str(what[0]), str(what[1]))
        self.calls.append(c)
        if self.target is not None and self.target[0] == c.index:
            self.hit = c
            if self.target[1] == AFTER:
                try:
                    call()
                except Exception:  # noqa: BLE001 - the call was made; its answer (even an error) dies too
                    pass
            raise ProcessDied(f"crash {self.target[1]} call {c.index} ({c.service}.{c.op})")
        return call()

    def invoke(self, fn: Callable[[], dict], target: tuple[int, str] | None) -> tuple[dict | None, bool]:
        """Run one invocation (``fn``) with the doors armed; (its answer, whether the process died)."""
        self.calls, self.target, self.hit = [], target, None
        self._armed = True
        try:
            return fn(), False
        except ProcessDied:
            environment.reset()        # the sandbox is gone: the next invocation starts cold
            return None, True
        finally:
            self._armed = False


Target = tuple[int, str]                       # (call index, before|after)
RunResult = tuple[list[Call], bool, list[str]]  # (calls made, whether the process died, end-state problems)


class StepScenario(Protocol):
    """What :func:`run_scenario` needs of a scenario (:class:`.crashpoint_scenarios.Scenario`)."""
    function: str
    step: str

    @property
    def name(self) -> str: ...

    def session(self, fork: bool = True, jobs: int = 1) -> ContextManager[
        Callable[[list[Target | None]], list[RunResult]]]: ...


@dataclass
class PointResult:
    function: str
    step: str
    index: int            # 0: the baseline (no crash)
    when: str             # before | after | none
    call: str             # the call site (``ec2.CreateFleet``)
    write: bool
    result: str           # ok | FAIL | not reached | same as #<i> <when>
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"function": self.function, "step": self.step, "index": self.index, "when": self.when,
                "call": self.call, "write": self.write, "result": self.result, "problems": self.problems,
                "seconds": round(self.seconds, 3)}


@dataclass
class CrashMatrix:
    rows: list[PointResult] = field(default_factory=list)
    calls: dict[str, list[Call]] = field(default_factory=dict)    # scenario -> recorded calls
    seconds: float = 0.0

    @property
    def failures(self) -> list[PointResult]:
        return [r for r in self.rows if r.result == "FAIL"]

    def summary(self) -> dict:
        out: dict[str, dict] = {}
        for r in self.rows:
            s = out.setdefault(f"{r.function}/{r.step}", {"points": 0, "runs": 0, "failed": 0, "calls": 0,
                                                          "writes": 0})
            if r.index == 0:
                continue
            s["points"] += 1
            s["runs"] += r.result in ("ok", "FAIL", "not reached")
            s["failed"] += r.result == "FAIL"
        for name, calls in self.calls.items():
            out[name]["calls"] = len(calls)
            out[name]["writes"] = sum(c.write for c in calls)
        return out

    def to_dict(self) -> dict:
        return {"seconds": round(self.seconds, 2), "points": sum(1 for r in self.rows if r.index),
                "runs": sum(1 for r in self.rows if r.index and r.result in ("ok", "FAIL", "not reached")),
                "failed": len(self.failures), "scenarios": self.summary(), "rows": [r.to_dict() for r in self.rows]}

    def table(self) -> str:
        """The coverage table (markdown): function, step, call, before/after, result."""
        lines = ["| function | step | # | call | when | result |", "|---|---|---|---|---|---|"]
        for r in self.rows:
            res = r.result if not r.problems else f"{r.result}: {'; '.join(r.problems)}"
            lines.append(f"| {r.function} | {r.step} | {r.index or ''} | {r.call} | {r.when} | {res} |")
        return "\n".join(lines)


def crash_points(calls: list[Call]) -> list[tuple[int, str]]:
    """Every (index, when) of an invocation, in order."""
    return [(c.index, w) for c in calls for w in (BEFORE, AFTER)]


def equivalence(calls: list[Call]) -> dict[tuple[int, str], tuple[int, str]]:
    """Each crash point -> the representative of its class (the points after the same number of writes)."""
    points, done = [], 0
    for c in calls:
        points.append(((c.index, BEFORE), done))
        done += c.write
        points.append(((c.index, AFTER), done))
    first_write = next((c for c in calls if c.write), calls[0] if calls else None)
    rep = {0: (first_write.index, BEFORE)} if first_write else {}
    done = 0
    for c in calls:
        if c.write:
            done += 1
            rep[done] = (c.index, AFTER)
    return {point: rep[d] for point, d in points}


def run_scenario(scenario: StepScenario, literal: bool = False,
                 only: list[Target] | Callable[[list[Call]], list[Target]] | None = None, fork: bool = True,
                 jobs: int = 1, progress: Callable[[str], None] | None = None) -> tuple[list[Call], list[PointResult]]:
    """Record the scenario's step, then crash it at every point (or every class representative, or ``only``: the
    points, or a function of the recorded calls giving them)."""
    say = progress or (lambda _m: None)
    with scenario.session(fork=fork, jobs=jobs) as run:
        t0 = time.perf_counter()
        ((calls, died, problems),) = run([None])
        if died:
            problems = ["the baseline run died"] + problems
        rows = [PointResult(scenario.function, scenario.step, 0, "none", "(no crash)", False,
                            "FAIL" if problems else "ok", problems, time.perf_counter() - t0)]
        say(f"{scenario.name}: {len(calls)} calls, {sum(c.write for c in calls)} writes, baseline {rows[0].result} "
            f"{'; '.join(problems)}")
        classes = equivalence(calls)
        if callable(only):        # chosen from the recorded calls
            only = only(calls)
        points = only if only is not None else crash_points(calls)
        reps = {p: p if literal or only is not None else classes[p] for p in points}
        todo = sorted(set(reps.values()), key=points.index)
        t1 = time.perf_counter()
        results = dict(zip(todo, run(todo)))
        each = (time.perf_counter() - t1) / max(len(todo), 1)
    for index, when in points:
        call, rep = calls[index - 1], reps[(index, when)]
        if rep != (index, when):
            rows.append(PointResult(scenario.function, scenario.step, index, when, call.site, call.write,
                                    f"same as #{rep[0]} {rep[1]}"))
            continue
        got, died, problems = results[rep]
        hit = got[index - 1] if len(got) >= index else None
        if not died or hit is None or hit.site != call.site:
            seen = f", call {index} was {hit.site}" if hit else ""
            problems = [f"not reached: the run made {len(got)} calls{seen}"] + problems
            result = "FAIL" if problems[1:] else "not reached"
        else:
            result = "FAIL" if problems else "ok"
        rows.append(PointResult(scenario.function, scenario.step, index, when, call.site, call.write, result,
                                problems, each))
        say(f"  #{index} {when} {call.site}: {result} {'; '.join(problems)}")
    verdicts = {(r.index, r.when): r for r in rows if r.index and not r.result.startswith("same as")}
    for row in rows:          # an equivalent point's verdict is its representative's
        rep = reps.get((row.index, row.when)) if row.result.startswith("same as") else None
        if rep in verdicts and verdicts[rep].result == "FAIL":
            row.problems = [f"(as #{rep[0]} {rep[1]})"]
    return calls, rows


def run_matrix(scenarios: list[StepScenario], literal: bool = False, fork: bool = True, jobs: int = 1,
               progress: Callable[[str], None] | None = None) -> CrashMatrix:
    """Every scenario (instances of :class:`.crashpoint_scenarios.Scenario`) through :func:`run_scenario`."""
    t0 = time.perf_counter()
    out = CrashMatrix()
    for scenario in scenarios:
        calls, rows = run_scenario(scenario, literal=literal, fork=fork, jobs=jobs, progress=progress)
        out.calls[scenario.name] = calls
        out.rows.extend(rows)
    out.seconds = time.perf_counter() - t0
    return out


__all__ = ["AFTER", "BEFORE", "Call", "CrashDoors", "CrashMatrix", "PointResult", "ProcessDied", "crash_points",
           "equivalence", "is_read", "run_matrix", "run_scenario"]
