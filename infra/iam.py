"""IAM for karpenter-lambda, modelled on Karpenter's controller policy (least privilege, no ``*`` action).

* the **controller role** (all functions but off-peak): EC2 create actions only with the request tags
  ``kubernetes.io/cluster/<cluster>=owned`` and ``karpenter.sh/nodepool`` (instances also this deployment's
  ``karpenter-lambda.io/cluster=<cluster>``), termination and re-tagging only on instances carrying them,
  ``iam:PassRole`` only on the node role and only to EC2, SSM public parameters, pricing, this
  cluster's ``eks:DescribeCluster``; table and queue grants are added by the stack;
* the **node role** (+ instance profile) the launched instances use;
* the **watcher role** (EKS Pod Identity) that may only ``sqs:SendMessage`` to the pod queue.
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from constructs import Construct

from karpenter_lambda.api import labels as wk
from karpenter_lambda.api import roles

NODE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonSSMManagedInstanceCore",
)
# EC2 describe calls do not support resource-level permissions: they are granted on "*" (named actions only).
EC2_READ_ACTIONS = (
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceStatus",   # the lifecycle sweep's instance status checks (controllers/instance_health.py)
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribePlacementGroups",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
)
# tag keys the controller may add to an instance after launch (AllowScopedResourceTagging)
RETAG_KEYS = ("karpenter.sh/nodeclaim", "Name")
REGION_TAG = "topology.kubernetes.io/region"
NODECLASS_TAG = wk.EC2NODECLASS
NODEPOOL_TAG = wk.NODEPOOL
OWNER_TAG = wk.OWNER_TAG
# resource types a launch creates, by where their tags come from: the CreateFleet request (adapters/aws/fleet.py:
# instance, volume, fleet) or the launch template's data (adapters/aws/launch_templates.py)
FLEET_TAGGED = ("instance/*", "volume/*", "fleet/*")
TEMPLATE_TAGGED = ("network-interface/*", "spot-instances-request/*")


def owned_tag(cluster: str) -> str:
    return f"kubernetes.io/cluster/{cluster}"


def ec2_arn(resource: str, *, account: bool = True) -> str:
    """``arn:<partition>:ec2:<region>:*:<resource>`` (or with an empty account for public images/snapshots)."""
    return f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{'*' if account else ''}:{resource}"


def controller_statements(cluster: str, node_role_arn: str) -> list[iam.PolicyStatement]:
    """The controller's EC2/IAM/SSM/pricing/EKS statements (tables and queues are granted separately).

    As Karpenter's controller policy, what is created, tagged or terminated must carry (in the request, resp. on the
    resource) ``kubernetes.io/cluster/<cluster>=owned`` *and* a ``karpenter.sh/nodepool`` tag, so instances of
    managed node groups (which carry the owned tag too) are out of reach.  Instances must also carry this
    deployment's own :data:`OWNER_TAG` with the cluster name, so it can never terminate an upstream Karpenter's nodes
    of the same cluster.  Launch templates, and the network interfaces and spot requests that take their tags from a
    launch template, are per EC2NodeClass here (shared by NodePools), so they are scoped by the
    ``karpenter.k8s.aws/ec2nodeclass`` tag instead of the NodePool's.
    """
    tag = owned_tag(cluster)
    profiles = f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:instance-profile/*"
    instance = [ec2_arn("instance/*")]
    with_fleet = [ec2_arn(r) for r in FLEET_TAGGED if r != "instance/*"]
    with_template = [ec2_arn(r) for r in TEMPLATE_TAGGED]
    launches = ["RunInstances", "CreateFleet"]
    request_owned = {f"aws:RequestTag/{tag}": "owned"}
    request_nodepool = {"StringLike": {f"aws:RequestTag/{NODEPOOL_TAG}": "*"}}
    request_nodeclass = {"StringLike": {f"aws:RequestTag/{NODECLASS_TAG}": "*"}}
    request_owner = {f"aws:RequestTag/{OWNER_TAG}": cluster}
    return [
        # Resources a launch reads but does not create and that carry no request tags.
        iam.PolicyStatement(
            sid="AllowScopedEC2InstanceAccessActions",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=[
                ec2_arn("image/*", account=False),
                ec2_arn("snapshot/*", account=False),
                ec2_arn("security-group/*"),
                ec2_arn("subnet/*"),
                ec2_arn("capacity-reservation/*"),
                ec2_arn("placement-group/*"),
            ],
        ),
        # Launch templates are used only when this cluster created them (they carry the owned tag).
        iam.PolicyStatement(
            sid="AllowScopedEC2LaunchTemplateAccessActions",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=[ec2_arn("launch-template/*")],
            conditions={"StringEquals": {f"aws:ResourceTag/{tag}": "owned"}},
        ),
        # What a launch creates must be tagged in the same request: instances as owned by this cluster, by a NodePool
        # and by this deployment (OWNER_TAG = the cluster name) ...
        iam.PolicyStatement(
            sid="AllowScopedEC2InstanceActionsWithTags",
            actions=[f"ec2:{a}" for a in launches],
            resources=instance,
            conditions={"StringEquals": {**request_owned, **request_owner}, **request_nodepool},
        ),
        # ... the fleet and the volumes with the instance's tags (owned + NodePool) ...
        iam.PolicyStatement(
            sid="AllowScopedEC2FleetResourceActionsWithTags",
            actions=[f"ec2:{a}" for a in launches],
            resources=with_fleet,
            conditions={"StringEquals": request_owned, **request_nodepool},
        ),
        # ... network interfaces and spot requests with their launch template's tags (owned + EC2NodeClass) ...
        iam.PolicyStatement(
            sid="AllowScopedEC2TemplateResourceActionsWithTags",
            actions=[f"ec2:{a}" for a in launches],
            resources=with_template,
            conditions={"StringEquals": request_owned, **request_nodeclass},
        ),
        # ... and launch templates (owned + EC2NodeClass).
        iam.PolicyStatement(
            sid="AllowScopedEC2LaunchTemplateCreation",
            actions=["ec2:CreateLaunchTemplate"],
            resources=[ec2_arn("launch-template/*")],
            conditions={"StringEquals": request_owned, **request_nodeclass},
        ),
        # Tag-on-create for the same requests, with the same tags.
        iam.PolicyStatement(
            sid="AllowScopedResourceCreationTagging",
            actions=["ec2:CreateTags"],
            resources=instance,
            conditions={"StringEquals": {**request_owned, **request_owner, "ec2:CreateAction": launches},
                        **request_nodepool},
        ),
        iam.PolicyStatement(
            sid="AllowScopedFleetResourceCreationTagging",
            actions=["ec2:CreateTags"],
            resources=with_fleet,
            conditions={"StringEquals": {**request_owned, "ec2:CreateAction": launches}, **request_nodepool},
        ),
        iam.PolicyStatement(
            sid="AllowScopedTemplateResourceCreationTagging",
            actions=["ec2:CreateTags"],
            resources=[*with_template, ec2_arn("launch-template/*")],
            conditions={"StringEquals": {**request_owned, "ec2:CreateAction": [*launches, "CreateLaunchTemplate"]},
                        **request_nodeclass},
        ),
        # Later tagging of an instance this deployment launched for a NodePool (owned, nodepool and this deployment's
        # OWNER_TAG, as the termination below: never an upstream Karpenter's or a managed node group's instance),
        # only with the NodeClaim name / Name keys.
        iam.PolicyStatement(
            sid="AllowScopedResourceTagging",
            actions=["ec2:CreateTags"],
            resources=instance,
            conditions={
                "StringEquals": {f"aws:ResourceTag/{tag}": "owned", f"aws:ResourceTag/{OWNER_TAG}": cluster},
                "StringLike": {f"aws:ResourceTag/{NODEPOOL_TAG}": "*"},
                "ForAllValues:StringEquals": {"aws:TagKeys": list(RETAG_KEYS)},
            },
        ),
        # Termination: only instances this deployment launched for a NodePool of this cluster.
        iam.PolicyStatement(
            sid="AllowScopedDeletion",
            actions=["ec2:TerminateInstances"],
            resources=instance,
            conditions={
                "StringEquals": {f"aws:ResourceTag/{tag}": "owned", f"aws:ResourceTag/{OWNER_TAG}": cluster},
                "StringLike": {f"aws:ResourceTag/{NODEPOOL_TAG}": "*"},
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedLaunchTemplateDeletion",
            actions=["ec2:DeleteLaunchTemplate"],
            resources=[ec2_arn("launch-template/*")],
            conditions={
                "StringEquals": {f"aws:ResourceTag/{tag}": "owned"},
                "StringLike": {f"aws:ResourceTag/{NODECLASS_TAG}": "*"},
            },
        ),
        iam.PolicyStatement(
            sid="AllowRegionalReadActions",
            actions=list(EC2_READ_ACTIONS),
            resources=["*"],
            conditions={"StringEquals": {"aws:RequestedRegion": Aws.REGION}},
        ),
        iam.PolicyStatement(
            sid="AllowSSMReadActions",
            actions=["ssm:GetParameter", "ssm:GetParameters"],   # an alias's parameters in one GetParameters call
            resources=[f"arn:{Aws.PARTITION}:ssm:{Aws.REGION}::parameter/aws/service/*"],
        ),
        # The Price List API has no resource-level permissions.
        iam.PolicyStatement(sid="AllowPricingReadActions", actions=["pricing:GetProducts"], resources=["*"]),
        iam.PolicyStatement(
            sid="AllowPassingInstanceRole",
            actions=["iam:PassRole"],
            resources=[node_role_arn],
            # the EC2 service principal is ec2.amazonaws.com.cn in the China regions (as Karpenter's policy lists)
            conditions={"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}},
        ),
        # EC2NodeClass spec.role: an instance profile per EC2NodeClass, created and changed only with this
        # cluster's and region's tags (adapters/aws/nodeclass_resolver.py), as Karpenter does.
        iam.PolicyStatement(
            sid="AllowScopedInstanceProfileCreationActions",
            actions=["iam:CreateInstanceProfile"],
            resources=[profiles],
            conditions={
                "StringEquals": {f"aws:RequestTag/{tag}": "owned", f"aws:RequestTag/{REGION_TAG}": Aws.REGION},
                "StringLike": {f"aws:RequestTag/{NODECLASS_TAG}": "*"},
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedInstanceProfileTagActions",
            actions=["iam:TagInstanceProfile"],
            resources=[profiles],
            conditions={
                "StringEquals": {
                    f"aws:ResourceTag/{tag}": "owned",
                    f"aws:ResourceTag/{REGION_TAG}": Aws.REGION,
                    f"aws:RequestTag/{tag}": "owned",
                    f"aws:RequestTag/{REGION_TAG}": Aws.REGION,
                },
                "StringLike": {f"aws:ResourceTag/{NODECLASS_TAG}": "*", f"aws:RequestTag/{NODECLASS_TAG}": "*"},
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedInstanceProfileActions",
            actions=["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
            resources=[profiles],
            conditions={
                "StringEquals": {f"aws:ResourceTag/{tag}": "owned", f"aws:ResourceTag/{REGION_TAG}": Aws.REGION},
                "StringLike": {f"aws:ResourceTag/{NODECLASS_TAG}": "*"},
            },
        ),
        iam.PolicyStatement(sid="AllowInstanceProfileReadActions", actions=["iam:GetInstanceProfile"], resources=[profiles]),
        iam.PolicyStatement(sid="AllowNodeRoleReadActions", actions=["iam:GetRole"], resources=[node_role_arn]),
        iam.PolicyStatement(
            sid="AllowAPIServerEndpointDiscovery",
            actions=["eks:DescribeCluster"],
            resources=[cluster_arn(cluster)],
        ),
    ]


def cluster_arn(cluster: str) -> str:
    return f"arn:{Aws.PARTITION}:eks:{Aws.REGION}:{Aws.ACCOUNT_ID}:cluster/{cluster}"


# KarpenterLambdaNode-<cluster> (None past IAM's 64 characters): one definition, shared with `validate`
node_role_name = roles.node_role_name


class NodeRole(Construct):
    """The role of the nodes karpenter-lambda launches, and its instance profile: ``role``, ``instance_profile``."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster: str) -> None:
        super().__init__(scope, construct_id)
        name = node_role_name(cluster)
        self.role = iam.Role(
            self,
            "Role",
            role_name=name,
            description=f"karpenter-lambda nodes of EKS cluster {cluster}",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(n) for n in NODE_MANAGED_POLICIES],
        )
        self.instance_profile = iam.InstanceProfile(self, "InstanceProfile", role=self.role, instance_profile_name=name)


