"""Every SQS queue of the stack lets a failed message come back and reach its dead-letter queue (issue 21).

The interruption queue had a 360 s visibility timeout (6x its function's 60 s timeout) and a 300 s retention: a
record that failed, or that a timed-out run left behind, expired before it was visible again, so it was neither
retried nor dead-lettered.  Checked on the synthesized templates (the default deployment, one with an
OffPeakSchedule, whose EventBridge Scheduler has a DLQ, and one with every optional parameter at its limit).
"""

from __future__ import annotations

import pytest

from infra.queues import check_queue_timings

SQS_DEFAULT_VISIBILITY = 30
SQS_DEFAULT_RETENTION = 4 * 86400

OFFPEAK = """\
apiVersion: karpenter-lambda.io/v1alpha1
kind: OffPeakSchedule
metadata: {name: nights}
spec:
  schedule: "0 20 * * 1-5"
  duration: 12h
  workloads: [{namespaces: [dev]}]
"""


@pytest.fixture(scope="module")
def templates(synth, synth_factory, nodepools_dir, tmp_path_factory) -> dict[str, dict]:
    pools = tmp_path_factory.mktemp("queues-pools")
    (pools / "default.yaml").write_text((nodepools_dir / "default.yaml").read_text())
    (pools / "offpeak.yaml").write_text(OFFPEAK)
    offpeak = synth_factory({"clusterName": "demo-cluster", "nodePools": str(pools), "podBatchWindowSeconds": "300",
                             "podBatchSize": "10000"}, tmp_path_factory.mktemp("cdk.out.queues"))
    return {"default": synth.template, "offpeak+limits": offpeak.template}


def _queues(template: dict) -> dict[str, dict]:
    return {k: v["Properties"] for k, v in template["Resources"].items() if v["Type"] == "AWS::SQS::Queue"}


def test_the_templates_hold_every_queue(templates):
    queues = _queues(templates["offpeak+limits"])
    names = sorted(queues)
    assert [n for n in names if n.startswith("PodQueue")] and [n for n in names if n.startswith("InterruptionQueue")]
    assert [n for n in names if n.startswith("OffPeakSchedulesDeadLetter")]
    assert len(queues) == 5       # pod + DLQ, interruption + DLQ, the Scheduler's DLQ


@pytest.mark.parametrize("which", ["default", "offpeak+limits"])
def test_no_queue_hides_a_message_longer_than_it_keeps_it(templates, which):
    queues = _queues(templates[which])
    by_arn = {k: p for k, p in queues.items()}
    for qid, p in queues.items():
        visibility = p.get("VisibilityTimeout", SQS_DEFAULT_VISIBILITY)
        retention = p.get("MessageRetentionPeriod", SQS_DEFAULT_RETENTION)
        assert visibility < retention, (qid, visibility, retention)
        redrive = p.get("RedrivePolicy")
        if redrive:
            # the receive after maxReceiveCount moves it to the DLQ: all of them must fit in the retention
            assert redrive["maxReceiveCount"] * visibility < retention, (qid, redrive["maxReceiveCount"], visibility, retention)
            dlq_id = redrive["deadLetterTargetArn"]["Fn::GetAtt"][0]
            # a dead letter keeps its original enqueue time: the DLQ must keep it longer than the source did
            assert by_arn[dlq_id].get("MessageRetentionPeriod", SQS_DEFAULT_RETENTION) > retention, qid


@pytest.mark.parametrize("which", ["default", "offpeak+limits"])
def test_every_event_source_queue_outlasts_its_function(templates, which):
    """Lambda refuses an SQS event source whose visibility timeout is below the function's timeout."""
    resources = templates[which]["Resources"]
    mappings = [v["Properties"] for v in resources.values() if v["Type"] == "AWS::Lambda::EventSourceMapping"]
    assert len(mappings) == 2
    for esm in mappings:
        queue = resources[esm["EventSourceArn"]["Fn::GetAtt"][0]]["Properties"]
        fn = resources[esm["FunctionName"]["Ref"]]["Properties"]
        assert queue["VisibilityTimeout"] >= fn["Timeout"], (esm, queue["VisibilityTimeout"], fn["Timeout"])


def test_the_interruption_queue_retries_twice_within_five_minutes(synth):
    [(qid, q)] = [(k, v) for k, v in _queues(synth.template).items() if k.startswith("InterruptionQueue") and "DeadLetter" not in k]
    assert (q["VisibilityTimeout"], q["MessageRetentionPeriod"], q["RedrivePolicy"]["maxReceiveCount"]) == (90, 300, 3)


def test_bad_timings_are_refused_at_synth():
    with pytest.raises(ValueError, match=r"queue interruption: visibility timeout 360 s must be below its retention 300 s"):
        check_queue_timings("interruption", visibility_seconds=360, retention_seconds=300, max_receive_count=3)
    with pytest.raises(ValueError, match=r"maxReceiveCount 3 x visibility 120 s = 360 s must be below the retention 300 s"):
        check_queue_timings("interruption", visibility_seconds=120, retention_seconds=300, max_receive_count=3)
    with pytest.raises(ValueError, match=r"visibility timeout 50 s is below its consumer's timeout 60 s"):
        check_queue_timings("interruption", visibility_seconds=50, retention_seconds=300, max_receive_count=3,
                            consumer_timeout_seconds=60)
    check_queue_timings("interruption", visibility_seconds=90, retention_seconds=300, max_receive_count=3,
                        consumer_timeout_seconds=60)
