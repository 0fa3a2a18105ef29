"""The package as a wheel installs it (issue 31 item 2): the console commands work with no checkout around them.

The wheel is built from this checkout (``pip wheel --no-deps``, setup.py's bundle step), unpacked into a temporary
site folder and run from an empty working directory with that folder first on ``sys.path``: the code and the files
it reads beside the package (``functions/``, ``infra/config.py``, ``watcher/``, ``examples/``) come from the wheel,
the third-party packages from this venv.  ``simulate`` from the wheel (20 s) is left to ``.ci/run``, which also
installs the wheel with its dependencies in a fresh venv and runs every command (``make wheel-check``).
"""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from karpenter_lambda import resources

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.xdist_group("wheel")


# what the build reads: a copy of these, so a concurrent build in the checkout (its build/ and *.egg-info) cannot
# interfere
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "layers/core/python/karpenter_lambda",
           *resources.BUNDLED)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    import shutil

    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    for rel in SOURCES:
        dest = src / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if (REPO / rel).is_dir():
            shutil.copytree(REPO / rel, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        else:
            shutil.copy2(REPO / rel, dest)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = out.glob("karpenter_lambda-*.whl")
    return path


@pytest.fixture(scope="module")
def site(wheel, tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(dest)
    return dest


def _run(site: Path, cwd: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in (resources.REPO_ENV, "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-m", "karpenter_lambda", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _repo_files(rel: str) -> set[str]:
    src = REPO / rel
    if src.is_file():
        return {rel}
    return {str(p.relative_to(REPO)) for p in src.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def test_wheel_carries_every_bundled_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    prefix = f"karpenter_lambda/{resources.BUNDLE_DIR}/"
    bundled = {n[len(prefix):] for n in names if n.startswith(prefix)}
    expected = set().union(*(_repo_files(rel) for rel in resources.BUNDLED))
    assert "functions/registry.json" in expected and "watcher/manifests/30-deployment.yaml" in expected
    assert expected - bundled == set(), "missing from the wheel"
    assert "karpenter_lambda/data/ec2-catalog.json.gz" in names


def test_commands_run_from_the_wheel_alone(site, tmp_path):
    code = "import karpenter_lambda, karpenter_lambda.resources as r; print(karpenter_lambda.__file__); print(r.resource_root())"
    env = {k: v for k, v in os.environ.items() if k not in (resources.REPO_ENV, "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    where = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=60)
    assert where.returncode == 0, where.stderr
    pkg, root = where.stdout.split()
    assert Path(pkg).is_relative_to(site) and Path(root) == site / "karpenter_lambda" / resources.BUNDLE_DIR

    bundle = Path(root)
    watcher = _run(site, tmp_path, "watcher", "manifest", "--image", "r.example.com/w:1", "--cluster", "demo",
                   "--pod-queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/pods", "--region", "us-east-1")
    assert watcher.returncode == 0, watcher.stderr
    assert "kind: Deployment" in watcher.stdout and "r.example.com/w:1" in watcher.stdout

    valid = _run(site, tmp_path, "validate", str(bundle / "examples" / "default.yaml"))
    assert valid.returncode == 0, valid.stderr

    plan = _run(site, tmp_path, "plan", "-f", str(bundle / "examples" / "default.yaml"),
                "-f", str(bundle / "examples" / "workloads" / "web.yaml"), "--json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["nodeClaims"], plan.stdout[:500]

    demo = _run(site, tmp_path, "demo")
    assert demo.returncode == 0, demo.stderr
    assert "nodepools" in demo.stdout.lower()
