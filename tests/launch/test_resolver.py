"""EC2NodeClass resolution against moto: subnets, security groups, AMIs, instance profile, status."""

import pytest

from karpenter_lambda.adapters.aws.amis import AMIProvider, alias_parameters, requirements_met, sort_amis, AMI
from karpenter_lambda.adapters.aws.nodeclass_resolver import NodeClassNotReady, default_block_device_mappings
from karpenter_lambda.adapters.aws.ssm_seed import add_image, seed_eks_amis
from karpenter_lambda.catalog.types import InstanceType

from .conftest import CLUSTER, K8S, REGION, nodeclass, resolver

AMD = {"kubernetes.io/arch": "amd64"}
ARM = {"kubernetes.io/arch": "arm64"}
GPU = {"kubernetes.io/arch": "amd64", "karpenter.k8s.aws/instance-gpu-count": "1"}
ARM_GPU = {"kubernetes.io/arch": "arm64", "karpenter.k8s.aws/instance-gpu-count": "1"}
NEURON = {"kubernetes.io/arch": "amd64", "karpenter.k8s.aws/instance-accelerator-count": "1"}


# -- subnets --------------------------------------------------------------------------------
def test_subnets_by_tag_sorted_by_free_ips(env):
    r = resolver(env).resolve(nodeclass())
    ids = [s["id"] for s in r.subnets]
    assert ids == [env.subnets["a-big"]["id"], env.subnets["b"]["id"], env.subnets["a-small"]["id"]]
    assert [s["available_ips"] for s in r.subnets] == sorted((s["available_ips"] for s in r.subnets), reverse=True)
    assert all(s["zone_id"] for s in r.subnets)
    # one subnet per zone: the one with most free IPs
    by_zone = r.subnets_by_zone()
    assert by_zone["us-east-1a"]["id"] == env.subnets["a-big"]["id"]
    assert set(by_zone) == {"us-east-1a", "us-east-1b"}


def test_subnet_terms_are_ored_and_ids_work_and_wildcard_matches_any_value(env):
    nc = nodeclass(subnetSelectorTerms=[{"id": env.subnets["c"]["id"]}, {"tags": {"tier": "public"}}])
    ids = {s["id"] for s in resolver(env).resolve(nc).subnets}
    assert ids == {env.subnets["c"]["id"], env.subnets["b"]["id"]}
    nc = nodeclass(subnetSelectorTerms=[{"tags": {"tier": "*"}}])
    assert len(resolver(env).resolve(nc).subnets) == 3
    # tags in one term are ANDed
    nc = nodeclass(subnetSelectorTerms=[{"tags": {"tier": "private", "karpenter.sh/discovery": CLUSTER}}])
    assert {s["id"] for s in resolver(env).resolve(nc).subnets} == {env.subnets["a-big"]["id"], env.subnets["a-small"]["id"]}


# -- security groups ------------------------------------------------------------------------
def test_security_groups_by_tags_id_and_name(env):
    nc = nodeclass(securityGroupSelectorTerms=[{"tags": {"karpenter.sh/discovery": CLUSTER}}, {"name": "plain"}, {"id": env.sgs["extra"]}])
    r = resolver(env).resolve(nc)
    assert {g["id"] for g in r.security_groups} == {env.sgs["nodes"], env.sgs["plain"], env.sgs["extra"]}
    assert {g["name"] for g in r.security_groups} == {"nodes", "plain", "extra"}
    nc = nodeclass(securityGroupSelectorTerms=[{"tags": {"team": "*"}}])
    assert [g["id"] for g in resolver(env).resolve(nc).security_groups] == [env.sgs["extra"]]


