"""Deploy-time parameters of the stack, read from CDK context (``-c key=value`` or cdk.json).

Everything arrives as a string from ``-c`` (or typed from cdk.json); :func:`load_config`
parses and checks each value and raises :class:`ConfigError` naming the parameter and the
``-c`` flag that fixes it.  No constructs are created here, so this runs in milliseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from karpenter_lambda.api.roles import CLUSTER_NAME_RE, IMAGE_RE  # noqa: F401  (EKS cluster names; image references)
from karpenter_lambda.api.scheduler_config import SCHEDULER_CONFIG_ENV, SchedulerConfig, parse_scheduler_config
from karpenter_lambda.controllers import runtime  # the functions' own parsing of the catalog settings

KUBERNETES_VERSION_RE = re.compile(r"^1\.[0-9]{1,3}$")
# CloudWatch Logs retention values accepted by PutRetentionPolicy.
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
KUBERNETES_ACCESS_MODES = ("rbac", "cluster-admin")
# the watcher image's platform (docker build --platform): the architecture of the nodes it runs on
WATCHER_PLATFORMS = ("linux/amd64", "linux/arm64")

# name -> (default, low, high): integer context parameters.
INT_PARAMS: dict[str, tuple[int, int, int]] = {
    "lifecycleIntervalMinutes": (1, 1, 1440),
    "disruptionIntervalMinutes": (1, 1, 1440),  # the drift and consolidation sweeps (issue: disruption)
    "offpeakIntervalMinutes": (5, 1, 1440),  # the off-peak reconcile (window edges run on EventBridge Scheduler)
    "logRetentionDays": (30, 1, 3653),
    "podBatchSize": (500, 1, 10000),
    "podBatchWindowSeconds": (10, 0, 300),
    "provisionerConcurrency": (2, 2, 1000),
}


class ConfigError(ValueError):
    """A context parameter is missing or wrong; the message names it and the ``-c`` flag to pass."""


@dataclass(frozen=True)
class StackConfig:
    cluster_name: str
    kubernetes_version: str | None = None
    node_pools_dir: Path | None = None
    lifecycle_interval_minutes: int = 1
    log_retention_days: int = 30
    log_level: str = "INFO"
    pod_batch_size: int = 500
    pod_batch_window_seconds: int = 10
    provisioner_concurrency: int = 2
    kubernetes_access: str = "rbac"
    alarm_topic_arn: str | None = None
    watcher_platform: str = "linux/amd64"
    watcher_image: str | None = None   # an image you built and pushed yourself: no DockerImageAsset (no Docker at deploy)
    # upstream Karpenter runs in the same cluster (a migration): the functions get KARPENTER_LAMBDA_BESIDE_KARPENTER=true
    beside_karpenter: bool = False
    # Karpenter's SpotToSpotConsolidation feature gate (on here, off in Karpenter): false gives the functions
    # KARPENTER_LAMBDA_SPOT_TO_SPOT_CONSOLIDATION=false
    spot_to_spot_consolidation: bool = True
    # Karpenter's catalog settings (Helm settings.vmMemoryOverheadPercent, settings.reservedENIs): the functions get
    # KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT / KARPENTER_LAMBDA_RESERVED_ENIS when not at the default
    vm_memory_overhead_percent: float = runtime.DEFAULT_VM_MEMORY_OVERHEAD_PERCENT
    reserved_enis: int = runtime.DEFAULT_RESERVED_ENIS
    # Karpenter's settings.schedulerConfig (--scheduler-config: podTopologySpread.defaultConstraints); the functions
    # that build snapshots get KARPENTER_LAMBDA_SCHEDULER_CONFIG when it is set
    scheduler_config: SchedulerConfig | None = None
    # every ``*IntervalMinutes`` parameter of INT_PARAMS by its context key (schedules look theirs up here)
    intervals: Mapping[str, int] = field(default_factory=dict)

    def interval_minutes(self, key: str) -> int:
        """A schedule interval by its context key (e.g. ``lifecycleIntervalMinutes``); add new keys to INT_PARAMS."""
        if key not in self.intervals:
            raise ConfigError(f"unknown schedule parameter {key}: add it to infra.config.INT_PARAMS")
        return self.intervals[key]

    def catalog_environment(self) -> dict[str, str]:
        """The functions' variables for the catalog settings (none at the defaults: a default deploy is unchanged)."""
        return runtime.catalog_environment({"vm_memory_overhead_percent": self.vm_memory_overhead_percent,
                                            "reserved_enis": self.reserved_enis})

    def scheduler_environment(self) -> dict[str, str]:
        """``{KARPENTER_LAMBDA_SCHEDULER_CONFIG: <its JSON>}`` when ``schedulerConfig`` is set, else nothing."""
        return {SCHEDULER_CONFIG_ENV: self.scheduler_config.to_json()} if self.scheduler_config is not None else {}


