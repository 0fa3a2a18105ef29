from karpenter_lambda.api.objects import EC2NodeClass, NodeClaim, NodePool


def nodepool(name="default", weight=10, **spec):
    return NodePool({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"weight": weight, "template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}, **spec},
    })


def nodeclass(name="default"):
    return EC2NodeClass({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
        "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}]},
    })


def nodeclaim(name="default-abcde", pool="default"):
    return NodeClaim({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}],
                 "resources": {"requests": {"cpu": "1"}}},
    })
