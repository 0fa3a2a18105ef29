"""The ``nodePools`` folder: validated at synth, written to the state table at deploy (the GitOps path).

Every YAML/JSON file in the folder is loaded with ``karpenter_lambda.api.manifests.load_files``
(Karpenter v1 validation + CRD defaults; the same object twice is an issue).  Any issue stops synth with
:class:`NodePoolValidationError`, whose message lists every ``FILE:DOC_INDEX: Kind/name:
field.path: message`` line.  Each valid object becomes one ``AwsCustomResource`` that does a
DynamoDB ``UpdateItem`` on create/update and ``DeleteItem`` on delete, in the item layout of
``karpenter_lambda.adapters.store`` (pk ``<cluster>#<Kind>``, sk name, ``metadata``/``spec`` JSON,
``version`` bumped).  ``status`` is left to the controllers.

The folder may also hold ``OffPeakSchedule`` documents (karpenter-lambda.io/v1alpha1): validated the same way and
written as the same kind of item (pk ``<cluster>#OffPeakSchedule``); ``NodePoolManifests.offpeak_schedules`` lists
them for the EventBridge Scheduler schedules of ``infra/offpeak.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from aws_cdk import Annotations, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

OFFPEAK_KIND = "OffPeakSchedule"   # karpenter_lambda.api.offpeak.KIND (imported lazily with the rest of the package)


class NodePoolValidationError(ValueError):
    """The nodePools folder has invalid manifests; ``issues`` holds each ValidationIssue."""

    def __init__(self, folder: Path, issues: list):
        self.issues = list(issues)
        lines = "\n".join(str(i) for i in self.issues)
        super().__init__(f"context parameter nodePools: {len(self.issues)} problem(s) in {folder}:\n{lines}")


def role_issues(folder: Path, node_role: str) -> list:
    """EC2NodeClasses in ``folder`` whose ``spec.role`` is not ``node_role``: the functions may pass only the
    stack's node role to EC2 (iam:PassRole), so nodes of such a class could never launch."""
    from karpenter_lambda.api.manifests import parse_documents
    from karpenter_lambda.api.roles import node_role_warnings

    path = Path(folder)
    files = sorted(f for f in path.iterdir() if f.suffix in (".yaml", ".yml", ".json")) if path.is_dir() else [path]
    docs = []
    for f in files:
        parsed, _ = parse_documents(f.read_text(encoding="utf-8"), str(f))
        docs.extend((str(f), index, doc) for index, doc in parsed)
    return node_role_warnings(docs, "", node_role=node_role)


def load_node_pools(folder: Path) -> list:
    """Load and validate every manifest in ``folder``; returns the typed objects or raises NodePoolValidationError."""
    from karpenter_lambda.api.manifests import load_files

    result = load_files([folder])
    # another provider's node class (e.g. a KWOKNodeClass) is only a note for `validate`; a stack deploys to AWS.
    # The same object twice (also a v1beta1 and a v1 NodePool of one name) is one "duplicate of FILE:DOC" issue.
    issues = result.issues + result.skipped
    if issues:
        raise NodePoolValidationError(folder, issues)
    return result.objects


def state_item(cluster: str, obj) -> tuple[dict, dict]:
    """(Key, update fields) of one object in the state table's layout (see adapters/store/models.py)."""
    doc = obj.to_dict()
    metadata = dict(doc.get("metadata") or {})
    for k in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        metadata.pop(k, None)
    key = {"pk": {"S": f"{cluster}#{obj.kind}"}, "sk": {"S": obj.name}}
    fields = {
        "cluster": {"S": cluster},
        "kind": {"S": obj.kind},
        "apiVersion": {"S": doc.get("apiVersion", "")},
        "metadata": {"S": json.dumps(metadata, sort_keys=True, separators=(",", ":"))},
        "spec": {"S": json.dumps(doc.get("spec") or {}, sort_keys=True, separators=(",", ":"))},
    }
    return key, fields


