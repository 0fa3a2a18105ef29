"""Issue 30 item 7: ``instanceStorePolicy: RAID0`` in the user data of every AMI family, as karpenter-provider-aws
writes it (AL2 bootstrap.sh ``--local-disks raid0``, AL2023 nodeadm ``instance.localStorage.strategy: RAID0``,
Bottlerocket ``settings.bootstrap-commands`` with ``apiclient ephemeral-storage``); Windows and Custom unchanged."""

import tomllib

import pytest
import yaml

from karpenter_lambda.adapters.aws.userdata import ClusterInfo, parse_mime_parts, render_user_data

CLUSTER = ClusterInfo(name="c1", endpoint="https://ABC.gr7.us-east-1.eks.amazonaws.com", ca_b64="Y2E=", cidr="10.100.0.0/16")


def _render(family, policy):
    return render_user_data(family, CLUSTER, None, {"karpenter.sh/nodepool": "p"}, [], [], {}, 29, None,
                            instance_store_policy=policy)


def test_al2_bootstrap_builds_the_array():
    text = _render("AL2", "RAID0")
    script = parse_mime_parts(text)[-1][1]
    assert script.rstrip().endswith(" \\\n--local-disks raid0") and "--local-disks" not in _render("AL2", None)


def test_al2023_nodeconfig_asks_nodeadm_for_raid0():
    parts = parse_mime_parts(_render("AL2023", "RAID0"))
    cfg = yaml.safe_load(parts[-1][1])
    assert cfg["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}
    assert "instance" not in yaml.safe_load(parse_mime_parts(_render("AL2023", None))[-1][1])["spec"]


def test_bottlerocket_mounts_the_instance_store_before_the_kubelet():
    doc = tomllib.loads(_render("Bottlerocket", "RAID0"))
    cmd = doc["settings"]["bootstrap-commands"]["000-mount-instance-storage"]
    assert cmd["commands"][0] == ["apiclient", "ephemeral-storage", "init"]
    assert cmd["commands"][1][:3] == ["apiclient", "ephemeral-storage", "bind"]
    assert cmd["mode"] == "always" and cmd["essential"] is True
    assert "bootstrap-commands" not in tomllib.loads(_render("Bottlerocket", None))["settings"]


@pytest.mark.parametrize("family", ["Windows2022", "Custom"])
def test_windows_and_custom_are_unchanged(family):
    assert _render(family, "RAID0") == _render(family, None)
