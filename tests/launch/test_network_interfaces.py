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
