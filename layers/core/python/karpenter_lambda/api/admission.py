"""The API server's mutating admission of a pod, as one chain (pure): the LimitRanger (:mod:`.limitrange`), then the
Priority admission (:mod:`.priority`), then the RuntimeClass admission (:mod:`.runtimeclass`), in the order of
Kubernetes' default plugin list.  ``plan`` applies it to the pods it builds, the simulated API server to every pod
created, and ``simulate`` to its input's pods before the run (to name those the chain refuses)."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import limitrange, priority, runtimeclass

__all__ = ["Admission", "KINDS"]

#: the kinds the chain reads
KINDS = ("LimitRange", "PriorityClass", "RuntimeClass")


@dataclass(frozen=True)
class Admission:
    """What the chain reads: LimitRanges by namespace, PriorityClasses and RuntimeClasses by name."""

    ranges: dict[str, list[dict]] = field(default_factory=dict)
    priorities: dict[str, dict] = field(default_factory=dict)
    runtimes: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def of(cls, docs) -> "Admission":
        """The chain over the manifests ``docs`` (dicts; other kinds are ignored)."""
        docs = [d for d in docs if isinstance(d, dict) and d.get("kind") in KINDS]
        return cls(limitrange.limit_ranges(docs), priority.priority_classes(docs), runtimeclass.runtime_classes(docs))

    def admit(self, pod: dict) -> tuple[dict, str | None]:
        """(the pod as admitted, None) or (the pod, why the API server refuses it); ``pod`` is not modified."""
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        pod, problem = limitrange.admit(pod, self.ranges.get(ns, []))
        if problem is None:
            pod, problem = priority.admit(pod, self.priorities)
        if problem is None:
            pod, problem = runtimeclass.admit(pod, self.runtimes)
        return pod, problem


def refusal_hint(problem: str) -> str:
    """What to add to the input for a refusal of a class the input lacks ("" otherwise)."""
    if problem.startswith("RuntimeClass "):
        return " (add the RuntimeClass to the input)"
    if problem.startswith("no PriorityClass"):
        return " (add the PriorityClass to the input)"
    return ""
