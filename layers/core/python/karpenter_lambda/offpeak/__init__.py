"""Off-peak scale-down, pure: which workloads and NodePools an OffPeakSchedule (or a kube-downscaler annotation)
holds now, and the changes that get there.

Not disruption: nothing here chooses nodes to remove; it scales workloads and overrides NodePools for a window,
and the cluster's own machinery (consolidation, the termination flow) follows.  Like ``api``, ``scheduling``,
``catalog`` and ``disruption`` it does no I/O: ``now`` is passed in, and ``controllers/offpeak.py`` observes and
acts.

* :mod:`.window`: when a schedule's windows start and end in wall-clock time (DST rules).
* :mod:`.downscaler`: kube-downscaler's annotations, honoured unchanged.
* :mod:`.plan`: ``plan_offpeak(OffPeakInput) -> OffPeakPlan``, records first and restores exactly.

The contract (the OffPeakSchedule kind, its validation) is in ``api/offpeak.py``.
"""

from .downscaler import DownscalerDecision, DownscalerError, downscaler_decision, parse_exclude_until, parse_timespec
from .plan import (DOWNSCALER_ORIGINAL, DRAIN_LIMITS, HELD_BY_ANNOTATION, KEDA_PAUSED, ORIGINAL_ANNOTATION,
                   WORKLOAD_KINDS, Change, OffPeakInput, OffPeakPlan, ScheduleState, key_of, nodepool_overrides,
                   plan_offpeak, replicas_of, schedule_states, workload_key)
from .window import Window, localize, next_window, window_at

__all__ = [
    "Window",
    "window_at",
    "next_window",
    "localize",
    "DownscalerDecision",
    "DownscalerError",
    "downscaler_decision",
    "parse_timespec",
    "parse_exclude_until",
    "OffPeakInput",
    "OffPeakPlan",
    "ScheduleState",
    "Change",
    "plan_offpeak",
    "schedule_states",
    "nodepool_overrides",
    "workload_key",
    "key_of",
    "replicas_of",
    "ORIGINAL_ANNOTATION",
    "HELD_BY_ANNOTATION",
    "KEDA_PAUSED",
    "DOWNSCALER_ORIGINAL",
    "WORKLOAD_KINDS",
    "DRAIN_LIMITS",
]
