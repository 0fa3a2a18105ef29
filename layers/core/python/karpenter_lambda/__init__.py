"""karpenter-lambda: Karpenter-compatible node autoscaling for Kubernetes on AWS, serverless."""

__version__ = "0.1.0"
