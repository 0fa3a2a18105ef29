"""Error metrics of the provisioner, lifecycle and interruption functions and their alarms (issue 21).

The provisioner and interruption handlers catch a failed round and return its records to SQS, so the function
succeeds and its ``Errors`` alarm never fires: only ``ProvisioningErrors`` / ``InterruptionErrors`` tell.  The
lifecycle sweep survives a failing NodeClaim step (``LifecycleErrors``).  Each handler runs for real in the
simulator (moto + the local Kubernetes API, a fault injected into the API server), its EMF output is read back, and
the synthesized stack must alarm on each metric with the dimensions Powertools publishes (cluster, and service =
the function's POWERTOOLS_SERVICE_NAME; the simulator runs every handler under one service name).
"""

from __future__ import annotations

import json

import pytest

CLUSTER = "demo-cluster"  # the session synth's clusterName (conftest)
ERROR_METRICS = {"provisioner": "ProvisioningErrors", "lifecycle": "LifecycleErrors", "interruption": "InterruptionErrors"}


def emf(logs: str, metric: str) -> list[dict]:
    """Every EMF document in ``logs`` that carries ``metric``."""
    out = []
    for line in logs.splitlines():
        line = line.strip()
        if line.startswith("{") and '"_aws"' in line:
            doc = json.loads(line)
            names = {m["Name"] for d in doc["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
            if metric in names:
                out.append(doc)
    return out


def one(logs: str, metric: str) -> dict:
    docs = emf(logs, metric)
    assert len(docs) == 1, f"{len(docs)} EMF documents with {metric}; the logs end with:\n{logs[-3000:]}"
    return docs[0]


def value(doc: dict, metric: str) -> float:
    v = doc[metric]
    return sum(v) if isinstance(v, list) else v     # Powertools writes a metric's values as a list


def no_backoff_wait(w) -> None:
    """The Kubernetes client's retry back-off waits in real seconds (random, up to 0.2 s x 2^attempt: about 3 s for
    each call that fails all its 5 retries); the API server's injected faults below make every retry fail anyway.
    The retries are still made (``KubeClient.retried`` counts them), only not waited for: the client's own
    ``sleep`` hook, as the fault-injection harness sets it (sim/faults/injector.py)."""
    w.env.kube._sleep = lambda _seconds: None


@pytest.mark.parametrize("function,metric", sorted(ERROR_METRICS.items()))
def test_each_error_metric_has_an_alarm(synth, function, metric):
    alarms = [a["Properties"] for a in synth.of_type("AWS::CloudWatch::Alarm").values()
              if a["Properties"].get("MetricName") == metric]
    assert len(alarms) == 1, metric
    (a,) = alarms
    assert a["Namespace"] == "KarpenterLambda" and a["Statistic"] == "Sum" and a["Period"] == 300
    assert {d["Name"]: d["Value"] for d in a["Dimensions"]} == {"cluster": CLUSTER, "service": f"karpenter-lambda-{function}"}
    assert (a["Threshold"], a["ComparisonOperator"], a["TreatMissingData"]) == (0, "GreaterThanThreshold", "notBreaching")
    # the dimension Powertools publishes under is the function's POWERTOOLS_SERVICE_NAME
    fn = next(v["Properties"] for k, v in synth.of_type("AWS::Lambda::Function").items()
              if k.startswith(f"{function.capitalize()}Function"))
    assert fn["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == f"karpenter-lambda-{function}"


def test_a_failed_provisioning_round_is_counted():
    from karpenter_lambda.sim.world import World, make_pod, scenario_manifests

    with World(scenario_manifests()) as w:
        no_backoff_wait(w)
        pods = w.add_pods([make_pod(f"web-{i}") for i in range(2)])
        event = w.sqs_event(pods)
        w.server.add_fault(500, times=100, method="GET", path=r"^/api/v1/pods")     # the snapshot cannot be read
        resp = w.provision(event)
        w.server.clear_faults()
        assert len(resp["batchItemFailures"]) == 2            # both records go back to SQS ...
        doc = one(w.logs.getvalue(), "ProvisioningErrors")   # ... and the round is counted
        assert value(doc, "ProvisioningErrors") == 1 and doc["cluster"] == w.cluster
        # a round that works publishes no error count (a zero would make the metric billed every hour; the alarm
        # treats missing data as not breaching)
        resp = w.provision(w.sqs_event(pods))
        assert resp == {"batchItemFailures": []}
        assert [value(d, "ProvisioningErrors") for d in emf(w.logs.getvalue(), "ProvisioningErrors")] == [1]


def test_a_failing_lifecycle_step_is_counted():
    from karpenter_lambda.sim.world import World, make_pod, scenario_manifests

    with World(scenario_manifests()) as w:
        no_backoff_wait(w)
        w.provision(w.sqs_event(w.add_pods([make_pod("web-0")])))
        w.join_all(ready=True)
        w.server.add_fault(500, times=1000, method="PATCH", path=r"^/api/v1/nodes/")   # registration cannot patch
        report = w.sweep()
        w.server.clear_faults()
        assert report["errors"], report
        doc = one(w.logs.getvalue(), "LifecycleErrors")
        assert value(doc, "LifecycleErrors") == len(report["errors"]) >= 1


def test_a_failed_interruption_batch_is_counted():
    from karpenter_lambda.sim.world import World
    from tests.interruption.interruption_world import InterruptionWorld, manifests, spot_warning

    with World(manifests()) as w:
        no_backoff_wait(w)
        iw = InterruptionWorld(w)
        (a,) = iw.nodes_with_pods([1])
        iw.put(spot_warning(a["instance"]["InstanceId"], w.clock.isoformat()))
        event = iw.receive(expect=1)
        w.server.add_fault(500, times=1000, path=r"^/api/v1/(pods|nodes)")          # nothing can be read
        resp = iw.invoke(event)
        w.server.clear_faults()
        assert [f["itemIdentifier"] for f in resp["batchItemFailures"]] == [event["Records"][0]["messageId"]]
        doc = one(w.logs.getvalue(), "InterruptionErrors")
        assert value(doc, "InterruptionErrors") == 1 and doc["cluster"] == w.cluster
