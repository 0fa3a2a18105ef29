"""plan counts a DaemonSet's overhead as the API server admits its pods (``scheduling.nodeclaim.counted_daemonsets``):
the template, in the DaemonSet's namespace, through the RuntimeClass admission and the LimitRanger of the files; a pod
of the DaemonSet among the files, when there is one, as it is.

The two repros: a RuntimeClass kata with a 1-CPU ``overhead.podFixed``, a DaemonSet of it asking 10m and a 1-CPU pod
(plan said m5.large, "fit cpu=1010m"; its node holds 2010m, an m5.xlarge), and a LimitRange of kube-system
defaulting containers to 1 CPU with a DaemonSet asking nothing (m5.large; 2 CPU, an m5.xlarge)."""

from __future__ import annotations

import json

from karpenter_lambda.cli.main import main

POOL = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: kubernetes.io/os, operator: In, values: [linux]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterLambdaNode-my-cluster
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
"""
KATA = """apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: kata}
handler: kata
overhead:
  podFixed: {cpu: "1"}
"""
LIMITS = """apiVersion: v1
kind: LimitRange
metadata: {name: lr, namespace: kube-system}
spec:
  limits:
  - type: Container
    defaultRequest: {cpu: "1"}
    default: {cpu: "1"}
"""
POD = """apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers:
  - {name: a, image: x, resources: {requests: {cpu: "1"}}}
"""


def daemonset(spec: str, uid: str = "") -> str:
    return f"""apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent, namespace: kube-system{', uid: ' + uid if uid else ''}}}
spec:
  selector: {{matchLabels: {{a: d}}}}
  template:
    metadata: {{labels: {{a: d}}}}
    spec:
{spec}"""


KATA_AGENT = daemonset("""      runtimeClassName: kata
      containers:
      - {name: d, image: x, resources: {requests: {cpu: 10m}}}
""")
BARE_AGENT = daemonset("""      containers:
      - {name: d, image: x}
""")


def _plan(capsys, tmp_path, *docs, status=0):
    path = tmp_path / "w.yaml"
    path.write_text("---\n".join(docs))
    pool = tmp_path / "pool.yaml"
    pool.write_text(POOL)
    code = main(["plan", "--json", str(pool), str(path)])
    out, err = capsys.readouterr()
    assert code == status, (out, err)
    return (json.loads(out) if status == 0 else None), err


def _claim(plan) -> tuple[str, str]:
    (claim,) = plan["nodeClaims"]
    return claim["instanceType"], claim["reason"]


def test_a_runtimeclass_overhead_of_a_daemonset_sizes_the_node(capsys, tmp_path):
    plan, err = _plan(capsys, tmp_path, KATA, KATA_AGENT, POD)
    itype, reason = _claim(plan)
    assert itype == "m5.xlarge" and "fit cpu=2010m (2 pods incl. daemonsets)" in reason, reason
    assert "warning" not in err


def test_limitrange_defaults_of_a_daemonset_size_the_node(capsys, tmp_path):
    plan, _ = _plan(capsys, tmp_path, LIMITS, BARE_AGENT, POD)
    itype, reason = _claim(plan)
    assert itype == "m5.xlarge" and "fit cpu=2 (2 pods incl. daemonsets)" in reason, reason
    # without the LimitRange the agent asks nothing: the m5.large holds the pod
    plan, _ = _plan(capsys, tmp_path, BARE_AGENT, POD)
    assert _claim(plan)[0] == "m5.large"


def test_a_pod_of_the_daemonset_in_the_files_is_counted_as_it_is(capsys, tmp_path):
    """A pod of the DaemonSet given with it (``kubectl get ds,pods -o yaml``) carries what the cluster gave it:
    its 1 CPU counts, not the template's 10m."""
    ds = daemonset("""      containers:
      - {name: d, image: x, resources: {requests: {cpu: 10m}}}
""", uid="ds-1")
    live = """apiVersion: v1
kind: Pod
metadata:
  name: agent-x1
  namespace: kube-system
  labels: {a: d}
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: ds-1, controller: true}]
spec:
  nodeName: ip-10-0-0-1.ec2.internal
  containers:
  - {name: d, image: x, resources: {requests: {cpu: "1"}}}
"""
    plan, _ = _plan(capsys, tmp_path, ds, live, POD)
    itype, reason = _claim(plan)
    assert itype == "m5.xlarge" and "fit cpu=2 (2 pods incl. daemonsets)" in reason, reason
    plan, _ = _plan(capsys, tmp_path, ds, POD)
    assert _claim(plan)[0] == "m5.large"


def test_a_daemonset_the_admission_refuses_is_an_error(capsys, tmp_path):
    gvisor = KATA.replace("name: kata", "name: gvisor")
    _, err = _plan(capsys, tmp_path, gvisor, KATA_AGENT, POD, status=1)
    assert "the API server would refuse these pods:\npods of kube-system/agent (DaemonSet): RuntimeClass kata " \
           "not found" in err, err
