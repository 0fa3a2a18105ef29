"""The off-peak function's access against what it really does (issue 21), both ways.

One night of an OffPeakSchedule that scales workloads (an HPA pinned, a KEDA ScaledObject paused) and drains a
NodePool, run through the real handler in the simulator (moto + the local Kubernetes API): moto's request recorder
logs every AWS call of the two off-peak invocations, the local API server every Kubernetes request.  Then:

* every DynamoDB call is an action of the role's state-table statement on a partition its ``dynamodb:LeadingKeys``
  lists, and every granted action and partition is used (so EC2NodeClasses -- userData -- stay out of reach);
* every other AWS call is granted (SendMessageBatch to the pod queue is ``sqs:SendMessage``);
* the Kubernetes requests are exactly the off-peak ClusterRole's grants.
"""

from __future__ import annotations

import base64
import json

import pytest

from test_rbac import OFFPEAK_GROUP, grants, rbac_request   # (tests/infra is on sys.path: no __init__.py)

CLUSTER = "demo-cluster"  # the session synth's clusterName (conftest)
BODY = """
  workloads:
    - namespaces: [dev]
      replicas: 0
    - namespaces: [staging]
      replicas: 1
  nodePools:
    - name: default
      drain: true
"""


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    """(AWS calls as (target, body), Kubernetes requests as RBAC triples, the two reports) of one off-peak night."""
    import os

    from moto.moto_api import recorder

    from karpenter_lambda.sim.workloads import WorkloadController
    from tests.offpeak.offpeak_world import NODEPOOL, OffPeakWorld, deployment, schedule

    cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("moto-recording"))     # the recorder writes ./moto_recording
    try:
        with OffPeakWorld(NODEPOOL + "---" + schedule(BODY), "2027-01-12T17:00:00Z") as o:
            w, wc = o.w, WorkloadController(o.server)
            wc.add(deployment("other", namespace="prod", replicas=2))
            wc.reconcile()
            o.create(deployment("web", replicas=2))
            o.create(deployment("db", replicas=1, kind="StatefulSet"))
            o.create({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "dbs", "namespace": "dev"},
                      "spec": {"scaleTargetRef": {"name": "db", "kind": "StatefulSet"}}})
            o.create(deployment("api", namespace="staging", replicas=4))
            o.create({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                      "metadata": {"name": "api", "namespace": "staging"},
                      "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
                               "minReplicas": 2, "maxReplicas": 8}})
            w.provision(w.sqs_event(o.server.store.list("pods", namespace="prod")))
            w.join_all(ready=True)
            w.sweep()
            w.schedule()
            kube, reports = set(), []
            recorder.reset_recording()
            for when, between in (("2027-01-12T19:00:00Z", True), ("2027-01-13T07:00:00Z", False)):
                o.server.request_log.clear()
                recorder.start_recording()
                reports.append(o.run(when))
                recorder.stop_recording()
                kube |= {rbac_request(m, p) for m, p, _code in o.server.requests()}
                for _ in range(6 if between else 0):        # the lifecycle sweep drains the NodePool overnight
                    w.clock.advance(60)
                    w.sweep()
                    wc.reconcile()
                    w.schedule()
            recording = recorder.download_recording()
    finally:
        recorder.stop_recording()
        os.chdir(cwd)
    calls = []
    for line in recording.splitlines():
        entry = json.loads(line)
        headers = {k.lower(): v for k, v in entry["headers"].items()}
        body = entry.get("body") or ""
        if entry.get("body_encoded"):
            body = base64.b64decode(body).decode()
        calls.append((headers.get("x-amz-target") or entry["url"], body))
    return calls, kube, reports


def _offpeak_statements(synth) -> dict[str, dict]:
    role_id = next(k for k in synth.of_type("AWS::IAM::Role") if k.startswith("OffPeakIam"))
    return {st.get("Sid", f"#{i}"): st for pol in synth.of_type("AWS::IAM::Policy").values()
            if {"Ref": role_id} in pol["Properties"]["Roles"]
            for i, st in enumerate(pol["Properties"]["PolicyDocument"]["Statement"])}


def _listify(x):
    return x if isinstance(x, list) else [x]


