"""sim/moto_speedups_request: the WSGI environ written directly must be werkzeug's ``EnvironBuilder`` environ, key for
key, for every request of a simulated run (DynamoDB, EC2, SQS, SSM, IAM, EKS, ...) and for the edge cases it takes;
anything it does not take goes to werkzeug."""

from __future__ import annotations

from collections import Counter

import pytest
from moto.core.request import Request
from werkzeug.test import EnvironBuilder

import manifests as shared
from karpenter_lambda.sim import moto_speedups_request as R
from karpenter_lambda.sim.world import World

MANIFESTS = shared.pair(capacity_types=("on-demand",))


def _werkzeug(**kwargs) -> dict:
    builder = EnvironBuilder(**kwargs)
    try:
        return builder.get_environ()
    finally:
        builder.close()


def _same(fast: dict, slow: dict) -> None:
    """Equal environs: the same keys in the same order, the same values; the body streams hold the same bytes."""
    assert list(fast) == list(slow)
    for k, v in slow.items():
        if k == "wsgi.input":
            assert fast[k].read() == v.read()
        else:
            assert fast[k] == v, k


def _kwargs(path="/", query="", data=b"", headers=None, base="https://dynamodb.us-east-1.amazonaws.com", method="POST"):
    return {"method": method, "base_url": base, "path": path, "query_string": query, "data": data,
            "headers": list(headers if headers is not None else [("Content-Type", "application/x-amz-json-1.0")])}


@pytest.fixture(scope="module")
def recorded():
    """Every request moto normalised in a short simulated run: (its from_values arguments, both environs)."""
    seen: list = []
    original = vars(Request).get("from_values")
    R.uninstall()
    inherited = Request.from_values

    def recording(cls, **kwargs):
        seen.append(kwargs)
        return inherited.__func__(cls, **kwargs)

    Request.from_values = classmethod(recording)
    try:
        with World(MANIFESTS) as w:
            w.provision(w.sqs_event(w.add_pods([{"metadata": {"name": f"p{i}"}, "spec": {"containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}
                for i in range(3)])))
            w.sweep()
    finally:
        del Request.from_values
        if original is not None:
            R.install()
    return seen


def test_every_request_of_a_run_gets_werkzeugs_environ(recorded):
    hosts = Counter(k["base_url"].split("//")[1].split(".")[0] for k in recorded)
    assert {"dynamodb", "ec2", "sqs", "ssm", "iam"} <= set(hosts), hosts
    fast_path = 0
    for kwargs in recorded:
        env = R._environ(**kwargs)
        if env is not None:
            fast_path += 1
            _same(env, _werkzeug(**kwargs))
    # the run's requests are the plain case: all (or nearly all) take the fast path
    assert fast_path >= 0.95 * len(recorded) > 20, (fast_path, len(recorded))
    # the provisioner launched: CreateFleet went through it too
    assert any(b"Action=CreateFleet" in (k["data"] if isinstance(k["data"], bytes) else k["data"].encode()) for k in recorded)


@pytest.mark.parametrize("kwargs", [
    _kwargs(),
    _kwargs(data=b'{"TableName": "t"}'),
    _kwargs(data='{"TableName": "t"}'),
    _kwargs(base="https://ec2.us-east-1.amazonaws.com", headers=[("Content-Type", "application/x-www-form-urlencoded")],
            data=b"Action=DescribeInstances&Version=2016-11-15"),
    _kwargs(headers=[("Content-Type", "application/x-www-form-urlencoded")]),                  # a form with no body
    _kwargs(headers=[]),                                                                        # no content type
    _kwargs(data=b"x", headers=[]),
    _kwargs(headers=[("X-Amz-Date", "1"), ("x-amz-date", "2"), ("Host", "elsewhere:8080"), ("Content-Length", "9")]),
    _kwargs(headers=[("content-type", "a/b"), ("Content-Type", "c/d")]),                       # the first one counts
    _kwargs(base="http://localhost:5000", path="/2012-11-05/queues/q", query="a=1&b=%2F", method="GET"),
    _kwargs(base="https://eks.us-east-1.amazonaws.com", path="/clusters/c/node-groups", method="GET"),
    _kwargs(path="/a/b~c_d-e.f!$&'()*+,;=:@"),
], ids=lambda kw: f"{kw['method']} {kw['base_url']}{kw['path']}?{kw['query_string']} {kw['headers']} {kw['data']!r}"[:90])
def test_edge_cases_equal_werkzeug(kwargs):
    env = R._environ(**kwargs)
    assert env is not None
    _same(env, _werkzeug(**kwargs))


@pytest.mark.parametrize("kwargs", [
    _kwargs(path="/a%2Fb"),                                      # PATH_INFO would be unquoted
    _kwargs(path="/caf\u00e9"),                                  # IRI quoting
    _kwargs(path="relative"),
    _kwargs(query="q=\u00e9"),
    _kwargs(base="https://DynamoDB.us-east-1.amazonaws.com"),    # hostname lowercased by urlsplit
    _kwargs(base="https://h:0443"),                              # port read as an int
    _kwargs(base="https://user@h"),
    _kwargs(base="ftp://h"),
    _kwargs(headers=[("Content-Type", "multipart/form-data; boundary=x")]),
    _kwargs(headers=[("X-Bad", "a\nb")]),
    _kwargs(headers=[("X-Num", 5)]),
    _kwargs(data={"a": "1"}),
])
def test_other_requests_go_to_werkzeug(kwargs):
    assert R._environ(**kwargs) is None


def test_install_and_uninstall():
    try:
        R.uninstall()
        assert "from_values" not in vars(Request)         # werkzeug's, inherited
        assert R.install() and R.install()
        assert "from_values" in vars(Request)
        req = Request.from_values(**_kwargs(data=b"{}"))
        assert req.get_data() == b"{}" and req.headers["Content-Type"] == "application/x-amz-json-1.0"
        assert req.host == "dynamodb.us-east-1.amazonaws.com" and req.url == "https://dynamodb.us-east-1.amazonaws.com/"
        odd = Request.from_values(**_kwargs(path="/a%2Fb"))                 # through werkzeug
        assert odd.path == "/a/b" and isinstance(odd, Request)
        assert Request.from_values("/x", base_url="http://h").path == "/x"   # other arguments: werkzeug's
    finally:
        R.install()   # as the rest of the session runs (tests/conftest installs the speedups)
