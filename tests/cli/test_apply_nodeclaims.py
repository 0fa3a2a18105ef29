"""`apply` of NodeClaims (manual NodeClaims, docs/provisioning.md): a new one is stored marked for the lifecycle sweep
to launch, without the status a file may carry (the API server drops a created object's status); a stored one keeps
its spec (Karpenter's CRD: spec is immutable) and what the controllers wrote (status, finalizers, the launched
instance's labels and annotations), the file's labels and annotations merged over it."""

import pytest
import yaml
from cli_manifests import NODECLASS, nodepool
from moto import mock_aws

from karpenter_lambda.adapters.store import Store
from karpenter_lambda.controllers.manual_nodeclaims import MANUAL_ANNOTATION

NODECLAIM = """\
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: manual-a
  labels:
    team: data
spec:
  nodeClassRef:
    group: karpenter.k8s.aws
    kind: EC2NodeClass
    name: default
  requirements:
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: ["c5"]
  resources:
    requests:
      cpu: "3"
status:
  providerID: aws:///us-east-1a/i-0123456789abcdef0
"""


@pytest.fixture
def table():
    with mock_aws():
        Store("default").ensure_table()
        yield


def test_a_new_nodeclaim_is_stored_as_a_manual_one_without_status(cli, manifests, table):
    f = manifests("nc.yaml", NODECLASS + "---\n" + NODECLAIM)
    rc, out, err = cli("apply", "-f", f)
    assert rc == 0, err
    assert out.splitlines() == ["ec2nodeclass/default created", "nodeclaim/manual-a created"]
    nc = Store("default").get("NodeClaim", "manual-a")
    assert nc.annotations[MANUAL_ANNOTATION] == "true" and nc.labels == {"team": "data"}
    assert not nc.status.get("providerID")      # a file's status is not the world's
    rc, out, _ = cli("apply", "-f", f)
    assert out.splitlines() == ["ec2nodeclass/default unchanged", "nodeclaim/manual-a unchanged"]


def test_a_stored_nodeclaim_keeps_its_spec_and_what_the_controllers_wrote(cli, manifests, table):
    f = manifests("nc.yaml", NODECLASS + "---\n" + NODECLAIM)
    assert cli("apply", "-f", f)[0] == 0
    store = Store("default")

    def launched(o):   # what the lifecycle sweep writes at launch
        o.metadata["labels"]["node.kubernetes.io/instance-type"] = "c5.xlarge"
        o.metadata["annotations"]["karpenter-lambda.io/launch-token"] = "t0"
        o.metadata["finalizers"] = ["karpenter.sh/termination"]
        o.status["providerID"] = "aws:///us-east-1a/i-0aaaaaaaaaaaaaaaa"
        return o

    store.update("NodeClaim", "manual-a", launched)
    rc, out, _ = cli("apply", "-f", f)
    assert out.splitlines()[-1] == "nodeclaim/manual-a unchanged"
    g = manifests("nc2.yaml", NODECLAIM.replace("team: data", "team: data\n    tier: gold"))
    rc, out, _ = cli("apply", "-f", g)
    assert (rc, out) == (0, "nodeclaim/manual-a configured\n")
    nc = store.get("NodeClaim", "manual-a")
    assert nc.labels == {"team": "data", "tier": "gold", "node.kubernetes.io/instance-type": "c5.xlarge"}
    assert nc.annotations["karpenter-lambda.io/launch-token"] == "t0" and nc.annotations[MANUAL_ANNOTATION] == "true"
    assert nc.status["providerID"] == "aws:///us-east-1a/i-0aaaaaaaaaaaaaaaa"
    assert nc.metadata["finalizers"] == ["karpenter.sh/termination"]

    # spec is immutable: nothing of the files is applied
    h = manifests("nc3.yaml", nodepool(weight=60) + "---\n" + NODECLAIM.replace('cpu: "3"', 'cpu: "4"'))
    rc, out, err = cli("apply", "-f", h)
    assert rc == 1 and out == ""
    assert "nodeclaim/manual-a: spec is immutable" in err and "apply: nothing applied" in err
    assert store.get("NodePool", "default") is None
    assert yaml.safe_load(yaml.safe_dump(store.get("NodeClaim", "manual-a").spec))["resources"]["requests"]["cpu"] == "3"


def test_apply_warns_of_what_keeps_a_new_nodeclaim_from_launching(cli, manifests, table):
    text = NODECLAIM.replace("team: data", "team: data\n    karpenter.sh/nodepool: ghost")
    rc, out, err = cli("apply", "-f", manifests("nc.yaml", text))
    assert rc == 0 and out == "nodeclaim/manual-a created\n"
    assert "warning: nodeclaim/manual-a: EC2NodeClass 'default' is not stored" in err
    assert "warning: nodeclaim/manual-a: karpenter.sh/nodepool 'ghost' names no stored NodePool" in err