# -- AMIs by alias --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "alias,amd,arm,gpu,arm_gpu,neuron",
    [
        ("al2023@latest", "x86_64-standard", "arm64-standard", "x86_64-nvidia", "arm64-nvidia", "x86_64-neuron"),
        ("al2@latest", "amazon-eks-node-", "amazon-eks-arm64-node-", "amazon-eks-gpu-node-", None, "amazon-eks-gpu-node-"),
        ("bottlerocket@latest", "k8s-1.31-x86_64", "k8s-1.31-arm64", "k8s-1.31-nvidia-x86_64", "k8s-1.31-nvidia-arm64", "k8s-1.31-x86_64"),
    ],
)
def test_alias_resolves_per_arch_and_variant(env, alias, amd, arm, gpu, arm_gpu, neuron):
    r = resolver(env).resolve(nodeclass(amiSelectorTerms=[{"alias": alias}]))
    assert r.ready, r.not_ready_messages()
    for labels, want in ((AMD, amd), (ARM, arm), (GPU, gpu), (ARM_GPU, arm_gpu), (NEURON, neuron)):
        ami = r.ami_for(labels)
        if want is None:
            assert ami is None, (labels, ami)
        else:
            assert ami is not None and want in ami.name, (labels, ami and ami.name)
    # the image ids are exactly the seeded SSM values for this family
    fam = alias.split("@")[0]
    assert {a.id for a in r.amis} == {env.seeded[p] for p, _, _ in alias_parameters(fam, K8S, "latest")}


@pytest.mark.parametrize("year,build", [("2019", "10.0.17763"), ("2022", "10.0.20348"), ("2025", "10.0.26100")])
def test_windows_alias(env, year, build):
    r = resolver(env).resolve(nodeclass(amiSelectorTerms=[{"alias": f"windows{year}@latest"}]))
    assert len(r.amis) == 1
    ami = r.amis[0]
    assert f"Windows_Server-{year}-English-Core-EKS_Optimized-{K8S}" in ami.name
    reqs = {q["key"]: q for q in ami.requirements}
    assert reqs["kubernetes.io/os"]["values"] == ["windows"]
    assert reqs["node.kubernetes.io/windows-build"]["values"] == [build]
    assert reqs["kubernetes.io/arch"]["values"] == ["amd64"]
    assert r.ami_for(ARM) is None and r.ami_for(AMD) is ami
    assert r.block_device_mappings == [{"deviceName": "/dev/sda1", "ebs": {"volumeSize": "50Gi", "volumeType": "gp3", "encrypted": True}}]


def test_alias_pinned_version_reads_the_pinned_parameter(env):
    seeded = seed_eks_amis(K8S, REGION, families=("al2023",), version="v20240807", release="v20240807", creation_date="2024-08-07T00:00:00Z")
    r = resolver(env).resolve(nodeclass(amiSelectorTerms=[{"alias": "al2023@v20240807"}]))
    assert {a.id for a in r.amis} == set(seeded.values())
    assert all("v20240807" in a.name for a in r.amis)
    assert any("/amazon-eks-node-al2023-x86_64-standard-1.31-v20240807/image_id" in p for p in seeded)
    # bottlerocket strips a leading v from the version in the SSM path
    paths = [p for p, _, _ in alias_parameters("bottlerocket", "1.31", "v1.20.3")]
    assert "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.20.3/image_id" in paths


def test_alias_at_another_k8s_version_finds_nothing_and_says_why(env):
    from karpenter_lambda.adapters.aws.nodeclass_resolver import NodeClassResolver

    r = NodeClassResolver(env.ec2, env.ssm, env.iam, CLUSTER, "1.29", REGION).resolve(nodeclass())
    assert r.amis == [] and not r.ready
    cond = {c.type: c for c in r.conditions}["AMIsReady"]
    assert cond.status is False and cond.reason == "AMINotFound"
    assert "al2023@latest" in cond.message and "1.29" in cond.message


