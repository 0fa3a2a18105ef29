"""`karpenter-lambda demo`: the embedded run, with moto as AWS (no account, no network).

It validates ``examples/``, applies it to a moto-backed DynamoDB state table and
prints what is stored (``run_demo(out)``); the full simulation is ``simulate``
(``make demo`` runs both).
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

ENDPOINT_ENVS = ("KARPENTER_LAMBDA_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL")


def default_examples_dir() -> Path:
    """``./examples`` if present, else the repository's ``examples/`` (or the installed package's copy)."""
    here = Path.cwd() / "examples"
    if here.is_dir():
        return here
    from .. import resources
    return resources.examples_dir()


@contextmanager
def _embedded_aws(region: str):
    """moto in-process; endpoint variables are hidden so nothing reaches a real or external endpoint."""
    from moto import mock_aws

    saved = {k: os.environ.pop(k) for k in ENDPOINT_ENVS if k in os.environ}
    saved_region = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = region
    try:
        with mock_aws():
            yield
    finally:
        os.environ.update(saved)
        if saved_region is None:
            os.environ.pop("AWS_DEFAULT_REGION", None)
        else:
            os.environ["AWS_DEFAULT_REGION"] = saved_region


def run_demo(out: TextIO, examples: str | Path | None = None, cluster: str = "demo", region: str = "us-east-1") -> int:
    """Validate ``examples`` (default: the repo's examples/), store them in moto DynamoDB, print the tables.

    Returns the exit code: 0 ok, 1 an example is invalid, 2 no examples found.
    """
    from .store_cmds import KIND_ORDER, KIND_PLURAL, table_for
    from .validate import load_inputs, summary

    examples = Path(examples) if examples else default_examples_dir()
    if not examples.is_dir() or not any(examples.glob("*.y*ml")):
        out.write(f"demo: no examples found in {examples}: run from the repository root or pass --examples DIR\n")
        return 2
    out.write(f"== validate {examples}\n")
    result, files = load_inputs([str(examples)])
    for issue in result.issues:
        out.write(f"  {issue}\n")
    out.write(f"  {summary(result, files)}\n")
    if result.issues:
        return 1

    with _embedded_aws(region):
        from ..adapters.store import Store

        store = Store(cluster, region=region)
        store.ensure_table()
        out.write(f"\n== apply to DynamoDB table {store.table_name} (moto, region {region}), cluster {cluster!r}\n")
        for obj in sorted(result.objects, key=lambda o: KIND_ORDER.index(o.kind)):
            stored = store.apply(obj)
            out.write(f"  {obj.kind.lower()}/{obj.name} created (resourceVersion {stored.metadata['resourceVersion']})\n")

        claims = store.list("NodeClaim")
        for kind in KIND_ORDER:
            objs = store.list(kind)
            out.write(f"\n== get {KIND_PLURAL[kind]}\n")
            if not objs:
                out.write(f"  (no {KIND_PLURAL[kind]})\n")
                continue
            table = table_for(kind, objs, nodeclaims=claims if kind == "NodePool" else None,
                              nodeclasses=store.list("EC2NodeClass") if kind == "NodePool" else None)
            out.write("".join(f"  {line}\n" for line in table.splitlines()))
    return 0


def run(args: argparse.Namespace) -> int:
    # the global --cluster defaults to "default": the demo's own cluster is "demo" (docs/cli.md) unless one is named
    return run_demo(sys.stdout, examples=args.examples, cluster="demo" if args.cluster == "default" else args.cluster,
                    region=args.region)


def register(subparsers) -> None:
    p = subparsers.add_parser("demo", help="run the embedded demo (moto as AWS): validate and store examples/",
                              description="Validate examples/, apply them to a moto-backed state table and print what is stored.")
    p.add_argument("--examples", metavar="DIR", help="manifests to use (default: ./examples or the repository's examples/)")
    p.set_defaults(func=run)
