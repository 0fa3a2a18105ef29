"""adapters/aws/amis: an alias's SSM parameters in one GetParameters call (issue 32: fewer calls per sweep), the
same AMIs as one GetParameter per name; a role that may not call GetParameters falls back to GetParameter, once
denied per process."""

from __future__ import annotations

import collections

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from karpenter_lambda.adapters.aws import amis
from karpenter_lambda.adapters.aws.amis import AMIProvider
from karpenter_lambda.adapters.aws.ssm_seed import seed_eks_amis

K8S = "1.31"


def _clients(calls: collections.Counter):
    ec2, ssm = boto3.client("ec2", region_name="us-east-1"), boto3.client("ssm", region_name="us-east-1")
    ssm.meta.events.register("before-call.ssm.*", lambda model, **_: calls.update([model.name]))
    return ec2, ssm


def _one_by_one(provider: AMIProvider, alias: str) -> list:
    """The AMIs as resolved before batching: every parameter through GetParameter."""
    family, version = alias.split("@")
    ids = {p: provider._ssm_get(p) for p, _a, _v in amis.alias_parameters(family, K8S, version)}
    return sorted(i for i in ids.values() if i)


@mock_aws
@pytest.mark.parametrize("alias", ["al2023@latest", "bottlerocket@latest", "al2@latest"])
def test_alias_parameters_in_one_call(alias, monkeypatch):
    monkeypatch.setattr(amis, "_GET_PARAMETERS_DENIED", False)
    seed_eks_amis(K8S)
    calls = collections.Counter()
    ec2, ssm = _clients(calls)
    provider = AMIProvider(ec2, ssm, K8S)
    got = provider.resolve_alias(alias)
    assert got and calls == {"GetParameters": 1}
    assert sorted({a.id for a in got}) == sorted(set(_one_by_one(provider, alias)))


@mock_aws
def test_denied_get_parameters_falls_back_once(monkeypatch):
    monkeypatch.setattr(amis, "_GET_PARAMETERS_DENIED", False)
    seed_eks_amis(K8S)
    calls = collections.Counter()
    ec2, ssm = _clients(calls)
    batched = sorted(a.id for a in AMIProvider(ec2, ssm, K8S).resolve_alias("al2023@latest"))

    def deny(**_):
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, "GetParameters")

    ssm.meta.events.register("before-call.ssm.GetParameters", deny)
    calls.clear()
    first = sorted(a.id for a in AMIProvider(ec2, ssm, K8S).resolve_alias("al2023@latest"))
    n = len(amis.alias_parameters("al2023", K8S, "latest"))
    assert first == batched and calls == {"GetParameters": 1, "GetParameter": n}
    calls.clear()
    again = sorted(a.id for a in AMIProvider(ec2, ssm, K8S).resolve_alias("al2023@latest"))
    assert again == batched and calls == {"GetParameter": n}   # not asked again
