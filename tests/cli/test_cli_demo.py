"""`demo`: validate examples, store them in moto DynamoDB, print the tables."""

import io
import subprocess
import sys
from pathlib import Path

from cli_manifests import NODECLAIM, UNSUPPORTED_KIND, pair

from karpenter_lambda.cli.demo import run_demo

REPO = Path(__file__).resolve().parents[2]


def test_run_demo_on_a_directory(tmp_path):
    (tmp_path / "a.yaml").write_text(pair() + "---\n" + NODECLAIM)
    out = io.StringIO()
    assert run_demo(out, examples=tmp_path, cluster="democ") == 0
    text = out.getvalue()
    assert "valid: 3 objects in 1 file" in text
    assert "cluster 'democ'" in text
    assert "nodeclaim/default-x7k2p created (resourceVersion 1)" in text
    lines = text.splitlines()
    pools = lines.index("== get nodepools")
    assert lines[pools + 1].split() == ["NAME", "NODECLASS", "WEIGHT", "LIMITS", "NODES", "READY", "AGE"]
    assert lines[pools + 2].split()[:5] == ["default", "default", "10", "cpu=1000", "1"]


def test_run_demo_stops_on_invalid_examples(tmp_path):
    (tmp_path / "bad.yaml").write_text(UNSUPPORTED_KIND)
    out = io.StringIO()
    assert run_demo(out, examples=tmp_path) == 1
    assert "bad.yaml:0: ConfigMap/cm: kind: unsupported kind" in out.getvalue()
    assert "== apply" not in out.getvalue()


def test_run_demo_without_examples_is_2(tmp_path):
    out = io.StringIO()
    assert run_demo(out, examples=tmp_path / "none") == 2
    assert "no examples found" in out.getvalue()


def test_demo_command_on_the_repository_examples_in_a_fresh_process():
    """What `make demo` runs: every example validates and is stored and listed."""
    env_py = sys.executable
    proc = subprocess.run([env_py, "-m", "karpenter_lambda", "demo"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stored = [l.split()[0] for l in proc.stdout.splitlines() if l.strip().endswith(")") and " created (resourceVersion 1)" in l]
    files = sorted(f for f in (REPO / "examples").iterdir() if f.suffix in (".yaml", ".yml", ".json"))
    assert files and stored
    import yaml
    expected = {f"{d['kind'].lower()}/{d['metadata']['name']}" for f in files for d in yaml.safe_load_all(f.read_text()) if d}
    assert set(stored) == expected
    pools = [d["metadata"]["name"] for f in files for d in yaml.safe_load_all(f.read_text()) if d and d["kind"] == "NodePool"]
    listed = proc.stdout.split("== get nodepools")[1].split("== get nodeclaims")[0]
    for name in pools:
        assert f"\n  {name} " in listed


def test_the_demo_command_uses_the_demo_cluster_unless_one_is_named(capsys):
    from karpenter_lambda.cli.main import main

    assert main(["demo"]) == 0
    assert "cluster 'demo'" in capsys.readouterr().out          # docs/cli.md; the global default is "default"
    assert main(["--cluster", "mine", "demo"]) == 0
    assert "cluster 'mine'" in capsys.readouterr().out
