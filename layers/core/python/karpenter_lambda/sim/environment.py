"""The embedded environment, one set-up for ``simulate`` (:mod:`.simulator`) and the test world (:mod:`.world`):
moto (``mock_aws``, its instance launch times on the virtual clock), the local Kubernetes API (:mod:`.kubeapi`),
the seeded account (:mod:`.aws`), and the controllers' clock and environment pointed at them.

``with SimEnvironment(clock, nodeclasses, ...) as env:`` -- ``env.server``, ``env.url``, ``env.account``; on exit
everything is undone (the process environment restored).  Also the helpers both use to run the real handlers:
:func:`repo_root`, :func:`load_module`, :class:`LambdaContext`, :func:`capture_logs`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
from pathlib import Path
from typing import Callable, Mapping

from .. import resources
from ..controllers import environment, runtime
from ..controllers.sweep_shortcuts import SHORTCUTS_ENV
from .aws import SimAccount
from .clock import VirtualClock
from .kubeapi import KubeAPIServer


class SimulationError(Exception):
    """Bad input or a broken environment: the message says what to fix."""


def repo_root() -> Path:
    """The folder holding ``functions/`` and ``infra/config.py``: the checkout, or the copy an installed wheel
    carries (:func:`karpenter_lambda.resources.resource_root`; ``$KARPENTER_LAMBDA_REPO`` overrides)."""
    try:
        return resources.resource_root()
    except FileNotFoundError as e:
        raise SimulationError(str(e)) from None


def load_module(path: Path, name: str):
    if not path.exists():
        raise SimulationError(f"cannot find {path}: run from a checkout of karpenter-lambda (or set KARPENTER_LAMBDA_REPO)")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class LambdaContext:
    """The context object Lambda hands a handler."""

    def __init__(self, name: str):
        self.function_name = name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{name}"
        self.memory_limit_in_mb = 512
        self.aws_request_id = "sim"
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "sim"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def capture_logs(mod, stream: io.TextIOBase) -> None:
    """Powertools loggers hold the stdout of their import time: point a handler module's logger at ``stream``."""
    handler = getattr(getattr(mod, "logger", None), "registered_handler", None)
    if handler is not None and hasattr(handler, "setStream"):
        handler.setStream(stream)


@contextlib.contextmanager
def moto_clock(clock: VirtualClock):
    """moto stamps instance launch times with its own utcnow(): make it virtual."""
    import moto.ec2.models.instances as moto_instances   # moto is the [sim] extra: see SimEnvironment.__enter__

    original = moto_instances.utcnow
    moto_instances.utcnow = clock.utcnow_naive
    try:
        yield
    finally:
        moto_instances.utcnow = original


KEPT_SETTINGS = ("KARPENTER_LAMBDA_REPO", SHORTCUTS_ENV)


def _isolate_environ(region: str) -> None:
    """Nothing from the user's shell may point a simulation elsewhere: endpoints (any AWS_ENDPOINT_URL*), profiles,
    or a deployment's KARPENTER_LAMBDA_* settings (kube endpoint, Kubernetes version, ...); the repository and
    ``KARPENTER_LAMBDA_SWEEP_SHORTCUTS`` (the quiet-sweep shortcut on or off) are kept."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ["AWS_DEFAULT_REGION"] = region
    for var in list(os.environ):
        if var in ("AWS_PROFILE", "AWS_CONFIG_FILE") or var.startswith("AWS_ENDPOINT_URL") or (
                var.startswith("KARPENTER_LAMBDA_") and var not in KEPT_SETTINGS):
            os.environ.pop(var, None)


def _restore_environ(saved: dict) -> None:
    os.environ.clear()
    os.environ.update(saved)


class SimEnvironment:
    """moto + the local Kubernetes API + the virtual clock, entered and left as one.

    ``isolate``: scrub the shell's AWS/KARPENTER_LAMBDA_ settings first (``simulate``; tests set their own).
    ``uid_seed``: repeatable uids in the API server.  ``progress`` hears one line once the API server is up.
    ``function_env``: more variables the functions get, set after the isolation and the account's (the deployment
    settings ``simulate`` was given, e.g. ``runtime.catalog_environment``'s, as the CDK stack sets them)."""

    def __init__(self, clock: VirtualClock, nodeclasses, *, cluster: str, region: str, k8s_version: str,
                 uid_seed: str | None = None, isolate: bool = False, progress: Callable[[str], None] | None = None,
                 function_env: Mapping[str, str] | None = None):
        self.clock = clock
        self.nodeclasses = list(nodeclasses)
        self.cluster = cluster
        self.region = region
        self.k8s_version = k8s_version
        self.uid_seed = uid_seed
        self.isolate = isolate
        self.progress = progress or (lambda msg: None)
        self.function_env = dict(function_env or {})
        self._stack = contextlib.ExitStack()

    def callback(self, fn, *args) -> None:
        """Run ``fn(*args)`` on exit, before what was set up so far is undone."""
        self._stack.callback(fn, *args)

    def __enter__(self) -> "SimEnvironment":
        # moto is imported here, not with the module: it is the [sim] extra, and a plain install imports this package
        # (``validate`` reads simulator.STORED_KINDS; ``simulate`` checks for moto and says what to install)
        from moto import mock_aws

        from ..adapters.aws.clients import share_service_models
        from . import moto_speedups

        share_service_models()   # the simulator's, moto's and the functions' sessions parse each AWS model once
        moto_speedups.install()  # DynamoDB item reads serialized directly (the same JSON as moto's own)
        stack = self._stack
        try:
            stack.callback(_restore_environ, dict(os.environ))
            if self.isolate:
                _isolate_environ(self.region)
            # moto's own catalogue of public AMIs is not used (SimAccount publishes the EKS images and their SSM
            # parameters); loading it took a second at every start and reset of the mock
            os.environ["MOTO_EC2_LOAD_DEFAULT_AMIS"] = "false"
            stack.enter_context(mock_aws())
            stack.enter_context(moto_clock(self.clock))
            self.server = KubeAPIServer(clock=self.clock, k8s_version=self.k8s_version, uid_seed=self.uid_seed)
            self.url = self.server.start()
            stack.callback(self.server.stop)
            self.progress(f"local Kubernetes API at {self.url}; seeding moto")
            self.account = SimAccount(self.cluster, self.region, self.k8s_version).create(self.nodeclasses, self.url)
            os.environ.update(self.account.environment())
            os.environ.update(self.function_env)
            runtime.set_clock(self.clock)
            environment.reset()
            stack.callback(environment.reset)
            stack.callback(runtime.set_clock, None)
        except BaseException:
            stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()
