"""Process-wide settings for the controllers: the clock and configuration from the environment.

Lambda uses the wall clock; the simulator swaps in its virtual clock with :func:`set_clock` so the
same controller and handler code runs on virtual time.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable

from ..api.times import format_time, to_epoch

_clock: Callable[[], float] = time.time


def now() -> float:
    return _clock()


def clock() -> Callable[[], float]:
    """The current clock function (call it for epoch seconds)."""
    return _clock


def set_clock(fn: Callable[[], float] | None) -> None:
    global _clock
    _clock = fn or time.time


def clock_proxy() -> float:
    """A stable function that always reads the current clock (safe to hand to long-lived objects)."""
    return _clock()


def attempt_stamp(ts: float | None = None) -> str:
    """A launch attempt's time as text, for names and tokens that must differ per attempt: seconds since the clock's
    ``start`` when it has one (the simulator's virtual clock, so a run repeats its NodeClaim names run after run),
    else epoch seconds."""
    t = now() if ts is None else ts
    start = getattr(_clock, "start", None)
    return repr(float(t) - float(start)) if isinstance(start, (int, float)) else repr(float(t))


# Callbacks receiving each controller report (the simulator listens here; Lambda has none).
REPORT_HOOKS: list[Callable[[str, object], None]] = []


def publish(kind: str, report: object) -> None:
    for hook in list(REPORT_HOOKS):
        hook(kind, report)


def iso(ts: float | None = None) -> str:
    """RFC 3339 text of ``ts``, or of the current clock's time (:func:`karpenter_lambda.api.times.format_time`)."""
    return format_time(now() if ts is None else ts)


parse_iso = to_epoch   # the simulator still imports this name (api.times.to_epoch, not a copy)


@dataclass
class Config:
    """Configuration of the functions, from environment variables (documented in docs/provisioning.md)."""

    cluster: str
    region: str
    state_table: str
    cache_table: str
    node_role: str | None
    instance_profile: str | None
    endpoint_url: str | None
    kube_endpoint: str | None  # override eks:DescribeCluster (tests, simulator, private endpoints)
    registration_timeout: float = 15 * 60
    orphan_min_age: float = 30.0
    # AWS calls: botocore "standard" retries (throttling and transient errors, with backoff) and timeouts well
    # below the shortest function timeout (60 s): 3 attempts x (3 s connect + 15 s read) stay under it
    aws_retry_mode: str = "standard"
    aws_max_attempts: int = 3          # in all, the first call included
    aws_connect_timeout: float = 3.0
    aws_read_timeout: float = 15.0
    # running beside upstream Karpenter (a migration): instances are launched without the tag keys it lists by
    beside_karpenter: bool = False
    # node repair (Karpenter's NodeRepair feature gate): unhealthy nodes past their toleration are replaced
    node_repair: bool = True
    # EC2 instance status checks (Karpenter's instance status controller): impaired instances and scheduled events
    instance_status_checks: bool = True
    # minValues when the instance types left cannot meet it: "Strict" (Karpenter's default: not launched) or
    # "BestEffort" (launched with fewer values); read by the solver
    min_values_policy: str = "Strict"

    @classmethod
    def from_env(cls, env=None) -> "Config":
        env = os.environ if env is None else env
        cluster = env.get("KARPENTER_LAMBDA_CLUSTER")
        if not cluster:
            raise ValueError("environment variable KARPENTER_LAMBDA_CLUSTER is required (the EKS cluster name)")
        return cls(
            cluster=cluster,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            state_table=env.get("KARPENTER_LAMBDA_STATE_TABLE", "karpenter-lambda-state"),
            cache_table=env.get("KARPENTER_LAMBDA_CACHE_TABLE", "karpenter-lambda-cache"),
            node_role=env.get("KARPENTER_LAMBDA_NODE_ROLE") or None,
            instance_profile=env.get("KARPENTER_LAMBDA_INSTANCE_PROFILE") or None,
            endpoint_url=env.get("KARPENTER_LAMBDA_ENDPOINT_URL") or None,
            kube_endpoint=env.get("KARPENTER_LAMBDA_KUBE_ENDPOINT") or None,
            registration_timeout=float(env.get("KARPENTER_LAMBDA_REGISTRATION_TIMEOUT_SECONDS", 15 * 60)),
            orphan_min_age=float(env.get("KARPENTER_LAMBDA_ORPHAN_MIN_AGE_SECONDS", 30)),
            **_aws_settings(env),
        )


MIN_VALUES_POLICIES = ("Strict", "BestEffort")


def _aws_settings(env) -> dict:
    """``KARPENTER_LAMBDA_BESIDE_KARPENTER``, ``KARPENTER_LAMBDA_NODE_REPAIR`` and
    ``KARPENTER_LAMBDA_INSTANCE_STATUS_CHECKS`` (true | false),
    ``KARPENTER_LAMBDA_MIN_VALUES_POLICY`` (Strict | BestEffort), and the botocore settings from
    ``KARPENTER_LAMBDA_AWS_RETRY_MODE`` (standard | adaptive), ``KARPENTER_LAMBDA_AWS_MAX_ATTEMPTS``, ``KARPENTER_LAMBDA_AWS_CONNECT_TIMEOUT_SECONDS``,
    ``KARPENTER_LAMBDA_AWS_READ_TIMEOUT_SECONDS``; a bad value is an error naming the variable."""
    out: dict = {}
    for var, key in (("KARPENTER_LAMBDA_BESIDE_KARPENTER", "beside_karpenter"), ("KARPENTER_LAMBDA_NODE_REPAIR", "node_repair"),
                     ("KARPENTER_LAMBDA_INSTANCE_STATUS_CHECKS", "instance_status_checks")):
        flag = (env.get(var) or "").strip().lower()
        if flag:
            if flag not in ("true", "false"):
                raise ValueError(f"environment variable {var} must be true or false, not {flag!r}")
            out[key] = flag == "true"
    policy = (env.get("KARPENTER_LAMBDA_MIN_VALUES_POLICY") or "").strip()
    if policy:
        if policy not in MIN_VALUES_POLICIES:
            raise ValueError(f"environment variable KARPENTER_LAMBDA_MIN_VALUES_POLICY must be one of "
                             f"{', '.join(MIN_VALUES_POLICIES)}, not {policy!r}")
        out["min_values_policy"] = policy
    mode = env.get("KARPENTER_LAMBDA_AWS_RETRY_MODE")
    if mode:
        if mode not in ("standard", "adaptive"):
            raise ValueError(f"environment variable KARPENTER_LAMBDA_AWS_RETRY_MODE must be standard or adaptive, not {mode!r}")
        out["aws_retry_mode"] = mode
    for var, key, kind in (("KARPENTER_LAMBDA_AWS_MAX_ATTEMPTS", "aws_max_attempts", int),
                           ("KARPENTER_LAMBDA_AWS_CONNECT_TIMEOUT_SECONDS", "aws_connect_timeout", float),
                           ("KARPENTER_LAMBDA_AWS_READ_TIMEOUT_SECONDS", "aws_read_timeout", float)):
        raw = env.get(var)
        if raw in (None, ""):
            continue
        try:
            value = kind(raw)
        except ValueError:
            raise ValueError(f"environment variable {var} must be a positive number, not {raw!r}") from None
        if value <= 0:
            raise ValueError(f"environment variable {var} must be a positive number, not {raw!r}")
        out[key] = value
    return out


_tracer = None


def get_tracer():
    """The Powertools Tracer, built once and only when tracing is on (``Tracer()`` costs ~0.6 s to construct).

    Returns None when ``POWERTOOLS_TRACE_DISABLED`` is true (tests, the simulator).
    """
    global _tracer
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "").lower() in ("1", "true", "yes"):
        return None
    if _tracer is None:
        from aws_lambda_powertools import Tracer

        _tracer = Tracer()
    return _tracer
