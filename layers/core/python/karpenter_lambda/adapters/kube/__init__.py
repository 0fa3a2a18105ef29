"""Kubernetes access from Lambda: EKS cluster info, EKS bearer tokens, a retrying client returning dicts."""