# -- AMIs by terms --------------------------------------------------------------------------
def test_ami_terms_by_name_tags_id_owner_keep_one_image_per_arch(env):
    """One AMI per requirement set (upstream amifamily/ami.go ``amis``): for ORed terms, per architecture; the
    non-deprecated image beats a newer deprecated one, then the newest wins.  (This test used to expect every match
    in the status -- [newer, arm, old, new_dep] -- which upstream never holds.)"""
    old = add_image(REGION, name="team-ami-1", arch="x86_64", creation_date="2024-01-01T00:00:00Z", tags={"team": "ml"})
    new_dep = add_image(REGION, name="team-ami-3", arch="x86_64", creation_date="2024-06-01T00:00:00Z",
                        deprecation_time="2024-07-01T00:00:00.000Z", tags={"team": "ml"})
    newer = add_image(REGION, name="team-ami-2", arch="x86_64", creation_date="2024-03-01T00:00:00Z", tags={"team": "ml"})
    arm = add_image(REGION, name="team-ami-arm", arch="arm64", creation_date="2024-02-01T00:00:00Z", tags={"team": "ml"})
    other = add_image(REGION, name="other-ami", arch="x86_64", owner_id="111122223333", creation_date="2024-02-01T00:00:00Z")

    r = resolver(env).resolve(nodeclass(amiFamily="AL2023", amiSelectorTerms=[{"tags": {"team": "ml"}}]))
    assert [a.id for a in r.amis] == [newer, arm]  # newest first; old and the deprecated new_dep are not kept
    assert r.ami_for(AMD).id == newer and r.ami_for(ARM).id == arm
    assert [a["id"] for a in r.status_patch()["amis"]] == [newer, arm]

    r = resolver(env).resolve(nodeclass(amiFamily="AL2023", amiSelectorTerms=[{"name": "team-ami-*"}]))
    assert [a.id for a in r.amis] == [newer, arm]  # owners self+amazon by default
    r = resolver(env).resolve(nodeclass(amiFamily="AL2023", amiSelectorTerms=[{"name": "other-ami"}]))
    assert r.amis == []  # not owned by self or amazon
    r = resolver(env).resolve(nodeclass(amiFamily="AL2023", amiSelectorTerms=[{"name": "other-ami", "owner": "111122223333"}]))
    assert [a.id for a in r.amis] == [other]
    r = resolver(env).resolve(nodeclass(amiFamily="AL2023", amiSelectorTerms=[{"id": old}, {"id": arm}]))
    assert [a.id for a in r.amis] == [arm, old]
    # two id terms of one architecture: the newer only
    r = resolver(env).resolve(nodeclass(amiFamily="AL2023", amiSelectorTerms=[{"id": old}, {"id": newer}]))
    assert [a.id for a in r.amis] == [newer]
    # only deprecated images left for the arch: the deprecated one is kept (and marked)
    r = resolver(env).resolve(nodeclass(amiFamily="AL2023", amiSelectorTerms=[{"id": new_dep}]))
    assert [a.id for a in r.amis] == [new_dep] and r.status_patch()["amis"][0]["deprecated"] is True


