"""The steps :mod:`.crashpoints` crashes at every external call: one scenario per (function, step), each small.

=================  =====================  ==================================================================
function           step                   set-up, then the step's invocation; what recovery adds
=================  =====================  ==================================================================
provisioner        pending-pods           Deployment web (2 x 500m) pending; the pod queue's batch (the
                                          cluster's first launch: instance profile, launch templates created)
provisioner        pending-pods-warm      the same after a first node (Deployment base, 1 x 1500m) was launched
lifecycle          register               web's instance launched, its kubelet joined; the sweep registers
                                          and initializes the NodeClaim
lifecycle          terminate              web on a node whose NodeClaim is deleting (AWS Health); the sweep
                                          drains it
consolidation      empty-propose          web scaled to 0: its node is empty; the sweep proposes its deletion
consolidation      empty-delete           the proposal made (set-up); the sweep taints and deletes the node
drift              propose                web on a node, the NodePool's template changed; the sweep proposes
drift              replace                the proposal made; the sweep taints and launches the replacement
drift              delete                 the replacement launched; the sweep requests the node's deletion
                                          (every recovery round of a sweep's scenario runs that sweep again)
interruption       spot-warning           web on a spot node; the warning, AWS reclaims the instance 2 min later
interruption       rebalance              same; a rebalance recommendation (the NodePool opts in to replacement)
interruption       scheduled-change       same; an AWS Health EC2 scheduledChange naming the instance
interruption       state-change           same; instance stopping (it stops), then the stopped event
interruption       capacity-reservation   same, the NodeClaim on a capacity reservation; the reservation's
                                          interruption warning, the instance reclaimed 2 min later
offpeak            window-start           web (dev) on a node; the window starts (dev to 0 replicas, NodePool
                                          drained); recovery: the periodic reconcile, then the window's end,
                                          after which web runs again with its 2 replicas and no record is left
offpeak            window-start-workloads the same without the NodePool drain
=================  =====================  ==================================================================

``Scenario.run(target) -> (calls, died, problems)``: from scratch, the set-up, the step under
:class:`~.crashpoints.CrashDoors` (crashing at ``target`` = (index, when), or recording with None), the recovery,
the end-state checks (:func:`~.crashpoint_world.end_state_problems` + the scenario's own).
"""

from __future__ import annotations

import contextlib
import os
from datetime import datetime, timezone

from ...api import labels as wk
from ...api.kube import instance_id_of
from ..interruption_events import (capacity_reservation_interruption, health_scheduled_change, rebalance,
                                   spot_warning, state_change)
from ..world import NODECLASS_YAML, World
from ...controllers import environment
from . import crashpoint_fork as forks
from .crashpoint_world import CrashWorld, deployment, end_state_problems
from .crashpoints import CrashDoors

