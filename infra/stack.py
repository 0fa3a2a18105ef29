"""``KarpenterLambdaStack``: everything karpenter-lambda needs for one existing EKS cluster.

Functions are declared in ``functions/registry.json`` (:data:`FUNCTIONS`, shared with the simulator), queues in
:data:`QUEUES`; a new function is one registry entry (and a new queue one ``QueueSpec``): the wiring below is
generic.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, CfnOutput, Duration, Stack, Tags
from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ecr_assets as ecr_assets
from constructs import Construct

from karpenter_lambda.api import roles

from .config import LOG_RETENTION_DAYS, StackConfig
from .functions import FunctionSpec, KarpenterFunction, QueueTrigger, ScheduleTrigger, load_registry, visibility_timeout_for
from .iam import NodeRole, OffPeakRole, WatcherRole, cluster_arn, controller_statements, node_role_name
from .layer import REPO_ROOT, CoreLayer
from .nag import (acknowledge_controller, acknowledge_custom_resource_provider, acknowledge_node_role,
                  acknowledge_offpeak)
from .nodepools import NodePoolManifests
from .queues import KarpenterQueue
from .tables import Tables

WATCHER_NAMESPACE = roles.WATCHER_NAMESPACE                  # watcher/manifests/ (karpenter-lambda watcher manifest)
WATCHER_SERVICE_ACCOUNT = roles.WATCHER_SERVICE_ACCOUNT
WATCHER_DIR = REPO_ROOT / "watcher"                          # the watcher image's build context (Dockerfile, .dockerignore)
CONTROLLER_KUBERNETES_GROUP = "karpenter-lambda-controller"   # bound by infra/rbac/controller-rbac.yaml
OFFPEAK_KUBERNETES_GROUP = "karpenter-lambda-offpeak"         # bound by infra/rbac/controller-rbac.yaml
CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"


@dataclass(frozen=True)
class QueueSpec:
    name: str
    consumer: str  # the FunctionSpec.name reading it (sets the visibility timeout)
    retention_hours: int = 24
    max_receive_count: int = 5
    retention_seconds: int | None = None   # overrides retention_hours (the interruption queue keeps 300 s, as Karpenter)
    # overrides visibility_timeout_for (6x the consumer's timeout + its batching window) where that would not fit
    # max_receive_count times into the retention (see docs/deploy.md "Queues")
    visibility_seconds: int | None = None


# the functions and their triggers: functions/registry.json (the simulator reads the same file)
FUNCTIONS: tuple[FunctionSpec, ...] = load_registry()

# item-level DynamoDB access (pynamodb: get/put/update/delete/query/scan, batches, transactions' condition checks)
TABLE_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DescribeTable",
)

QUEUES: tuple[QueueSpec, ...] = (
    QueueSpec(name="pod", consumer="provisioner"),
    # EventBridge -> interruption handler; a warning older than 5 minutes is useless (Karpenter's 300 s retention).
    # 6x the function's 60 s timeout (360 s) outlived the retention: nothing was ever redelivered nor dead-lettered.
    # 90 s (>= the 60 s timeout, as Lambda requires) x 3 receives = 270 s < 300 s: a failing record is retried twice
    # and reaches the DLQ before it expires.
    QueueSpec(name="interruption", consumer="interruption", retention_seconds=300, max_receive_count=3,
              visibility_seconds=90),
)


class KarpenterLambdaStack(Stack):
    """Attributes: ``tables``, ``queues`` (name -> KarpenterQueue), ``functions`` (name -> KarpenterFunction),
    ``controller_role``, ``offpeak_role`` (OffPeakRole), ``node_role``, ``watcher_role``, ``node_pools`` (or None),
    ``offpeak_schedules`` (or None), ``monitoring``, ``watcher_image`` (the DockerImageAsset, None with watcherImage)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, description=f"karpenter-lambda for EKS cluster {config.cluster_name}", **kwargs)
        self.config = config
        cluster = config.cluster_name
        Tags.of(self).add("karpenter-lambda/cluster", cluster)
        retention = _retention(config.log_retention_days)

        self.tables = Tables(self, "Tables")
        self.node_role = NodeRole(self, "Node", cluster=cluster)

        specs = {s.name: s for s in FUNCTIONS}
        self.queues: dict[str, KarpenterQueue] = {}
        for q in QUEUES:
            consumer = specs[q.consumer]
            window = max((_trigger_window(t, config) for t in consumer.triggers if isinstance(t, QueueTrigger) and t.queue == q.name), default=0)
            self.queues[q.name] = KarpenterQueue(
                self,
                f"{q.name.capitalize()}Queue",
                visibility_timeout_seconds=q.visibility_seconds or visibility_timeout_for(consumer.timeout_seconds, window),
                retention=Duration.seconds(q.retention_seconds) if q.retention_seconds else Duration.hours(q.retention_hours),
                max_receive_count=q.max_receive_count,
                consumer_timeout_seconds=consumer.timeout_seconds,
            )
        pod_queue = self.queues["pod"].queue
        from .interruption import InterruptionRules

        self.interruption_rules = InterruptionRules(self, "InterruptionRules", queue=self.queues["interruption"].queue,
                                                    cluster=cluster)

        # one role for every function, like Karpenter's single controller (except offpeak: its own smaller role, below)
        self.controller_role = iam.Role(
            self,
            "ControllerRole",
            description=f"karpenter-lambda functions of EKS cluster {cluster}",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        )
        policy = iam.Policy(self, "ControllerPolicy", roles=[self.controller_role])
        for st in controller_statements(cluster, self.node_role.role.role_arn):
            policy.add_statements(st)
        for table in (self.tables.state, self.tables.cache):
            table.grant(self.controller_role, *TABLE_ACTIONS)
        pod_queue.grant_send_messages(self.controller_role)
        # the off-peak function has its own, smaller role (its state table partitions, pod queue, DescribeCluster; no EC2/IAM)
        self.offpeak_role = OffPeakRole(self, "OffPeakIam", cluster=cluster, pod_queue_arn=pod_queue.queue_arn,
                                        state_table_arn=self.tables.state.table_arn)
        # function name -> (role, the policy its function waits for); every other function: the controller role
        own_roles = {"offpeak": (self.offpeak_role.role, self.offpeak_role.policy)}

        self.layer = CoreLayer(self, "CoreLayer")
        environment = {
            "KARPENTER_LAMBDA_CLUSTER": cluster,
            **self.tables.environment(),
            "KARPENTER_LAMBDA_POD_QUEUE_URL": pod_queue.queue_url,
            "KARPENTER_LAMBDA_NODE_ROLE": self.node_role.role.role_name,
            "KARPENTER_LAMBDA_INSTANCE_PROFILE": self.node_role.instance_profile.instance_profile_name,
        }
        if config.kubernetes_version:
            environment["KARPENTER_LAMBDA_KUBERNETES_VERSION"] = config.kubernetes_version
        if config.beside_karpenter:   # -c besideKarpenter=true: a migration from Karpenter (docs/migration.md)
            environment["KARPENTER_LAMBDA_BESIDE_KARPENTER"] = "true"
        if not config.spot_to_spot_consolidation:   # -c spotToSpotConsolidation=false (Karpenter's default gate)
            environment["KARPENTER_LAMBDA_SPOT_TO_SPOT_CONSOLIDATION"] = "false"
        # -c vmMemoryOverheadPercent / -c reservedENIs (Karpenter's Helm settings of those names): only when not the default
        environment.update(config.catalog_environment())

        self.functions: dict[str, KarpenterFunction] = {}
        for spec in FUNCTIONS:
            reserved = getattr(config, spec.reserved_concurrency_param) if spec.reserved_concurrency_param else spec.reserved_concurrency
            role, role_policy = own_roles.get(spec.name, (self.controller_role, policy))
            # -c schedulerConfig: the controller-role functions, which build snapshots (and may list what it needs)
            env = {**environment, **config.scheduler_environment()} if role is self.controller_role else environment
            fn = KarpenterFunction(
                self,
                spec.name.capitalize(),
                spec=spec,
                role=role,
                layer=self.layer.layer,
                environment=env,
                log_retention=retention,
                log_level=config.log_level,
                reserved_concurrency=reserved,
            )
            for trigger in spec.triggers:
                if isinstance(trigger, QueueTrigger):
                    fn.add_queue_source(
                        self.queues[trigger.queue].queue,
                        batch_size=getattr(config, trigger.batch_size_param) if trigger.batch_size_param else trigger.batch_size,
                        window_seconds=_trigger_window(trigger, config),
                        max_concurrency=getattr(config, trigger.max_concurrency_param) if trigger.max_concurrency_param else None,
                    )
                else:
                    fn.add_schedule(config.interval_minutes(trigger.interval_param))
            fn.function.node.add_dependency(role_policy)
            self.functions[spec.name] = fn

        # EKS: the functions reach the Kubernetes API through an access entry; nodes join with theirs
        access_policies = None
        groups, offpeak_groups = [CONTROLLER_KUBERNETES_GROUP], [OFFPEAK_KUBERNETES_GROUP]
        if config.kubernetes_access == "cluster-admin":
            groups = offpeak_groups = None
            access_policies = [
                eks.CfnAccessEntry.AccessPolicyProperty(
                    policy_arn=CLUSTER_ADMIN_POLICY.replace("arn:aws:", f"arn:{Aws.PARTITION}:"),
                    access_scope=eks.CfnAccessEntry.AccessScopeProperty(type="cluster"),
                )
            ]
        self.controller_access = eks.CfnAccessEntry(
            self,
            "ControllerAccessEntry",
            cluster_name=cluster,
            principal_arn=self.controller_role.role_arn,
            type="STANDARD",
            kubernetes_groups=groups,
            access_policies=access_policies,
        )
        # the off-peak role: its own Kubernetes group (infra/rbac/controller-rbac.yaml: workloads, scale, HPA/KEDA, pending
        # pods), so it can neither delete nodes nor evict pods
        self.offpeak_access = eks.CfnAccessEntry(
            self,
            "OffPeakAccessEntry",
            cluster_name=cluster,
            principal_arn=self.offpeak_role.role.role_arn,
            type="STANDARD",
            kubernetes_groups=offpeak_groups,
            access_policies=access_policies,
        )
        self.node_access = eks.CfnAccessEntry(
            self, "NodeAccessEntry", cluster_name=cluster, principal_arn=self.node_role.role.role_arn, type="EC2_LINUX"
        )

        # the watcher: Pod Identity role that can only send to the pod queue
        self.watcher_role = WatcherRole(self, "Watcher", queue_arn=pod_queue.queue_arn)
        self.watcher_association = eks.CfnPodIdentityAssociation(
            self,
            "WatcherPodIdentity",
            cluster_name=cluster,
            namespace=WATCHER_NAMESPACE,
            service_account=WATCHER_SERVICE_ACCOUNT,
            role_arn=self.watcher_role.role.role_arn,
        )
        # the watcher's image: built from watcher/ and pushed to the bootstrap ECR repository by `cdk deploy` (asset
        # publishing needs Docker then; synth does not), or an image given with -c watcherImage=...
        self.watcher_image = None
        watcher_image_uri = config.watcher_image
        if watcher_image_uri is None:
            self.watcher_image = ecr_assets.DockerImageAsset(
                self, "WatcherImage", directory=str(WATCHER_DIR),
                platform=ecr_assets.Platform.custom(config.watcher_platform))
            watcher_image_uri = self.watcher_image.image_uri

        self.node_pools = None
        if config.node_pools_dir is not None:
            self.node_pools = NodePoolManifests(self, "NodePools", cluster=cluster, folder=config.node_pools_dir, table=self.tables.state,
                                                log_retention=retention, node_role=node_role_name(cluster))

        # EventBridge Scheduler at each OffPeakSchedule window's start and end (schedules applied later with the CLI
        # are picked up by the periodic reconcile only)
        self.offpeak_schedules = None
        if self.node_pools is not None and self.node_pools.offpeak_schedules:
            from .offpeak import OffPeakSchedules

            self.offpeak_schedules = OffPeakSchedules(
                self, "OffPeakSchedules", cluster=cluster, schedules=self.node_pools.offpeak_schedules,
                function=self.functions["offpeak"].function,
                interval_minutes=config.interval_minutes("offpeakIntervalMinutes"))
        dead_letter_queues = {n: q.dlq for n, q in self.queues.items()}
        if self.offpeak_schedules is not None and self.offpeak_schedules.dlq is not None:
            dead_letter_queues["offpeakScheduler"] = self.offpeak_schedules.dlq

        from .monitoring import Monitoring

        self.monitoring = Monitoring(
            self,
            "Monitoring",
            cluster=cluster,
            functions={n: f.function for n, f in self.functions.items()},
            dead_letter_queues=dead_letter_queues,
            alarm_topic_arn=config.alarm_topic_arn,
            metric_alarms={n: (f"karpenter-lambda-{n}", spec.alarm_metrics) for spec in FUNCTIONS
                           for n in [spec.name] if spec.alarm_metrics},
            # an interruption notice is useful for 2 minutes (a spot warning's notice) and kept 5: one not consumed
            # within 2 minutes is an alarm, as it would otherwise expire without reaching the DLQ
            queue_age_alarms={"interruption": (self.queues["interruption"].queue, 120)} if "interruption" in self.queues else None,
        )

        outputs = {
            "ClusterName": (cluster, "EKS cluster this stack manages"),
            "Region": (Aws.REGION, "region of the stack (the watcher's AWS_REGION)"),
            "PodQueueUrl": (pod_queue.queue_url, "the watcher sends pending pods here (KARPENTER_LAMBDA_POD_QUEUE_URL)"),
            "InterruptionQueueUrl": (self.queues["interruption"].queue.queue_url, "EventBridge interruption events (spot, health, state)"),
            "WatcherRoleArn": (self.watcher_role.role.role_arn, f"Pod Identity role of {WATCHER_NAMESPACE}/{WATCHER_SERVICE_ACCOUNT}"),
            "WatcherNamespace": (WATCHER_NAMESPACE, "namespace of the watcher's service account"),
            "WatcherServiceAccount": (WATCHER_SERVICE_ACCOUNT, "service account bound to WatcherRoleArn"),
            "WatcherImageUri": (watcher_image_uri, "the watcher's image (karpenter-lambda watcher manifest --stack-outputs FILE)"),
            "NodeRoleName": (self.node_role.role.role_name, "use as spec.role in your EC2NodeClass"),
            "NodeInstanceProfileName": (self.node_role.instance_profile.instance_profile_name, "instance profile of the node role"),
            "ControllerRoleArn": (self.controller_role.role_arn, f"the functions' role (Kubernetes group {CONTROLLER_KUBERNETES_GROUP})"),
            "OffPeakRoleArn": (self.offpeak_role.role.role_arn, f"the off-peak function's role (Kubernetes group {OFFPEAK_KUBERNETES_GROUP})"),
            "StateTableName": (self.tables.state.table_name, "DynamoDB state table (karpenter-lambda CLI: KARPENTER_LAMBDA_STATE_TABLE)"),
            "CacheTableName": (self.tables.cache.table_name, "DynamoDB cache table"),
            "DashboardName": (self.monitoring.dashboard.dashboard_name, "CloudWatch dashboard"),
        }
        for key, (value, description) in outputs.items():
            CfnOutput(self, key, value=value, description=description)

        acknowledge_node_role(self.node_role.role)
        acknowledge_controller(policy, self.controller_role.node.try_find_child("DefaultPolicy"))
        acknowledge_offpeak(self.offpeak_role.role.node.try_find_child("DefaultPolicy"),
                            self.offpeak_schedules.dlq if self.offpeak_schedules is not None else None)
        acknowledge_custom_resource_provider(self)


def _trigger_window(trigger: QueueTrigger, config: StackConfig) -> int:
    return getattr(config, trigger.window_param) if trigger.window_param else trigger.window_seconds


_RETENTION_NAMES = (
    "ONE_DAY", "THREE_DAYS", "FIVE_DAYS", "ONE_WEEK", "TWO_WEEKS", "ONE_MONTH", "TWO_MONTHS", "THREE_MONTHS",
    "FOUR_MONTHS", "FIVE_MONTHS", "SIX_MONTHS", "ONE_YEAR", "THIRTEEN_MONTHS", "EIGHTEEN_MONTHS", "TWO_YEARS",
    "THREE_YEARS", "FIVE_YEARS", "SIX_YEARS", "SEVEN_YEARS", "EIGHT_YEARS", "NINE_YEARS", "TEN_YEARS",
)


def _retention(days: int) -> logs.RetentionDays:
    """RetentionDays member for a number of days (config.LOG_RETENTION_DAYS, same order)."""
    return getattr(logs.RetentionDays, dict(zip(LOG_RETENTION_DAYS, _RETENTION_NAMES))[days])