def test_ami_ties_break_by_name_then_id():
    """upstream compareAMI: same deprecation and creation second -> the greater name; our last resort the smaller id."""
    from karpenter_lambda.adapters.aws.amis import one_per_requirements

    arch = [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
    a = AMI("ami-a", "img-a", "amd64", "2025-01-01T00:00:00Z", requirements=arch)
    b = AMI("ami-b", "img-b", "amd64", "2025-01-01T00:00:00.400Z", requirements=arch)
    assert [x.id for x in one_per_requirements([a, b])] == ["ami-b"]
    assert [x.id for x in one_per_requirements([b, a])] == ["ami-b"]
    c = AMI("ami-c", "img-b", "amd64", "2025-01-01T00:00:00Z", requirements=arch)
    assert [x.id for x in one_per_requirements([c, b])] == ["ami-b"]


def test_image_tags_are_not_requirements(env):
    """Karpenter v0.x read well-known labels from an image's tags as requirements; v1 does not (upstream v1.0.0
    removed ``getRequirementsFromImage``): the image's architecture is its only requirement."""
    img = add_image(REGION, name="gpu-only", arch="x86_64", tags={"karpenter.k8s.aws/instance-family": "g5"})
    r = resolver(env).resolve(nodeclass(amiFamily="AL2023", amiSelectorTerms=[{"id": img}]))
    assert r.amis[0].requirements == [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
    assert r.ami_for({"kubernetes.io/arch": "amd64", "karpenter.k8s.aws/instance-family": "m5"}).id == img


def test_ami_for_accepts_catalog_instance_types():
    it = InstanceType(name="g5.xlarge", labels={"kubernetes.io/arch": "amd64", "karpenter.k8s.aws/instance-gpu-count": "1"}, capacity={})
    std = AMI("ami-1", "std", "amd64", "2024-01-01T00:00:00Z", requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                                                                       {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}])
    assert not requirements_met(std.requirements, it.labels)
    assert requirements_met(std.requirements, {"kubernetes.io/arch": "amd64", "karpenter.k8s.aws/instance-gpu-count": "0"})
    assert [a.id for a in sort_amis([AMI("b", "", "amd64", ""), AMI("a", "", "amd64", "2020-01-01T00:00:00Z")])] == ["a", "b"]


# -- instance profile ------------------------------------------------------------------------
def test_instance_profile_created_from_role_tagged_and_reused(env):
    r1 = resolver(env).resolve(nodeclass())
    prof = env.iam.get_instance_profile(InstanceProfileName=r1.instance_profile)["InstanceProfile"]
    assert r1.instance_profile.startswith(f"{CLUSTER}_")
    assert [x["RoleName"] for x in prof["Roles"]] == ["KarpenterNodeRole-c1"]
    tags = {t["Key"]: t["Value"] for t in prof["Tags"]}
    assert tags[f"kubernetes.io/cluster/{CLUSTER}"] == "owned"
    assert tags["karpenter.k8s.aws/ec2nodeclass"] == "default"
    # same nodeclass -> same profile, no duplicate; a role change swaps the role
    r2 = resolver(env).resolve(nodeclass(role="arn:aws:iam::123456789012:role/OtherRole"))
    assert r2.instance_profile == r1.instance_profile
    prof = env.iam.get_instance_profile(InstanceProfileName=r1.instance_profile)["InstanceProfile"]
    assert [x["RoleName"] for x in prof["Roles"]] == ["OtherRole"]
    assert len(env.iam.list_instance_profiles()["InstanceProfiles"]) == 1
    # another nodeclass gets its own
    assert resolver(env).resolve(nodeclass("gpu")).instance_profile != r1.instance_profile


def test_instance_profile_given_or_missing(env):
    env.iam.create_instance_profile(InstanceProfileName="MyProfile")
    r = resolver(env).resolve(nodeclass(role=None, instanceProfile="MyProfile"))
    assert r.instance_profile == "MyProfile" and r.ready
    r = resolver(env).resolve(nodeclass(role=None, instanceProfile="Nope"))
    cond = {c.type: c for c in r.conditions}["InstanceProfileReady"]
    assert not cond.status and "instance profile Nope not found" in cond.message
    r = resolver(env).resolve(nodeclass(role="MissingRole"))
    assert "role MissingRole not found" in {c.type: c for c in r.conditions}["InstanceProfileReady"].message


# -- block devices, metadata ----------------------------------------------------------------
def test_block_device_defaults_per_family_and_explicit(env):
    r = resolver(env).resolve(nodeclass())
    assert r.block_device_mappings == [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi", "volumeType": "gp3", "encrypted": True}}]
    br = default_block_device_mappings("Bottlerocket")
    assert [(b["deviceName"], b["ebs"]["volumeSize"]) for b in br] == [("/dev/xvda", "4Gi"), ("/dev/xvdb", "20Gi")]
    assert default_block_device_mappings("Custom") == []
    mine = [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi", "volumeType": "io2", "iops": 3000}, "rootVolume": True}]
    r = resolver(env).resolve(nodeclass(blockDeviceMappings=mine))
    assert r.block_device_mappings == mine
    assert r.metadata_options == {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}
    r = resolver(env).resolve(nodeclass(metadataOptions={"httpPutResponseHopLimit": 2, "httpTokens": "optional"}))
    assert r.metadata_options["httpPutResponseHopLimit"] == 2 and r.metadata_options["httpTokens"] == "optional"
    assert r.metadata_options["httpEndpoint"] == "enabled"


# -- status --------------------------------------------------------------------------------
def test_status_patch_ready(env):
    r = resolver(env, clock=lambda: 1_700_000_000).resolve(nodeclass())
    st = r.status_patch()
    assert [s["id"] for s in st["subnets"]] == [s["id"] for s in r.subnets]
    assert st["subnets"][0]["zone"] == "us-east-1a" and st["subnets"][0]["zoneID"]
    assert st["securityGroups"] == [{"id": env.sgs["nodes"], "name": "nodes"}]
    assert len(st["amis"]) == 5 and all(a["requirements"][0]["key"] == "kubernetes.io/arch" for a in st["amis"])
    assert st["instanceProfile"] == r.instance_profile
    conds = {c["type"]: c for c in st["conditions"]}
    assert set(conds) == {"SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady", "CapacityReservationsReady",
                          "Ready"}
    assert all(c["status"] == "True" for c in conds.values())
    assert conds["Ready"]["lastTransitionTime"] == "2023-11-14T22:13:20Z"
    assert r.require_ready() is r


def test_status_patch_failure_reasons(env):
    nc = nodeclass(
        subnetSelectorTerms=[{"tags": {"karpenter.sh/discovery": "x"}}],
        securityGroupSelectorTerms=[{"name": "missing"}],
        amiSelectorTerms=[{"name": "no-such-ami-*"}],
        amiFamily="AL2023",
    )
    r = resolver(env).resolve(nc)
    conds = {c["type"]: c for c in r.status_patch()["conditions"]}
    assert conds["SubnetsReady"] == {**conds["SubnetsReady"], "status": "False", "reason": "SubnetsNotFound",
                                     "message": "no subnet matches subnetSelectorTerms [{tags: {karpenter.sh/discovery: x}}]"}
    assert conds["SecurityGroupsReady"]["message"] == "no security group matches securityGroupSelectorTerms [{name: missing}]"
    assert conds["AMIsReady"]["message"].startswith("no AMI matches amiSelectorTerms [{name: no-such-ami-*}]")
    assert conds["InstanceProfileReady"]["status"] == "True"
    assert conds["Ready"]["status"] == "False" and conds["Ready"]["reason"] == "UnhealthyDependents"
    assert "SubnetsReady=False" in conds["Ready"]["message"] and "AMIsReady=False" in conds["Ready"]["message"]
    with pytest.raises(NodeClassNotReady, match="no subnet matches"):
        r.require_ready()
    assert r.status_patch()["subnets"] == [] and r.status_patch()["amis"] == []


def test_ami_provider_rejects_alias_with_other_terms(env):
    from karpenter_lambda.adapters.aws.amis import AMIResolutionError

    p = AMIProvider(env.ec2, env.ssm, K8S)
    with pytest.raises(AMIResolutionError, match="only term"):
        p.resolve([{"alias": "al2023@latest"}, {"id": "ami-123"}])
    with pytest.raises(AMIResolutionError, match="unknown alias family"):
        p.resolve([{"alias": "ubuntu@latest"}])


def test_ssm_parameter_terms_as_upstream_describe_image_queries(env):
    """karpenter-provider-aws ``DescribeImageQueries``: an ssmParameter term selects the parameter's image alone (the
    ``tags``/``name``/``owner`` beside it are not applied; ``validate`` warns), a value that is not an AMI id selects
    nothing, an ``id`` beside it wins, and an alias decides alone (the parameter is never read)."""
    mine = add_image(REGION, name="my-ami", arch="x86_64", creation_date="2025-01-01T00:00:00Z")   # no tags
    other = add_image(REGION, name="other-ami", arch="x86_64", creation_date="2025-02-01T00:00:00Z", tags={"team": "ml"})
    env.ssm.put_parameter(Name="/my/ami", Value=mine, Type="String")
    env.ssm.put_parameter(Name="/my/not-an-ami", Value="latest", Type="String")
    p = AMIProvider(env.ec2, env.ssm, K8S)
    # the tags beside the parameter do not narrow it (before: ANDed, so the untagged image was not found at all)
    assert [a.id for a in p.resolve([{"ssmParameter": "/my/ami", "tags": {"team": "ml"}}])] == [mine]
    assert [a.id for a in p.resolve([{"ssmParameter": "/my/ami", "name": "nothing-*"}])] == [mine]
    assert p.resolve([{"ssmParameter": "/my/not-an-ami"}]) == [] and "not an AMI id" in " ".join(p.errors)
    # an id beside it wins; with an alias the parameter's image is never selected
    assert [a.id for a in p.resolve([{"id": other, "ssmParameter": "/my/ami"}])] == [other]
    assert mine not in {a.id for a in p.resolve([{"alias": "al2023@latest", "ssmParameter": "/my/ami"}])}
