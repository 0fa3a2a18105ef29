"""Where the simulated EC2 behaves as EC2 does and plain moto does not: eventual consistency of DescribeInstances
and ClientToken idempotency of CreateFleet and RunInstances.

* **Eventual consistency**: an instance is invisible to DescribeInstances for ``visibility_delay`` virtual seconds
  after its launch (moto stamps ``launch_time`` on the simulator's virtual clock): a filtered listing leaves it out
  and a lookup by id answers ``InvalidInstanceID.NotFound``, as EC2 does right after RunInstances/CreateFleet.
  Other calls (DescribeInstanceAttribute, CreateTags, TerminateInstances) see it at once.  The default is 0 (moto's
  behaviour); :func:`set_visibility_delay` sets it per simulated account and region.
* **ClientToken idempotency** (docs.aws.amazon.com ec2-api-idempotency): a request carrying a ClientToken already
  used with the same parameters returns the first request's answer (the same fleet and instances; their state may
  have moved on) and launches nothing; the same token with other parameters fails with
  ``IdempotentParameterMismatch`` (HTTP 400).  EC2 keeps a token for at least 24 hours after the instance
  terminates; the simulator keeps it for the whole run.  A request that failed is not remembered.

CreateFleet also answers as EC2 does when capacity runs out (:mod:`.capacity`: a Scenario ``capacity`` step's rules,
inside the idempotency above).

Both are on only in accounts the simulator seeded (:func:`enable`, called by ``SimAccount.create``): a test's plain
``mock_aws`` keeps moto's behaviour.  The settings live on moto's EC2 backend, so a reset of the mock clears them.
Only moto 5.2.x is patched (the version the tests pin); with any other version :func:`install` changes nothing.
"""

from __future__ import annotations

import contextlib
import threading
from datetime import timezone

__all__ = ["install", "enable", "set_visibility_delay", "visibility_delay", "unfiltered", "backend", "all_instances", "instance_launches"]

_ENABLED = "karpenter_lambda_faithful_ec2"
_DELAY = "karpenter_lambda_visibility_delay"
_TOKENS = "karpenter_lambda_client_tokens"
_IGNORED_PARAMS = frozenset({"ClientToken", "Action", "Version"})
MISMATCH_MESSAGE = "Arguments on this idempotent request are inconsistent with arguments used in previous request(s)."
_local = threading.local()


def backend(region: str, account: str | None = None):
    """moto's EC2 backend of the simulated account in ``region``."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    return ec2_backends[account or DEFAULT_ACCOUNT_ID][region]


def enable(region: str, visibility_delay: float = 0.0, account: str | None = None) -> None:
    """Turn the faithful behaviour on for the account's ``region`` (installs the patch once)."""
    install()
    b = backend(region, account)
    setattr(b, _ENABLED, True)
    setattr(b, _DELAY, float(visibility_delay))


def set_visibility_delay(region: str, seconds: float, account: str | None = None) -> None:
    if seconds < 0:
        raise ValueError(f"visibility delay must be >= 0 seconds, got {seconds}")
    setattr(backend(region, account), _DELAY, float(seconds))


def visibility_delay(region: str, account: str | None = None) -> float:
    return float(getattr(backend(region, account), _DELAY, 0.0))


@contextlib.contextmanager
def unfiltered():
    """DescribeInstances on this thread sees every instance (the ground truth: what runs, visible or not)."""
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


def all_instances(ec2, **kwargs) -> list[dict]:
    """Every instance DescribeInstances answers, page after page (moto, as EC2, answers 100 reservations a page:
    one call saw only the first 100 instances, and the simulated kubelets of the others never joined)."""
    return [i for page in ec2.get_paginator("describe_instances").paginate(**kwargs)
            for r in page.get("Reservations", []) for i in r.get("Instances", [])]


def instance_launches(region: str, filters: dict[str, list[str]], account: str | None = None) -> list[tuple[str, float]]:
    """(instance id, launch time as DescribeInstances answers it: epoch seconds, whole) of every instance matching
    ``filters`` (DescribeInstances' filter names), in DescribeInstances' order, read from moto's backend: the world's
    truth (visible to the controllers yet or not) without serializing and parsing every instance (the simulator's
    loop asks after every handler call)."""
    return [(i.id, i.launch_time.replace(microsecond=0, tzinfo=timezone.utc).timestamp())
            for r in backend(region, account).describe_instances(filters) for i in r.instances]


