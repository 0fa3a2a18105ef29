"""Off-peak schedules in the simulator: window edges as timers, and the night's summary for ``--json``.

* **Edges.** EventBridge Scheduler invokes the off-peak function at each window's start and end; the simulator
  does the same on the virtual clock (:func:`window_edges`): with ``--until``, every edge before it; without, the
  first window that holds the start or begins after it (so a run without ``--until`` ends the morning after), and
  the simulator adds the windows that start before a later timer or hold the time when the run would stop
  (``Simulation._add_wakeups``).
  The periodic reconcile (``offpeakIntervalMinutes``) runs as every scheduled function does.
* **Summary** (:func:`offpeak_summary`): per window, the cost per hour just before it started, the lowest cost
  per hour during it, the cost per hour after it ended (when simulated) and the dollars saved against the
  cost before it (the integral of the difference over the window, from ``costTimeline``).
"""

from __future__ import annotations

from ..api.times import to_datetime
from ..offpeak import next_window, window_at


def window_edges(schedules: list, start: float, until: float | None) -> list[tuple[float, str, str, dict]]:
    """[(seconds since start, schedule name, "start"|"end", window dict)] in time order."""
    t0 = to_datetime(start)
    out = []
    for s in schedules:
        try:
            w = window_at(s.schedule, s.time_zone, s.duration_seconds, t0) or \
                next_window(s.schedule, s.time_zone, s.duration_seconds, t0)
        except (ValueError, KeyError):
            continue
        while w is not None:
            info = {"schedule": s.name, "start": w.start.timestamp() - start, "end": w.end.timestamp() - start}
            for edge, at in (("start", info["start"]), ("end", info["end"])):
                if at >= 0 and (until is None or at <= until):
                    out.append((at, s.name, edge, info))
            if until is None or w.end.timestamp() - start >= until:
                break
            w = next_window(s.schedule, s.time_zone, s.duration_seconds, w.start)
    out.sort(key=lambda e: (e[0], e[2] != "end"))
    return out


def _cost_at(timeline: list[dict], t: float) -> float:
    cost = 0.0
    for e in timeline:
        if e["time"] <= t:
            cost = e["costPerHour"]
        else:
            break
    return cost


def offpeak_summary(edges: list[tuple[float, str, str, dict]], timeline: list[dict], elapsed: float) -> list[dict]:
    """One entry per simulated window: costs per hour before / lowest / after, and the dollars saved."""
    seen, out = set(), []
    for _at, name, _edge, w in edges:
        key = (name, w["start"])
        if key in seen or w["start"] > elapsed:
            continue
        seen.add(key)
        start, end = max(w["start"], 0.0), min(w["end"], elapsed)
        before = _cost_at(timeline, start - 1e-6) if start > 0 else _cost_at(timeline, 0.0)
        points = [start] + [e["time"] for e in timeline if start < e["time"] < end] + [end]
        low, saved = before, 0.0
        for a, b in zip(points, points[1:]):
            c = _cost_at(timeline, a)
            low = min(low, c)
            saved += (before - c) * (b - a) / 3600.0
        entry = {"schedule": name, "windowStart": round(w["start"], 3), "windowEnd": round(w["end"], 3),
                 "costPerHourBefore": round(before, 6), "lowestCostPerHour": round(low, 6),
                 "savedDollars": round(saved, 4), "simulatedToEnd": w["end"] <= elapsed}
        if w["end"] <= elapsed:
            entry["costPerHourAfter"] = round(_cost_at(timeline, elapsed), 6)
        out.append(entry)
    return out
