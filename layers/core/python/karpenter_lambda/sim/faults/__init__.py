"""Fault injection for the real handlers in a :class:`~karpenter_lambda.sim.world.World` (moto + local Kubernetes API).

:class:`FaultInjector` sits on the two doors every external call of a handler goes through:

* AWS: moto's ``BotocoreStubber.process_request`` (every in-process request of every boto3/botocore/pynamodb
  client: EC2, DynamoDB, SQS, SSM, ...);
* Kubernetes: ``KubeClient._call`` (every call the controllers make to the API server, before the client's own
  retry loop), plus the API server's own fault hook (:meth:`KubeAPIServer.add_fault`) for 5xx / 429 answers.

An invocation runs under :meth:`FaultInjector.invocation` with a :class:`FaultPlan`:

* ``crash_at=N`` -- the process dies at the N-th external call of the invocation (``crash_after``: the call is made
  and its answer lost, else it is never sent); every later call of the invocation fails too (the process is gone),
  so ``finally`` blocks cannot repair anything.  The crash is a ``BaseException`` (:class:`InjectedCrash`): no
  ``except Exception`` in the code under test can swallow it, as nothing survives a killed Lambda sandbox.
* ``aws_errors`` -- ``{(service, operation): (kind, times)}``: the next ``times`` calls get EC2 insufficient
  capacity (a CreateFleet answer whose ``Errors`` name every override), EC2 throttling (RequestLimitExceeded,
  503), DynamoDB throttling (ProvisionedThroughputExceededException), a transaction conflict
  (TransactionCanceledException / TransactionConflict), or a real conditional failure (``race``: a concurrent
  writer bumps the item's optimistic-locking ``version`` just before the call, so DynamoDB's own condition fails).
* ``kube_faults`` -- ``[(status, times, method)]`` answered by the API server.

Every fault that actually hits is counted in :attr:`FaultInjector.counts` (by kind); a planned fault the
invocation never reached is not.  :mod:`karpenter_lambda.sim.faults` also holds the scenario (:func:`run_seed`)
that ``bench/faults.py`` and ``tests/reliability`` run, and the ground-truth counters it reports.

By fault family: :mod:`.plan` (plans, crashes, hung calls), :mod:`.aws` (AWS error answers), :mod:`.injector` (the
doors, Kubernetes faults and Lambda timeouts on the virtual clock included), :mod:`.queues` (moto's SQS on the
virtual clock with the stack's queue settings), :mod:`.scenario` (the run), :mod:`.spot` (spot warnings, reclaims
and the interruption queue), :mod:`.invariants` (checked after every round), :mod:`.ground_truth` (the loss
counters), :mod:`.targeted` (a scripted run through every recovery path) and :mod:`.mutations` (each recovery path
switched off, and what must catch it).
"""

from __future__ import annotations

from .aws import aws_operation
from .injector import EVENT_KINDS, FAULT_KINDS, RETRY_KINDS, FaultInjector
from .invariants import NAMES as INVARIANT_NAMES
from .plan import CRITICAL_CALLS, WRITE_OPS, FaultPlan, InjectedCrash, LambdaTimeout, is_write, random_plan
from .scenario import (BUDGET, COUNTER_KEYS, CPU_LIMIT, LOSS_KEYS, MANIFESTS, ROUND_SECONDS, SETTLE_JUMP,
                       SPOT_WARNING_SECONDS, FaultRun, deployment, run_seed)

__all__ = ["aws_operation", "FaultInjector", "FAULT_KINDS", "RETRY_KINDS", "EVENT_KINDS", "INVARIANT_NAMES",
           "LambdaTimeout", "CRITICAL_CALLS", "WRITE_OPS", "FaultPlan", "InjectedCrash", "is_write",
           "random_plan", "BUDGET", "COUNTER_KEYS", "CPU_LIMIT", "LOSS_KEYS", "MANIFESTS", "ROUND_SECONDS",
           "SETTLE_JUMP", "SPOT_WARNING_SECONDS", "FaultRun", "deployment", "run_seed"]
