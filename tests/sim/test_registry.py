"""One registry of functions (functions/registry.json) for the CDK stack and the simulator."""

import json
import shutil
from pathlib import Path

from karpenter_lambda.sim.functions import load_functions
from karpenter_lambda.sim.simulator import Simulation

REPO = Path(__file__).resolve().parents[2]


def test_simulator_reads_the_registry_the_stack_deploys():
    import sys

    sys.path.insert(0, str(REPO))
    try:
        from infra.functions import load_registry
    finally:
        sys.path.remove(str(REPO))
    fns = {f.name: f for f in load_functions(REPO)}
    specs = {s.name: s for s in load_registry()}
    assert set(fns) == set(specs) >= {"provisioner", "lifecycle"}
    assert fns["provisioner"].queue == "pod"
    assert fns["lifecycle"].interval_seconds == 60.0  # lifecycleIntervalMinutes' default
    for name, spec in specs.items():
        assert spec.code_dir == fns[name].handler_path.parent


def test_a_function_added_to_the_registry_is_simulated(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    shutil.copytree(REPO / "functions", root / "functions", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "infra").mkdir()
    shutil.copy(REPO / "infra" / "config.py", root / "infra" / "config.py")
    shutil.copytree(REPO / "watcher", root / "watcher", ignore=shutil.ignore_patterns("__pycache__"))
    calls = tmp_path / "calls.txt"
    (root / "functions" / "probe").mkdir()
    (root / "functions" / "probe" / "handler.py").write_text(
        f"def handler(event, context):\n    open({str(calls)!r}, 'a').write(event['time'] + '\\n')\n    return {{}}\n")
    reg = json.loads((root / "functions" / "registry.json").read_text())
    reg["functions"].append({"name": "probe", "description": "test probe", "triggers": [{"schedule": "lifecycleIntervalMinutes"}]})
    (root / "functions" / "registry.json").write_text(json.dumps(reg))
    monkeypatch.setenv("KARPENTER_LAMBDA_REPO", str(root))
    result = Simulation([REPO / "examples" / "default.yaml"], until=150.0, progress=lambda m: None).run()
    assert result.elapsed == 150.0
    assert len(calls.read_text().splitlines()) == 2  # at 1m and 2m of virtual time
