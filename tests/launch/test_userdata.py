"""userData per AMI family: parse what we render and check the fields."""

import email
import tomllib

import pytest
import yaml

from karpenter_lambda.adapters.aws.userdata import ClusterInfo, UserDataError, dump_toml, render_user_data
from karpenter_lambda.api.objects import EC2NodeClass

CLUSTER = ClusterInfo(name="c1", endpoint="https://ABC.gr7.us-east-1.eks.amazonaws.com", ca_b64="Y2EtYnVuZGxl", cidr="10.100.0.0/16")
LABELS = {
    "karpenter.sh/nodepool": "default",
    "karpenter.sh/capacity-type": "spot",
    "karpenter.k8s.aws/ec2nodeclass": "default",
    "kubernetes.io/arch": "amd64",
    "team": "ml",
    "node-role.kubernetes.io/worker": "",  # kubelet may not self-assign: dropped
    "kubernetes.io/hostname": "x",  # dropped
}
TAINTS = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
STARTUP = [{"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}]
KUBELET = {"evictionHard": {"memory.available": "5%"}, "kubeReserved": {"cpu": "100m"}, "imageGCHighThresholdPercent": 85, "cpuCFSQuota": False}


def mime_parts(text: str) -> list[tuple[str, str]]:
    msg = email.message_from_string(text)
    assert msg.is_multipart() and msg.get_content_type() == "multipart/mixed"
    return [(p.get_content_type(), p.get_payload()) for p in msg.get_payload()]


def render(family, user_data=None, kubelet=KUBELET, max_pods=58, cluster=CLUSTER):
    return render_user_data(family, cluster, None, LABELS, TAINTS, STARTUP, kubelet, max_pods, user_data)


# -- AL2023 ---------------------------------------------------------------------------------
def test_al2023_nodeconfig_fields():
    parts = mime_parts(render("AL2023"))
    assert [ct for ct, _ in parts] == ["application/node.eks.aws"]
    doc = yaml.safe_load(parts[0][1])
    assert doc["apiVersion"] == "node.eks.aws/v1alpha1" and doc["kind"] == "NodeConfig"
    c = doc["spec"]["cluster"]
    assert c == {"name": "c1", "apiServerEndpoint": CLUSTER.endpoint, "certificateAuthority": "Y2EtYnVuZGxl", "cidr": "10.100.0.0/16"}
    cfg = doc["spec"]["kubelet"]["config"]
    assert cfg["maxPods"] == 58
    assert cfg["clusterDNS"] == ["10.100.0.10"]
    assert cfg["evictionHard"] == {"memory.available": "5%"} and cfg["kubeReserved"] == {"cpu": "100m"}
    assert cfg["imageGCHighThresholdPercent"] == 85 and cfg["cpuCFSQuota"] is False
    assert {(t["key"], t["effect"]) for t in cfg["registerWithTaints"]} == {
        ("dedicated", "NoSchedule"),
        ("node.cilium.io/agent-not-ready", "NoExecute"),
        ("karpenter.sh/unregistered", "NoExecute"),
    }
    (flag,) = doc["spec"]["kubelet"]["flags"]
    assert flag.startswith('--node-labels="') and flag.endswith('"')
    pairs = dict(kv.split("=", 1) for kv in flag[len('--node-labels="') : -1].split(","))
    # karpenter.sh/do-not-sync-taints: the kubelet registers the taints itself (upstream InjectDoNotSyncTaintsLabel)
    assert pairs == {"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "spot",
                     "karpenter.k8s.aws/ec2nodeclass": "default", "kubernetes.io/arch": "amd64", "team": "ml",
                     "karpenter.sh/do-not-sync-taints": "true"}


def test_al2023_user_parts_come_first_shell_yaml_and_mime():
    parts = mime_parts(render("AL2023", "#!/bin/bash\necho hello\n"))
    assert [ct for ct, _ in parts] == ["text/x-shellscript", "application/node.eks.aws"]
    assert "echo hello" in parts[0][1]
    user_cfg = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n"
    parts = mime_parts(render("AL2023", user_cfg))
    assert [ct for ct, _ in parts] == ["application/node.eks.aws", "application/node.eks.aws"]
    assert yaml.safe_load(parts[0][1])["spec"]["kubelet"]["config"]["shutdownGracePeriod"] == "30s"
    assert "Karpenter Generated NodeConfig" in parts[1][1]
    user_mime = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="BOUNDARY"\n\n'
        "--BOUNDARY\nContent-Type: text/x-shellscript\n\n#!/bin/bash\necho one\n"
        "--BOUNDARY\nContent-Type: application/node.eks.aws\n\n" + user_cfg + "--BOUNDARY--\n"
    )
    parts = mime_parts(render("AL2023", user_mime))
    assert [ct for ct, _ in parts] == ["text/x-shellscript", "application/node.eks.aws", "application/node.eks.aws"]
    assert "echo one" in parts[0][1] and "shutdownGracePeriod" in parts[1][1] and "Karpenter" in parts[2][1]


def test_al2023_takes_user_data_and_kubelet_from_the_nodeclass():
    nc = EC2NodeClass({"metadata": {"name": "x"}, "spec": {"userData": "#!/bin/bash\necho nc\n", "kubelet": {"clusterDNS": ["10.0.0.53"], "maxPods": 20}}})
    out = render_user_data("AL2023", CLUSTER, nc, LABELS, [], [], None, None, None)
    parts = mime_parts(out)
    assert "echo nc" in parts[0][1]
    cfg = yaml.safe_load(parts[1][1])["spec"]["kubelet"]["config"]
    assert cfg["clusterDNS"] == ["10.0.0.53"] and cfg["maxPods"] == 20


def test_rendering_is_deterministic():
    a = render("AL2023", "#!/bin/bash\necho x\n")
    b = render_user_data("AL2023", CLUSTER, None, dict(reversed(list(LABELS.items()))), list(TAINTS), list(STARTUP), KUBELET, 58, "#!/bin/bash\necho x\n")
    assert a == b
    assert render("AL2023", max_pods=29) != a


# -- AL2 ------------------------------------------------------------------------------------
def test_al2_bootstrap_args_and_user_part_first():
    parts = mime_parts(render("AL2", "#!/bin/bash\necho custom\n"))
    assert [ct for ct, _ in parts] == ["text/x-shellscript", "text/x-shellscript"]
    assert "echo custom" in parts[0][1]
    script = parts[1][1]
    assert script.startswith("#!/bin/bash -xe")
    line = script.replace(" \\\n", " ")
    assert f"/etc/eks/bootstrap.sh 'c1' --apiserver-endpoint '{CLUSTER.endpoint}' --b64-cluster-ca 'Y2EtYnVuZGxl'" in line
    assert "--dns-cluster-ip '10.100.0.10'" in line
    assert "--use-max-pods false" in line
    extra = line.split("--kubelet-extra-args '", 1)[1].split("'", 1)[0]
    args = extra.split(" ")
    assert "--max-pods=58" in args
    assert "--node-labels=karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=spot,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,kubernetes.io/arch=amd64,team=ml" in args
    taints = [a for a in args if a.startswith("--register-with-taints=")][0].split("=", 1)[1].split(",")
    assert set(taints) == {"dedicated=ml:NoSchedule", "karpenter.sh/unregistered=:NoExecute", "node.cilium.io/agent-not-ready=true:NoExecute"}
    assert "--eviction-hard=memory.available<5%" in args and "--kube-reserved=cpu=100m" in args
    assert "--image-gc-high-threshold=85" in args and "--cpu-cfs-quota=false" in args


def test_al2_user_mime_parts_keep_their_headers():
    """Upstream ``copyCustomUserDataParts`` (``bootstrap/eksbootstrap.go``) writes each part with its whole header
    (``multipart.Writer.CreatePart(p.Header)``: canonical keys, sorted), so a base64 part stays base64."""
    user = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n'
        '--B\nContent-Type: text/x-shellscript; charset="us-ascii"\ncontent-transfer-encoding: base64\n'
        'X-Note: kept\n\nIyEvYmluL2Jhc2gKZWNobyBoaQo=\n'
        '--B\nContent-Type: text/cloud-config\n\n#cloud-config\nruncmd: []\n--B--\n'
    )
    out = render("AL2", user)
    msg = email.message_from_string(out)
    first, second, ours = msg.get_payload()
    assert first["Content-Transfer-Encoding"] == "base64" and first["X-Note"] == "kept"
    assert first.get_payload(decode=True) == b"#!/bin/bash\necho hi\n"
    assert first.get_content_type() == "text/x-shellscript"
    assert out.index("Content-Transfer-Encoding: base64\nContent-Type: text/x-shellscript") > 0  # sorted, canonical
    assert second.get_content_type() == "text/cloud-config" and "runcmd" in second.get_payload()
    assert ours.get_payload().startswith("#!/bin/bash -xe")
    # AL2023 is left as upstream builds it (mime.NewArchive keeps only the content type)
    assert "Content-Transfer-Encoding" not in render("AL2023", user)


