"""`karpenter-lambda` command line.

Each sub-command lives in its own module under ``karpenter_lambda.cli`` and
exposes ``register(subparsers)``; the module adds its parser and sets
``func`` (called with the parsed args, returns the exit code).  Modules are
imported here so a command's heavy dependencies load only when it runs.

Exit codes: 0 success, 1 the command ran and found a problem (invalid manifest,
unschedulable pods where asked), 2 usage error or an environment problem.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# One entry per sub-command module (add a line; never rename a command).
COMMAND_MODULES = [
    "karpenter_lambda.cli.validate",
    "karpenter_lambda.cli.convert",
    "karpenter_lambda.cli.store_cmds",
    "karpenter_lambda.cli.plan",
    "karpenter_lambda.cli.simulate",
    "karpenter_lambda.cli.demo",
    "karpenter_lambda.cli.disruption",
    "karpenter_lambda.cli.offpeak",
    "karpenter_lambda.cli.watcher",
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage errors exit 2 with a hint
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\nRun '{self.prog} --help' for usage.\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="karpenter-lambda", description="Karpenter-compatible node autoscaling on AWS Lambda.")
    parser.add_argument("--cluster", default=os.environ.get("KARPENTER_LAMBDA_CLUSTER", "default"),
                        help="cluster name the state belongs to (env KARPENTER_LAMBDA_CLUSTER, default: default)")
    parser.add_argument("--region", default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
                        help="AWS region (env AWS_REGION, default us-east-1)")
    parser.add_argument("--endpoint-url", default=os.environ.get("KARPENTER_LAMBDA_ENDPOINT_URL"),
                        help="AWS endpoint, e.g. http://127.0.0.1:5000 for moto_server (env KARPENTER_LAMBDA_ENDPOINT_URL)")
    parser.add_argument("--state", metavar="DIR", default=None,
                        help="read a simulation saved by `simulate --save-state DIR` instead of AWS and the cluster "
                             "(get, disruption plan, offpeak status; env KARPENTER_LAMBDA_STATE_DIR)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for mod_name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            if e.name == mod_name:  # command not built yet in this checkout
                continue
            raise
        mod.register(sub)
    return parser


NO_CREDENTIALS = ("no AWS credentials: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                  "or use --endpoint-url (any values work for moto_server) or --state DIR (a saved simulation)")
NO_REGION = "no AWS region: pass --region or set AWS_REGION"


def aws_environment_error(e: BaseException) -> str | None:
    """The one-line message when ``e`` (or what it was raised from) is a missing AWS credential or region, else None.

    Commands that catch broad errors to explain them re-raise when this is not None, so every command that needs
    AWS exits 2 with the same line (docs/cli.md: no credentials is an environment problem)."""
    try:
        from botocore.exceptions import NoCredentialsError, NoRegionError
    except ImportError:  # pragma: no cover - botocore is a dependency
        return None
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, NoCredentialsError):
            return NO_CREDENTIALS
        if isinstance(cur, NoRegionError):
            return NO_REGION
        cur = cur.__cause__ or cur.__context__
    return None


def _local_endpoint_credentials(endpoint_url: str | None) -> None:
    """A loopback ``--endpoint-url`` (moto_server, DynamoDB Local) with no credentials in the environment: dummy
    ones for every AWS client of the command (any values work there; docs/cli.md), not only the store's."""
    if not endpoint_url:   # (the store's module imports botocore: an offline plan must not)
        return
    from ..adapters.store.models import is_local_endpoint

    if is_local_endpoint(endpoint_url) and not (os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE")):
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")


def _reads_state(args) -> bool:
    return (args.command == "get" or (args.command == "disruption" and getattr(args, "disruption_command", None) == "plan")
            or (args.command == "offpeak" and getattr(args, "offpeak_command", None) == "status"))


def _run_on_saved_state(args, state_dir: str) -> int:
    """Run the command unchanged against in-process moto + a local Kubernetes API seeded from a saved simulation."""
    from ..sim.state_io import StateDirError, serve_state

    try:
        with serve_state(state_dir) as served:
            if args.cluster == "default":  # the saved cluster unless one was named
                args.cluster = served["cluster"]
            args.region = served["region"]
            args.endpoint_url = None
            if hasattr(args, "kube_endpoint"):
                args.kube_endpoint = served["kubeEndpoint"]
            return int(args.func(args) or 0)
    except StateDirError as e:
        sys.stderr.write(f"karpenter-lambda: {e}\n")
        return 2


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        state_dir = args.state or os.environ.get("KARPENTER_LAMBDA_STATE_DIR")
        if state_dir and _reads_state(args):
            return _run_on_saved_state(args, state_dir)
        if args.state:
            parser.error("--state works with get, disruption plan and offpeak status only")
        _local_endpoint_credentials(getattr(args, "endpoint_url", None))
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:
        message = aws_environment_error(e)
        if message is None:
            raise
        sys.stderr.write(f"{parser.prog}: {message}\n")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
