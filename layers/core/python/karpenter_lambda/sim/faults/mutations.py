"""Mutation switches: each recovery path of the controllers switched off, one at a time (issue 29 item 1).

Not production flags: each is a context manager that patches the controllers' recovery function or method in this
process so that the path does nothing, and names what must catch it (invariants of :mod:`.invariants`, or loss
counters).  A fault run with a mutation on must FAIL: ``tests/reliability/test_mutations.py`` and
``bench/faults.py`` (``mutations: {name: caught_by}``) run the targeted scenario (:mod:`.targeted`) with each.

| mutation | switched off | caught by |
|---|---|---|
| ``adoption`` | ``Launcher.adopt`` (the lifecycle sweep's and ``Launcher.resolve``'s adoption of the instance tagged for a NodeClaim) writes nothing | ``no_leaked_instance`` (the tagged instance never adopted), ``pending_bound`` |
| ``orphan_gc`` | the lifecycle sweep's termination of instances no NodeClaim names (``Lifecycle._terminate`` with an ``orphan`` reason) | ``no_leaked_instance`` |
| ``stale_claim_release`` | the lifecycle sweep's release of launch claims without a NodeClaim (``lifecycle.STALE_CLAIM_AGE`` infinite) | ``usage_matches_claims`` |
| ``stale_taint_removal`` | ``Executor.remove_stale_taints`` | ``disrupted_taint_has_command`` |
| ``ledger_release`` | ``DisruptionLedger.release`` of an entry whose NodeClaim is gone (the sweeps' and the dead-slot release) | ``ledger_progress`` |
| ``replacement_timeout`` | the 10-minute replacement timeout (``disruption_exec.REPLACEMENT_TIMEOUT`` infinite) | ``ledger_progress`` (a command whose replacement registered but never became Ready holds its budget slot) |
| ``launch_retry`` | ``Launcher.resolve``'s relaunch (the lifecycle sweep's and the provisioner's) of a NodeClaim whose launch outcome is unknown and that no instance is tagged for | ``launch_resolved`` (left to the 5-minute backstop), ``pending_bound`` |
| ``interruption_redelivery`` | the interruption controller's failed records (``InterruptionReport.retry`` -> ``batchItemFailures``) | ``interruption_acted_before_ack`` |
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Iterator

from ...adapters.store.ledger import DisruptionLedger
from ...cloudprovider.instance import GONE_STATES, instance_state
from ...controllers import disruption_exec, environment, lifecycle
from ...controllers.disruption_exec import Executor
from ...controllers.interrupt import Interruption
from ...controllers.launcher import Launcher
from ...controllers.lifecycle import Lifecycle


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str                        # the recovery path switched off
    caught_by: tuple[str, ...]       # invariants (or loss counters) that must fire
    patch: Callable[[], contextlib.AbstractContextManager]


@contextlib.contextmanager
def _setattr(obj, name: str, value) -> Iterator[None]:
    saved = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, saved)


def _no_adoption():
    def adopt(self, name, nodepool, desc, it):   # nothing written on the record
        return self.cloud.as_instance(desc)
    return _setattr(Launcher, "adopt", adopt)


def _no_orphan_gc():
    orig = Lifecycle._terminate

    def terminate(self, instance_id, nodeclaim, reason, report):
        if str(reason).startswith("orphan"):
            return None
        return orig(self, instance_id, nodeclaim, reason, report)
    return _setattr(Lifecycle, "_terminate", terminate)


def _no_stale_claim_release():
    return _setattr(lifecycle, "STALE_CLAIM_AGE", float("inf"))


def _no_stale_taint_removal():
    return _setattr(Executor, "remove_stale_taints", lambda self, snap, report: [])


def _no_ledger_release():
    orig = DisruptionLedger.release

    def release(self, entry):
        if environment.get_environment().store.get("NodeClaim", entry.nodeclaim) is None:
            return False   # the entry of a gone NodeClaim stays
        return orig(self, entry)
    return _setattr(DisruptionLedger, "release", release)


def _no_replacement_timeout():
    return _setattr(disruption_exec, "REPLACEMENT_TIMEOUT", float("inf"))


def _no_launch_retry():
    orig = Launcher.resolve

    def resolve(self, nc, nodepool, nodeclass, resolved, instance_types):
        live = [d for d in self.cloud.instances_of(nc.name).values() if instance_state(d) not in GONE_STATES]
        if not live:
            return "skipped", "relaunch switched off (mutation)"
        return orig(self, nc, nodepool, nodeclass, resolved, instance_types)
    return _setattr(Launcher, "resolve", resolve)


def _no_interruption_redelivery():
    orig = Interruption.handle

    def handle(self, messages):
        report = orig(self, messages)
        report.retry = []
        return report
    return _setattr(Interruption, "handle", handle)


MUTATIONS: dict[str, Mutation] = {m.name: m for m in (
    Mutation("adoption", "Launcher.adopt (lifecycle adoption and Launcher.resolve)",
             ("no_leaked_instance", "pending_bound"), _no_adoption),
    Mutation("orphan_gc", "Lifecycle.sweep orphan termination by providerID", ("no_leaked_instance",), _no_orphan_gc),
    Mutation("stale_claim_release", "Lifecycle.sweep release of launch claims without a NodeClaim",
             ("usage_matches_claims",), _no_stale_claim_release),
    Mutation("stale_taint_removal", "Executor.remove_stale_taints", ("disrupted_taint_has_command",),
             _no_stale_taint_removal),
    Mutation("ledger_release", "DisruptionLedger.release of entries whose NodeClaim is gone", ("ledger_progress",),
             _no_ledger_release),
    Mutation("replacement_timeout", "Executor._check_replacements 10-minute timeout", ("ledger_progress",),
             _no_replacement_timeout),
    Mutation("launch_retry", "Launcher.resolve relaunch of an unknown launch (lifecycle sweep and provisioner)",
             ("launch_resolved", "pending_bound"), _no_launch_retry),
    Mutation("interruption_redelivery", "Interruption.handle failed records -> batchItemFailures",
             ("interruption_acted_before_ack",), _no_interruption_redelivery),
)}


def switched_off(name: str) -> contextlib.AbstractContextManager:
    """``with switched_off("adoption"): ...`` -- that recovery path does nothing inside the block."""
    return MUTATIONS[name].patch()
