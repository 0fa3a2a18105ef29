#!/usr/bin/env python
"""Exhaustive crash points (issue 29 item 4): every step of every function crashed before and after each external
call it makes, then recovered and checked (docs/crash-points.md; karpenter_lambda/sim/faults/crashpoints.py).

    python bench/crashpoints.py [--json] [--table] [--literal] [--jobs N] [--no-fork] [--quiet] [SCENARIO ...]

SCENARIO is ``function/step`` (default: all of them; ``--list`` names them).  By default the points after the same
number of state-changing calls (identical external state) run once and the others are reported equal to it;
``--literal`` runs every point.  ``--jobs`` runs that many forked worlds at once (default 2).

Prints one line per scenario (calls, writes, points, runs, failed) and the totals; ``--table`` the coverage table
(markdown: function, step, call, before/after, result); ``--json`` one JSON object: seconds, points, runs, failed,
scenarios {name: {calls, writes, points, runs, failed}}, rows [{function, step, index, when, call, write, result,
problems, seconds}].  Exit 1 when a point fails to recover.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "layers", "core", "python"))
os.environ.setdefault("KARPENTER_LAMBDA_REPO", os.path.abspath(os.path.join(HERE, "..")))

from karpenter_lambda.sim.faults.crashpoint_scenarios import SCENARIOS  # noqa: E402
from karpenter_lambda.sim.faults.crashpoints import run_matrix  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenarios", nargs="*", help="function/step (default: all)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--table", action="store_true", help="the coverage table (markdown)")
    ap.add_argument("--literal", action="store_true", help="run every crash point, equivalent ones too")
    ap.add_argument("--jobs", type=int, default=2, help="forked runs at once (default 2)")
    ap.add_argument("--no-fork", action="store_true", help="build every run's world from scratch")
    ap.add_argument("--list", action="store_true", help="name the scenarios and exit")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(SCENARIOS))
        return 0
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenarios {unknown}; one of {list(SCENARIOS)}")
    logging.disable(logging.WARNING)
    say = None if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    m = run_matrix([SCENARIOS[n]() for n in args.scenarios or SCENARIOS], literal=args.literal,
                   fork=not args.no_fork, jobs=args.jobs, progress=say)
    if args.json:
        print(json.dumps(m.to_dict(), indent=1))
    else:
        for name, s in m.summary().items():
            print(f"{name:36s} calls {s['calls']:3d}  writes {s['writes']:3d}  points {s['points']:3d}  "
                  f"runs {s['runs']:3d}  failed {s['failed']}")
        d = m.to_dict()
        print(f"total: {d['points']} crash points, {d['runs']} runs, {d['failed']} failed, {d['seconds']} s")
        if args.table:
            print()
            print(m.table())
    return 1 if m.failures else 0


if __name__ == "__main__":
    sys.exit(main())
