import manifests as shared

# the shared NodePool / EC2NodeClass (tests/manifests.py) with the discovery tag "test"
NODECLASS = shared.to_yaml(shared.nodeclass(discovery="test"))

NODECLAIM = """\
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-x7k2p
  labels:
    karpenter.sh/nodepool: default
    node.kubernetes.io/instance-type: m5.large
    karpenter.sh/capacity-type: spot
    topology.kubernetes.io/zone: us-east-1a
spec:
  nodeClassRef:
    group: karpenter.k8s.aws
    kind: EC2NodeClass
    name: default
  requirements:
    - key: node.kubernetes.io/instance-type
      operator: In
      values: ["m5.large"]
"""

# Invalid for any validator: the loader itself rejects these.
UNSUPPORTED_KIND = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
"""
# A kind nobody knows (a typo of ConfigMap): an error in validate, plan and simulate alike.  A ConfigMap itself is a
# built-in kind nothing reads: a "not read" warning there, an error only where only Karpenter's kinds are taken (apply).
UNKNOWN_KIND = UNSUPPORTED_KIND.replace("kind: ConfigMap", "kind: ConfigMapp")
BAD_YAML = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: [oops\n"


def nodepool(name="default", weight=10):
    return shared.to_yaml(shared.nodepool(name, weight=weight))


def pair():
    return NODECLASS + "---\n" + nodepool()
