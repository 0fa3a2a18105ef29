"""The ``controlPlaneCost`` document (:mod:`.cost`) for people: an aligned text table (``simulate``'s human output)
and an HTML section (``simulate --report``, :mod:`.report`).  Pure rendering of the dict."""

from __future__ import annotations

from html import escape

_SERVICES = (("lambda", "Lambda (requests + GB-s)"), ("dynamodb", "DynamoDB on-demand"),
             ("sqs", "SQS (functions, watcher, event source polls)"), ("eventbridge", "EventBridge schedules + events"),
             ("cloudwatch", "CloudWatch custom metrics (EMF)"), ("logs", "CloudWatch Logs ingestion"),
             ("xray", "X-Ray traces"))


def _money(v) -> str:
    return f"${float(v or 0.0):.2f}"


def function_rows(doc: dict) -> list[list[str]]:
    rows = []
    for name, f in (doc.get("functions") or {}).items():
        rows.append([name, str(f.get("invocations", 0)), f"{f.get('invocationsPerMonth', 0):,.0f}",
                     f"{f.get('meanBilledMs', 0):.0f}", str(f.get("memoryMb", "")), str(f.get("architecture", "")),
                     f"{f.get('awsCallsPerInvocation', 0):.1f}", _money(f.get("costPerMonth"))])
    return rows


def _align(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    return ["  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in [header] + rows]


FUNCTION_HEADER = ["FUNCTION", "RUNS", "RUNS/MONTH", "MEAN BILLED MS", "MEMORY MB", "ARCH", "AWS CALLS/RUN", "COST/MONTH"]


def cost_lines(doc: dict) -> list[str]:
    """The table ``simulate`` prints: one row per function, one per service, the month's total."""
    if not doc:
        return []
    lines = _align(FUNCTION_HEADER, function_rows(doc), right={1, 2, 3, 4, 6, 7})
    lines.append("")
    lines += _align(["SERVICE", "COST/MONTH"], [[label, _money((doc.get(k) or {}).get("costPerMonth"))]
                                              for k, label in _SERVICES], right={1})
    lines.append(f"Control plane: {_money(doc.get('totalPerMonth'))} a month at {doc.get('region')} list prices "
                 f"(read {doc.get('pricesRead')}), extrapolated from {float(doc.get('simulatedSeconds') or 0):.0f} "
                 "simulated seconds; assumptions in --json controlPlaneCost.assumptions")
    return lines


def cost_text(doc: dict) -> str:
    """:func:`cost_lines` as one block of text (empty without a document)."""
    lines = cost_lines(doc)
    return ("\n".join(lines) + "\n") if lines else ""


def cost_section(doc: dict | None) -> str:
    """The HTML section of the report (empty without a document)."""
    if not doc:
        return ""
    head = "".join(f"<th>{escape(h)}</th>" for h in FUNCTION_HEADER)
    body = "\n".join("<tr>" + "".join(f'<td class="t">{escape(c)}</td>' if i else f"<td>{escape(c)}</td>"
                                      for i, c in enumerate(r)) + "</tr>" for r in function_rows(doc))
    services = "\n".join(f'<tr><td>{escape(label)}</td><td class="t">{escape(_money((doc.get(k) or {}).get("costPerMonth")))}</td></tr>'
                         for k, label in _SERVICES)
    notes = "".join(f"<li>{escape(str(a))}</li>" for a in list(doc.get("assumptions") or []) + [
        f"not counted: {n}" for n in doc.get("notCounted") or []])
    return "\n".join([
        "<h2>What the control plane costs to run</h2>",
        f'<p class="summary">{escape(_money(doc.get("totalPerMonth")))} a month at {escape(str(doc.get("region")))} '
        f"list prices (read {escape(str(doc.get('pricesRead')))}), extrapolated from "
        f"{float(doc.get('simulatedSeconds') or 0):.0f} simulated seconds</p>",
        f'<table id="control-plane-cost"><thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table>',
        f'<table id="control-plane-services"><thead><tr><th>SERVICE</th><th>COST/MONTH</th></tr></thead>\n'
        f"<tbody>\n{services}\n</tbody></table>",
        f"<ul>{notes}</ul>",
    ])
