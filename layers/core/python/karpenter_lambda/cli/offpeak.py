"""`karpenter-lambda offpeak status [NAME] [--json]` and `offpeak run [NAME] [--dry-run] [--json]`.

``status``: each OffPeakSchedule: active or not, the current window (if active) and the next one, in its time zone
and in UTC, and the workloads and NodePools it holds with their recorded originals.  ``run``: what the off-peak
function would change now (``--dry-run``: nothing is changed), or change it now, exactly as the function does.
Both read what the function reads: the state table (global ``--cluster``, ``--region``, ``--endpoint-url``) and the
cluster's Kubernetes API (EKS, or ``--kube-endpoint`` / env ``KARPENTER_LAMBDA_KUBE_ENDPOINT``).

``status --json``::

    {"time": RFC3339, "schedules": [{"name", "timeZone", "active", "error",
        "window": {"start", "end", "startLocal", "endLocal"} | null, "next": {...} | null,
        "holds": [{"object", "kind", "namespace", "name", "originalReplicas", "target", "since", "original"}]}]}

``run --json``: the function's report (``dryRun``, ``schedules``, ``started``, ``ended``, ``scaled``
[{object, action, from, to, holders}], ``autoscalers``, ``nodepools``, ``drained``, ``handedOff``, ``skipped``,
``failed``, ``errors``).

Exit 0; 1 when the state or the cluster cannot be read, the schedule does not exist, or a change failed.
"""

from __future__ import annotations

import json
import os
import sys

from ..api.times import to_datetime
from ..offpeak import schedule_states
from .main import aws_environment_error
from .table import render_table


def register(sub) -> None:
    p = sub.add_parser("offpeak", help="off-peak scale-down schedules (status, run)", description=__doc__.split("\n\n")[0])
    osub = p.add_subparsers(dest="offpeak_command", metavar="SUBCOMMAND")
    osub.required = True
    for name, helptext in (("status", "each schedule: active or not, windows, what it holds and the originals"),
                           ("run", "converge now as the off-peak function would (--dry-run: only show it)")):
        q = osub.add_parser(name, help=helptext, description=helptext)
        q.add_argument("name", nargs="?", metavar="NAME", help="one OffPeakSchedule (default: all)")
        q.add_argument("--json", action="store_true", help="print JSON")
        q.add_argument("--kube-endpoint", default=os.environ.get("KARPENTER_LAMBDA_KUBE_ENDPOINT"),
                       help="Kubernetes API URL (default: the EKS cluster's endpoint)")
        if name == "run":
            q.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
        q.set_defaults(func=run_status if name == "status" else run_run)


def _controller(args):
    # the controllers (boto3, the Kubernetes client) load only when a command runs (see cli/main.py)
    from ..controllers import environment, runtime
    from ..controllers.offpeak import OffPeakController

    env_vars = dict(os.environ)
    env_vars.update({"KARPENTER_LAMBDA_CLUSTER": args.cluster, "AWS_REGION": args.region})
    if args.endpoint_url:
        env_vars["KARPENTER_LAMBDA_ENDPOINT_URL"] = args.endpoint_url
    if args.kube_endpoint:
        env_vars["KARPENTER_LAMBDA_KUBE_ENDPOINT"] = args.kube_endpoint
    env = environment.get_environment(runtime.Config.from_env(env_vars))
    return OffPeakController.from_environment(env), runtime


def _fail(cmd: str, e: Exception) -> int:
    if aws_environment_error(e):  # no credentials/region: main prints one line, exit 2
        raise e
    sys.stderr.write(f"offpeak {cmd}: cannot read the cluster state: {e}\n"
                     "Check --cluster/--region/--endpoint-url, AWS credentials, and that the Kubernetes API is "
                     "reachable (--kube-endpoint).\n")
    return 1


