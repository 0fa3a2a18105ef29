"""Where the files beside the package are: ``functions/`` (the handlers and ``registry.json``), ``infra/config.py``
(the schedules' defaults), ``watcher/`` (its manifests and the watcher package the simulator runs) and ``examples/``.

From a checkout (``pip install -e .``, the tests, the Lambda layer next to the repo) they are the repository's own
folders.  An installed wheel has no repository: the build copies those folders into the package as ``_bundle/``
(see ``setup.py``), and :func:`resource_root` finds them there.  ``$KARPENTER_LAMBDA_REPO`` overrides both.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ENV = "KARPENTER_LAMBDA_REPO"
BUNDLE_DIR = "_bundle"
# the folders and files a wheel carries (setup.py copies exactly these; .ci/wheel-check runs the installed wheel)
BUNDLED = ("functions", "infra/config.py", "watcher/manifests", "watcher/karpenter_lambda_watcher", "examples")
_MARKER = Path("functions") / "provisioner" / "handler.py"


def _checkout() -> Path | None:
    """The repository this very package file lives in (layers/core/python/karpenter_lambda), if any."""
    package = Path(__file__).resolve().parent
    root = package.parents[3]
    if package == root / "layers" / "core" / "python" / package.name and (root / _MARKER).exists():
        return root
    return None


def resource_root() -> Path:
    """The folder holding ``functions/``, ``infra/config.py``, ``watcher/manifests/`` and ``examples/``."""
    env = os.environ.get(REPO_ENV)
    if env:
        return Path(env)
    checkout = _checkout()
    if checkout is not None:
        return checkout
    bundle = Path(__file__).resolve().parent / BUNDLE_DIR
    if (bundle / _MARKER).exists():
        return bundle
    raise FileNotFoundError(
        f"cannot find the karpenter-lambda functions: neither a checkout around {Path(__file__).resolve().parent} nor "
        f"the bundled {bundle}; reinstall the package (pip install 'karpenter-lambda[sim]') or set ${REPO_ENV} "
        "to a checkout of karpenter-lambda")


def examples_dir() -> Path:
    return resource_root() / "examples"


def watcher_manifests_dir() -> Path:
    return resource_root() / "watcher" / "manifests"