class WatcherRole(Construct):
    """The in-cluster watcher's role (EKS Pod Identity): it may only send messages to the pod queue."""

    def __init__(self, scope: Construct, construct_id: str, *, queue_arn: str) -> None:
        super().__init__(scope, construct_id)
        # SessionTagsPrincipal adds sts:TagSession next to sts:AssumeRole, as Pod Identity requires.
        self.role = iam.Role(
            self,
            "Role",
            description="karpenter-lambda watcher (EKS Pod Identity): sqs:SendMessage on the pod queue only",
            assumed_by=iam.SessionTagsPrincipal(iam.ServicePrincipal("pods.eks.amazonaws.com")),
        )
        self.role.add_to_policy(iam.PolicyStatement(sid="SendPendingPods", actions=["sqs:SendMessage"], resources=[queue_arn]))


# the off-peak function's DynamoDB access: per partition of the state table (partition key ``<cluster>#<Kind>``,
# adapters/store/state.py), only the item actions its code uses there (pynamodb get/query/save/delete): its
# schedules (status) and its records (deleted when a window ends), the NodePools it overrides and the NodeClaims it
# drains.  A drain only marks a NodeClaim deleting (an update: PutItem with the version condition): no DeleteItem on
# NodeClaims (a deleted record would leave its instance to the orphan GC, terminated without a drain) nor on
# NodePools or schedules.  Never the EC2NodeClasses (userData), launch reservations or usage.  No Scan:
# dynamodb:LeadingKeys does not apply to it.
_READ_WRITE = ("dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem")
OFFPEAK_TABLE_ACCESS: dict[str, tuple[str, ...]] = {
    "OffPeakSchedule": _READ_WRITE,
    "OffPeakRecord": (*_READ_WRITE, "dynamodb:DeleteItem"),
    "NodePool": _READ_WRITE,
    "NodeClaim": _READ_WRITE,
}
OFFPEAK_STATE_KINDS = tuple(OFFPEAK_TABLE_ACCESS)
OFFPEAK_TABLE_ACTIONS = tuple(sorted({a for acts in OFFPEAK_TABLE_ACCESS.values() for a in acts}))