def upsert_parameters(cluster: str, table_name: str, obj) -> dict:
    """The DynamoDB ``UpdateItem`` parameters that write ``obj`` on create and update (fields set, ``version`` bumped;
    a NodePool's static/dynamic mode kept, :func:`mode_condition`)."""
    key, fields = state_item(cluster, obj)
    names = {f"#a{i}": k for i, k in enumerate(fields)}
    values = {f":a{i}": v for i, v in enumerate(fields.values())}
    sets = ", ".join(f"#a{i} = :a{i}" for i in range(len(fields)))
    names["#v"] = "version"
    values[":one"] = {"N": "1"}
    parameters = {
        "TableName": table_name,
        "Key": key,
        "UpdateExpression": f"SET {sets} ADD #v :one",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    if obj.kind == "NodePool":
        parameters["ConditionExpression"] = mode_condition(obj, names, values)
    return parameters


def mode_condition(obj, names: dict, values: dict) -> str:
    """The ``ConditionExpression`` that keeps a deployed NodePool static or dynamic as it was stored (Karpenter's CRD
    rule: ``spec.replicas`` cannot be added to or removed from a NodePool; ``api/updates.py`` checks it in ``apply``).
    The stored ``spec`` is JSON, written by this construct (``"replicas":3``) or by the store (``"replicas": 3``):
    either holds the substring ``"replicas":`` exactly when the NodePool is static (a template label with the key
    ``replicas`` would read as static too).  A refused update fails the deploy with DynamoDB's
    ``ConditionalCheckFailedException`` on the NodePool's custom resource, and CloudFormation rolls back
    (docs/deploy.md: delete the NodePool in one deploy, add it back in the next)."""
    spec = next(k for k, v in names.items() if v == "spec")   # the placeholder the update sets it by
    values[":replicas"] = {"S": '"replicas":'}
    static = obj.spec.get("replicas") is not None
    test = f"contains({spec}, :replicas)" if static else f"NOT contains({spec}, :replicas)"
    return f"attribute_not_exists({spec}) OR {test}"


def _construct_id(kind: str, name: str) -> str:
    return f"{kind}-{re.sub(r'[^A-Za-z0-9-]', '-', name)}"


class NodePoolManifests(Construct):
    """One AwsCustomResource per object; ``objects`` lists what is written (kind, name), ``offpeak_schedules`` the
    OffPeakSchedules among them."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster: str, folder: Path, table: dynamodb.ITable, log_retention: logs.RetentionDays, node_role: str | None = None) -> None:
        super().__init__(scope, construct_id)
        self.objects = load_node_pools(folder)
        self.offpeak_schedules = [o for o in self.objects if o.kind == OFFPEAK_KIND]
        # a role the functions cannot pass is a warning (printed by cdk synth/deploy; fatal with --strict), not an error
        self.role_warnings = [str(i) for i in role_issues(folder, node_role)] if node_role else []
        for warning in self.role_warnings:
            Annotations.of(self).add_warning_v2("karpenter-lambda:node-role", warning)
        policy = cr.AwsCustomResourcePolicy.from_statements(
            [iam.PolicyStatement(actions=["dynamodb:UpdateItem", "dynamodb:DeleteItem"], resources=[table.table_arn])]
        )
        # one log group for the provider function every AwsCustomResource of the stack shares
        self.log_group = logs.LogGroup(self, "ProviderLogs", retention=log_retention, removal_policy=RemovalPolicy.DESTROY)
        self.resources: list[cr.AwsCustomResource] = []
        for obj in self.objects:
            parameters = upsert_parameters(cluster, table.table_name, obj)
            key = parameters["Key"]
            physical = cr.PhysicalResourceId.of(f"{key['pk']['S']}/{obj.name}")
            upsert = cr.AwsSdkCall(
                service="DynamoDB",
                action="updateItem",
                parameters=parameters,
                physical_resource_id=physical,
            )
            delete = cr.AwsSdkCall(
                service="DynamoDB",
                action="deleteItem",
                parameters={"TableName": table.table_name, "Key": key},
                physical_resource_id=physical,
            )
            self.resources.append(
                cr.AwsCustomResource(
                    self,
                    _construct_id(obj.kind, obj.name),
                    on_create=upsert,
                    on_update=upsert,
                    on_delete=delete,
                    policy=policy,
                    install_latest_aws_sdk=False,
                    log_group=self.log_group,
                )
            )
