"""One self-contained HTML page for a simulation: ``simulate ... --report report.html``.

Pure rendering: :func:`render_report` takes the result dict (``SimulationResult.to_dict()``, the ``--json``
document) and returns the page as a string; the caller writes it.  The page has inline SVG and CSS only:
no script, no network, no external URL, so it opens offline and can be attached to a ticket.

It shows

* nodes and cost per hour over virtual time (``costTimeline``), one polyline each, one point per entry;
* one lifeline per NodeClaim: launched, ready (``NodeClaimInitialized``, or ``NodeReady`` of its node),
  disrupted (with the ``reason`` key of ``NodeClaimDisrupted``) and deleted, from ``events``;
* what the control plane costs a month (``controlPlaneCost``: per function and per service, :mod:`.cost_render`);
* the events table (time, type, object, message).

Every text taken from the result goes through :func:`html.escape`.
"""

from __future__ import annotations

import re
from html import escape

from .clock import format_elapsed
from .cost_render import cost_section

_W, _H = 900, 260                   # cost/nodes chart size (SVG user units)
_ML, _MR, _MT, _MB = 70, 60, 20, 30  # its margins: left (cost axis), right (nodes axis), top, bottom
_ROW = 22                           # lifeline row height
_LABEL = 260                        # lifeline label column width

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.t{text-align:right;white-space:nowrap;font-family:monospace}
svg text{font-size:11px;font-family:system-ui,sans-serif}
.cost{fill:none;stroke:#c0392b;stroke-width:2}.nodes{fill:none;stroke:#2471a3;stroke-width:2}
.axis{stroke:#888}.grid{stroke:#eee}.life{stroke:#888;stroke-width:3}.ready{stroke:#27ae60;stroke-width:3}
.draining{stroke:#e67e22;stroke-width:3}.mk-launch{fill:#2471a3}.mk-ready{fill:#27ae60}.mk-disrupted{fill:#e67e22}
.mk-deleted{fill:#555}.legend{font-size:12px}.summary{font-size:13px}
"""


def _num(v, default=0.0) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


def _t(seconds: float) -> str:
    return "+" + format_elapsed(seconds)


def _end_time(result: dict) -> float:
    times = [_num(e.get("time")) for e in result.get("events") or []]
    times += [_num(c.get("time")) for c in result.get("costTimeline") or []]
    return max([_num(result.get("simulatedSeconds"))] + times + [1.0])


def _chart(result: dict, end: float) -> str:
    timeline = result.get("costTimeline") or []
    pw, ph = _W - _ML - _MR, _H - _MT - _MB
    max_cost = max([_num(c.get("costPerHour")) for c in timeline] + [0.0]) or 1.0
    max_nodes = max([int(_num(c.get("nodes"))) for c in timeline] + [0]) or 1

    def x(t: float) -> float:
        return _ML + pw * min(max(t, 0.0), end) / end

    def y(v: float, top: float) -> float:
        return _MT + ph - ph * v / top

    parts = [f'<svg id="cost-chart" width="{_W}" height="{_H}" '
             f'viewBox="0 0 {_W} {_H}" role="img" aria-label="nodes and cost per hour over time">']
    for i in range(5):   # horizontal grid + both axes' ticks
        gy = _MT + ph * i / 4
        parts.append(f'<line class="grid" x1="{_ML}" y1="{gy:.1f}" x2="{_W - _MR}" y2="{gy:.1f}"/>')
        parts.append(f'<text x="{_ML - 6}" y="{gy + 4:.1f}" text-anchor="end">${max_cost * (4 - i) / 4:.3f}</text>')
        parts.append(f'<text x="{_W - _MR + 6}" y="{gy + 4:.1f}">{max_nodes * (4 - i) / 4:g}</text>')
    for i in range(5):
        tx = _ML + pw * i / 4
        parts.append(f'<text x="{tx:.1f}" y="{_H - 8}" text-anchor="middle">{escape(_t(end * i / 4))}</text>')
    parts.append(f'<line class="axis" x1="{_ML}" y1="{_MT + ph}" x2="{_W - _MR}" y2="{_MT + ph}"/>')
    cost_pts = " ".join(f"{x(_num(c.get('time'))):.1f},{y(_num(c.get('costPerHour')), max_cost):.1f}" for c in timeline)
    node_pts = " ".join(f"{x(_num(c.get('time'))):.1f},{y(_num(c.get('nodes')), max_nodes):.1f}" for c in timeline)
    parts.append(f'<polyline class="cost" points="{cost_pts}"><title>cost per hour ($)</title></polyline>')
    parts.append(f'<polyline class="nodes" points="{node_pts}"><title>nodes</title></polyline>')
    parts.append(f'<text class="legend" x="{_ML + 8}" y="{_MT + 12}" fill="#c0392b">cost/h ($, left)</text>')
    parts.append(f'<text class="legend" x="{_ML + 120}" y="{_MT + 12}" fill="#2471a3">nodes (right)</text>')
    parts.append("</svg>")
    return "\n".join(parts)


_NODE_OF = re.compile(r"^node (\S+) (?:registered|initialized)")


def lifelines(result: dict) -> list[dict]:
    """Per NodeClaim, in order of first appearance: ``{name, launched, ready, disrupted, reason, deleted}``
    (times in virtual seconds, None when it did not happen in the run)."""
    rows: dict[str, dict] = {}
    node_to_claim: dict[str, str] = {}
    for c in result.get("nodeClaims") or []:
        if c.get("name"):
            rows.setdefault(c["name"], _row(c["name"]))
            if c.get("nodeName"):
                node_to_claim[c["nodeName"]] = c["name"]
    events = result.get("events") or []
    for e in events:
        obj = str(e.get("object") or "")
        if obj.startswith("nodeclaim/") and e.get("type") in ("NodeClaimRegistered", "NodeClaimInitialized"):
            m = _NODE_OF.match(str(e.get("message") or ""))
            if m:
                node_to_claim.setdefault(m.group(1), obj.split("/", 1)[1])
    for e in events:
        typ, obj, t = e.get("type"), str(e.get("object") or ""), _num(e.get("time"))
        kind, _, name = obj.partition("/")
        if kind == "node" and typ == "NodeReady" and name in node_to_claim:
            r = rows.setdefault(node_to_claim[name], _row(node_to_claim[name]))
            r["ready"] = t if r["ready"] is None else min(r["ready"], t)
            continue
        if kind != "nodeclaim" or typ not in ("NodeClaimLaunched", "NodeClaimInitialized", "NodeClaimDisrupted", "NodeClaimDeleted"):
            continue
        r = rows.setdefault(name, _row(name))
        if typ == "NodeClaimLaunched" and r["launched"] is None:
            r["launched"] = t
        elif typ == "NodeClaimInitialized" and r["ready"] is None:
            r["ready"] = t
        elif typ == "NodeClaimDisrupted" and r["disrupted"] is None:
            r["disrupted"] = t
            r["reason"] = str(e.get("reason") or str(e.get("message") or "").split(":", 1)[0])
        elif typ == "NodeClaimDeleted" and r["deleted"] is None:
            r["deleted"] = t
    return [r for r in rows.values() if any(r[k] is not None for k in ("launched", "ready", "disrupted", "deleted"))]


def _row(name: str) -> dict:
    return {"name": name, "launched": None, "ready": None, "disrupted": None, "reason": "", "deleted": None}


def _lifelines_svg(rows: list[dict], end: float) -> str:
    pw = _W - _LABEL - 20
    height = _MT + _ROW * max(len(rows), 1) + _MB

    def x(t: float) -> float:
        return _LABEL + pw * min(max(t, 0.0), end) / end

    parts = [f'<svg id="lifelines" width="{_W}" height="{height}" '
             f'viewBox="0 0 {_W} {height}" role="img" aria-label="NodeClaim lifelines">']
    for i in range(5):
        tx = _LABEL + pw * i / 4
        parts.append(f'<line class="grid" x1="{tx:.1f}" y1="{_MT - 6}" x2="{tx:.1f}" y2="{height - _MB + 4}"/>')
        parts.append(f'<text x="{tx:.1f}" y="{height - 8}" text-anchor="middle">{escape(_t(end * i / 4))}</text>')
    for i, r in enumerate(rows):
        cy = _MT + _ROW * i + _ROW / 2
        start = r["launched"] if r["launched"] is not None else 0.0
        stop = r["deleted"] if r["deleted"] is not None else end
        label = r["name"] + (f" ({r['reason']})" if r["reason"] else "")
        tip = "; ".join(f"{k} {_t(r[k])}" for k in ("launched", "ready", "disrupted", "deleted") if r[k] is not None)
        parts.append(f'<g class="lifeline" data-nodeclaim="{escape(r["name"])}" data-reason="{escape(r["reason"])}">')
        parts.append(f"<title>{escape(r['name'])}: {escape(tip)}{escape(' (' + r['reason'] + ')') if r['reason'] else ''}</title>")
        parts.append(f'<text x="{_LABEL - 8}" y="{cy + 4:.1f}" text-anchor="end">{escape(label)}</text>')
        parts.append(f'<line class="life" x1="{x(start):.1f}" y1="{cy:.1f}" x2="{x(stop):.1f}" y2="{cy:.1f}"/>')
        if r["ready"] is not None:
            until = r["disrupted"] if r["disrupted"] is not None else stop
            parts.append(f'<line class="ready" x1="{x(r["ready"]):.1f}" y1="{cy:.1f}" x2="{x(until):.1f}" y2="{cy:.1f}"/>')
        if r["disrupted"] is not None:
            parts.append(f'<line class="draining" x1="{x(r["disrupted"]):.1f}" y1="{cy:.1f}" x2="{x(stop):.1f}" y2="{cy:.1f}"/>')
        for key in ("launched", "ready", "disrupted", "deleted"):
            if r[key] is not None:
                shape = "rect" if key == "deleted" else "circle"
                if shape == "circle":
                    parts.append(f'<circle class="mk-{key if key != "launched" else "launch"}" cx="{x(r[key]):.1f}" '
                                 f'cy="{cy:.1f}" r="4"><title>{key} {escape(_t(r[key]))}</title></circle>')
                else:
                    parts.append(f'<rect class="mk-deleted" x="{x(r[key]) - 4:.1f}" y="{cy - 4:.1f}" width="8" height="8">'
                                 f"<title>deleted {escape(_t(r[key]))}</title></rect>")
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts)


def _events_table(events: list[dict]) -> str:
    rows = []
    for e in events:
        rows.append(f'<tr><td class="t">{escape(_t(_num(e.get("time"))))}</td><td>{escape(str(e.get("type", "")))}</td>'
                    f'<td>{escape(str(e.get("object", "")))}</td><td>{escape(str(e.get("message", "")))}</td></tr>')
    return ('<table id="events"><thead><tr><th>TIME</th><th>TYPE</th><th>OBJECT</th><th>MESSAGE</th></tr></thead>\n'
            "<tbody>\n" + "\n".join(rows) + "\n</tbody></table>")


def render_report(result: dict, title: str = "karpenter-lambda simulate") -> str:
    """The whole page (a str) for a ``SimulationResult.to_dict()`` document."""
    end = _end_time(result)
    rows = lifelines(result)
    pods = result.get("pods") or {}
    summary = (f"Cost at the end: ${_num(result.get('costPerHour')):.4f}/hour for {len(result.get('nodeClaims') or [])} nodes; "
               f"{pods.get('bound', 0)}/{pods.get('total', 0)} pods bound; simulated {_t(_num(result.get('simulatedSeconds')))}"
               + (f" ({result.get('stoppedBecause')})" if result.get("stoppedBecause") else "")
               + (f"; start {result.get('startTime')}" if result.get("startTime") else ""))
    unsched = "".join(f"<li>{escape(str(u.get('pod', '')))}: {escape(str(u.get('reason', '')))}</li>"
                      for u in result.get("unschedulable") or [])
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="summary">{escape(summary)}</p>',
        f"<ul>{unsched}</ul>" if unsched else "",
        "<h2>Nodes and cost per hour over time</h2>",
        _chart(result, end),
        f"<h2>NodeClaim lifelines ({len(rows)})</h2>",
        '<p class="legend">blue dot: launched; green: ready/initialized; orange: disrupted (reason in brackets) '
        "until deleted (grey square)</p>",
        _lifelines_svg(rows, end),
        cost_section(result.get("controlPlaneCost")),
        f"<h2>Events ({len(result.get('events') or [])})</h2>",
        _events_table(result.get("events") or []),
        "</body></html>",
        "",
    ])
