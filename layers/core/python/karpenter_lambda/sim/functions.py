"""The functions the simulator runs, from the same registry the CDK stack deploys (``functions/registry.json``).

A queue-triggered function gets its queue's messages (today the pod queue); a scheduled one runs every N virtual
minutes, N the default of its interval context parameter in ``infra/config.py`` ``INT_PARAMS`` (read by path: that
module imports no CDK).  Adding a function to the registry adds it to the simulation.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path

# The architecture every function and the core layer are built for: infra/layer.py deploys it (arm64 costs about 20%
# less per GB-second than x86_64), the cost report (:mod:`.cost`) prices it.
LAMBDA_ARCHITECTURE = "arm64"
DEFAULT_MEMORY_MB = 512   # a registry entry without memoryMb (infra/functions.py FunctionSpec has the same default)


@dataclass
class SimFunction:
    name: str
    handler_path: Path
    queue: str | None = None              # queue trigger: the stack's queue name
    interval_seconds: float | None = None  # schedule trigger
    memory_mb: int = DEFAULT_MEMORY_MB     # the function's memory setting (Lambda bills GB-seconds of it)
    architecture: str = LAMBDA_ARCHITECTURE


def _int_params(root: Path) -> dict:
    path = root / "infra" / "config.py"
    spec = importlib.util.spec_from_file_location("_sim_infra_config", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(spec.name, None)
    return dict(mod.INT_PARAMS)


def load_functions(root: Path) -> list[SimFunction]:
    doc = json.loads((root / "functions" / "registry.json").read_text())
    params = _int_params(root)
    out = []
    for f in doc["functions"]:
        for t in f.get("triggers") or []:
            fn = SimFunction(name=f["name"], handler_path=root / "functions" / f["name"] / "handler.py",
                             memory_mb=int(f.get("memoryMb", DEFAULT_MEMORY_MB)))
            if "queue" in t:
                fn.queue = t["queue"]
            elif "schedule" in t:
                default = params[t["schedule"]][0]
                fn.interval_seconds = float(default) * 60.0
            out.append(fn)
    return out