def _parse_int(name: str, raw: Any, low: int, high: int) -> int:
    if isinstance(raw, bool):
        raise ConfigError(f"context parameter {name}: expected an integer, got {raw!r} (pass -c {name}=N)")
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"context parameter {name}: expected an integer, got {raw!r} (pass -c {name}=N)") from None
    if not low <= value <= high:
        raise ConfigError(f"context parameter {name}: {value} is out of range {low}..{high}")
    return value


CONTEXT_KEYS = ("clusterName", "kubernetesVersion", "nodePools", "logLevel", "kubernetesAccess", "alarmTopicArn",
                "watcherPlatform", "watcherImage", "besideKarpenter", "spotToSpotConsolidation", "vmMemoryOverheadPercent", "reservedENIs",
                "schedulerConfig", *INT_PARAMS)


def _parse_bool(name: str, raw: Any, hint: str) -> bool:
    """``true``/``false`` (any case, from ``-c``) or a JSON boolean (cdk.json); missing or empty is false."""
    if raw is None or raw == "":
        return False
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"context parameter {name}: expected true or false, got {raw!r} ({hint})")
    return text == "true"


def load_config(context: Mapping[str, Any], base_dir: Path | None = None) -> StackConfig:
    """Build a :class:`StackConfig` from a context mapping (``{name: value}``); raise ConfigError on bad input.

    With a CDK app, pass ``{k: app.node.try_get_context(k) for k in CONTEXT_KEYS}``.

    ``base_dir`` resolves a relative ``nodePools`` folder (default: the current directory, where
    ``cdk`` runs ``app.py``).
    """
    cluster = context.get("clusterName")
    if cluster is None or (isinstance(cluster, str) and not cluster.strip()):
        raise ConfigError(
            "missing context parameter clusterName: the name of the existing EKS cluster to manage; "
            "pass it as `cdk deploy -c clusterName=<your-cluster>` (or set \"clusterName\" in cdk.json's context)"
        )
    cluster = str(cluster).strip()
    if not CLUSTER_NAME_RE.match(cluster):
        raise ConfigError(
            f"context parameter clusterName: {cluster!r} is not a valid EKS cluster name "
            "(1-100 characters: letters, digits, '-' and '_', starting with a letter or digit)"
        )

    version = context.get("kubernetesVersion")
    if version is not None and str(version).strip():
        version = str(version).strip()
        if not KUBERNETES_VERSION_RE.match(version):
            raise ConfigError(f"context parameter kubernetesVersion: {version!r} is not a Kubernetes minor version like 1.33")
    else:
        version = None

    node_pools = context.get("nodePools")
    node_pools_dir = None
    if node_pools is not None and str(node_pools).strip():
        node_pools_dir = Path(str(node_pools).strip())
        if not node_pools_dir.is_absolute():
            node_pools_dir = (base_dir or Path.cwd()) / node_pools_dir
        if not node_pools_dir.is_dir():
            raise ConfigError(f"context parameter nodePools: {node_pools_dir} is not a directory (pass -c nodePools=<folder of NodePool/EC2NodeClass YAML>)")

    ints = {}
    for name, (default, low, high) in INT_PARAMS.items():
        raw = context.get(name)
        ints[name] = default if raw is None or raw == "" else _parse_int(name, raw, low, high)
    if ints["logRetentionDays"] not in LOG_RETENTION_DAYS:
        raise ConfigError(
            f"context parameter logRetentionDays: {ints['logRetentionDays']} is not a CloudWatch Logs retention; "
            f"use one of {', '.join(map(str, LOG_RETENTION_DAYS))}"
        )

    if ints["podBatchSize"] > 10 and ints["podBatchWindowSeconds"] == 0:
        raise ConfigError(
            f"context parameter podBatchSize: {ints['podBatchSize']} needs a batching window; Lambda allows more than 10 "
            "SQS messages per batch only with podBatchWindowSeconds >= 1"
        )

    log_level = str(context.get("logLevel") or "INFO").strip().upper()
    if log_level not in LOG_LEVELS:
        raise ConfigError(f"context parameter logLevel: {log_level!r} is not one of {', '.join(LOG_LEVELS)}")

    access = str(context.get("kubernetesAccess") or "rbac").strip()
    if access not in KUBERNETES_ACCESS_MODES:
        raise ConfigError(f"context parameter kubernetesAccess: {access!r} is not one of {', '.join(KUBERNETES_ACCESS_MODES)}")

    topic = context.get("alarmTopicArn")
    topic = str(topic).strip() if topic else None
    if topic and not re.match(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$", topic):
        raise ConfigError(f"context parameter alarmTopicArn: {topic!r} is not an SNS topic ARN")

    platform = str(context.get("watcherPlatform") or "linux/amd64").strip()
    if platform not in WATCHER_PLATFORMS:
        raise ConfigError(f"context parameter watcherPlatform: {platform!r} is not one of {', '.join(WATCHER_PLATFORMS)}")
    image = str(context.get("watcherImage") or "").strip() or None
    if image and not IMAGE_RE.match(image):
        raise ConfigError(f"context parameter watcherImage: {image!r} is not a container image reference "
                          "(e.g. 123456789012.dkr.ecr.us-east-1.amazonaws.com/karpenter-lambda-watcher:1.0)")

    beside = _parse_bool("besideKarpenter", context.get("besideKarpenter"),
                         "pass -c besideKarpenter=true while upstream Karpenter runs in the cluster, false after")

    raw = context.get("spotToSpotConsolidation")
    spot_to_spot = True if raw is None or raw == "" else _parse_bool(
        "spotToSpotConsolidation", raw, "pass -c spotToSpotConsolidation=false to keep spot nodes from being replaced "
        "by spot nodes, as Karpenter's default SpotToSpotConsolidation=false")

    # parsed by the functions' own rules (controllers/runtime.py), so a value synth takes is one they take
    catalog = {}
    for key, parse, default, example in (
            ("vmMemoryOverheadPercent", runtime.parse_vm_memory_overhead_percent,
             runtime.DEFAULT_VM_MEMORY_OVERHEAD_PERCENT, "0.075, Karpenter's default"),
            ("reservedENIs", runtime.parse_reserved_enis, runtime.DEFAULT_RESERVED_ENIS, "1")):
        raw = context.get(key)
        try:
            catalog[key] = default if raw is None or raw == "" else parse(raw, f"context parameter {key}")
        except ValueError as e:
            raise ConfigError(f"{e} (pass e.g. -c {key}={example})") from None

    # a YAML/JSON string (-c) or a mapping (cdk.json), checked by the functions' own parser (api/scheduler_config.py)
    raw = context.get("schedulerConfig")
    if isinstance(raw, str) and not raw.strip():
        raw = None
    try:
        scheduler = parse_scheduler_config(raw, "context parameter schedulerConfig")
    except ValueError as e:
        raise ConfigError(f"{e} (pass -c schedulerConfig=<a YAML/JSON document with podTopologySpread.defaultConstraints>, "
                          "see docs/deploy.md)") from None

    return StackConfig(
        cluster_name=cluster,
        kubernetes_version=version,
        node_pools_dir=node_pools_dir,
        lifecycle_interval_minutes=ints["lifecycleIntervalMinutes"],
        log_retention_days=ints["logRetentionDays"],
        log_level=log_level,
        pod_batch_size=ints["podBatchSize"],
        pod_batch_window_seconds=ints["podBatchWindowSeconds"],
        provisioner_concurrency=ints["provisionerConcurrency"],
        kubernetes_access=access,
        alarm_topic_arn=topic,
        watcher_platform=platform,
        watcher_image=image,
        beside_karpenter=beside,
        spot_to_spot_consolidation=spot_to_spot,
        vm_memory_overhead_percent=catalog["vmMemoryOverheadPercent"],
        reserved_enis=catalog["reservedENIs"],
        scheduler_config=scheduler,
        intervals={k: v for k, v in ints.items() if k.endswith("IntervalMinutes")},
    )
