"""`karpenter-lambda disruption plan [--json]`: what the next drift and consolidation sweeps would do, per node, and
why; changes nothing.

It reads what the sweeps read: the state table (NodePools, EC2NodeClasses, NodeClaims, in-flight disruptions),
the cluster's Kubernetes API (EKS, or ``--kube-endpoint`` / env ``KARPENTER_LAMBDA_KUBE_ENDPOINT``) and EC2, with
the global ``--cluster``, ``--region`` and ``--endpoint-url`` (as ``get``).  ``--json`` prints::

    {"time": RFC3339, "nodes": [{"nodeClaim", "nodePool", "instanceType", "capacityType", "pricePerHour",
                                 "decision": "disrupt|blocked|in flight|keep", "reason", "cause", "detail",
                                 "replacements", "savingsPerHour", "balancedScore"}]}

``balancedScore`` (null outside ``consolidationPolicy: Balanced``): the move's ``{"nodePool", "score", "threshold",
"approved", "savingsFraction", "disruptionFraction"}`` (``score`` null when infinite); the table's SCORE column shows
it as ``3.33>=0.50`` (approved) or ``0.07<0.50`` (rejected).

Exit 0; 1 when the state or the cluster cannot be read (the message says what to set).
"""

from __future__ import annotations

import json
import os
import sys


def register(sub) -> None:
    p = sub.add_parser("disruption", help="disruption decisions (plan)", description=__doc__.split("\n\n")[0])
    dsub = p.add_subparsers(dest="disruption_command", metavar="SUBCOMMAND")
    dsub.required = True
    plan = dsub.add_parser("plan", help="what the next sweeps would do per node, and why (changes nothing)",
                           description=__doc__.split("\n\n")[0])
    plan.add_argument("--json", action="store_true", help="print JSON")
    plan.add_argument("--kube-endpoint", default=os.environ.get("KARPENTER_LAMBDA_KUBE_ENDPOINT"),
                      help="Kubernetes API URL (default: the EKS cluster's endpoint)")
    plan.set_defaults(func=run)


def run(args) -> int:
    from ..controllers import environment, runtime
    from ..controllers.disrupt import DisruptionSweep

    env_vars = dict(os.environ)
    env_vars.update({"KARPENTER_LAMBDA_CLUSTER": args.cluster, "AWS_REGION": args.region})
    if args.endpoint_url:
        env_vars["KARPENTER_LAMBDA_ENDPOINT_URL"] = args.endpoint_url
    if args.kube_endpoint:
        env_vars["KARPENTER_LAMBDA_KUBE_ENDPOINT"] = args.kube_endpoint
    try:
        env = environment.get_environment(runtime.Config.from_env(env_vars))
        now = runtime.now()
        rows = DisruptionSweep.from_environment(env, "consolidation").preview(now)
    except Exception as e:  # the store, the cluster or EC2 could not be read: say what to fix
        from .main import aws_environment_error

        if aws_environment_error(e):  # no credentials/region: main prints one line, exit 2
            raise
        sys.stderr.write(f"disruption plan: cannot read the cluster state: {e}\n"
                         "Check --cluster/--region/--endpoint-url, AWS credentials, and that the Kubernetes API is "
                         "reachable (--kube-endpoint).\n")
        return 1
    if args.json:
        print(json.dumps({"time": runtime.iso(now), "nodes": rows}, indent=2))
        return 0
    from .table import render_table

    if not rows:
        print("no NodeClaims")
        return 0
    print(render_table(["NODECLAIM", "NODEPOOL", "TYPE", "PRICE/H", "DECISION", "REASON", "SCORE", "DETAIL"],
                       [[r["nodeClaim"], r["nodePool"], r["instanceType"], f"${r['pricePerHour']:.4f}", r["decision"],
                         r["reason"] or "-", _score(r.get("balancedScore")),
                         r["detail"] + (f" -> {', '.join(r['replacements'])}" if r["replacements"] else "")]
                        for r in rows], right={3}))
    acting = sum(1 for r in rows if r["decision"] == "disrupt")
    saving = sum(r["savingsPerHour"] for r in rows if r["decision"] == "disrupt")
    print(f"{acting} of {len(rows)} NodeClaims would be disrupted by the next sweeps (saves ${saving:.4f}/h); nothing was changed")
    return 0


def _score(s: dict | None) -> str:
    """A Balanced move's score for the table: ``3.33>=0.50``, ``0.07<0.50``, ``inf>=0.50``; ``-`` without one."""
    if not s:
        return "-"
    value = "inf" if s["score"] is None else f"{s['score']:.2f}"
    return f"{value}{'>=' if s['approved'] else '<'}{s['threshold']:.2f}"