def test_the_night_did_everything(night):
    _calls, _kube, (start, end) = night
    assert start["started"] == ["nights"] and start["drained"] and not start["failed"] and not start["errors"]
    assert {a["kind"] for a in start["autoscalers"]} == {"HorizontalPodAutoscaler", "ScaledObject"}
    assert end["ended"] == ["nights"] and end["handedOff"] == 2 and not end["failed"] and not end["errors"]


DDB_SIDS = ("OffPeakStateItems", "OffPeakRecordDeletion")


def _granted_by_kind(synth) -> dict[str, set[str]]:
    """partition kind -> the DynamoDB actions the off-peak role's statements grant on it."""
    out: dict[str, set[str]] = {}
    for sid in DDB_SIDS:
        st = _offpeak_statements(synth)[sid]
        keys = st["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"]
        assert all(k.startswith(f"{CLUSTER}#") for k in keys)
        state_id = next(k for k in synth.of_type("AWS::DynamoDB::Table") if k.startswith("TablesState"))
        assert _listify(st["Resource"]) == [{"Fn::GetAtt": [state_id, "Arn"]}]
        for k in keys:
            out.setdefault(k.split("#", 1)[1], set()).update(_listify(st["Action"]))
    return out


def test_dynamodb_calls_are_exactly_the_granted_actions_and_partitions(night, synth):
    calls, _kube, _reports = night
    used: dict[str, set[str]] = {}   # partition kind -> actions used on it
    for target, body in calls:
        if not target.startswith("DynamoDB_"):
            continue
        doc = json.loads(body)
        action = "dynamodb:" + target.split(".")[1]
        if "Key" in doc or "Item" in doc:
            keys = [(doc.get("Key") or doc.get("Item"))["pk"]["S"]]
        elif action == "dynamodb:Query":                      # "#0 = :0" with #0 -> pk: one partition
            name, _, value = doc["KeyConditionExpression"].replace(" ", "").partition("=")
            assert (doc.get("ExpressionAttributeNames") or {}).get(name, name) == "pk", doc
            keys = [doc["ExpressionAttributeValues"][value]["S"]]
        else:
            pytest.fail(f"{action} has no leading key: dynamodb:LeadingKeys cannot restrict it ({doc})")
        for k in keys:
            used.setdefault(k.split("#", 1)[1], set()).add(action)
    granted = _granted_by_kind(synth)
    # per partition: what the function does there, and nothing more
    assert granted == used, "granted DynamoDB actions per partition != the ones the function uses"
    assert "EC2NodeClass" not in granted
    # no other statement of the role reaches DynamoDB (an unconditioned grant would undo the condition)
    others = [s for sid, s in _offpeak_statements(synth).items() if sid not in DDB_SIDS
              and any(a.startswith("dynamodb:") for a in _listify(s["Action"]))]
    assert others == []


def test_offpeak_role_cannot_delete_nodeclaim_records(synth):
    """A deleted NodeClaim record leaves its instance to the orphan GC, which terminates it without a drain: the
    off-peak role drains NodeClaims only by marking them deleting (an update)."""
    granted = _granted_by_kind(synth)
    assert "dynamodb:DeleteItem" not in granted["NodeClaim"]
    assert {k for k, acts in granted.items() if "dynamodb:DeleteItem" in acts} == {"OffPeakRecord"}
    assert not any(a in granted["NodeClaim"] for a in ("dynamodb:*", "dynamodb:BatchWriteItem", "dynamodb:UpdateItem"))


def test_every_other_aws_call_is_granted(night, synth):
    calls, _kube, _reports = night
    granted = {a for s in _offpeak_statements(synth).values() for a in _listify(s["Action"])}
    # X-Amz-Target -> the IAM action that authorizes it (the JSON protocols the function's clients use)
    for target, _body in calls:
        if target.startswith("DynamoDB_"):
            continue
        if target.startswith("AmazonSQS."):
            op = target.split(".")[1]
            action = "sqs:SendMessage" if op in ("SendMessage", "SendMessageBatch") else f"sqs:{op}"
        else:
            pytest.fail(f"unexpected AWS call {target}")
        assert action in granted, (target, action)


def test_kubernetes_requests_are_exactly_the_offpeak_grants(night):
    _calls, kube, _reports = night
    have = grants(OFFPEAK_GROUP)
    assert sorted(kube - have) == [], "the off-peak ClusterRole misses requests the function made"
    assert sorted(have - kube) == [], "the off-peak ClusterRole grants what the function never did"
