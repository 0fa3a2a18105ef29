"""Process-wide settings for the controllers: the clock and configuration from the environment.

Lambda uses the wall clock; the simulator swaps in its virtual clock with :func:`set_clock` so the
same controller and handler code runs on virtual time.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from ..api.scheduler_config import SCHEDULER_CONFIG_ENV, SchedulerConfig, parse_scheduler_config
from ..api.times import format_time, to_epoch
from ..catalog.allocatable import DEFAULT_VM_MEMORY_OVERHEAD_PERCENT

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
    # Karpenter's SpotToSpotConsolidation feature gate (off in Karpenter, on here: docs/disruption.md): consolidation
    # may replace spot nodes by a spot node; KARPENTER_LAMBDA_SPOT_TO_SPOT_CONSOLIDATION=false turns it off
    spot_to_spot_consolidation: bool = True
    # EC2 instance status checks (Karpenter's instance status controller): impaired instances and scheduled events
    instance_status_checks: bool = True
    # minValues when the instance types left cannot meet it: "Strict" (Karpenter's default: not launched) or
    # "BestEffort" (launched with fewer values); read by the solver
    min_values_policy: str = "Strict"
    # Karpenter's two catalog settings (--vm-memory-overhead-percent, --reserved-enis): every catalog the functions
    # build uses them (cloudprovider/catalog.py); read by :func:`catalog_settings`
    vm_memory_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT
    reserved_enis: int = 0
    # Karpenter's --scheduler-config (podTopologySpread.defaultConstraints), from $KARPENTER_LAMBDA_SCHEDULER_CONFIG;
    # None: not set (no default constraints, no extra Kubernetes call); read by the snapshot loader
    scheduler_config: SchedulerConfig | None = None

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
            **catalog_settings(env),
            scheduler_config=read_scheduler_config(env),
        )

    def catalog_settings(self) -> dict:
        """``{"vm_memory_overhead_percent", "reserved_enis"}``: the keyword arguments of the catalog loaders."""
        return {"vm_memory_overhead_percent": self.vm_memory_overhead_percent, "reserved_enis": self.reserved_enis}


MIN_VALUES_POLICIES = ("Strict", "BestEffort")


def read_scheduler_config(env: Mapping[str, str] | None = None) -> SchedulerConfig | None:
    """Karpenter's ``--scheduler-config`` / ``SCHEDULER_CONFIG`` from ``$KARPENTER_LAMBDA_SCHEDULER_CONFIG`` of ``env``
    (default ``os.environ``): a YAML/JSON document ``{podTopologySpread: {defaultConstraints: [...]}}``; unset or
    empty is None.  A bad value is a SchedulerConfigError (a ValueError) naming the variable and the field."""
    env = os.environ if env is None else env
    raw = (env.get(SCHEDULER_CONFIG_ENV) or "").strip()
    if not raw:
        return None
    return parse_scheduler_config(raw, f"environment variable {SCHEDULER_CONFIG_ENV}")


#: Karpenter's ``--vm-memory-overhead-percent`` / ``VM_MEMORY_OVERHEAD_PERCENT`` (a fraction, default 0.075)
VM_MEMORY_OVERHEAD_PERCENT_ENV = "KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT"
#: Karpenter's ``--reserved-enis`` / ``RESERVED_ENIS`` (an integer, default 0)
RESERVED_ENIS_ENV = "KARPENTER_LAMBDA_RESERVED_ENIS"
DEFAULT_RESERVED_ENIS = 0


def parse_vm_memory_overhead_percent(raw, origin: str = f"environment variable {VM_MEMORY_OVERHEAD_PERCENT_ENV}") -> float:
    """The VM memory overhead from text (or a number): a fraction of the instance memory, ``0 <= value < 1`` (Karpenter
    refuses a negative one; a value of 1 or more would leave no memory, and is a percentage written as such, 7.5 for
    0.075).  A ValueError names ``origin`` (the variable, the flag or the context parameter) and the bad value."""
    hint = f"{origin} must be a fraction of the instance memory such as 0.075 (7.5%), from 0 up to but not including 1"
    if isinstance(raw, bool):
        raise ValueError(f"{hint}, not {raw!r}")
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise ValueError(f"{hint}, not {raw!r}: not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{hint}, not {raw!r}: not a finite number")
    if value < 0:
        raise ValueError(f"{hint}, not {raw!r}: it cannot be negative")
    if value >= 1:
        raise ValueError(f"{hint}, not {raw!r}: that subtracts all the memory (for {value:g}%, write {value / 100:g})")
    return value


def parse_reserved_enis(raw, origin: str = f"environment variable {RESERVED_ENIS_ENV}") -> int:
    """The number of reserved ENIs from text (or an integer): ``>= 0``, as Karpenter.  A ValueError names ``origin``
    and the bad value."""
    hint = f"{origin} must be a whole number of network interfaces, 0 or more"
    if isinstance(raw, bool) or isinstance(raw, float):
        raise ValueError(f"{hint}, not {raw!r}")
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{hint}, not {raw!r}: not an integer") from None
    if value < 0:
        raise ValueError(f"{hint}, not {raw!r}: it cannot be negative")
    return value


def catalog_settings(env: Mapping[str, str] | None = None, *, vm_memory_overhead_percent=None,
                     reserved_enis=None) -> dict:
    """Karpenter's two catalog settings, the one place they are read: ``{"vm_memory_overhead_percent": float,
    "reserved_enis": int}`` from ``$KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT`` and ``$KARPENTER_LAMBDA_RESERVED_ENIS``
    of ``env`` (default ``os.environ``; unset or empty: 0.075 and 0).  A keyword argument that is not None (a CLI
    flag's text) wins over its variable, and a bad value is a ValueError naming it (the ``--flag``, or the
    variable).  Every catalog is built with these (``Config``, ``plan``, the simulated kubelet)."""
    env = os.environ if env is None else env
    out = {"vm_memory_overhead_percent": DEFAULT_VM_MEMORY_OVERHEAD_PERCENT, "reserved_enis": DEFAULT_RESERVED_ENIS}
    if vm_memory_overhead_percent is not None:
        out["vm_memory_overhead_percent"] = parse_vm_memory_overhead_percent(vm_memory_overhead_percent,
                                                                             "--vm-memory-overhead-percent")
    elif (env.get(VM_MEMORY_OVERHEAD_PERCENT_ENV) or "").strip():
        out["vm_memory_overhead_percent"] = parse_vm_memory_overhead_percent(env[VM_MEMORY_OVERHEAD_PERCENT_ENV])
    if reserved_enis is not None:
        out["reserved_enis"] = parse_reserved_enis(reserved_enis, "--reserved-enis")
    elif (env.get(RESERVED_ENIS_ENV) or "").strip():
        out["reserved_enis"] = parse_reserved_enis(env[RESERVED_ENIS_ENV])
    return out


def catalog_environment(settings: Mapping) -> dict[str, str]:
    """The variables that carry ``settings`` (:func:`catalog_settings`'s dict) to the functions: only those not at
    their default, as the CDK stack sets them (a default deployment has neither)."""
    out = {}
    if float(settings["vm_memory_overhead_percent"]) != DEFAULT_VM_MEMORY_OVERHEAD_PERCENT:
        out[VM_MEMORY_OVERHEAD_PERCENT_ENV] = repr(float(settings["vm_memory_overhead_percent"]))
    if int(settings["reserved_enis"]) != DEFAULT_RESERVED_ENIS:
        out[RESERVED_ENIS_ENV] = str(int(settings["reserved_enis"]))
    return out


#: the deployment settings that change decisions (not where the functions talk to): ``simulate`` gives the shell's
#: values to its functions, ``plan`` reads the minValues policy
DECISION_SETTINGS_ENV = ("KARPENTER_LAMBDA_MIN_VALUES_POLICY", "KARPENTER_LAMBDA_SPOT_TO_SPOT_CONSOLIDATION",
                         "KARPENTER_LAMBDA_NODE_REPAIR", "KARPENTER_LAMBDA_INSTANCE_STATUS_CHECKS")


def decision_environment(env=None) -> dict[str, str]:
    """The :data:`DECISION_SETTINGS_ENV` variables set in ``env`` (default the process's), checked as the functions
    check them (a bad value: ValueError naming the variable)."""
    env = os.environ if env is None else env
    out = {var: env[var] for var in DECISION_SETTINGS_ENV if (env.get(var) or "").strip()}
    _aws_settings(out)
    return out


def min_values_policy(env=None) -> str:
    """``$KARPENTER_LAMBDA_MIN_VALUES_POLICY`` (Strict | BestEffort; default Strict), checked."""
    return _aws_settings(decision_environment(env)).get("min_values_policy", "Strict")


def _aws_settings(env) -> dict:
    """``KARPENTER_LAMBDA_BESIDE_KARPENTER``, ``KARPENTER_LAMBDA_NODE_REPAIR``,
    ``KARPENTER_LAMBDA_SPOT_TO_SPOT_CONSOLIDATION`` and ``KARPENTER_LAMBDA_INSTANCE_STATUS_CHECKS`` (true | false),
    ``KARPENTER_LAMBDA_MIN_VALUES_POLICY`` (Strict | BestEffort), and the botocore settings from
    ``KARPENTER_LAMBDA_AWS_RETRY_MODE`` (standard | adaptive), ``KARPENTER_LAMBDA_AWS_MAX_ATTEMPTS``, ``KARPENTER_LAMBDA_AWS_CONNECT_TIMEOUT_SECONDS``,
    ``KARPENTER_LAMBDA_AWS_READ_TIMEOUT_SECONDS``; a bad value is an error naming the variable."""
    out: dict = {}
    for var, key in (("KARPENTER_LAMBDA_BESIDE_KARPENTER", "beside_karpenter"), ("KARPENTER_LAMBDA_NODE_REPAIR", "node_repair"),
                     ("KARPENTER_LAMBDA_INSTANCE_STATUS_CHECKS", "instance_status_checks"),
                     ("KARPENTER_LAMBDA_SPOT_TO_SPOT_CONSOLIDATION", "spot_to_spot_consolidation")):
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
