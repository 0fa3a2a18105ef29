"""A plain ``pip install .`` (no moto): ``plan`` works from the EC2 data shipped in the package, ``simulate``
says in one line what to install; the shipped data is moto's data (regenerate with tools/gen_ec2_catalog_data.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from karpenter_lambda.adapters.aws import moto_catalog
from karpenter_lambda.adapters.aws.ec2_catalog import PACKAGED_CATALOG, SOURCE_ENV, bundled_ec2_data, load_catalog

REPO = Path(__file__).resolve().parents[2]

# Makes moto unimportable in the child, as on a machine where it is not installed:
# `import moto` raises ModuleNotFoundError and importlib.util.find_spec("moto") is None.
BLOCK_MOTO = "import sys; sys.modules['moto'] = None\n"


def _run_without_moto(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != SOURCE_ENV}
    return subprocess.run([sys.executable, "-c", BLOCK_MOTO + code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_block_really_hides_moto():
    proc = _run_without_moto("import importlib.util\nassert importlib.util.find_spec('moto') is None\n"
                             "try:\n    import moto\nexcept ImportError:\n    print('blocked')\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "blocked"


def test_plan_works_without_moto():
    code = ("import io, contextlib, json, sys\n"
            "from karpenter_lambda.cli.main import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            "    rc = main(['plan', '-f', 'examples/default.yaml', '-f', 'examples/workloads/web.yaml', '--json'])\n"
            "print(json.dumps({'rc': rc, 'plan': json.loads(out.getvalue()),\n"
            "                  'moto': sorted(m for m in sys.modules if m.split('.')[0] == 'moto' and sys.modules[m])}))\n")
    proc = _run_without_moto(code)
    assert proc.returncode == 0, proc.stderr
    assert "moto" not in proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["rc"] == 0 and res["moto"] == []
    plan = res["plan"]
    assert plan["nodeClaims"] and plan["costPerHour"] > 0
    # the same plan as with moto installed (moto's own files)
    from karpenter_lambda.cli.main import main
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plan", "-f", "examples/default.yaml", "-f", "examples/workloads/web.yaml", "--json"]) == 0
    assert json.loads(out.getvalue()) == plan


def test_simulate_without_moto_says_what_to_install():
    code = ("from karpenter_lambda.cli.main import main\n"
            "raise SystemExit(main(['simulate', '--quiet', 'examples/default.yaml', 'examples/workloads/web.yaml']))\n")
    proc = _run_without_moto(code)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "moto" in lines[0] and "pip install" in lines[0] and "[sim]" in lines[0]
    assert "Traceback" not in proc.stderr


def test_packaged_data_is_motos_data():
    """Fails after a moto upgrade changed its data: run tools/gen_ec2_catalog_data.py."""
    size = os.path.getsize(PACKAGED_CATALOG)
    assert size < 400_000, f"{PACKAGED_CATALOG}: {size} bytes"
    for region in sorted(moto_catalog.known_regions()):
        moto_types, moto_offs, moto_zones = bundled_ec2_data(region, packaged=False)
        types, offs, zones = bundled_ec2_data(region, packaged=True)
        assert offs == moto_offs, region
        assert zones == moto_zones, region
    assert types == moto_types


def test_packaged_catalog_unknown_region_is_a_key_error():
    with pytest.raises(KeyError):
        bundled_ec2_data("xx-nowhere-1", packaged=True)


def test_packaged_catalog_builds_the_same_instance_types(monkeypatch):
    from karpenter_lambda.adapters.aws import ec2_catalog

    with_moto = load_catalog(None, "us-west-2", source="moto-bundled")
    real = ec2_catalog.bundled_ec2_data
    monkeypatch.setattr(ec2_catalog, "bundled_ec2_data", lambda region: real(region, packaged=True))
    packaged = load_catalog(None, "us-west-2", source="moto-bundled")
    assert [(t.name, t.labels, t.offerings) for t in packaged] == [(t.name, t.labels, t.offerings) for t in with_moto]
    assert any(t.offerings for t in packaged)


def test_the_packaged_data_is_in_the_wheel_and_sim_is_an_extra():
    """pyproject's package-data patterns take data/ec2-catalog.json.gz; [sim] brings moto (checked on a real
    `pip wheel` + `pip install` into a fresh venv without moto: plan printed $0.1897/h, simulate exit 2)."""
    import fnmatch
    import tomllib

    conf = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = conf["tool"]["setuptools"]["package-data"]["karpenter_lambda"]
    rel = os.path.relpath(PACKAGED_CATALOG, REPO / "layers" / "core" / "python" / "karpenter_lambda")
    assert any(fnmatch.fnmatch(rel, p) for p in patterns), (rel, patterns)
    assert any(req.startswith("moto") for req in conf["project"]["optional-dependencies"]["sim"])
    assert not any(req.startswith("moto") for req in conf["project"]["dependencies"])
