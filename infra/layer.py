"""The core Lambda layer: ``karpenter_lambda`` plus the runtime dependencies, built without Docker.

CDK asks :class:`LocalLayerBundler` to fill ``output_dir`` on the machine running ``cdk``:
``pip install --platform manylinux2014_aarch64 --only-binary=:all: --python-version 3.14
--target <out>/python -r requirements.txt`` (wheels for the Lambda platform, whatever the host
is) and a copy of ``layers/core/python/karpenter_lambda``.  The Docker image is only a fallback
CDK never reaches, because the local bundler always answers.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from karpenter_lambda.sim.functions import LAMBDA_ARCHITECTURE  # arm64: one definition, the cost report prices it

REPO_ROOT = Path(__file__).resolve().parent.parent
LAYER_DIR = REPO_ROOT / "layers" / "core"
PACKAGE_DIR = LAYER_DIR / "python" / "karpenter_lambda"
REQUIREMENTS = REPO_ROOT / "requirements.txt"

RUNTIME = lambda_.Runtime.PYTHON_3_14
# the functions' and the layer's architecture, and the wheels pip fetches for it (manylinux, whatever the host is)
ARCHITECTURES = {"arm64": (lambda_.Architecture.ARM_64, "manylinux2014_aarch64"),
                 "x86_64": (lambda_.Architecture.X86_64, "manylinux2014_x86_64")}
ARCHITECTURE, PLATFORM = ARCHITECTURES[LAMBDA_ARCHITECTURE]
PYTHON_VERSION = "3.14"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache")


def pip_command(target: Path, requirements: Path, *, python_version: str = PYTHON_VERSION, platform: str = PLATFORM, extra_args: tuple[str, ...] = ()) -> list[str]:
    """The pip command line that installs ``requirements`` for the Lambda platform into ``target``."""
    return [
        sys.executable, "-m", "pip", "install",
        "--quiet", "--disable-pip-version-check", "--no-compile",
        "--platform", platform, "--implementation", "cp", "--python-version", python_version,
        "--only-binary=:all:", "--target", str(target),
        "-r", str(requirements), *extra_args,
    ]


def build_layer(output_dir: str | Path, *, requirements: Path = REQUIREMENTS, package_dir: Path = PACKAGE_DIR, python_version: str = PYTHON_VERSION, platform: str = PLATFORM, extra_pip_args: tuple[str, ...] = ()) -> Path:
    """Fill ``output_dir/python`` with the dependencies and the package; returns that folder.

    Raises RuntimeError with pip's output when pip fails (no silent Docker fallback).
    """
    target = Path(output_dir) / "python"
    target.mkdir(parents=True, exist_ok=True)
    cmd = pip_command(target, requirements, python_version=python_version, platform=platform, extra_args=extra_pip_args)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building the core layer failed: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    dest = target / package_dir.name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(package_dir, dest, ignore=_IGNORE)
    return target


def layer_fingerprint(*, requirements: Path = REQUIREMENTS, package_dir: Path = PACKAGE_DIR) -> str:
    """A hash of everything that goes into the layer (the asset hash: a change here means a new layer version)."""
    h = hashlib.sha256()
    h.update(f"{PLATFORM} {PYTHON_VERSION}\n".encode())
    h.update(requirements.read_bytes())
    for f in sorted(package_dir.rglob("*")):
        rel = f.relative_to(package_dir).as_posix()
        if f.is_dir() or "__pycache__" in rel or f.suffix == ".pyc" or ".egg-info" in rel:
            continue
        h.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


@jsii.implements(ILocalBundling)
class LocalLayerBundler:
    """``ILocalBundling`` that runs :func:`build_layer` on the host (no Docker)."""

    def __init__(self, requirements: Path = REQUIREMENTS, package_dir: Path = PACKAGE_DIR, extra_pip_args: tuple[str, ...] = ()):
        self.requirements = requirements
        self.package_dir = package_dir
        self.extra_pip_args = tuple(extra_pip_args)

    def try_bundle(self, output_dir: str, *, image=None, command=None, entrypoint=None, environment=None, **_kwargs) -> bool:
        build_layer(output_dir, requirements=self.requirements, package_dir=self.package_dir, extra_pip_args=self.extra_pip_args)
        return True


class CoreLayer(Construct):
    """The ``karpenter_lambda`` layer for the functions' architecture (arm64) and Python 3.14: ``self.layer``."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        code = lambda_.Code.from_asset(
            str(LAYER_DIR),
            asset_hash_type=AssetHashType.CUSTOM,
            asset_hash=layer_fingerprint(),
            exclude=["**/__pycache__", "**/*.pyc", "**/*.egg-info"],
            bundling=BundlingOptions(
                image=RUNTIME.bundling_image,
                local=LocalLayerBundler(),
                # CDK requires an image; the local bundler always answers (or raises), so Docker never runs
                command=["bash", "-c", "echo 'the core layer is built locally by infra/layer.py, not in Docker' >&2; exit 1"],
            ),
        )
        self.layer = lambda_.LayerVersion(
            self,
            "Layer",
            code=code,
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description=f"karpenter-lambda core package and runtime dependencies ({LAMBDA_ARCHITECTURE}, Python {PYTHON_VERSION})",
        )