def status_rows(controller, now: float, name: str | None = None) -> list[dict]:
    schedules = controller.store.list("OffPeakSchedule")
    records = controller.records()
    out = []
    for st in schedule_states(schedules, to_datetime(now)):
        if name is not None and st.name != name:
            continue
        holder = f"OffPeakSchedule/{st.name}"
        holds = []
        for r in sorted(records, key=lambda r: r["key"]):
            if holder not in (r.get("holders") or []):
                continue
            holds.append({"object": r["key"], "kind": r.get("kind"), "namespace": r.get("namespace"),
                          "name": r.get("name"), "originalReplicas": r.get("originalReplicas"),
                          "target": r.get("target"), "since": r.get("since"), "original": r.get("original")})
        out.append({**st.to_dict(), "holds": holds})
    return out


def run_status(args) -> int:
    try:
        controller, runtime = _controller(args)
        now = runtime.now()
        rows = status_rows(controller, now, args.name)
    except Exception as e:
        return _fail("status", e)
    if args.name is not None and not rows:
        sys.stderr.write(f"offpeak status: no OffPeakSchedule named {args.name!r} (list them: karpenter-lambda get offpeakschedules)\n")
        return 1
    if args.json:
        print(json.dumps({"time": runtime.iso(now), "schedules": rows}, indent=2))
        return 0
    if not rows:
        print("no OffPeakSchedules (add one: karpenter-lambda apply -f schedule.yaml)")
        return 0

    def when(w, local: bool) -> str:
        if not w:
            return "-"
        return f"{w['startLocal'][:16]} -> {w['endLocal'][:16]}" if local else f"{w['start']} -> {w['end']}"

    print(render_table(["NAME", "TIMEZONE", "ACTIVE", "WINDOW (LOCAL)", "NEXT (LOCAL)", "NEXT (UTC)", "HOLDS"],
                       [[r["name"], r["timeZone"], "yes" if r["active"] else ("error" if r["error"] else "no"),
                         when(r["window"], True), when(r["next"], True), when(r["next"], False), str(len(r["holds"]))]
                        for r in rows]))
    held = [(r["name"], h) for r in rows for h in r["holds"]]
    if held:
        print()
        print(render_table(["SCHEDULE", "OBJECT", "ORIGINAL", "NOW HELD AT", "SINCE"],
                           [[s, h["object"], _original(h), "-" if h["target"] is None else str(h["target"]),
                             h["since"] or "-"] for s, h in held]))
    for r in rows:
        if r["error"]:
            print(f"OffPeakSchedule/{r['name']}: {r['error']}")
    return 0


def _original(h: dict) -> str:
    if h.get("originalReplicas") is not None:
        return f"{h['originalReplicas']} replicas"
    orig = h.get("original") or {}
    return json.dumps(orig.get("limits")) if orig.get("limits") is not None else "no limits"


def run_run(args) -> int:
    try:
        controller, runtime = _controller(args)
        now = runtime.now()
        report = controller.sweep(now, name=args.name, dry_run=args.dry_run)
    except Exception as e:
        return _fail("run", e)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
        return 1 if report.failed or report.errors else 0
    changes = report.scaled + report.autoscalers + report.nodepools
    verb = "would change" if args.dry_run else "changed"
    if changes:
        print(render_table(["OBJECT", "ACTION", "FROM", "TO", "HELD BY"],
                           [[c["object"], c["action"], _short(c["from"]), _short(c["to"]), ", ".join(c["holders"]) or "-"]
                            for c in changes]))
    for d in report.drained:
        print(f"{'would drain' if args.dry_run else 'draining'} {d}")
    for s in report.skipped:
        print(f"left alone: {s['object']}: {s['reason']}")
    for f in report.failed:
        print(f"FAILED {f['action']} {f['object']}: {f['error']}")
    for e in report.errors:
        print(f"error: {e}")
    print(f"{len(changes)} object{'' if len(changes) == 1 else 's'} {verb}" + ("; nothing was changed (--dry-run)" if args.dry_run else ""))
    return 1 if report.failed or report.errors else 0


def _short(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, (int, str)):
        return str(v)
    return json.dumps(v, separators=(",", ":"))
