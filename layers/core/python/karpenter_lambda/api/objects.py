"""Typed wrappers over Karpenter v1 objects.

An object keeps its manifest as a plain dict in the CRD's own shape
(camelCase keys, exactly as a user writes it) with Karpenter's CRD defaults
applied.  Accessors give typed views of the fields the rest of the code uses;
``to_dict()`` gives the manifest back.  Nothing here does I/O.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from .budgets import Budget, parse_budgets
from .offpeak_types import NodePoolOverride, WorkloadTarget, parse_window_duration

KARPENTER_GROUP = "karpenter.sh"
AWS_GROUP = "karpenter.k8s.aws"


class KubeObject:
    """Any Kubernetes object (Pod, Deployment, ...) kept as its dict."""

    api_version: ClassVar[str] = ""
    kind_name: ClassVar[str] = ""

    def __init__(self, doc: dict):
        self.doc = doc

    # -- identity ---------------------------------------------------------------
    @property
    def kind(self) -> str:
        return self.doc.get("kind", self.kind_name)

    @property
    def metadata(self) -> dict:
        return self.doc.setdefault("metadata", {})

    @property
    def name(self) -> str:
        return self.metadata.get("name", "")

    @property
    def namespace(self) -> str:
        return self.metadata.get("namespace", "")

    @property
    def labels(self) -> dict:
        return self.metadata.get("labels") or {}

    @property
    def annotations(self) -> dict:
        return self.metadata.get("annotations") or {}

    @property
    def spec(self) -> dict:
        return self.doc.setdefault("spec", {})

    @property
    def status(self) -> dict:
        return self.doc.setdefault("status", {})

    def to_dict(self) -> dict:
        return copy.deepcopy(self.doc)

    def copy(self):
        return type(self)(copy.deepcopy(self.doc))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and other.doc == self.doc


class NodePool(KubeObject):
    api_version = "karpenter.sh/v1"
    kind_name = "NodePool"

    @property
    def replicas(self) -> int | None:
        """``spec.replicas`` (a static NodePool, validated >= 0), or None for a dynamic one."""
        r = (self.spec or {}).get("replicas")
        return r if isinstance(r, int) and not isinstance(r, bool) else None

    @property
    def template(self) -> dict:
        return self.spec.get("template") or {}

    @property
    def template_spec(self) -> dict:
        return self.template.get("spec") or {}

    @property
    def template_labels(self) -> dict:
        return (self.template.get("metadata") or {}).get("labels") or {}

    @property
    def template_annotations(self) -> dict:
        return (self.template.get("metadata") or {}).get("annotations") or {}

    @property
    def requirements(self) -> list[dict]:
        return self.template_spec.get("requirements") or []

    @property
    def taints(self) -> list[dict]:
        return self.template_spec.get("taints") or []

    @property
    def startup_taints(self) -> list[dict]:
        return self.template_spec.get("startupTaints") or []

    @property
    def node_class_ref(self) -> dict:
        return self.template_spec.get("nodeClassRef") or {}

    @property
    def expire_after(self) -> str:
        return self.template_spec.get("expireAfter", "720h")

    @property
    def termination_grace_period(self) -> str | None:
        return self.template_spec.get("terminationGracePeriod")

    @property
    def disruption(self) -> dict:
        return self.spec.get("disruption") or {}

    @property
    def budgets(self) -> tuple[Budget, ...]:
        """``spec.disruption.budgets`` as typed :class:`~.budgets.Budget` objects, defaulted (absent: one
        ``nodes: "10%"``); an entry that does not parse carries its ``problem`` (the allowance is then 0).  Parsed
        from the manifest on each access (``doc`` stays the CRD shape, so hashes and ``to_dict()`` do not move)."""
        return parse_budgets(self.disruption)

    @property
    def limits(self) -> dict:
        return self.spec.get("limits") or {}

    @property
    def weight(self) -> int:
        return int(self.spec.get("weight") or 0)


class EC2NodeClass(KubeObject):
    api_version = "karpenter.k8s.aws/v1"
    kind_name = "EC2NodeClass"

    @property
    def ami_family(self) -> str | None:
        """The AMI family, from ``amiFamily`` or derived from an ``alias`` term (``al2023@latest`` -> ``AL2023``)."""
        fam = self.spec.get("amiFamily")
        if fam:
            return fam
        alias = self.ami_alias
        if alias:
            return ALIAS_FAMILIES.get(alias.split("@", 1)[0].lower())
        return None

    @property
    def ami_alias(self) -> str | None:
        for term in self.spec.get("amiSelectorTerms") or []:
            if term.get("alias"):
                return term["alias"]
        return None

    @property
    def kubelet(self) -> dict:
        return self.spec.get("kubelet") or {}

    @property
    def block_device_mappings(self) -> list[dict]:
        return self.spec.get("blockDeviceMappings") or []

    @property
    def tags(self) -> dict:
        return self.spec.get("tags") or {}


class NodeClaim(KubeObject):
    api_version = "karpenter.sh/v1"
    kind_name = "NodeClaim"

    @property
    def nodepool_name(self) -> str:
        return self.labels.get("karpenter.sh/nodepool", "")

    @property
    def requirements(self) -> list[dict]:
        return self.spec.get("requirements") or []

    @property
    def conditions(self) -> list[dict]:
        return self.status.get("conditions") or []

    def condition(self, type_: str) -> dict | None:
        for c in self.conditions:
            if c.get("type") == type_:
                return c
        return None

    def is_true(self, type_: str) -> bool:
        c = self.condition(type_)
        return bool(c and c.get("status") == "True")


class OffPeakSchedule(KubeObject):
    """An off-peak window (karpenter-lambda.io/v1alpha1).  Defined here so ``KINDS`` registers it; the entry types
    are in :mod:`.offpeak_types`, the validation and docs in :mod:`.offpeak`."""

    api_version = "karpenter-lambda.io/v1alpha1"
    kind_name = "OffPeakSchedule"

    @property
    def time_zone(self) -> str:
        return self.spec.get("timeZone") or "UTC"

    @property
    def schedule(self) -> str:
        return self.spec.get("schedule") or ""

    @property
    def duration_seconds(self) -> int:
        return parse_window_duration(self.spec.get("duration"))

    @property
    def workloads(self) -> list:
        return [WorkloadTarget.from_spec(w) for w in self.spec.get("workloads") or []]

    @property
    def nodepools(self) -> list:
        return [NodePoolOverride.from_spec(n) for n in self.spec.get("nodePools") or []]


class NodeOverlay(KubeObject):
    """Karpenter's NodeOverlay (karpenter.sh/v1alpha1): prices and extended resources changed on the instance types
    its requirements select.  Validation and the price syntax in :mod:`.overlay`; applied by :mod:`..catalog.overlay`."""

    api_version = "karpenter.sh/v1alpha1"
    kind_name = "NodeOverlay"

    @property
    def requirements(self) -> list[dict]:
        return self.spec.get("requirements") or []

    @property
    def price(self) -> str | None:
        return self.spec.get("price")

    @property
    def price_adjustment(self) -> str | None:
        return self.spec.get("priceAdjustment")

    @property
    def price_change(self) -> str | None:
        """What the overlay does to a price: ``price`` (absolute, e.g. "0.25") or ``priceAdjustment`` ("-10%",
        "+0.5"); None when it sets neither (the CRD forbids both)."""
        return self.price if self.price is not None else self.price_adjustment

    @property
    def capacity(self) -> dict:
        """``spec.capacity`` as written (resource name -> quantity)."""
        return self.spec.get("capacity") or {}

    @property
    def weight(self) -> int:
        """``spec.weight``; unset counts as 0 (Karpenter's ``lo.FromPtr``)."""
        return int(self.spec.get("weight") or 0)


ALIAS_FAMILIES = {
    "al2": "AL2",
    "al2023": "AL2023",
    "bottlerocket": "Bottlerocket",
    "windows2019": "Windows2019",
    "windows2022": "Windows2022",
    "windows2025": "Windows2025",
}

KINDS: dict[tuple[str, str], type[KubeObject]] = {
    ("karpenter.sh/v1", "NodePool"): NodePool,
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): EC2NodeClass,
    ("karpenter.sh/v1", "NodeClaim"): NodeClaim,
    ("karpenter-lambda.io/v1alpha1", "OffPeakSchedule"): OffPeakSchedule,
    ("karpenter.sh/v1alpha1", "NodeOverlay"): NodeOverlay,
}
KIND_BY_NAME: dict[str, type[KubeObject]] = {cls.kind_name: cls for cls in KINDS.values()}
