"""One construct per Lambda function, declared by a :class:`FunctionSpec`.

A function is its folder ``functions/<name>/`` (the code asset, ``handler.handler``) on the
core layer, arm64 / Python 3.14, X-Ray active, its own log group, Powertools settings in the
environment.  Triggers are data: a :class:`QueueTrigger` (SQS event source with partial batch
responses) or a :class:`ScheduleTrigger` (EventBridge rate rule).  Adding a function to the
stack is one entry in ``functions/registry.json`` (plus its handler).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from .layer import ARCHITECTURE, REPO_ROOT, RUNTIME

FUNCTIONS_DIR = REPO_ROOT / "functions"
METRICS_NAMESPACE = "KarpenterLambda"


@dataclass(frozen=True)
class QueueTrigger:
    """Consume a stack queue (by its name in ``KarpenterLambdaStack.queues``)."""

    queue: str
    batch_size_param: str | None = None  # StackConfig attribute holding the batch size
    batch_size: int = 10
    window_param: str | None = None  # StackConfig attribute holding the batching window (s)
    window_seconds: int = 0
    max_concurrency_param: str | None = None  # StackConfig attribute: event source maximum concurrency


@dataclass(frozen=True)
class ScheduleTrigger:
    """Run every N minutes, N from the context parameter ``interval_param`` (see infra.config.INT_PARAMS)."""

    interval_param: str


@dataclass(frozen=True)
class FunctionSpec:
    name: str  # folder under functions/, also the Powertools service suffix
    description: str
    timeout_seconds: int = 60
    memory_mb: int = 512
    # reserved concurrency: a fixed number, or the StackConfig attribute holding it; None = unreserved
    reserved_concurrency: int | None = None
    reserved_concurrency_param: str | None = None
    triggers: tuple[QueueTrigger | ScheduleTrigger, ...] = ()
    environment: dict[str, str] = field(default_factory=dict)
    # custom (Powertools EMF) metrics of this function that raise an alarm as soon as they are above zero
    alarm_metrics: tuple[str, ...] = ()

    @property
    def code_dir(self) -> Path:
        return FUNCTIONS_DIR / self.name


REGISTRY = FUNCTIONS_DIR / "registry.json"


def load_registry(path: Path = REGISTRY) -> tuple[FunctionSpec, ...]:
    """The functions of ``functions/registry.json`` (the simulator reads the same file) as FunctionSpecs."""
    import json

    doc = json.loads(Path(path).read_text())
    specs = []
    for f in doc["functions"]:
        triggers: list[QueueTrigger | ScheduleTrigger] = []
        for t in f.get("triggers") or []:
            if "queue" in t:
                triggers.append(QueueTrigger(queue=t["queue"], batch_size_param=t.get("batchSizeParam"),
                                             batch_size=t.get("batchSize", 10), window_param=t.get("windowParam"),
                                             window_seconds=t.get("windowSeconds", 0),
                                             max_concurrency_param=t.get("maxConcurrencyParam")))
            elif "schedule" in t:
                triggers.append(ScheduleTrigger(interval_param=t["schedule"]))
            else:
                raise ValueError(f"{path}: function {f.get('name')}: trigger {t!r} needs 'queue' or 'schedule'")
        specs.append(FunctionSpec(name=f["name"], description=f["description"],
                                  timeout_seconds=f.get("timeoutSeconds", 60), memory_mb=f.get("memoryMb", 512),
                                  reserved_concurrency=f.get("reservedConcurrency"),
                                  reserved_concurrency_param=f.get("reservedConcurrencyParam"),
                                  triggers=tuple(triggers), environment=dict(f.get("environment") or {}),
                                  alarm_metrics=tuple(f.get("alarmMetrics") or ())))
    return tuple(specs)


def visibility_timeout_for(function_timeout_seconds: int, window_seconds: int) -> int:
    """SQS visibility timeout for a queue feeding a function: 6x the timeout plus the batching window (AWS guidance)."""
    return 6 * function_timeout_seconds + window_seconds


class KarpenterFunction(Construct):
    """A function from its spec: ``self.function``, ``self.log_group``, ``self.rules`` (schedules)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        spec: FunctionSpec,
        role: iam.IRole,
        layer: lambda_.ILayerVersion,
        environment: dict[str, str],
        log_retention: logs.RetentionDays,
        log_level: str,
        reserved_concurrency: int | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.spec = spec
        if not spec.code_dir.is_dir():
            raise ValueError(f"function {spec.name}: code folder {spec.code_dir} does not exist")
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=RemovalPolicy.RETAIN)
        env = {
            **environment,
            "POWERTOOLS_SERVICE_NAME": f"karpenter-lambda-{spec.name}",
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": log_level,
            **spec.environment,
        }
        self.function = lambda_.Function(
            self,
            "Function",
            description=spec.description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(spec.code_dir), exclude=["**/__pycache__", "**/*.pyc", ".gitkeep"]),
            layers=[layer],
            role=role,
            environment=env,
            timeout=Duration.seconds(spec.timeout_seconds),
            memory_size=spec.memory_mb,
            reserved_concurrent_executions=reserved_concurrency,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
        )
        # the shared role has no AWSLambdaBasicExecutionRole: write access to this log group only
        self.log_group.grant_write(role)
        self.rules: list[events.Rule] = []

    def add_queue_source(self, queue: sqs.IQueue, *, batch_size: int, window_seconds: int, max_concurrency: int | None) -> None:
        self.function.add_event_source(
            sources.SqsEventSource(
                queue,
                batch_size=batch_size,
                max_batching_window=Duration.seconds(window_seconds) if window_seconds else None,
                report_batch_item_failures=True,
                max_concurrency=max_concurrency,
            )
        )

    def add_schedule(self, minutes: int) -> events.Rule:
        # scheduled runs are not retried: the next tick is the retry.  Nor kept: an invocation throttled by the
        # reserved concurrency (the previous sweep still running) is dropped once the next tick is due, rather than
        # kept by Lambda's async queue for its default 6 hours and run later on a stale tick, back to back
        if not getattr(self, "_async_configured", False):   # one EventInvokeConfig per function
            self.function.configure_async_invoke(retry_attempts=0, max_event_age=Duration.minutes(max(minutes, 1)))
            self._async_configured = True
        rule = events.Rule(
            self,
            f"Every{minutes}Min",
            description=f"karpenter-lambda {self.spec.name} sweep every {minutes} minute(s)",
            schedule=events.Schedule.rate(Duration.minutes(minutes)),
            targets=[targets.LambdaFunction(self.function, retry_attempts=0, max_event_age=Duration.minutes(max(minutes, 1)))],
        )
        self.rules.append(rule)
        return rule
