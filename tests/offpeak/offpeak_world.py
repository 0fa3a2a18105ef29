"""Test harness for the off-peak function: a World (moto + the local Kubernetes API + a virtual clock starting at a
chosen instant) with a NodePool, OffPeakSchedules, and Deployments/StatefulSets/HPAs/ScaledObjects created in the
API; the real ``functions/offpeak/handler.py`` is invoked by name."""

from __future__ import annotations

from datetime import datetime, timezone

import manifests as shared
from karpenter_lambda.sim.world import World

# the shared NodePool + EC2NodeClass (tests/manifests.py): on-demand m5/c5, empty nodes consolidated after 5 minutes
NODEPOOL = shared.pair(capacity_types=("on-demand",), families=("m5", "c5"), policy="WhenEmpty", consolidate_after="5m")

NIGHTS = """
apiVersion: karpenter-lambda.io/v1alpha1
kind: OffPeakSchedule
metadata:
  name: nights
spec:
  timeZone: %(tz)s
  schedule: "%(schedule)s"
  duration: %(duration)s
%(body)s
"""

DEV_WORKLOADS = """
  workloads:
    - namespaces: [dev]
      replicas: 0
"""


def schedule(body: str = DEV_WORKLOADS, *, name: str = "nights", tz: str = "Europe/Berlin",
             cron: str = "0 20 * * *", duration: str = "12h") -> str:
    return (NIGHTS % {"tz": tz, "schedule": cron, "duration": duration, "body": body.rstrip()}).replace(
        "name: nights", f"name: {name}", 1)


def ts(text: str) -> float:
    """'2027-01-12T18:59:00Z' -> epoch seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc).timestamp()


def deployment(name: str, namespace: str = "dev", replicas: int = 1, labels: dict | None = None,
               annotations: dict | None = None, kind: str = "Deployment") -> dict:
    labels = dict(labels or {"app": name})
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "c", "image": "nginx",
                                                  "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}]}}}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    meta = {"name": name, "namespace": namespace, "labels": labels}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": spec}


class OffPeakWorld:
    """A World plus helpers: create/scale workloads in the API, invoke the off-peak function at a time."""

    def __init__(self, manifests: str, start: str):
        self.world = World(manifests, start=ts(start))

    def __enter__(self) -> "OffPeakWorld":
        self.w = self.world.__enter__()
        self.server = self.w.server
        self.store = self.w.store
        for ns in ("dev", "staging", "prod"):
            if self.server.store.get("namespaces", ns) is None:
                self.server.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        return self

    def __exit__(self, *exc):
        return self.world.__exit__(*exc)

    # -- objects -----------------------------------------------------------------------------------
    @staticmethod
    def plural(kind: str) -> str:
        return {"Deployment": "deployments", "StatefulSet": "statefulsets"}[kind]

    def create(self, doc: dict) -> dict:
        plural = {"Deployment": "deployments", "StatefulSet": "statefulsets", "Namespace": "namespaces",
                  "HorizontalPodAutoscaler": "horizontalpodautoscalers", "ScaledObject": "scaledobjects"}[doc["kind"]]
        ns = (doc.get("metadata") or {}).get("namespace")
        return self.server.store.create(plural, doc, ns) if ns else self.server.store.create(plural, doc)

    def replicas(self, name: str, namespace: str = "dev", kind: str = "Deployment") -> int:
        return self.server.store.get(self.plural(kind), name, namespace)["spec"]["replicas"]

    def set_replicas(self, name: str, n: int, namespace: str = "dev", kind: str = "Deployment") -> None:
        self.server.store.patch(self.plural(kind), name, {"spec": {"replicas": n}}, namespace=namespace)

    def get(self, plural: str, name: str, namespace: str | None = None) -> dict | None:
        return self.server.store.get(plural, name, namespace)

    # -- time and the function ---------------------------------------------------------------------
    def at(self, when: str) -> None:
        self.w.clock.advance_to(ts(when))

    def run(self, when: str | None = None) -> dict:
        if when is not None:
            self.at(when)
        return self.w.invoke("offpeak")

    def records(self) -> dict[str, dict]:
        return {o.spec["key"]: o.spec for o in self.store.list("OffPeakRecord")}

    def writes(self) -> int:
        """Mutating requests the API server has seen so far (a run that changes nothing adds none)."""
        return sum(1 for m, _p, _c in self.server.requests() if m in ("PATCH", "PUT", "POST", "DELETE"))
