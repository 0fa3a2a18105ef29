"""EKS cluster info (moto) and the EKS bearer token format."""

import base64
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from moto import mock_aws

from karpenter_lambda.adapters.kube.eks import get_cluster_info
from karpenter_lambda.adapters.kube.token import TokenProvider, get_token


def _decode(token):
    assert token.startswith("k8s-aws-v1.")
    body = token[len("k8s-aws-v1.") :]
    assert "=" not in body  # no padding
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def test_token_is_a_presigned_sts_url_with_the_cluster_header_signed():
    session = boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="eu-west-1")
    url = _decode(get_token("my-cluster", session=session))
    parts = urlsplit(url)
    q = parse_qs(parts.query)
    assert parts.scheme == "https" and parts.netloc == "sts.eu-west-1.amazonaws.com"
    assert q["Action"] == ["GetCallerIdentity"] and q["Version"] == ["2011-06-15"]
    assert q["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert q["X-Amz-Expires"] == ["60"]
    assert q["X-Amz-Credential"][0].startswith("AKIDEXAMPLE/") and "/eu-west-1/sts/aws4_request" in q["X-Amz-Credential"][0]
    assert "x-k8s-aws-id" in q["X-Amz-SignedHeaders"][0].split(";")
    assert len(q["X-Amz-Signature"][0]) == 64
    # the header value is part of the signature: another cluster gives another signature
    other = parse_qs(urlsplit(_decode(get_token("other", session=session))).query)
    if other["X-Amz-Date"] == q["X-Amz-Date"]:
        assert other["X-Amz-Signature"] != q["X-Amz-Signature"]


def test_token_needs_a_cluster_name():
    with pytest.raises(ValueError, match="cluster name"):
        get_token("")


def test_token_provider_refreshes_after_ten_minutes():
    now = [0.0]
    made = []
    p = TokenProvider("c", clock=lambda: now[0], signer=lambda: made.append(1) or f"tok{len(made)}")
    assert p.token() == "tok1"
    now[0] = 599
    assert p.token() == "tok1"
    now[0] = 600
    assert p.token() == "tok2"


@mock_aws
def test_get_cluster_info_from_describe_cluster():
    eks = boto3.client("eks", region_name="us-east-1")
    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.create_role(RoleName="eks", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    eks.create_cluster(name="demo", version="1.31", roleArn=role, resourcesVpcConfig={"subnetIds": []}, kubernetesNetworkConfig={"serviceIpv4Cidr": "10.100.0.0/16"})
    info = get_cluster_info(eks, "demo")
    endpoint, ca, version, cidr = info
    assert endpoint.startswith("https://") and version == "1.31"
    assert base64.b64decode(ca)  # base64 CA data
    assert cidr in ("10.100.0.0/16", None)
    with pytest.raises(eks.exceptions.ResourceNotFoundException):
        get_cluster_info(eks, "missing")
    with pytest.raises(ValueError):
        get_cluster_info(eks, "")
