"""adapters/aws/clients.share_service_models: every botocore session of the process shares one data loader, so a
service's JSON model is parsed once; clients made from such sessions still work (under moto)."""

from __future__ import annotations

import boto3
import botocore.session
from moto import mock_aws

from karpenter_lambda.adapters.aws import clients


def test_sessions_share_one_loader_and_one_parsed_model():
    clients.share_service_models()
    clients.share_service_models()   # idempotent: wrapping twice would still share, but it is not re-wrapped
    assert getattr(botocore.session.create_loader, "karpenter_lambda_shared", False)
    a, b = botocore.session.get_session(), clients.make_session("us-east-1")._session
    assert a.get_component("data_loader") is b.get_component("data_loader")
    model_a = a.get_service_model("ec2")._service_description
    model_b = b.get_service_model("ec2")._service_description
    assert model_a is model_b   # parsed once, the same object


def test_clients_from_shared_sessions_work_under_moto():
    with mock_aws():
        sqs = clients.make_client(clients.make_session("us-east-1"), "sqs",
                                  clients.botocore_config("standard", 3, 2, 5))
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        boto3.client("sqs", region_name="us-east-1").send_message(QueueUrl=url, MessageBody="x")
        assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "x"
