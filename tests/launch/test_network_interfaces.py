"""The launch template's primary network interface, as upstream ``generateNetworkInterfaces``
(``pkg/providers/launchtemplate/launchtemplate.go``, v1.14.1): always one interface, ``DeviceIndex`` 0, the security
groups as its ``Groups`` (so no template-level ``SecurityGroupIds``), ``AssociatePublicIpAddress`` when set, the
``ipPrefixCount`` as IPv4 (IPv6 on an IPv6 cluster) prefixes, and on an IPv6 cluster ``PrimaryIpv6: true`` with
``Ipv6AddressCount: 1``.  Read back from moto's DescribeLaunchTemplateVersions."""

from __future__ import annotations

import pytest

from karpenter_lambda.adapters.aws.launch_templates import LaunchTemplates, options_for
from karpenter_lambda.adapters.aws.userdata import ClusterInfo
from karpenter_lambda.catalog.types import InstanceType

from .conftest import CLUSTER, nodeclass, resolver

V4 = ClusterInfo(name=CLUSTER, endpoint="https://k8s.example", ca_b64="Y2E=", cidr="10.100.0.0/16")
V6 = ClusterInfo(name=CLUSTER, endpoint="https://k8s.example", ca_b64="Y2E=", cidr="fd00:10:96::/112")
M5 = InstanceType(name="m5.large", labels={"kubernetes.io/arch": "amd64"}, capacity={"pods": 29})


def _template_data(env, cluster, **spec):
    r = resolver(env).resolve(nodeclass(**spec))
    lt = LaunchTemplates(env.ec2, CLUSTER).ensure(options_for(r, cluster, r.ami_for(M5), {}, [], [], 29, "on-demand"))
    versions = env.ec2.describe_launch_template_versions(LaunchTemplateId=lt["id"])["LaunchTemplateVersions"]
    return versions[0]["LaunchTemplateData"]


def test_ipv6_cluster_asks_for_a_primary_ipv6_address(env):
    data = _template_data(env, V6)
    assert data["NetworkInterfaces"] == [{"DeviceIndex": 0, "Groups": [env.sgs["nodes"]], "PrimaryIpv6": True,
                                          "Ipv6AddressCount": 1}]
    assert "SecurityGroupIds" not in data


def test_ipv6_cluster_with_public_ip_and_prefixes(env):
    (eni,) = _template_data(env, V6, associatePublicIPAddress=False, ipPrefixCount=2)["NetworkInterfaces"]
    assert eni == {"DeviceIndex": 0, "Groups": [env.sgs["nodes"]], "AssociatePublicIpAddress": False,
                   "Ipv6PrefixCount": 2, "PrimaryIpv6": True, "Ipv6AddressCount": 1}


@pytest.mark.parametrize("spec, extra", [({}, {}), ({"associatePublicIPAddress": True, "ipPrefixCount": 1},
                                                    {"AssociatePublicIpAddress": True, "Ipv4PrefixCount": 1})])
def test_ipv4_cluster_sends_the_primary_interface_without_ipv6(env, spec, extra):
    data = _template_data(env, V4, **spec)
    assert data["NetworkInterfaces"] == [{"DeviceIndex": 0, "Groups": [env.sgs["nodes"]], **extra}]
    assert "SecurityGroupIds" not in data


def test_the_interface_is_in_the_template_name(env):
    """The template is named by a hash of its options: a template made before the interface changed (same options,
    other data) must not be found and reused by name."""
    r = resolver(env).resolve(nodeclass())
    opts = options_for(r, V6, r.ami_for(M5), {}, [], [], 29, "on-demand")
    assert '"network_interfaces"' in opts.canonical()


P4D = InstanceType(name="p4d.24xlarge", labels={"kubernetes.io/arch": "amd64"},
                   capacity={"pods": 737, "vpc.amazonaws.com/efa": 4})


def _data(env, ref) -> dict:
    versions = env.ec2.describe_launch_template_versions(LaunchTemplateId=ref.id)["LaunchTemplateVersions"]
    return versions[0]["LaunchTemplateData"]


def test_a_nodeclaim_requesting_efa_gets_one_efa_interface_per_network_card(env):
    """Upstream's EFA branch: n = the type's vpc.amazonaws.com/efa interfaces of InterfaceType efa, NetworkCardIndex
    0..n-1, DeviceIndex 0 on the first card and 1 on the others, the security groups on each; a type without EFA in
    the same launch keeps the primary interface; without an EFA request nothing changes (the same template name)."""
    r = resolver(env).resolve(nodeclass(ipPrefixCount=1))
    lts = LaunchTemplates(env.ec2, CLUSTER)
    refs = lts.ensure_for(r, V4, [P4D, M5], {}, [], [], "on-demand", efa=True)
    nis = _data(env, refs["p4d.24xlarge"])["NetworkInterfaces"]
    sg = [env.sgs["nodes"]]
    assert nis == [{"DeviceIndex": 0 if i == 0 else 1, "Groups": sg, "NetworkCardIndex": i, "InterfaceType": "efa",
                    "Ipv4PrefixCount": 1} for i in range(4)]
    assert _data(env, refs["m5.large"])["NetworkInterfaces"] == [{"DeviceIndex": 0, "Groups": sg, "Ipv4PrefixCount": 1}]
    plain = lts.ensure_for(r, V4, [P4D, M5], {}, [], [], "on-demand")
    assert plain["m5.large"] == refs["m5.large"] and plain["p4d.24xlarge"] != refs["p4d.24xlarge"]
    assert _data(env, plain["p4d.24xlarge"])["NetworkInterfaces"] == [{"DeviceIndex": 0, "Groups": sg,
                                                                       "Ipv4PrefixCount": 1}]
    # a template without EFA hashes as before the field existed (deployed templates keep their names)
    assert '"efa_count"' not in options_for(r, V4, r.ami_for(M5), {}, [], [], 29, "on-demand").canonical()
