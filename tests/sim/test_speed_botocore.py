"""sim/moto_speedups_botocore: under moto's in-process mock a plain SigV4 request carries the headers a signed one
carries (date, token, credential scope, signed headers) with a zero signature, and moto still reads its access key;
presigned URLs (the EKS token) and every request outside the mock are signed exactly as botocore signs them; the shared
event-alias memo answers what botocore's own renaming answers; moto's random strings keep their length and alphabet."""

from __future__ import annotations

import datetime
import string

import boto3
import botocore.auth
import pytest
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.hooks import EventAliaser, HierarchicalEmitter
from moto import mock_aws
from moto.moto_api._internal import mock_random

from karpenter_lambda.adapters.kube.token import get_token
from karpenter_lambda.sim import moto_speedups_botocore as B

REGION = "us-east-1"
NOW = datetime.datetime(2026, 3, 2, 10, 0, 0)
CREDS = Credentials("AKIDEXAMPLE", "secret", "session-token")


@pytest.fixture(autouse=True)
def _installed_after():
    yield
    B.install()   # as the rest of the session runs (tests/conftest installs the speedups)


@pytest.fixture
def frozen(monkeypatch):
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: NOW)


def _signed(fast: bool) -> AWSRequest:
    B.install() if fast else B.uninstall()
    req = AWSRequest(method="POST", url=f"https://dynamodb.{REGION}.amazonaws.com/", data=b'{"TableName": "t"}',
                     headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.GetItem"})
    botocore.auth.SigV4Auth(CREDS, "dynamodb", REGION).add_auth(req)
    return req


def _fields(auth: str) -> dict:
    algo, rest = auth.split(" ", 1)
    return {"algorithm": algo, **dict(part.split("=", 1) for part in rest.split(", "))}


def test_under_the_mock_the_headers_are_a_signed_requests_with_a_zero_signature(frozen):
    with mock_aws():
        fast, slow = _signed(True), _signed(False)
    f, s = _fields(fast.headers["Authorization"]), _fields(slow.headers["Authorization"])
    assert f["Credential"] == s["Credential"] == f"AKIDEXAMPLE/20260302/{REGION}/dynamodb/aws4_request"
    assert f["SignedHeaders"] == s["SignedHeaders"] and f["algorithm"] == s["algorithm"] == "AWS4-HMAC-SHA256"
    assert f["Signature"] == B.ZERO_SIGNATURE != s["Signature"]
    assert {k: v for k, v in fast.headers.items() if k != "Authorization"} == \
           {k: v for k, v in slow.headers.items() if k != "Authorization"}
    assert fast.headers["X-Amz-Security-Token"] == "session-token" and fast.headers["X-Amz-Date"] == "20260302T100000Z"


def test_outside_the_mock_every_request_is_signed(frozen):
    fast, slow = _signed(True), _signed(False)
    assert fast.headers["Authorization"] == slow.headers["Authorization"]
    assert _fields(fast.headers["Authorization"])["Signature"] != B.ZERO_SIGNATURE


def test_presigned_urls_are_signed_under_the_mock(frozen):
    session = boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name=REGION)
    with mock_aws():
        B.install()
        fast = get_token("c", REGION, session)
        B.uninstall()
        slow = get_token("c", REGION, session)
    assert fast == slow


def test_moto_still_reads_the_account_and_answers():
    B.install()
    with mock_aws():
        assert boto3.client("sts", region_name=REGION).get_caller_identity()["Account"] == "123456789012"
        ddb = boto3.client("dynamodb", region_name=REGION)
        ddb.create_table(TableName="t", KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                         AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        ddb.put_item(TableName="t", Item={"k": {"S": "a"}})
        assert ddb.get_item(TableName="t", Key={"k": {"S": "a"}})["Item"] == {"k": {"S": "a"}}


EVENTS = ["before-call.apigateway.GetRestApi", "creating-client-class.s3", "before-parameter-build.s3.PutObject",
          "after-call.runtime.sagemaker.InvokeEndpoint", "needs-retry.dynamodb.Query", "before-sign.sts.GetCallerIdentity",
          "request-created.elasticloadbalancing.X", "before-call.autoscaling-plans.X", "provide-client-params.ec2.RunInstances"]


def test_alias_memo_answers_as_botocore_and_is_shared():
    B.uninstall()
    own = [EventAliaser(HierarchicalEmitter())._alias_event_name(e) for e in EVENTS]
    B.install()
    a, b = EventAliaser(HierarchicalEmitter()), EventAliaser(HierarchicalEmitter())
    assert [a._alias_event_name(e) for e in EVENTS] == own
    assert a._alias_name_cache is b._alias_name_cache and set(EVENTS) <= set(b._alias_name_cache)
    other = EventAliaser(HierarchicalEmitter(), {"foo": "bar"})        # another table: its own memo
    assert other._alias_name_cache is not a._alias_name_cache
    assert other._alias_event_name("x.foo.y") == "x.bar.y"
    assert own[0] != EVENTS[0] or own[1] != EVENTS[1] or own != EVENTS   # the table did rename something


def test_random_strings_keep_length_and_alphabet():
    B.install()
    assert len(mock_random.get_random_string()) == 20
    long = mock_random.get_random_string(length=52)
    assert len(long) == 52 and set(long) <= set(string.ascii_letters + string.digits)
    letters = "".join(mock_random.get_random_string(length=200, include_digits=False) for _ in range(5))
    assert set(letters) <= set(string.ascii_letters) and len(set(letters)) > 40
    lower = mock_random.get_random_string(length=200, lower_case=True)
    assert lower == lower.lower() and any(c.isdigit() for c in lower + mock_random.get_random_string(length=500))
