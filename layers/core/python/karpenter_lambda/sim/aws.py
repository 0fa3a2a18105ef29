"""The simulated AWS account (in-process moto): what a real cluster's account would already hold.

``SimAccount(cluster, region, k8s_version).create(nodeclasses, kube_url)`` seeds, inside an active
``moto.mock_aws``:

* a VPC with one subnet per zone (us-east-1a..c by default) and a security group, tagged so that the
  EC2NodeClasses' selector terms match (every ``tags`` term is honoured with ``*`` -> ``sim``; ``name``
  terms create groups of that name; ``id`` terms cannot be honoured: moto picks ids);
* the node IAM role of each EC2NodeClass (``spec.role``) and the instance profile it names;
* EKS-optimized AMIs behind the SSM alias parameters (``ssm_seed.seed_eks_amis``), plus an image for
  every ``name``/``tags`` AMI selector term;
* an EKS cluster (``eks:DescribeCluster`` works) whose endpoint is the local Kubernetes API URL;
* the state and cache DynamoDB tables and the SQS pod queue (with a DLQ);
* EC2 as EC2 behaves where moto does not (:mod:`.moto_ec2`): ClientToken idempotency of CreateFleet/RunInstances and
  DescribeInstances' eventual consistency (a launched instance invisible for ``ec2_visibility_delay`` virtual seconds,
  :data:`DEFAULT_EC2_VISIBILITY_DELAY` unless set, as in ``simulate``; its loop finds the instances to join in moto's
  backend, as a kubelet does not wait for DescribeInstances).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import boto3

from ..adapters.aws import amis, ssm_seed
from ..adapters.aws.unavailable import UnavailableOfferings
from ..adapters.store import Store
from ..catalog.zones import DEFAULT_ZONE_SUFFIXES
from . import ec2_extras, moto_ec2

FAKE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nc2ltdWxhdGVkIGNsdXN0ZXIgQ0E=\n-----END CERTIFICATE-----\n").decode()


INITIAL_AMI_RELEASE = "v20250101"  # the EKS AMI release every family starts with (a pinned alias can name it)
# seconds a launched instance stays invisible to DescribeInstances (EC2's eventual consistency; a few seconds)
DEFAULT_EC2_VISIBILITY_DELAY = 5.0
AMI_FAMILIES = ("al2023", "al2", "bottlerocket", "windows2019", "windows2022", "windows2025")


@dataclass
class SimAccount:
    cluster: str
    region: str = "us-east-1"
    k8s_version: str = "1.31"
    zones: tuple[str, ...] = DEFAULT_ZONE_SUFFIXES
    state_table: str = "karpenter-lambda-state"
    cache_table: str = "karpenter-lambda-cache"
    node_role: str = "KarpenterNodeRole-sim"
    vpc_id: str | None = None
    subnet_ids: list[str] = field(default_factory=list)
    queue_url: str | None = None
    interruption_queue_url: str | None = None
    dlq_url: str | None = None
    ec2_visibility_delay: float = DEFAULT_EC2_VISIBILITY_DELAY

    _clients: dict = field(default_factory=dict, repr=False, compare=False)   # service -> client, made once

    def client(self, service: str):
        c = self._clients.get(service)
        if c is None:
            c = self._clients[service] = boto3.client(service, region_name=self.region)
        return c

    # ------------------------------------------------------------------------------------------
    def create(self, nodeclasses, kube_url: str) -> "SimAccount":
        moto_ec2.enable(self.region, self.ec2_visibility_delay)
        ec2_extras.install()   # capacity reservations and placement groups, which moto lacks
        ec2 = self.client("ec2")
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        self.vpc_id = vpc
        subnet_tags, sg_terms = self._selector_tags(nodeclasses)
        for i, z in enumerate(self.zones):
            sub = ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i * 32}.0/19", AvailabilityZone=f"{self.region}{z}")["Subnet"]
            self.subnet_ids.append(sub["SubnetId"])
            tags = {"Name": f"{self.cluster}-private-{self.region}{z}", "karpenter.sh/discovery": self.cluster, **subnet_tags}
            ec2.create_tags(Resources=[sub["SubnetId"]], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
        sg_names = {t["name"] for t in sg_terms if t.get("name")} or set()
        sg_tags = {}
        for t in sg_terms:
            sg_tags.update({k: ("sim" if v == "*" else v) for k, v in (t.get("tags") or {}).items()})
        groups = sorted(sg_names) or [f"{self.cluster}-node"]
        for name in groups:
            sg = ec2.create_security_group(GroupName=name, Description="simulated node security group", VpcId=vpc)["GroupId"]
            tags = {"karpenter.sh/discovery": self.cluster, **sg_tags}
            ec2.create_tags(Resources=[sg], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
        self._iam(nodeclasses)
        self._amis(nodeclasses)
        self._eks(kube_url)
        self._tables()
        self._queues()
        return self

    def _selector_tags(self, nodeclasses):
        subnet_tags: dict[str, str] = {}
        sg_terms: list[dict] = []
        for nc in nodeclasses:
            for t in nc.spec.get("subnetSelectorTerms") or []:
                subnet_tags.update({k: ("sim" if v == "*" else v) for k, v in (t.get("tags") or {}).items()})
            sg_terms.extend(nc.spec.get("securityGroupSelectorTerms") or [])
        return subnet_tags, sg_terms

    def _iam(self, nodeclasses) -> None:
        iam = self.client("iam")
        trust = json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
        roles = {self.node_role} | {nc.spec["role"] for nc in nodeclasses if nc.spec.get("role")}
        for role in sorted(roles):
            iam.create_role(RoleName=role, AssumeRolePolicyDocument=trust)
        for nc in nodeclasses:
            prof = nc.spec.get("instanceProfile")
            if prof:
                iam.create_instance_profile(InstanceProfileName=prof)
                iam.add_role_to_instance_profile(InstanceProfileName=prof, RoleName=self.node_role)

    def _amis(self, nodeclasses) -> None:
        ssm_seed.seed_eks_amis(self.k8s_version, self.region, release=INITIAL_AMI_RELEASE)
        self.ami_releases = {fam: INITIAL_AMI_RELEASE for fam in AMI_FAMILIES}
        for fam in AMI_FAMILIES:
            self._pin(fam, INITIAL_AMI_RELEASE)
        for nc in nodeclasses:
            for term in nc.spec.get("amiSelectorTerms") or []:
                if term.get("alias") or term.get("id") or term.get("ssmParameter"):
                    continue
                name = (term.get("name") or f"{nc.name}-custom-ami").replace("*", "sim")
                tags = {k: ("sim" if v == "*" else v) for k, v in (term.get("tags") or {}).items()}
                for arch in ("x86_64", "arm64"):
                    ssm_seed.add_image(self.region, name=f"{name}" if arch == "x86_64" else f"{name}-arm64", arch=arch,
                                       owner_id=term.get("owner") if (term.get("owner") or "").isdigit() else None,
                                       owner_alias="self", creation_date="2025-06-01T00:00:00Z", tags=tags)

    def _pin(self, family: str, release: str) -> None:
        """The pinned alias ``family@release`` resolves to the images ``@latest`` has now (as AWS publishes both)."""
        if family.startswith("windows"):
            return  # Windows aliases are @latest only
        latest = amis.alias_parameters(family, self.k8s_version, "latest")
        pinned = amis.alias_parameters(family, self.k8s_version, release)
        ssm = self.client("ssm")
        for (lpath, _a, _v), (ppath, _a2, _v2) in zip(latest, pinned):
            image = ssm.get_parameter(Name=lpath)["Parameter"]["Value"]
            ssm_seed.put_public_parameter(ppath, image, self.region)

    def release_ami(self, family: str) -> str:
        """Publish the next EKS-optimized AMI release of ``family`` behind its ``@latest`` alias; returns the release.

        Releases count up from ``v20250101`` by one day; older pinned releases keep resolving to their images."""
        current = datetime.strptime(self.ami_releases[family], "v%Y%m%d")
        nxt = (current + timedelta(days=1)).strftime("v%Y%m%d")
        ssm_seed.seed_eks_amis(self.k8s_version, self.region, families=(family,), release=nxt,
                               creation_date=(current + timedelta(days=1)).strftime("%Y-%m-%dT00:00:00Z"))
        self.ami_releases[family] = nxt
        self._pin(family, nxt)
        return nxt

    def _eks(self, kube_url: str) -> None:
        # moto is the [sim] extra: imported when an account is created, not with the module (see environment.py)
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.eks.models import eks_backends

        iam = self.client("iam")
        trust = json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
        role = iam.create_role(RoleName=f"{self.cluster}-cluster-role", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
        eks = self.client("eks")
        eks.create_cluster(name=self.cluster, version=self.k8s_version, roleArn=role,
                           resourcesVpcConfig={"subnetIds": self.subnet_ids},
                           kubernetesNetworkConfig={"serviceIpv4Cidr": "172.20.0.0/16", "ipFamily": "ipv4"})
        cluster = eks_backends[DEFAULT_ACCOUNT_ID][self.region].clusters[self.cluster]
        cluster.endpoint = kube_url  # the local Kubernetes API answers for the "EKS" cluster
        cluster.certificate_authority = {"data": FAKE_CA}

    def _tables(self) -> None:
        Store(self.cluster, table_name=self.state_table, region=self.region).ensure_table()
        UnavailableOfferings(table_name=self.cache_table, region=self.region, cluster_name=self.cluster).ensure_table()

    def _queues(self) -> None:
        sqs = self.client("sqs")
        self.dlq_url = sqs.create_queue(QueueName=f"{self.cluster}-pods-dlq")["QueueUrl"]
        self.queue_url = sqs.create_queue(QueueName=f"{self.cluster}-pods",
                                          Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
        # EventBridge -> interruption handler (the CDK stack: 300 s retention)
        self.interruption_queue_url = sqs.create_queue(QueueName=f"{self.cluster}-interruptions",
                                                       Attributes={"MessageRetentionPeriod": "300"})["QueueUrl"]

    def environment(self) -> dict[str, str]:
        """Environment variables the functions read (as the CDK stack would set them)."""
        return {
            "KARPENTER_LAMBDA_CLUSTER": self.cluster,
            "KARPENTER_LAMBDA_STATE_TABLE": self.state_table,
            "KARPENTER_LAMBDA_CACHE_TABLE": self.cache_table,
            "KARPENTER_LAMBDA_POD_QUEUE_URL": self.queue_url or "",
            "KARPENTER_LAMBDA_NODE_ROLE": self.node_role,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            "POWERTOOLS_SERVICE_NAME": "karpenter-lambda-sim",
            "POWERTOOLS_METRICS_NAMESPACE": "KarpenterLambda",
            "POWERTOOLS_TRACE_DISABLED": "true",
            # the instance catalog from moto's data files directly (identical to DescribeInstanceTypes through moto,
            # seconds faster; adapters/aws/moto_catalog.py)
            "KARPENTER_LAMBDA_CATALOG_SOURCE": "moto-bundled",
            "KARPENTER_LAMBDA_ESTIMATED_PRICES": "available",  # moto has no real spot prices: launch on estimates
        }
