"""`karpenter-lambda simulate FILE... [--until DURATION] [--json] [--report PATH]`: the embedded default.

Runs the real provisioner and lifecycle handlers against in-process moto (EC2, SSM, DynamoDB, SQS,
IAM, EKS) and a local Kubernetes API that the real watcher and kubernetes client talk to, on a
virtual clock, until nothing changes and no timer is ahead, or exactly ``--until`` (which always wins over the
safety limit).  See docs/simulator.md ("Timers, quiet stretches and when the run stops").

``--serve`` keeps the simulated cluster's API server up after the run (clock frozen at the end), writes a kubeconfig
(``--kubeconfig PATH``, default ``.simulate/kubeconfig``) and serves on 127.0.0.1 (``--serve-port``) until SIGINT or
SIGTERM (exit 0), so ``kubectl get nodes,pods -o wide`` shows the result (docs/kubeapi.md).

``--scheduler-config FILE`` (as for ``plan``; default ``$KARPENTER_LAMBDA_SCHEDULER_CONFIG``, read before the run
scrubs the shell's settings) is the cluster's kube-scheduler configuration: the simulated kube-scheduler gives pods
without topology spread constraints its ``defaultConstraints`` (selectors deduced from the Services and the pods'
ReplicaSets / StatefulSets in the simulated API server), and the functions get it as
``KARPENTER_LAMBDA_SCHEDULER_CONFIG``, as a deployment configured with it (docs/simulator.md).

``--json`` prints exactly::

    {"nodeClaims": [{"name", "nodePool", "instanceType", "zone", "capacityType", "pricePerHour",
                     "nodeName", "pods": ["ns/name", ...]}],
     "unschedulable": [{"pod", "reason"}], "gated": [{"pod", "gates"}], "costPerHour": N,
     "events": [{"time", "type", "object", "message"}]}

(extra keys are added, never renamed: e.g. ``controlPlaneCost``, what the functions cost to run a month at list
prices, sim/cost.py; ``defaultSpreadConstraints``, the ``--scheduler-config`` defaults, when one is given).  The
human output is a timeline, the control plane's cost and a table of NodeClaims.
Exit 0 when every pod is bound, 1 when some stay unschedulable, 2 for bad input.
"""

from __future__ import annotations

import json
import sys

from ..sim.clock import format_elapsed, parse_duration


