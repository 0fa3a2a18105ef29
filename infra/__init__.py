"""CDK constructs and stack of karpenter-lambda (``cdk deploy -c clusterName=...``); see docs/deploy.md."""

from .config import ConfigError, StackConfig, load_config

__all__ = ["ConfigError", "StackConfig", "load_config"]
