NODECLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: test
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: test
"""

NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  weight: {weight}
  limits:
    cpu: "1000"
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
"""

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
BAD_YAML = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: [oops\n"


def nodepool(name="default", weight=10):
    return NODEPOOL.format(name=name, weight=weight)


def pair():
    return NODECLASS + "---\n" + nodepool()
