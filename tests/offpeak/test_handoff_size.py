"""The morning hand-off respects SQS's limits (issue 21 defect 10): at most 10 entries and 256 KiB per
SendMessageBatch; a pod too large alone is reported by name, the others are sent (moto SQS)."""

import json

import boto3
from moto import mock_aws

from karpenter_lambda.adapters.aws.sqs import MAX_BATCH_BYTES, PodQueue


def _pod(name: str, pad: int = 0) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "annotations": {"example.com/blob": "x" * pad} if pad else {}},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]}}


def _drain(sqs, url) -> list[dict]:
    out = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            return out
        out.extend(json.loads(m["Body"]) for m in got)
        sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                        for i, m in enumerate(got)])


def test_big_pods_are_sent_in_batches_under_256_kib_and_an_oversized_one_is_named():
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="pods")["QueueUrl"]
        calls = []
        sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch",
                                 lambda params, **kw: calls.append([len(e["MessageBody"].encode()) for e in params["Entries"]]))
        pods = [_pod(f"big-{i}", pad=60_000) for i in range(12)] + [_pod(f"small-{i}") for i in range(15)]
        pods.insert(5, _pod("huge", pad=300_000))
        q = PodQueue(sqs, url, "c1", clock=lambda: 0.0)
        sent, problems = q.send_pods(pods)
        assert sent == 27
        (problem,) = problems
        assert problem.startswith("pod default/huge: message of ") and f"{MAX_BATCH_BYTES}-byte limit" in problem
        assert all(len(c) <= 10 and sum(c) <= MAX_BATCH_BYTES for c in calls), calls
        got = _drain(sqs, url)
        assert sorted(m["pod"]["metadata"]["name"] for m in got) == sorted(p["metadata"]["name"] for p in pods
                                                                           if p["metadata"]["name"] != "huge")
        assert all(m["type"] == "pod" and m["cluster"] == "c1" for m in got)