def instance_entry(region: str, instance_id: str, account: str | None = None) -> dict | None:
    """The fields of ``instance_id``'s DescribeInstances entry that a simulated kubelet reads (InstanceId,
    InstanceType, Placement.AvailabilityZone, PrivateDnsName, State.Name, Tags), read from moto's backend: the
    instance's own view of itself (the world's truth, visible to the controllers yet or not), without serializing
    and parsing the whole entry; None when moto has no such instance.  ``tests/sim/test_moto_ec2_entry.py`` holds it
    equal to DescribeInstances."""
    b = backend(region, account)
    for r in b.reservations.values():
        for i in r.instances:
            if i.id == instance_id:
                return {"InstanceId": i.id, "InstanceType": i.instance_type,
                        "Placement": {"AvailabilityZone": i.placement.zone}, "PrivateDnsName": i.private_dns_name,
                        "State": {"Name": i.state},
                        "Tags": [{"Key": t["key"], "Value": t["value"]} for t in i.get_tags()]}
    return None


def _age(instance) -> float:
    import moto.ec2.models.instances as moto_instances   # utcnow is the virtual clock's inside SimEnvironment

    return (moto_instances.utcnow() - instance.launch_time).total_seconds()


def install() -> bool:
    """Patch moto's DescribeInstances, CreateFleet and RunInstances handlers (once); False when this moto is not one
    the patch was checked against."""
    import moto
    from moto.ec2.responses.fleets import Fleets
    from moto.ec2.responses.instances import InstanceResponse

    if not str(getattr(moto, "__version__", "")).startswith("5.2."):
        return False
    if getattr(InstanceResponse, _ENABLED, False):
        return True
    describe, run, fleet = InstanceResponse.describe_instances, InstanceResponse.run_instances, Fleets.create_fleet

    def describe_instances(self):
        return _visible(self, describe(self))

    def run_instances(self):
        return _idempotent(self, "RunInstances", run)

    def create_fleet(self):
        from .capacity import create_fleet as shaped   # a Scenario's capacity shortages (sim/capacity.py)

        return _idempotent(self, "CreateFleet", lambda response: shaped(response, fleet))

    InstanceResponse.describe_instances = describe_instances
    InstanceResponse.run_instances = run_instances
    Fleets.create_fleet = create_fleet
    setattr(InstanceResponse, _ENABLED, True)
    return True


def _visible(response, action_result):
    b = response.ec2_backend
    delay = float(getattr(b, _DELAY, 0.0))
    if delay <= 0 or not getattr(b, _ENABLED, False) or getattr(_local, "depth", 0):
        return action_result
    from moto.ec2.exceptions import InvalidInstanceIdError

    result = action_result.result
    hidden: list[str] = []
    kept = []
    for reservation in result.get("Reservations") or []:   # copies made for this request (all_reservations)
        visible = [i for i in reservation.instances if _age(i) >= delay]
        hidden.extend(i.id for i in reservation.instances if _age(i) < delay)
        if visible:
            reservation.instances = visible
            kept.append(reservation)
    asked = response._get_param("InstanceIds", [])
    missing = sorted(set(asked) & set(hidden))
    if missing:
        raise InvalidInstanceIdError(missing)
    result["Reservations"] = kept
    return action_result


def _params(response) -> tuple:
    return tuple(sorted((k, tuple(v)) for k, v in response.querystring.items() if k not in _IGNORED_PARAMS))


def _idempotent(response, action: str, original):
    b = response.ec2_backend
    token = response._get_param("ClientToken")
    if not token or not getattr(b, _ENABLED, False):
        return original(response)
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError

    tokens = b.__dict__.setdefault(_TOKENS, {})
    params = _params(response)
    seen = tokens.get((action, token))
    if seen is not None:
        if seen[0] != params:
            raise EC2ClientError("IdempotentParameterMismatch", MISMATCH_MESSAGE)
        return ActionResult(seen[1])
    answer = original(response)
    tokens[(action, token)] = (params, answer.result)
    return answer