NODEPOOL = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
  annotations:
    karpenter-lambda.io/rebalance-replace: "true"
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
        - key: karpenter.k8s.aws/instance-family
          operator: In
          values: ["m5", "c5", "m6i"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      expireAfter: 720h
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 30s
    budgets: [{nodes: "1"}]
  limits:
    cpu: "100"
---
""" + NODECLASS_YAML

OFFPEAK = """---
apiVersion: karpenter-lambda.io/v1alpha1
kind: OffPeakSchedule
metadata:
  name: nights
spec:
  timeZone: Europe/Berlin
  schedule: "0 20 * * *"
  duration: 12h
  workloads:
    - namespaces: [dev]
      replicas: 0
%(drain)s"""
DRAIN = """  nodePools:
    - name: default
      drain: true
"""


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc).timestamp()


START = _ts("2027-01-12T18:40:00Z")          # 19:40 in Berlin (winter): the off-peak window starts at 19:00Z


class Scenario:
    function = ""
    step = ""
    expect = ""           # a key of the step's report that must not be empty in the run without a crash
    manifests = NODEPOOL

    @property
    def name(self) -> str:
        return f"{self.function}/{self.step}"

    # -- the parts a scenario defines -----------------------------------------------------------------------
    def setup(self, cw: CrashWorld) -> None:
        cw.add(deployment("web", 2))
        cw.bring_up()

    def invoke(self, cw: CrashWorld) -> dict:
        raise NotImplementedError

    def after(self, cw: CrashWorld, answer: dict | None, died: bool) -> None:
        """What follows the step (SQS redelivery, AWS's announced actions)."""

    def sweeps(self, cw: CrashWorld) -> None:
        """The scheduled function's next runs during recovery (each round)."""

    def recover(self, cw: CrashWorld) -> list[str]:
        cw.settle(self.sweeps)
        return []

    # -- runs ------------------------------------------------------------------------------------------------
    def finish(self, cw: CrashWorld, doors: CrashDoors, target: tuple[int, str] | None):
        """The step (a cold start: the controllers' environment dropped first), what follows it, the recovery and
        the checks: (calls, died, problems)."""
        environment.reset()
        answer, died = doors.invoke(lambda: self.invoke(cw), target)
        calls = list(doors.calls)
        problems = [f"the step did nothing: no {self.expect!r} in its report"] \
            if target is None and self.expect and not (answer or {}).get(self.expect) else []
        self.after(cw, answer, died)
        problems += self.recover(cw)
        return calls, died, end_state_problems(cw) + problems

    @contextlib.contextmanager
    def session(self, fork: bool = True, jobs: int = 1):
        """``with scenario.session() as run: run(targets) -> [(calls, died, problems)]``, every run from the same
        starting point: with ``fork``, the world is set up once and every run is a forked copy of it (``jobs`` at
        once); else each run builds its world from scratch."""
        if not fork or not hasattr(os, "fork"):
            yield lambda targets: [self._fresh(t) for t in targets]
            return
        with World(self.manifests, start=START) as w, CrashDoors() as doors:
            cw = CrashWorld(w)
            self.setup(cw)
            environment.reset()
            since = forks.checkpoint()

            def run(targets):
                out, running = [], []
                for t in targets:
                    if len(running) >= max(jobs, 1):
                        out.append(forks.collect(running.pop(0)))
                    running.append(forks.start(lambda t=t: self.finish(cw, doors, t), w.server, since))
                out.extend(forks.collect(c) for c in running)
                return out

            yield run

    def _fresh(self, target):
        with World(self.manifests, start=START) as w, CrashDoors() as doors:
            cw = CrashWorld(w)
            self.setup(cw)
            return self.finish(cw, doors, target)


class Provisioner(Scenario):
    function, step = "provisioner", "pending-pods"

    def setup(self, cw):
        cw.add(deployment("web", 2))
        cw.w.schedule()
        self.event = cw.w.sqs_event(cw.pending())

    def invoke(self, cw):
        return cw.w.provision(self.event)

    def after(self, cw, answer, died):
        cw.after_delivery("provisioner", self.event, answer, died)


class ProvisionerWarm(Provisioner):
    """A second launch: the launch template and the instance profile exist (fewer writes than the first)."""
    step = "pending-pods-warm"

    def setup(self, cw):
        cw.add(deployment("base", 1, cpu="1500m"))     # fills its node: web needs a new one
        cw.bring_up()
        super().setup(cw)


class LifecycleRegister(Scenario):
    function, step, expect = "lifecycle", "register", "registered"

    def setup(self, cw):
        cw.add(deployment("web", 2))
        cw.w.schedule()
        cw.deliver("provisioner", cw.w.sqs_event(cw.pending()))
        cw.kubelets()

    def invoke(self, cw):
        return cw.w.sweep()


class LifecycleTerminate(Scenario):
    function, step, expect = "lifecycle", "terminate", "evicted"

    def setup(self, cw):
        super().setup(cw)
        (nc,) = cw.w.store.list("NodeClaim")
        iid = instance_id_of(nc.status.get("providerID"))
        cw.deliver("interruption", cw.interruption_event(health_scheduled_change([iid], cw.w.clock.isoformat())))
        assert cw.w.store.get("NodeClaim", nc.name).metadata.get("deletionTimestamp"), "set-up: NodeClaim not deleting"
        # the replacement launched at the notice joins: the sweep initializes it, and the drain its deletion waited
        # for (termination.HOLD_FOR_REPLACEMENTS) starts in the same sweep
        cw.kubelets()

    def invoke(self, cw):
        return cw.w.sweep()


class Sweep(Scenario):
    """A disruption sweep's step: the sweeps before it run (with a round after each) in the set-up."""
    prior = 0

    def prepare(self, cw):
        """The change that makes the sweep act."""

    def setup(self, cw):
        super().setup(cw)
        self.prepare(cw)
        for _ in range(self.prior):
            self.invoke(cw)
            cw.round()

    def invoke(self, cw):
        return cw.w.invoke(self.function)

    def sweeps(self, cw):
        cw.w.invoke(self.function)


class Consolidation(Sweep):
    function = "consolidation"

    def prepare(self, cw):
        cw.scale("web", 0)
        cw.w.clock.advance(60)


class ConsolidationPropose(Consolidation):
    step, prior, expect = "empty-propose", 1, "proposed"


class ConsolidationDelete(Consolidation):
    step, prior, expect = "empty-delete", 2, "disrupted"


class Drift(Sweep):
    function = "drift"

    def prepare(self, cw):
        def mutate(np):
            np.spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})["gen"] = "2"

        cw.w.store.update("NodePool", "default", mutate)


class DriftPropose(Drift):
    step, prior, expect = "propose", 0, "proposed"


class DriftReplace(Drift):
    step, prior, expect = "replace", 1, "replacing"


