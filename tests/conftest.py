"""Shared test set-up: no real AWS, ever."""

import os
from pathlib import Path

import pytest

# Never reach real AWS from tests: dummy credentials and a fixed region for boto3/moto.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_SECURITY_TOKEN", "testing")
os.environ.setdefault("AWS_SESSION_TOKEN", "testing")
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "karpenter-lambda-test")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "KarpenterLambdaTest")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def repo_root() -> Path:
    return REPO
