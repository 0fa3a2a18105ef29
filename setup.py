"""Build hook: a wheel carries the folders the CLI reads beside the package (karpenter_lambda.resources.BUNDLED:
the functions and their registry, infra/config.py, the watcher's manifests, the examples) as karpenter_lambda/_bundle/.
Everything else is in pyproject.toml.  An editable install reads them from the checkout instead."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUNDLED = ("functions", "infra/config.py", "watcher/manifests", "watcher/karpenter_lambda_watcher", "examples")  # = karpenter_lambda.resources.BUNDLED
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc")


class BuildWithBundle(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        dest = Path(self.build_lib) / "karpenter_lambda" / "_bundle"
        for rel in BUNDLED:
            src, out = ROOT / rel, dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, out, ignore=_SKIP, dirs_exist_ok=True)
            else:
                shutil.copy2(src, out)


setup(cmdclass={"build_py": BuildWithBundle})
