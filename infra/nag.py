"""cdk-nag (AwsSolutions) acknowledgements: every one names its finding and gives the reason.

cdk-nag 3 reports each finding separately (``AwsSolutions-IAM5[Resource::...]``) and has no
prefix matching, so each wildcard resource is acknowledged on its own, on the construct that
holds it.  The reasons are the design: see docs/deploy.md "IAM".
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct

from .iam import NODE_MANAGED_POLICIES

PACK = "AwsSolutions::"
EC2 = "arn:<AWS::Partition>:ec2:<AWS::Region>:"

# resource pattern (as cdk-nag prints it) -> why the wildcard is needed and what bounds it
CONTROLLER_WILDCARDS = {
    "*": "EC2 Describe* calls and pricing:GetProducts support no resource-level permissions; the actions are named one by one and EC2 reads are limited to this region by aws:RequestedRegion",
    f"{EC2}:image/*": "RunInstances/CreateFleet read the AMI chosen by the EC2NodeClass selector at run time (public or account AMIs); images carry no request tags (same as Karpenter)",
    f"{EC2}:snapshot/*": "RunInstances/CreateFleet read the snapshots behind the AMI's block devices; they carry no request tags (same as Karpenter)",
    f"{EC2}*:security-group/*": "security groups are chosen by the EC2NodeClass selector at run time; launches only attach them (same as Karpenter)",
    f"{EC2}*:subnet/*": "subnets are chosen by the EC2NodeClass selector at run time; launches only place instances in them (same as Karpenter)",
    f"{EC2}*:capacity-reservation/*": "capacity reservations are chosen by the EC2NodeClass selector at run time; launches only consume them",
    f"{EC2}*:placement-group/*": "the placement group is chosen by the EC2NodeClass placementGroupSelector at run time; launches only place instances in it (same as Karpenter)",
    f"{EC2}*:launch-template/*": "launch templates are created per EC2NodeClass and shape at run time; creation and deletion require the tags kubernetes.io/cluster/<cluster>=owned and karpenter.k8s.aws/ec2nodeclass, use the owned tag",
    f"{EC2}*:fleet/*": "fleets are created at run time; allowed only with the request tags kubernetes.io/cluster/<cluster>=owned and karpenter.sh/nodepool",
    f"{EC2}*:instance/*": "instances are created at run time; creation needs the request tags kubernetes.io/cluster/<cluster>=owned, karpenter.sh/nodepool and karpenter-lambda.io/cluster=<cluster>, termination the same resource tags, re-tagging owned + nodepool",
    f"{EC2}*:volume/*": "volumes are created with the instances; allowed only with the request tags kubernetes.io/cluster/<cluster>=owned and karpenter.sh/nodepool",
    f"{EC2}*:network-interface/*": "network interfaces are created with the instances from the launch template's tags; allowed only with the request tags kubernetes.io/cluster/<cluster>=owned and karpenter.k8s.aws/ec2nodeclass",
    f"{EC2}*:spot-instances-request/*": "spot requests are created by CreateFleet for spot capacity from the launch template's tags; allowed only with the request tags kubernetes.io/cluster/<cluster>=owned and karpenter.k8s.aws/ec2nodeclass",
    "arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/*": "one instance profile per EC2NodeClass is created at run time (as Karpenter does); create/tag/add-role/delete require this cluster's kubernetes.io/cluster tag, the region tag and the ec2nodeclass tag, and iam:PassRole is limited to the node role",
    "arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/*": "read-only access to AWS public parameters (EKS optimized AMI IDs by version); nothing in the account is readable",
}


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=PACK + rule, reason=reason))


def acknowledge_node_role(role: IConstruct) -> None:
    for name in NODE_MANAGED_POLICIES:
        acknowledge(
            role,
            f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]",
            f"{name} is the AWS managed policy EKS documents for worker nodes (kubelet, VPC CNI, ECR pulls, SSM access); AWS keeps it in step with EKS",
        )


def acknowledge_controller(policy: IConstruct, default_policy: IConstruct | None) -> None:
    for resource, reason in CONTROLLER_WILDCARDS.items():
        acknowledge(policy, f"AwsSolutions-IAM5[Resource::{resource}]", reason)
    if default_policy is not None:
        acknowledge(
            default_policy,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level permissions",
        )


def acknowledge_custom_resource_provider(stack: Stack) -> None:
    """The AwsCustomResource provider (nodePools writer) is a CDK singleton function with CDK's own role."""
    provider = stack.node.try_find_child("AWS679f53fac002430cb0da5b7982bd2287")
    if provider is None:
        return
    acknowledge(
        provider,
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
        "CDK's AwsCustomResource provider function uses the basic execution role for its logs; it only runs during deployments",
    )


def acknowledge_offpeak(default_policy: IConstruct | None, scheduler_dlq: IConstruct | None) -> None:
    """The off-peak function's role (X-Ray, as the controller's) and the EventBridge Scheduler dead-letter queue."""
    if default_policy is not None:
        acknowledge(
            default_policy,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level permissions",
        )
    if scheduler_dlq is not None:
        acknowledge(
            scheduler_dlq,
            "AwsSolutions-SQS3",
            "this queue is the dead-letter queue of the off-peak EventBridge Scheduler schedules (Target.DeadLetterConfig); "
            "cdk-nag only recognises SQS redrive policies as dead-letter use",
        )
