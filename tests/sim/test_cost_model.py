"""The control-plane cost model (sim/cost.py): billed duration, DynamoDB units, SQS chunks, the monthly figures."""

import pytest

from karpenter_lambda.sim import cost
from karpenter_lambda.sim import cost_prices as P
from karpenter_lambda.sim.cost_meter import emf_metrics


def test_billed_ms_rounds_up_to_the_millisecond_and_adds_call_latency():
    assert cost.billed_ms(0.2, 1769, [], 0) == 1
    assert cost.billed_ms(10.01, 1769, [], 0) == 11
    # two DynamoDB reads and a Kubernetes request: 2 x 6 ms + 10 ms on top of the CPU time
    assert cost.billed_ms(10.0, 1769, [("dynamodb", "GetItem"), ("dynamodb", "Query")], 1) == 32
    assert cost.billed_ms(0.0, 1769, [("ec2", "CreateFleet")], 0) == 1500


def test_less_memory_than_one_vcpu_slows_the_cpu_part_only():
    # 1,024 MB is 0.579 of a vCPU: 100 ms of CPU take 172.8 ms; more than 1,769 MB is no faster
    assert cost.billed_ms(100.0, 1024, [], 0) == 173
    assert cost.billed_ms(100.0, 3538, [], 0) == 100
    assert cost.billed_ms(100.0, 1024, [("sqs", "SendMessage")], 0) == 183


def test_item_size_counts_names_and_values():
    assert cost.item_size({"pk": {"S": "abc"}}) == 5
    assert cost.item_size({"n": {"N": "12345"}}) == 1 + 3
    assert cost.item_size({"m": {"M": {"a": {"S": "xy"}}}}) == 1 + 3 + (1 + 2 + 1)
    assert cost.item_size({"b": {"BOOL": True}, "l": {"L": [{"S": "a"}, {"S": "b"}]}}) == (1 + 1) + (1 + 3 + 2 + 2)


def _item(nbytes: int) -> dict:
    return {"k": {"S": "x" * (nbytes - 1)}}


def test_dynamodb_request_units():
    # reads: 4 KB units, half for an eventually consistent read, at least one unit even for a missing item
    assert cost.request_units("GetItem", {}, {"Item": _item(100)}) == (0.5, 0.0)
    assert cost.request_units("GetItem", {"ConsistentRead": True}, {"Item": _item(9000)}) == (3.0, 0.0)
    assert cost.request_units("GetItem", {}, {}) == (0.5, 0.0)
    assert cost.request_units("Query", {}, {"Items": [_item(3000), _item(3000)]}) == (1.0, 0.0)
    # writes: 1 KB units; a transaction's items count twice; a refused write still costs
    assert cost.request_units("PutItem", {"Item": _item(2500)}, None) == (0.0, 3.0)
    assert cost.request_units("UpdateItem", {"Key": _item(10)}, {"Attributes": _item(1500)}) == (0.0, 2.0)
    assert cost.request_units("DeleteItem", {"Key": _item(10)}, {}) == (0.0, 1.0)
    tx = {"TransactItems": [{"Put": {"Item": _item(500)}}, {"ConditionCheck": {"Key": _item(10)}},
                            {"Update": {"Key": _item(10), "ExpressionAttributeValues": {":v": {"N": "1"}}}}]}
    assert cost.request_units("TransactWriteItems", tx, {}) == (0.0, 6.0)
    assert cost.request_units("DescribeTable", {}, {}) == (0.0, 0.0)


def test_sqs_requests_are_64_kb_chunks():
    assert cost.sqs_requests("SendMessage", {"MessageBody": "x" * 100}) == 1
    assert cost.sqs_requests("SendMessage", {"MessageBody": "x" * (64 * 1024 + 1)}) == 2
    assert cost.sqs_requests("SendMessageBatch", {"Entries": [{"MessageBody": "x" * 40000}] * 4}) == 3
    assert cost.sqs_requests("ReceiveMessage", {}) == 1


