"""The one NodePool / EC2NodeClass manifest fixture of the tests (issue 22 item 5).

Every test helper that needs "the default NodePool and EC2NodeClass" builds it here, with keyword variants, instead
of keeping its own copy of the YAML:

    nodepool(capacity_types=("spot",), families=("m5",), budgets='[{nodes: "0"}]')  -> dict
    nodeclass(role="KarpenterNodeRole-demo", discovery="demo")                      -> dict
    to_yaml(nodepool(), nodeclass())                                                -> "...---..." text
    pair(**nodepool_kw)                                                             -> the two as YAML text

Defaults: NodePool ``default`` on amd64, limits ``cpu: "1000"``, referring to EC2NodeClass ``default`` (role
``KarpenterNodeRole-test``, AL2023, subnets and security groups discovered by ``karpenter.sh/discovery:
test-cluster``).  A keyword left at None leaves its field out, so a variant is exactly the manifest it names.
``budgets`` and ``annotations`` take a list/dict or their YAML text (as the helpers' callers write them).
"""

from __future__ import annotations

import copy
from typing import Any, Iterable

import yaml

NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"
NODECLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
ROLE = "KarpenterNodeRole-test"
DISCOVERY = "test-cluster"
DISCOVERY_TAG = "karpenter.sh/discovery"

ARCH = "kubernetes.io/arch"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"


def _parsed(value: Any) -> Any:
    return yaml.safe_load(value) if isinstance(value, str) else copy.deepcopy(value)


def requirement(key: str, values: Iterable[str], operator: str = "In") -> dict:
    return {"key": key, "operator": operator, "values": list(values)}


def nodepool(name: str = "default", *, arch: Iterable[str] | None = ("amd64",),
             capacity_types: Iterable[str] | None = None, families: Iterable[str] | None = None,
             requirements: list[dict] | None = None, nodeclass: str = "default", expire_after: str | None = None,
             termination_grace_period: str | None = None, policy: str | None = None,
             consolidate_after: str | None = None, budgets: Any = None, cpu_limit: str | None = "1000",
             weight: int | None = None, annotations: Any = None, labels: dict | None = None) -> dict:
    """A NodePool manifest (dict).  ``requirements`` replaces the arch / capacity-type / family ones; the
    disruption block appears when ``policy``, ``consolidate_after`` or ``budgets`` is given."""
    if requirements is None:
        requirements = []
        if arch is not None:
            requirements.append(requirement(ARCH, arch))
        if capacity_types is not None:
            requirements.append(requirement(CAPACITY_TYPE, capacity_types))
        if families is not None:
            requirements.append(requirement(INSTANCE_FAMILY, families))
    metadata: dict = {"name": name}
    if labels is not None:
        metadata["labels"] = dict(labels)
    if annotations is not None:
        metadata["annotations"] = _parsed(annotations)
    tspec: dict = {"requirements": copy.deepcopy(requirements), "nodeClassRef": {**NODECLASS_REF, "name": nodeclass}}
    if expire_after is not None:
        tspec["expireAfter"] = expire_after
    if termination_grace_period is not None:
        tspec["terminationGracePeriod"] = termination_grace_period
    spec: dict = {}
    if weight is not None:
        spec["weight"] = weight
    spec["template"] = {"spec": tspec}
    disruption: dict = {}
    if policy is not None:
        disruption["consolidationPolicy"] = policy
    if consolidate_after is not None:
        disruption["consolidateAfter"] = consolidate_after
    if budgets is not None:
        disruption["budgets"] = _parsed(budgets)
    if disruption:
        spec["disruption"] = disruption
    if cpu_limit is not None:
        spec["limits"] = {"cpu": cpu_limit}
    return {"apiVersion": NODEPOOL_API, "kind": "NodePool", "metadata": metadata, "spec": spec}


def nodeclass(name: str = "default", *, role: str = ROLE, discovery: str = DISCOVERY, alias: str = "al2023@latest",
              tags: dict | None = None) -> dict:
    """An EC2NodeClass manifest (dict): subnets and security groups by the discovery tag."""
    spec: dict = {"role": role, "amiSelectorTerms": [{"alias": alias}],
                  "subnetSelectorTerms": [{"tags": {DISCOVERY_TAG: discovery}}],
                  "securityGroupSelectorTerms": [{"tags": {DISCOVERY_TAG: discovery}}]}
    if tags is not None:
        spec["tags"] = dict(tags)
    return {"apiVersion": NODECLASS_API, "kind": "EC2NodeClass", "metadata": {"name": name}, "spec": spec}


def to_yaml(*docs: dict) -> str:
    """Documents as one YAML text, separated by ``---``."""
    return "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs)


def pair(*, nodeclass_kw: dict | None = None, **nodepool_kw) -> str:
    """The NodePool then its EC2NodeClass, as YAML text."""
    return to_yaml(nodepool(**nodepool_kw), nodeclass(**(nodeclass_kw or {})))


def workload(name: str, pod_spec: dict, *, kind: str = "Deployment", replicas: int | None = None,
             namespace: str | None = None, **spec: Any) -> dict:
    """A Deployment (or StatefulSet, ReplicaSet) manifest (dict) whose pods are labelled ``app: <name>`` and have
    ``pod_spec``; ``spec``: more fields of the workload's spec (``volumeClaimTemplates=[...]``, ``serviceName=...``)."""
    meta: dict = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    body: dict = {"selector": {"matchLabels": {"app": name}},
                  "template": {"metadata": {"labels": {"app": name}}, "spec": copy.deepcopy(pod_spec)}}
    if replicas is not None:
        body["replicas"] = replicas
    body.update(copy.deepcopy(spec))
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": body}


def m5_on_demand_pool(discovery: str = DISCOVERY) -> str:
    """The simulator tests' usual pair as YAML: a NodePool of on-demand m5 (no limits) and its EC2NodeClass
    (role KarpenterNodeRole-sim, subnets and security groups by the ``discovery`` tag)."""
    return pair(nodeclass_kw={"role": "KarpenterNodeRole-sim", "discovery": discovery}, arch=None,
                families=["m5"], capacity_types=["on-demand"], cpu_limit=None)