def offpeak_leading_keys(cluster: str, kinds=OFFPEAK_STATE_KINDS) -> list[str]:
    return [f"{cluster}#{kind}" for kind in kinds]


def offpeak_table_statements(cluster: str, state_table_arn: str) -> list[iam.PolicyStatement]:
    """One statement per distinct action set of :data:`OFFPEAK_TABLE_ACCESS`, each on its partitions only
    (``OffPeakStateItems``: read and update; ``OffPeakRecordDeletion``: also delete, its own records only)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for kind, actions in OFFPEAK_TABLE_ACCESS.items():
        groups.setdefault(tuple(actions), []).append(kind)
    out = []
    for actions, kinds in groups.items():
        sid = "OffPeakRecordDeletion" if "dynamodb:DeleteItem" in actions else "OffPeakStateItems"
        out.append(iam.PolicyStatement(
            sid=sid, actions=list(actions), resources=[state_table_arn],
            conditions={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": offpeak_leading_keys(cluster, kinds)}}))
    return out


class OffPeakRole(Construct):
    """The off-peak function's own role: it scales workloads through the Kubernetes API and keeps its records and
    the NodePool overrides in the state table, so it gets no EC2, IAM, SSM or pricing access at all.

    Here: ``eks:DescribeCluster`` on this cluster (the API server endpoint), ``sqs:SendMessage`` on the pod queue
    (the morning hand-off of pending pods, SendMessageBatch) and, per partition of the state table,
    :data:`OFFPEAK_TABLE_ACCESS` only; the function construct adds its log group and X-Ray.  Kubernetes
    access: its own access entry group (``infra/rbac/controller-rbac.yaml``).
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster: str, pod_queue_arn: str,
                 state_table_arn: str) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            description=f"karpenter-lambda off-peak function of EKS cluster {cluster}",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        )
        self.policy = iam.Policy(self, "Policy", roles=[self.role], statements=[
            iam.PolicyStatement(sid="AllowAPIServerEndpointDiscovery", actions=["eks:DescribeCluster"],
                                resources=[cluster_arn(cluster)]),
            iam.PolicyStatement(sid="SendPendingPods", actions=["sqs:SendMessage"], resources=[pod_queue_arn]),
            *offpeak_table_statements(cluster, state_table_arn),
        ])