def _usage() -> cost.Usage:
    u = cost.Usage(queue_sources=1)
    sweep = cost.FunctionUsage("lifecycle", 1024, "arm64", interval_seconds=60.0, invocations=10, billed_ms=1000,
                               rru=20.0, wru=5.0, log_bytes=10_000, hours={0})
    prov = cost.FunctionUsage("provisioner", 1769, "arm64", invocations=2, billed_ms=4000, sqs_requests=0, hours={0})
    u.functions = {"lifecycle": sweep, "provisioner": prov}
    u.metrics = {("KarpenterLambda", "NodesTerminated", (("cluster", "c"),)): ("lifecycle", {0})}
    return u


def test_a_scheduled_function_runs_every_interval_all_month_whatever_the_run_skipped():
    doc = cost.monthly(_usage(), 3600.0)
    life = doc["functions"]["lifecycle"]
    assert life["invocationsPerMonth"] == 43800.0              # 730 h x 60 per hour
    assert life["meanBilledMs"] == 100.0
    gbs = 43800 * 0.1 * 1.0 + 12 * 730 / 24 * 2.8 * 1.0
    assert life["gbSecondsPerMonth"] == pytest.approx(gbs, abs=0.1)
    assert life["costPerMonth"] == pytest.approx(gbs * P.LAMBDA_GB_SECOND["arm64"] + 43800 * P.LAMBDA_PER_REQUEST, abs=1e-4)
    # the queue-triggered provisioner at the run's rate: 2 per simulated hour
    assert doc["functions"]["provisioner"]["invocationsPerMonth"] == 1460.0
    # DynamoDB units scale with the sweep's invocations (4,380x the 10 measured)
    assert doc["dynamodb"]["rruPerMonth"] == 87600.0 and doc["dynamodb"]["wruPerMonth"] == 21900.0
    # one queue: 5 pollers x 20 s long polls all month, plus one delete per provisioner batch
    assert doc["sqs"]["eventSourcePollsPerMonth"] == 657000.0
    assert doc["sqs"]["requestsPerMonth"] == 1460.0
    assert doc["cloudwatch"]["metrics"] == 1 and doc["cloudwatch"]["costPerMonth"] == 0.3
    parts = sum(doc[k]["costPerMonth"] for k in ("lambda", "dynamodb", "sqs", "eventbridge", "cloudwatch", "logs", "xray"))
    assert doc["totalPerMonth"] == pytest.approx(parts, abs=1e-3)


def test_x86_costs_more_per_gb_second_than_arm64():
    u = _usage()
    arm = cost.monthly(u, 3600.0)["functions"]["lifecycle"]["costPerMonth"]
    u.functions["lifecycle"].architecture = "x86_64"
    x86 = cost.monthly(u, 3600.0)["functions"]["lifecycle"]["costPerMonth"]
    assert x86 > arm * 1.2


def test_a_metric_is_billed_for_the_share_of_hours_it_had_data():
    u = _usage()
    u.functions["lifecycle"].hours = {0, 1, 2, 3}
    u.metrics = {("N", "A", ()): ("lifecycle", {0, 1, 2, 3}), ("N", "B", ()): ("lifecycle", {2})}
    doc = cost.monthly(u, 4 * 3600.0)
    assert doc["cloudwatch"]["metricMonths"] == 1.25


def test_emf_metrics_reads_the_documents_powertools_prints():
    line = ('{"_aws": {"Timestamp": 1, "CloudWatchMetrics": [{"Namespace": "KarpenterLambda", '
            '"Dimensions": [["cluster", "service"]], "Metrics": [{"Name": "NodesLaunched", "Unit": "Count"}, '
            '{"Name": "DecisionLatencyMs", "Unit": "Milliseconds"}]}]}, "cluster": "c1", "service": "prov", '
            '"NodesLaunched": [0], "DecisionLatencyMs": [3.1]}')
    got = emf_metrics("not json\n" + line + "\n")
    dims = (("cluster", "c1"), ("service", "prov"))
    assert got == {("KarpenterLambda", "NodesLaunched", dims), ("KarpenterLambda", "DecisionLatencyMs", dims)}