class DriftDelete(Drift):
    step, prior, expect = "delete", 2, "disrupted"


class Interruption(Scenario):
    function = "interruption"
    reclaim_after: float | None = None      # AWS takes the instance back this long after the notice
    reclaim_state = "terminated"

    def message(self, iid: str, now: str) -> dict:
        raise NotImplementedError

    def setup(self, cw):
        super().setup(cw)
        (nc,) = cw.w.store.list("NodeClaim")
        self.iid = instance_id_of(nc.status.get("providerID"))
        self.event = cw.interruption_event(self.message(self.iid, cw.w.clock.isoformat()))

    def invoke(self, cw):
        return cw.call("interruption", self.event)

    def after(self, cw, answer, died):
        cw.after_delivery("interruption", self.event, answer, died)
        if self.reclaim_after is not None:
            cw.later(self.reclaim_after, lambda: cw.reclaim(self.iid, self.reclaim_state))


class Spot(Interruption):
    step, reclaim_after = "spot-warning", 120.0

    def message(self, iid, now):
        return spot_warning(iid, now)


class Rebalance(Interruption):
    step = "rebalance"

    def message(self, iid, now):
        return rebalance(iid, now)


class ScheduledChange(Interruption):
    step = "scheduled-change"

    def message(self, iid, now):
        return health_scheduled_change([iid], now)


class StateChange(Interruption):
    step, reclaim_after, reclaim_state = "state-change", 30.0, "stopped"

    def message(self, iid, now):
        return state_change(iid, "stopping", now)


class CapacityReservation(Interruption):
    step, reclaim_after = "capacity-reservation", 120.0

    def setup(self, cw):
        super().setup(cw)
        (nc,) = cw.w.store.list("NodeClaim")

        def reserved(obj):     # as a NodeClaim launched into a capacity reservation is labelled
            obj.metadata["labels"].update({wk.CAPACITY_TYPE: "reserved",
                                           wk.CAPACITY_RESERVATION_ID: "cr-0123456789abcdef0"})

        cw.w.store.update("NodeClaim", nc.name, reserved)

    def message(self, iid, now):
        return capacity_reservation_interruption(iid, now)


class OffPeak(Scenario):
    function, step, expect = "offpeak", "window-start", "scaled"
    manifests = NODEPOOL + OFFPEAK % {"drain": DRAIN}
    drain = True
    window_start, window_end = _ts("2027-01-12T19:00:00Z"), _ts("2027-01-13T07:00:00Z")

    def setup(self, cw):
        cw.add(deployment("web", 2, namespace="dev"))
        cw.bring_up()
        cw.w.clock.advance_to(max(self.window_start, cw.w.clock.now()))

    def invoke(self, cw):
        return cw.w.invoke("offpeak")

    def sweeps(self, cw):
        cw.w.invoke("offpeak")

    def recover(self, cw):
        cw.settle(self.sweeps)
        problems = []
        web = cw.w.server.store.get("deployments", "web", "dev")
        if (web.get("spec") or {}).get("replicas") != 0:
            problems.append(f"in the window: dev/web has {web['spec'].get('replicas')} replicas, not 0")
        live = [nc.name for nc in cw.w.store.list("NodeClaim") if not nc.metadata.get("deletionTimestamp")]
        if live and self.drain:
            problems.append(f"in the window: NodePool default not drained ({live})")
        cw.w.clock.advance_to(self.window_end)
        cw.settle(self.sweeps)
        web = cw.w.server.store.get("deployments", "web", "dev")
        if (web.get("spec") or {}).get("replicas") != 2:
            problems.append(f"after the window: dev/web has {web['spec'].get('replicas')} replicas, not 2")
        left = sorted(o.name for o in cw.w.store.list("OffPeakRecord"))
        if left:
            problems.append(f"after the window: off-peak records left {left}")
        return problems


class OffPeakWorkloads(OffPeak):
    """The window without the NodePool drain: only the workloads scaled to zero and back."""
    step = "window-start-workloads"
    manifests = NODEPOOL + OFFPEAK % {"drain": ""}
    drain = False


SCENARIOS = {s.function + "/" + s.step: s for s in (
    Provisioner, ProvisionerWarm, LifecycleRegister, LifecycleTerminate, ConsolidationPropose, ConsolidationDelete,
    DriftPropose, DriftReplace, DriftDelete, Spot, Rebalance, ScheduledChange, StateChange, CapacityReservation,
    OffPeak, OffPeakWorkloads)}

# the cheapest scenario of each function (tests/reliability/test_crash_points.py runs these exhaustively)
CHEAPEST = ["provisioner/pending-pods-warm", "lifecycle/register", "consolidation/empty-delete", "drift/propose",
            "interruption/state-change", "offpeak/window-start-workloads"]
