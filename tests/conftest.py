"""Shared test set-up: no real AWS, ever."""

import os
import sys
from pathlib import Path

import pytest

# Never reach real AWS from tests: dummy credentials and a fixed region for boto3/moto.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_SECURITY_TOKEN", "testing")
os.environ.setdefault("AWS_SESSION_TOKEN", "testing")
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "karpenter-lambda-test")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "KarpenterLambdaTest")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
# moto's catalogue of public AMIs (thousands of images, loaded at every start and reset of the mock): no test uses it;
# the simulator and the tests publish the EKS images they resolve (adapters/aws/ssm_seed.py)
os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")

# every botocore session in the tests (boto3's, moto's, pynamodb's, the functions') parses each service model once
from karpenter_lambda.adapters.aws.clients import share_service_models  # noqa: E402
from karpenter_lambda.sim import moto_speedups  # noqa: E402

share_service_models()
moto_speedups.install()   # moto's DynamoDB item reads written straight to JSON (tests/sim/test_moto_speedups.py)

# The suite builds and drops a great many small objects (moto's backends, simulated clusters); the collector's
# young-generation passes at the default threshold (700) cost about a tenth of its time (tests/disruption +
# tests/lifecycle, -n 2: 42-48 s instead of 47-56 s).  A larger threshold only makes those passes rarer: nothing is
# kept that would have been freed (reference counting frees the rest at once), and the simulator sets its own
# thresholds while it runs (sim/heap.py).
import gc  # noqa: E402

gc.set_threshold(100_000, 50, 50)

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def kube_api_server():
    """A fresh local Kubernetes API server (sim/kubeapi.py) on 127.0.0.1, stopped after the test."""
    from karpenter_lambda.sim.kubeapi import KubeAPIServer

    srv = KubeAPIServer()
    srv.start()
    yield srv
    srv.stop()


# -- scheduling on xdist workers (`make test`: -n 2 --dist loadgroup --no-loadscope-reorder) ----------------------
# A module- or session-scoped fixture is computed once per worker that runs one of its tests: the tests sharing one
# (a simulation run once per module, the CDK synth, moto's EC2 catalog, the moto_server) are kept on one worker by
# an ``xdist_group`` named after the fixture's home; every other test is scheduled on its own.  The slowest
# modules (measured: ``pytest -n 2 --junitxml`` after the test-speed work, time per module) start first, so the two
# workers finish together.
SLOW_FIRST = (
    "tests/reliability/test_mutations.py", "tests/reliability/test_crash_points.py", "tests/sim/test_sweep_shortcuts.py",
    "tests/repair_static/test_static_sim.py", "tests/repair_static/test_repair_sim.py", "tests/cli/test_simulate_serve.py",
    "tests/offpeak/test_offpeak_simulation.py", "tests/provision/test_claims_scale.py", "tests/sim/test_timers_and_events.py",
    "tests/disruption/test_consolidation.py", "tests/infra/", "tests/cli/test_offline_state.py",
    "tests/reliability/test_faults_short.py", "tests/sim/test_spread_scenario.py", "tests/disruption/test_consolidation_bench.py",
    "tests/disruption/test_budgets_and_safety.py", "tests/sim/test_scenario.py", "tests/sim/test_disruption_run.py",
    "tests/plan/test_plan_admission.py", "tests/sim/test_clock_start.py",
    "tests/catalog/test_estimated_prices.py", "tests/catalog/test_allocatable.py", "tests/disruption/test_drift.py",
    "tests/interruption/test_kinds.py", "tests/disruption/test_emptiness.py", "tests/termination/test_drain.py",
)
# measured 2026-12-08 (--durations, per module): the simulations added that session, put before the tail
SLOW_FIRST = SLOW_FIRST[:3] + ("tests/sim/test_do_not_disrupt_timer.py", "tests/sim/test_capacity_shortage.py",
                               "tests/repair_static/test_static_drift_sim.py", "tests/cli/test_offline_plan_truth.py") \
    + SLOW_FIRST[3:]


def _shared_fixture_group(item) -> str | None:
    """The home (conftest directory or test module) of the widest-scoped project fixture the test uses."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    best = None
    for defs in info.name2fixturedefs.values():
        d = defs[-1]
        if d.scope not in ("module", "session") or not d.baseid.startswith("tests"):
            continue
        home = d.baseid if d.scope == "session" else item.nodeid.split("::", 1)[0]
        if best is None or (d.scope == "session" and best[0] != "session"):
            best = (d.scope, home)
    return best[1] if best else None


def _slow_rank(item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return next((i for i, p in enumerate(SLOW_FIRST) if path.startswith(p)), len(SLOW_FIRST))


def pytest_collection_modifyitems(config, items):
    for item in items:
        group = _shared_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=_slow_rank)   # stable: the order inside a module is kept


def pytest_collection(session):
    """pytest keeps its assertion-rewritten test modules (``tests/**/__pycache__``, git-ignored) only where bytecode
    may be written; with ``PYTHONDONTWRITEBYTECODE`` set, as on these machines, every xdist worker rewrote every
    test module at every run (about 8 s of each worker's start).  Bytecode is allowed while the tests are
    collected, and the setting is put back after."""
    session.stash[_BYTECODE_SETTING] = sys.dont_write_bytecode
    sys.dont_write_bytecode = False


def pytest_collection_finish(session):
    sys.dont_write_bytecode = session.stash.get(_BYTECODE_SETTING, sys.dont_write_bytecode)


_BYTECODE_SETTING = pytest.StashKey[bool]()
