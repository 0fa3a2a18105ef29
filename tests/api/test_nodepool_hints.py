"""api/nodepool_hints.py: a NodePool requirement value no node has (a typo the CRD takes) is a warning at the
requirement's values; NotIn of such a value excludes nothing."""

from __future__ import annotations

from karpenter_lambda.api.nodepool_hints import nodepool_requirement_hints
from karpenter_lambda.catalog.instancetypes import label_values_of_names

CATALOG = label_values_of_names(["m5.large", "m7a.large", "m7g.large", "m7i.large", "c7g.large", "t3.nano"])


def _pool(*requirements: dict) -> dict:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
            "spec": {"template": {"spec": {"requirements": list(requirements),
                                           "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                            "name": "default"}}}}}


def test_requirement_values_no_node_has():
    pool = _pool({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd46", "arm64"]},
                 {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m7", "c7g"]},
                 {"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["t3.nanoo"]},
                 {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]},
                 {"key": "team", "operator": "In", "values": ["anything"]})
    assert [(e.path, e.message) for e in nodepool_requirement_hints(pool, CATALOG)] == [
        ("spec.template.spec.requirements[0].values",
         "no node has kubernetes.io/arch=amd46: its values on AWS nodes are amd64, arm64 (did you mean amd64?)"),
        ("spec.template.spec.requirements[1].values",
         "no instance type in karpenter-lambda's catalog has karpenter.k8s.aws/instance-family=m7 (did you mean m7a "
         "or m7g or m7i?)"),
        ("spec.template.spec.requirements[2].values",
         "no instance type in karpenter-lambda's catalog has node.kubernetes.io/instance-type=t3.nanoo (did you mean "
         "t3.nano?); NotIn of it excludes nothing"),
    ]


def test_known_values_and_odd_documents_give_nothing():
    pool = _pool({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                 {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m7g"]})
    assert nodepool_requirement_hints(pool, CATALOG) == []
    assert nodepool_requirement_hints({"spec": "x"}) == [] and nodepool_requirement_hints(None) == []


def test_an_expiry_shorter_than_ten_minutes_is_a_warning():
    pool = _pool()
    for value, warned in (("300s", True), ("720s", False), ("9m59s", True), ("10m", False), ("720h", False), ("Never", False),
                          ("bogus", False)):
        pool["spec"]["template"]["spec"]["expireAfter"] = value
        found = [(e.path, e.message) for e in nodepool_requirement_hints(pool)]
        assert found == ([("spec.template.spec.expireAfter",
                           f"expireAfter {value} is shorter than 10 minutes: every node expires and is replaced about "
                           "as soon as it is ready (a unit typo? h is hours)")] if warned else []), value


def test_a_budget_with_an_empty_reasons_list_is_said_to_limit_nothing():
    pool = {"spec": {"disruption": {"budgets": [{"nodes": "0", "reasons": []}, {"nodes": "1", "reasons": ["Empty"]},
                                                {"nodes": "10%"}]},
                     "template": {"spec": {"requirements": []}}}}
    hints = [(e.path, e.message) for e in nodepool_requirement_hints(pool, CATALOG)]
    assert hints == [("spec.disruption.budgets[0].reasons",
                      "an empty reasons list applies this budget to no disruption reason (as Karpenter reads it): it "
                      "limits nothing; leave reasons out to apply it to every reason")]