def register(sub) -> None:
    p = sub.add_parser("simulate", help="run the real handlers on moto + a local Kubernetes API on virtual time",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*", metavar="FILE", help="manifests: NodePool, EC2NodeClass, Pod, Deployment, Job, DaemonSet, ...")
    p.add_argument("-f", "--filename", dest="more_files", action="append", default=[], metavar="FILE",
                   help="a manifest file, as for plan (repeatable; adds to the FILE arguments)")
    p.add_argument("--until", metavar="DURATION",
                   help="stop at exactly this virtual time, however long (e.g. 10m, 1h30m, 14h; quiet stretches are skipped); "
                        "default: when nothing changed and no timer (Scenario step, off-peak or budget window edge) is ahead, "
                        "at the latest 6h after the last timer")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--join-delay", type=float, default=30.0, metavar="SECONDS", help="virtual seconds from launch to node join (default 30)")
    p.add_argument("--ready-delay", type=float, default=15.0, metavar="SECONDS", help="virtual seconds from join to Ready (default 15)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--report", metavar="PATH",
                   help="also write a self-contained HTML page (inline SVG, no network): nodes and cost over time, "
                        "a lifeline per NodeClaim, the events table")
    p.add_argument("--save-state", metavar="DIR",
                   help="at the end, save the simulated cluster (DynamoDB state, Kubernetes objects, EC2 instances) as JSON "
                        "files in DIR; read it back with e.g. `karpenter-lambda --state DIR disruption plan`")
    p.add_argument("--serve", action="store_true",
                   help="after the run, keep the simulated cluster's Kubernetes API up on 127.0.0.1 (its clock frozen at the "
                        "end of the run), write a kubeconfig and serve until Ctrl-C: kubectl get nodes,pods -o wide shows "
                        "the result (with --json the JSON is printed first; the instructions go to stderr)")
    p.add_argument("--serve-port", type=int, default=0, metavar="PORT", help="the port --serve listens on (default: a free one)")
    p.add_argument("--kubeconfig", metavar="PATH", default=None,
                   help="where --serve writes its kubeconfig (default .simulate/kubeconfig)")
    from .plan import add_catalog_flags, add_scheduler_config_flag

    add_catalog_flags(p)   # the functions (and the simulated kubelets) get them as a deployment's functions would
    add_scheduler_config_flag(p)   # the simulated kube-scheduler's defaults, and the functions' setting
    p.set_defaults(func=run)


def _timeline(events, out) -> None:
    """One line per event; consecutive events of one type at the same time are folded into one line."""
    tw = max([10] + [len(format_elapsed(e.time)) + 1 for e in events])     # +7h00m00.0s is 11 wide
    yw = max([22] + [len(e.type) for e in events])
    i = 0
    while i < len(events):
        e = events[i]
        j = i + 1
        while j < len(events) and events[j].type == e.type and abs(events[j].time - e.time) < 1e-6 and e.type in ("PodBound", "PodPending", "PodUnschedulable"):
            j += 1
        if j - i > 2:
            objs = [x.object.split("/", 1)[-1] for x in events[i:j]]
            shown = ", ".join(objs[:4]) + (f", ... (+{len(objs) - 4})" if len(objs) > 4 else "")
            msg = e.message if e.type != "PodBound" else "bound"
            out.write(f"{('+' + format_elapsed(e.time)):>{tw}}  {e.type:<{yw}} {j - i} pods: {shown}: {msg}\n")
        else:
            for x in events[i:j]:
                out.write(f"{('+' + format_elapsed(x.time)):>{tw}}  {x.type:<{yw}} {x.object:<40} {x.message}\n")
        i = j


def _last_per_time(timeline: list[dict]) -> list[dict]:
    """One entry per distinct time (the last state at that time), in time order."""
    out: list[dict] = []
    for c in timeline:
        if out and abs(out[-1]["time"] - c["time"]) < 1e-6:
            out[-1] = c
        else:
            out.append(c)
    return out


def cost_table(timeline: list[dict]) -> str:
    """The human output's "Cost over time" table: one row per distinct time."""
    from .table import render_table

    return render_table(["TIME", "NODES", "COST/H"], [[f"+{format_elapsed(c['time'])}", str(c["nodes"]), f"${c['costPerHour']:.4f}"]
                                                       for c in _last_per_time(timeline)]).rstrip("\n") + "\n"


def run(args) -> int:
    import importlib.util

    if importlib.util.find_spec("moto") is None:  # a plain `pip install .`: the simulator's AWS is an extra
        sys.stderr.write("karpenter-lambda simulate: needs moto (the simulated AWS): pip install 'karpenter-lambda[sim]' "
                         "(from a checkout: pip install '.[sim]')\n")
        return 2
    from ..sim.simulator import Simulation, SimulationError

    files = list(args.files or []) + list(getattr(args, "more_files", None) or [])
    if not files:
        sys.stderr.write("karpenter-lambda simulate: at least one manifest FILE is required (e.g. examples/demo/)\n"
                         "Run 'karpenter-lambda simulate --help' for usage.\n")
        return 2
    from pathlib import Path

    missing = [f for f in files if f != "-" and not Path(f).exists()]
    if missing:
        for f in missing:
            sys.stderr.write(f"karpenter-lambda simulate: {f}: no such file or directory\n")
        return 2
    try:
        until = parse_until(args.until)
    except ValueError as e:
        sys.stderr.write(f"karpenter-lambda simulate: --until: {e}\n")
        return 2
    loaded, problems = preflight(files)
    if problems:
        for line in problems:
            sys.stderr.write(line + "\n")
        sys.stderr.write(f"karpenter-lambda simulate: invalid manifests: {len(problems)} error{'s' if len(problems) != 1 else ''} "
                         f"(as validate reports them); nothing simulated\n")
        return 2
    report = getattr(args, "report", None)
    if report and not (Path(report).resolve().parent.is_dir() and not Path(report).is_dir()):
        sys.stderr.write(f"karpenter-lambda simulate: --report: cannot write {report}: "
                         f"{'is a directory' if Path(report).is_dir() else 'no such directory ' + str(Path(report).parent)}\n")
        return 2
    from ..controllers.runtime import catalog_environment, decision_environment
    from .plan import SchedulerConfigFileError, catalog_settings_of, scheduler_config_of

    try:   # the shell's variables are scrubbed from the run (SimEnvironment): read here, given to the functions
        function_env = catalog_environment(catalog_settings_of(args))
        function_env.update(decision_environment())   # the minValues policy, spot-to-spot, node repair, status checks
        scheduler_config, _source = scheduler_config_of(args)   # given to the functions by the Simulation
    except (ValueError, SchedulerConfigFileError) as e:
        sys.stderr.write(f"karpenter-lambda simulate: {e}\n")
        return 2
    progress = (lambda m: None) if args.quiet else (lambda m: sys.stderr.write(f"[simulate] {m}\n"))

    save_dir = getattr(args, "save_state", None)
    if save_dir and Path(save_dir).exists() and not Path(save_dir).is_dir():
        sys.stderr.write(f"karpenter-lambda simulate: --save-state: {save_dir} is not a directory\n")
        return 2
    save_errors: list[str] = []

    def on_event(ev):
        if save_dir and ev.type == "Done":  # emitted at the end of the run, while moto and the local API still hold it
            from ..sim.state_io import save_state

            try:
                save_state(sim, save_dir)
            except OSError as e:
                save_errors.append(f"--save-state: cannot write {save_dir}: {e.strerror or e}")
        if not args.quiet and ev.type in ("NodeClaimLaunched", "NodeReady", "NodeClaimInitialized", "Done", "ProvisionerInvoked",
                                           "OffPeakStarted", "OffPeakEnded", "WorkloadScaled"):
            sys.stderr.write(f"[simulate] +{format_elapsed(ev.time)} {ev.type} {ev.object}\n")

    sim = Simulation(files, until=until, cluster=getattr(args, "cluster", None) or "sim-cluster",
                     region=args.region, join_delay=args.join_delay, ready_delay=args.ready_delay,
                     progress=progress, on_event=on_event, function_env=function_env,
                     scheduler_config=scheduler_config, loaded=loaded)
    if sim.cluster == "default":
        sim.cluster = "sim-cluster"
    try:
        result = sim.run()
    except SimulationError as e:
        sys.stderr.write(f"karpenter-lambda simulate: {e}\n")
        return 2
    if save_dir:
        if save_errors or not (Path(save_dir) / "state.json").exists():
            sys.stderr.write(f"karpenter-lambda simulate: {save_errors[0] if save_errors else '--save-state: nothing saved'}\n")
            return 2
        sys.stderr.write(f"state saved to {save_dir} (read it with: karpenter-lambda --state {save_dir} get nodeclaims)\n")
    if getattr(args, "report", None):
        from ..sim.report import render_report

        try:
            with open(args.report, "w", encoding="utf-8") as fh:
                fh.write(render_report(result.to_dict()))
        except OSError as e:
            sys.stderr.write(f"karpenter-lambda simulate: --report: cannot write {args.report}: {e.strerror or e}\n")
            return 2
        sys.stderr.write(f"report written to {args.report}\n")
    if args.json:
        doc = result.to_dict()
        if scheduler_config is not None:
            doc["defaultSpreadConstraints"] = [dict(c) for c in scheduler_config.default_constraints]
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        out = sys.stdout
        if scheduler_config is not None:
            from .plan import describe_constraint

            out.write(f"Default topology spread ({_source}, the kube-scheduler's and the functions'): "
                      f"{'; '.join(describe_constraint(c) for c in scheduler_config.default_constraints) or 'none'}\n\n")
        out.write("Timeline (virtual time)\n")
        _timeline(result.events, out)
        if len(result.cost_timeline) > 0:
            out.write("\nCost over time\n")
            out.write(cost_table(result.cost_timeline))
        if result.offpeak:
            out.write("\nOff-peak windows\n")
            from .table import render_table as _rt

            out.write(_rt(["SCHEDULE", "WINDOW", "COST/H BEFORE", "LOWEST COST/H", "COST/H AFTER", "SAVED"],
                          [[o["schedule"], f"+{format_elapsed(o['windowStart'])} -> +{format_elapsed(o['windowEnd'])}",
                            f"${o['costPerHourBefore']:.4f}", f"${o['lowestCostPerHour']:.4f}",
                            f"${o['costPerHourAfter']:.4f}" if "costPerHourAfter" in o else "(not simulated)",
                            f"${o['savedDollars']:.2f}"] for o in result.offpeak], right={2, 3, 4, 5}).rstrip("\n") + "\n")
        if getattr(result, "control_plane_cost", None):
            from ..sim.cost_render import cost_text

            out.write("\nWhat the control plane costs to run (a month at list prices)\n")
            out.write(cost_text(result.control_plane_cost))
        out.write("\nNodeClaims\n")
        from .table import render_table

        rows = [[c["name"], c["nodePool"], c["instanceType"], c["capacityType"], c["zone"], f"${c['pricePerHour']:.4f}",
                 c["nodeName"] or "-", "Ready" if c.get("ready") else "not ready", str(len(c["pods"]))] for c in result.nodeclaims]
        out.write(render_table(["NAME", "NODEPOOL", "TYPE", "CAPACITY", "ZONE", "PRICE/H", "NODE", "STATUS", "PODS"], rows))
        out.write(f"\nCost: ${result.cost_per_hour:.4f}/hour for {len(result.nodeclaims)} nodes; "
                  f"{result.pods_bound}/{result.pods_total} pods bound; simulated {format_elapsed(result.elapsed)} "
                  f"in {result.wall_seconds:.1f} s ({result.stopped_because})\n")
        for u in result.unschedulable:
            out.write(f"unschedulable: {u['pod']}: {u['reason']}\n")
        for g in result.gated:
            out.write(f"gated: {g['pod']}: scheduling gates {', '.join(g['gates'])}: neither scheduled nor provisioned "
                      f"for until they are removed (as Kubernetes and Karpenter)\n")
    if getattr(args, "serve", False):
        return _serve(sim, args)
    return 1 if result.unschedulable else 0


#: the largest ``--until``: 100 years of virtual time (the clock's dates end in the year 9999; a Scenario starts before
#: 9000 and its steps are at most 100 years in: api/scenario.py)
MAX_UNTIL_SECONDS = 100 * 365 * 24 * 3600.0
MAX_UNTIL_TEXT = f"{int(MAX_UNTIL_SECONDS // 3600)}h (100 years)"


def parse_until(text: str | None) -> float | None:
    """``--until`` in seconds (None when not given); ValueError naming the value and the largest accepted one."""
    if not text:
        return None
    until = parse_duration(text)
    if not until < float("inf") or until > MAX_UNTIL_SECONDS:
        raise ValueError(f"{text} is more than the largest value accepted, {MAX_UNTIL_TEXT} of virtual time")
    return until


def preflight(files: list[str]):
    """Load the inputs as ``validate`` does (``-`` is stdin, read once) and return (the load, the error lines):
    everything ``validate`` refuses, each as its ``FILE:DOC: Kind/name: field: message (line N)`` line, and more than
    one Scenario.  Warnings (``validate``'s, and the kinds not read) and the skipped node classes of other providers
    are printed on stderr."""
    from ..api.errors import ValidationIssue
    from ..api.manifests import load_files
    from ..api.scenario import KIND as SCENARIO
    from .validate import (content_issues, empty_inputs, format_issue, input_warnings, note_unread, print_warnings,
                           read_stdin, simulate_kinds)

    stdin = read_stdin() if "-" in files else None
    # Karpenter's alpha CapacityBuffer and a v1 PodTemplate (its pod shape) go on to the Simulation, which refuses
    # them by name before the run, with what to use instead
    loaded = load_files(files, accept_kinds=simulate_kinds() | {"CapacityBuffer", "PodTemplate"}, stdin=stdin)
    issues = list(loaded.issues) + content_issues(loaded) + empty_inputs(files, loaded)
    scenarios = [i for i, o in enumerate(loaded.objects) if o.kind == SCENARIO]
    for i in scenarios[1:]:
        file, index = loaded.origins[i]
        first = "%s:%s" % loaded.origins[scenarios[0]]
        issues.append(ValidationIssue(file, index, SCENARIO, loaded.objects[i].name, "",
                                      f"only one Scenario document per simulation ({first} is the first)",
                                      loaded.line_of(i)))
    if not issues:
        note_unread(loaded)
        loaded.warnings.extend(input_warnings(loaded))   # what is valid but cannot do what it says
        print_warnings(loaded)
        for x in loaded.skipped:
            sys.stderr.write(format_issue(x) + "\n")
    return loaded, [format_issue(x) for x in issues]


def _serve(sim, args) -> int:
    """``--serve``: the run's API objects behind a new local API server until SIGINT/SIGTERM (exit 0)."""
    from ..sim.kubeapi.serve import serve_store

    sys.stdout.flush()
    path = args.kubeconfig or ".simulate/kubeconfig"
    try:
        return serve_store(sim.server.store, path, sim.cluster, port=args.serve_port, k8s_version=sim.k8s_version,
                           err=sys.stderr)
    except OSError as e:
        sys.stderr.write(f"karpenter-lambda simulate: --serve: {e.strerror or e}"
                         f"{f' ({e.filename})' if getattr(e, 'filename', None) else ''}\n")
        return 2
