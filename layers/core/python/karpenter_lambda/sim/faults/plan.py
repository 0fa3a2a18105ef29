"""What an invocation suffers: a :class:`FaultPlan` (a crash, AWS errors, API server answers), drawn by
:func:`random_plan`; :class:`InjectedCrash` is the process dying."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


class InjectedCrash(BaseException):
    """The Lambda process died here (a BaseException: the code under test cannot catch it with ``except Exception``)."""


class LambdaTimeout(InjectedCrash):
    """The invocation ran past its function's configured timeout (virtual clock): Lambda kills it where it is."""


@dataclass
class FaultPlan:
    crash_at: int | None = None
    crash_after: bool = False
    crash_at_write: int | None = None   # crash at the N-th state-changing call instead (CreateFleet, PutItem, PATCH, ...)
    crash_on: tuple | None = None       # or at the first call of this (service, operation prefix), e.g. ("ec2", "CreateFleet")
    aws_errors: dict = field(default_factory=dict)      # (service, op) -> [kind, times]
    kube_faults: list = field(default_factory=list)     # (status, times, method)
    hang_at: int | None = None          # the N-th external call hangs ``hang_seconds`` virtual seconds (a stalled
    hang_seconds: float = 0.0           # connection): past the function's timeout, Lambda kills the invocation there
    hang_after: bool = False            # the hung call took effect before the kill (its answer is lost)

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
        if self.hang_at:
            parts.append(f"hang@{self.hang_at}:{self.hang_seconds:.0f}s{'+' if self.hang_after else ''}")
        return ",".join(parts) or "none"


WRITE_OPS = {"ec2": ("Create", "Run", "Terminate", "Delete", "Modify"),
             "dynamodb": ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"),
             "sqs": ("SendMessage", "DeleteMessage", "ChangeMessageVisibility"),
             "kube": ("BIND", "CREATE", "DELETE", "EVICT", "PATCH", "PUT")}


def is_write(what: tuple) -> bool:
    return str(what[1]).startswith(WRITE_OPS.get(what[0], ()))


# the calls where a crash splits state between EC2, DynamoDB and Kubernetes (a crash plan may aim at one of them)
CRITICAL_CALLS = [("ec2", "CreateFleet"), ("ec2", "TerminateInstances"), ("dynamodb", "TransactWriteItems"),
                  ("dynamodb", "PutItem"), ("dynamodb", "DeleteItem"), ("kube", "EVICT"), ("kube", "DELETE nodes"),
                  ("kube", "PATCH nodes")]


def random_plan(rng: random.Random, name: str, seen_calls: int, rate: float = 0.6, seen_writes: int = 0,
                timeout: float | None = None) -> FaultPlan | None:
    """A plan for one invocation of ``name``: nothing (1 - rate), a crash, a hung call, or errors.  A crash lands at a
    random external call (45%), a random state-changing one (30%), or the first of one of CRITICAL_CALLS (25%: before
    or after CreateFleet, TerminateInstances, a store transaction, an eviction, a Node write), where a crash splits
    state.  A hung call (with ``timeout``, the function's Lambda timeout) stalls 0.6-1.6x the timeout: mostly the
    invocation is killed there (a Lambda timeout), else it goes on late."""
    if rng.random() > rate:
        return None
    plan = FaultPlan()
    r = rng.random()
    if timeout and r < 0.08:
        plan.hang_at = rng.randint(1, max(seen_calls, 8))
        plan.hang_seconds = round(rng.uniform(0.6, 1.6) * timeout, 1)
        plan.hang_after = rng.random() < 0.5
        return plan
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
