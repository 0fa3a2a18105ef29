"""The simulator's report hook (sim/report_events.py) on a controller's reports, for tests that drive the lifecycle
handler in a World: what ``simulate`` would emit, collected as ``(kind, object, extra)``."""

from __future__ import annotations

import types

from karpenter_lambda.sim.report_events import ReportEventsMixin


class Events(ReportEventsMixin):
    def __init__(self, store):
        self.store, self.emitted = store, []
        self._launched, self._disrupted, self._budget_blocked, self.reasons = set(), set(), {}, {}
        self.clock = types.SimpleNamespace(elapsed=0.0)

    def emit(self, kind, obj, message, **extra):
        self.emitted.append((kind, obj, extra))

    def lifecycle(self, report: dict) -> dict:
        self._on_report("lifecycle", types.SimpleNamespace(**report))
        return report