def test_al2_quoted_printable_part_comes_out_decoded_as_go_reads_it():
    user = ('MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n--B\n'
            'Content-Type: text/x-shellscript\nContent-Transfer-Encoding: quoted-printable\n\necho caf=C3=A9 a=3Db\n--B--\n')
    first = email.message_from_string(render("AL2", user)).get_payload()[0]
    assert first["Content-Transfer-Encoding"] is None and first.get_payload() == "echo café a=b"


def test_al2_ipv6_cluster():
    v6 = ClusterInfo(name="c1", endpoint="https://e", ca_b64="Y2E=", cidr="fd00:10:96::/112")
    script = mime_parts(render("AL2", cluster=v6))[0][1]
    assert "--ip-family ipv6" in script and "--dns-cluster-ip 'fd00:10:96::a'" in script


# -- Bottlerocket -----------------------------------------------------------------------------
def test_bottlerocket_toml_merged_ours_win():
    user = """
[settings.kubernetes]
max-pods = 5
cluster-name = "wrong"
image-gc-low-threshold-percent = "40"

[settings.kubernetes.node-labels]
custom = "user"
team = "user-value"

[settings.kubernetes.node-taints]
user-taint = ["x:NoSchedule"]

[settings.autoscaling]
should-wait = true

[settings.network]
hostname = "test.local"
no-proxy = ["localhost", "127.0.0.1"]

[settings.ntp]
time-servers = ["169.254.169.123"]
"""
    doc = tomllib.loads(render("Bottlerocket", user))
    k = doc["settings"]["kubernetes"]
    assert k["cluster-name"] == "c1" and k["api-server"] == CLUSTER.endpoint and k["cluster-certificate"] == "Y2EtYnVuZGxl"
    assert k["max-pods"] == 58 and k["cluster-dns-ip"] == "10.100.0.10"
    assert k["image-gc-low-threshold-percent"] == "40"  # user's setting kept where we set nothing
    assert k["image-gc-high-threshold-percent"] == "85"
    assert k["node-labels"]["custom"] == "user" and k["node-labels"]["team"] == "ml"  # ours win on conflict
    assert k["node-labels"]["karpenter.sh/nodepool"] == "default"
    assert "user-taint" not in k["node-taints"]  # Karpenter owns node-taints
    assert k["node-taints"]["dedicated"] == ["ml:NoSchedule"] and k["node-taints"]["karpenter.sh/unregistered"] == [":NoExecute"]
    assert k["eviction-hard"] == {"memory.available": "5%"} and k["cpu-cfs-quota-enforced"] is False
    assert doc["settings"]["autoscaling"]["should-wait"] is False
    assert doc["settings"]["network"] == {"hostname": "test.local", "no-proxy": ["localhost", "127.0.0.1"]}
    assert doc["settings"]["ntp"]["time-servers"] == ["169.254.169.123"]


