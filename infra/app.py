"""Build the CDK app: context -> StackConfig -> KarpenterLambdaStack, with cdk-nag AwsSolutions checks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from karpenter_lambda.api.roles import stack_name  # KarpenterLambda-<cluster>, one definition (the CLI reads outputs by it)

from .config import CONTEXT_KEYS, StackConfig, load_config
from .stack import KarpenterLambdaStack


def build_app(context: Mapping[str, Any] | None = None, *, outdir: str | None = None, base_dir: Path | None = None, nag: bool = True) -> cdk.App:
    """The app with one stack for ``clusterName``; raises ConfigError / NodePoolValidationError on bad input.

    ``context`` is given by tests; under ``cdk`` the CLI passes ``-c`` values through the environment.
    """
    app = cdk.App(context=dict(context) if context is not None else None, outdir=outdir)
    config: StackConfig = load_config({k: app.node.try_get_context(k) for k in CONTEXT_KEYS}, base_dir=base_dir)
    env = None
    if os.environ.get("CDK_DEFAULT_ACCOUNT") and os.environ.get("CDK_DEFAULT_REGION") and context is None:
        env = cdk.Environment(account=os.environ["CDK_DEFAULT_ACCOUNT"], region=os.environ["CDK_DEFAULT_REGION"])
    KarpenterLambdaStack(app, stack_name(config.cluster_name), config=config, env=env)
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app
