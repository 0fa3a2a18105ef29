"""The exit codes of the commands, one definition (docs/cli.md "Exit codes"): a pipeline can tell them apart.

``plan`` uses all four: 0 every pending pod placed (or none pending), 1 invalid manifests, 2 usage or environment,
3 a plan was made but some pods stay unschedulable (printed first, with their reasons).  ``simulate`` keeps its
documented 1 for pods left unschedulable at the end (its invalid input is 2).
"""

from __future__ import annotations

OK = 0
INVALID = 1           # the command ran and found a problem: invalid manifests, an object not found
USAGE = 2             # bad arguments, a missing file, an environment that cannot answer
UNSCHEDULABLE = 3     # plan: the plan leaves pods unschedulable