def test_bottlerocket_bad_toml_is_a_clear_error():
    with pytest.raises(UserDataError, match="spec.userData: invalid Bottlerocket TOML"):
        render("Bottlerocket", "[settings\nbroken")


def test_toml_writer_round_trips():
    doc = {"a": 1, "b": {"c.d": "x\"y", "e": [1, 2], "f": {"g": True}}, "h": [{"i": 1}, {"i": 2}], "j": {}}
    assert tomllib.loads(dump_toml(doc)) == doc


# -- Windows / Custom -----------------------------------------------------------------------
def test_windows_powershell():
    out = render("Windows2022", "<powershell>\nWrite-Host 'custom'\n</powershell>")
    assert out.startswith("<powershell>\n") and out.endswith("</powershell>")
    assert out.count("<powershell>") == 1 and out.index("Write-Host 'custom'") < out.index("Start-EKSBootstrap.ps1")
    cmd = [l for l in out.splitlines() if l.startswith("& $EKSBootstrapScriptFile")][0]
    assert f"-EKSClusterName 'c1' -APIServerEndpoint '{CLUSTER.endpoint}' -Base64ClusterCA 'Y2EtYnVuZGxl'" in cmd
    assert "-KubeletExtraArgs '" in cmd and "--max-pods=58" in cmd and "--register-with-taints=" in cmd
    assert cmd.endswith("-DNSClusterIP '10.100.0.10'")


def test_custom_passes_through_and_unknown_family_errors():
    assert render("Custom", "anything at all\n") == "anything at all\n"
    assert render("Custom") == ""
    with pytest.raises(UserDataError, match="unknown AMI family 'Ubuntu'"):
        render("Ubuntu")


@pytest.mark.parametrize("family", ["AL2023", "AL2", "Bottlerocket", "Windows2022"])
def test_every_family_but_custom_labels_its_node_do_not_sync_taints(family):
    """Upstream ``InjectDoNotSyncTaintsLabel`` (launchtemplate.go): the kubelet of every family but Custom registers
    its taints and startup taints and labels the Node ``karpenter.sh/do-not-sync-taints=true``, so registration puts
    back no startup taint its agent removed; a Custom AMI's userData is the user's and carries nothing of ours."""
    assert "karpenter.sh/do-not-sync-taints=true" in render(family).replace('"', "").replace("'", "").replace(" = ", "=")
    assert "do-not-sync-taints" not in render("Custom", user_data="#!/bin/bash\necho mine\n")
