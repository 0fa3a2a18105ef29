"""Spot interruptions in the fault run: the warning (sent to the interruption queue, or lost on the way), AWS's
reclaim two minutes later with its state-change event, and the interruption handler polling its queue (records it
failed come back after the visibility timeout; an acknowledged record is checked by the invariants)."""

from __future__ import annotations

import contextlib
import json

from .. import nodes as simnodes
from ..environment import LambdaContext
from ..interruption_events import spot_warning, state_change

SPOT_WARNING_SECONDS = 120.0


class SpotInterruptions:
    """Mixed into :class:`~.scenario.FaultRun` (its world ``w``, queue ``iq``, injector, invariants and handler)."""

    def _interrupt(self, iid: str | None = None, lose: bool | None = None) -> None:
        """A spot warning (random instance, random losses unless given), the reclaim two minutes later."""
        if iid is None:
            running = [i for i in self.w.instances(states=("running",)) if i["InstanceId"] not in self.interrupted]
            if not running:
                return
            iid = self.rng.choice(running)["InstanceId"]
        self.interrupted.add(iid)
        self.event("spot_warning")
        lose_state = self.rng.random() < 0.3 if lose is None else lose
        self.reclaims.append((self.w.clock.now() + SPOT_WARNING_SECONDS, iid, lose_state))
        if (self.rng.random() < 0.3) if lose is None else lose:
            self.inj.count("eventbridge_lost")          # the warning never reaches the queue
            return
        body = json.dumps(spot_warning(iid, self.w.clock.isoformat()))
        self.iq.send(body)
        if lose is None and self.rng.random() < 0.3:
            self.inj.count("sqs_duplicate")             # EventBridge -> SQS is at-least-once
            self.iq.send(body)

    def _aws_reclaims(self) -> None:
        now = self.w.clock.now()
        due = [r for r in self.reclaims if r[0] <= now]
        self.reclaims = [r for r in self.reclaims if r[0] > now]
        for _t, iid, lose in due:
            self.event("spot_reclaim")
            r = self.w.ec2.describe_instances(InstanceIds=[iid])["Reservations"]
            state = r[0]["Instances"][0]["State"]["Name"] if r else "terminated"
            if state not in ("shutting-down", "terminated"):
                self.w.ec2.terminate_instances(InstanceIds=[iid])
            for n in self.w.server.store.list("nodes"):
                if (n.get("spec") or {}).get("providerID", "").endswith("/" + iid):
                    simnodes.set_node_ready(self.w.server, n["metadata"]["name"], False)
            if lose:
                self.inj.count("eventbridge_lost")
            else:
                self.iq.send(json.dumps(state_change(iid, "shutting-down", self.w.clock.isoformat())))

    def _deliver_interruptions(self) -> None:
        w = self.w
        while True:
            before = (self.iq.redelivered, self.iq.depth(dlq=True))
            ev = self.iq.poll()
            self._count_queue(self.iq, before)
            if ev is None:
                return

            def call(ev=ev):
                with contextlib.redirect_stdout(w.logs):
                    return self.interruption.handler(ev, LambdaContext(f"{w.cluster}-interruption"))

            out = self._invoke("interruption", call)
            left = {r["messageId"] for r in self.iq.settle(ev, out)}
            for r in ev["Records"]:
                if r["messageId"] not in left:
                    self.invariants.acknowledged(r["body"])
            if left:
                return   # what is left comes back after the visibility timeout
