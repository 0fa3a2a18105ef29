"""Karpenter's ``--scheduler-config`` in runtime.Config: ``$KARPENTER_LAMBDA_SCHEDULER_CONFIG`` (a YAML/JSON document
``podTopologySpread: {defaultConstraints: [...]}``) is parsed once by ``Config.from_env``; unset or empty is None; a
bad value stops the function with an error naming the variable and the field.  The controllers hand it to their
snapshot loaders (the loader itself: tests/kube/test_default_spread_loader.py)."""

from __future__ import annotations

import json

import pytest

from karpenter_lambda.api.scheduler_config import SCHEDULER_CONFIG_ENV, SchedulerConfigError
from karpenter_lambda.controllers.runtime import Config, read_scheduler_config

BASE = {"KARPENTER_LAMBDA_CLUSTER": "c"}
ZONE = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}
HOST = {"maxSkew": 3, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}

YAML = """
podTopologySpread:
  defaultConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: ScheduleAnyway
    - maxSkew: 3
      topologyKey: kubernetes.io/hostname
      whenUnsatisfiable: DoNotSchedule
"""


def test_the_variable_name_is_karpenter_lambdas():
    assert SCHEDULER_CONFIG_ENV == "KARPENTER_LAMBDA_SCHEDULER_CONFIG"


@pytest.mark.parametrize("env", [{}, {SCHEDULER_CONFIG_ENV: ""}, {SCHEDULER_CONFIG_ENV: "  \n"}])
def test_unset_or_empty_is_none(env):
    assert Config.from_env({**BASE, **env}).scheduler_config is None
    assert read_scheduler_config({**BASE, **env}) is None


@pytest.mark.parametrize("raw", [YAML, json.dumps({"podTopologySpread": {"defaultConstraints": [ZONE, HOST]}})])
def test_yaml_or_json_gives_the_constraints_in_order(raw):
    config = Config.from_env({**BASE, SCHEDULER_CONFIG_ENV: raw}).scheduler_config
    assert config is not None
    assert [dict(c) for c in config.default_constraints] == [ZONE, HOST]


def test_what_the_stack_writes_reads_back_equal():
    """The stack passes ``to_json()``: the functions read the same constraints back."""
    first = Config.from_env({**BASE, SCHEDULER_CONFIG_ENV: YAML}).scheduler_config
    again = Config.from_env({**BASE, SCHEDULER_CONFIG_ENV: first.to_json()}).scheduler_config
    assert again == first and [dict(c) for c in again.default_constraints] == [ZONE, HOST]


def test_read_from_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("KARPENTER_LAMBDA_CLUSTER", "c")
    monkeypatch.setenv(SCHEDULER_CONFIG_ENV, json.dumps({"podTopologySpread": {"defaultConstraints": [HOST]}}))
    assert [dict(c) for c in Config.from_env().scheduler_config.default_constraints] == [HOST]


@pytest.mark.parametrize("raw, field", [
    ("podTopologySpread: {defaultConstraints: [{maxSkew: 0, topologyKey: kubernetes.io/hostname, "
     "whenUnsatisfiable: DoNotSchedule}]}", r"podTopologySpread\.defaultConstraints\[0\]\.maxSkew"),
    ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, "
     "whenUnsatisfiable: Sometimes}]}", r"defaultConstraints\[0\]\.whenUnsatisfiable"),
    ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, "
     "labelSelector: {matchLabels: {app: web}}}]}", r"defaultConstraints\[0\]\.labelSelector"),
    ("podTopologySpread: {defaultConstrains: []}", r"podTopologySpread\.defaultConstrains"),
    ("podTopologySpread: [", r"not valid YAML or JSON"),
])
def test_a_bad_value_names_the_variable_and_the_field(raw, field):
    with pytest.raises(ValueError, match=rf"environment variable {SCHEDULER_CONFIG_ENV}: .*{field}") as err:
        Config.from_env({**BASE, SCHEDULER_CONFIG_ENV: raw})
    assert isinstance(err.value, SchedulerConfigError)


@pytest.mark.parametrize("configured", [False, True])
def test_the_setting_reaches_the_provisioners_solve(monkeypatch, configured):
    """From the variable to the launch (moto + the local Kubernetes API, the real provisioner handler): three web pods
    a Service selects, and a zone spread (DoNotSchedule, maxSkew 1) by default: one NodeClaim per zone; without the
    setting one NodeClaim takes them all, and neither Services nor ReplicaSets are listed."""
    from karpenter_lambda.sim.world import World, make_pod, scenario_manifests

    zone = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
    if configured:
        monkeypatch.setenv(SCHEDULER_CONFIG_ENV, json.dumps({"podTopologySpread": {"defaultConstraints": [zone]}}))
    else:
        monkeypatch.delenv(SCHEDULER_CONFIG_ENV, raising=False)
    with World(scenario_manifests()) as world:
        assert (world.env.config.scheduler_config is not None) is configured
        world.server.store.create("services", {"metadata": {"name": "web", "namespace": "default"},
                                               "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
        world.server.request_log.clear()
        resp = world.provision(world.sqs_event(world.add_pods([make_pod(f"web-{i}") for i in range(3)])))
        assert resp == {"batchItemFailures": []}
        zones = sorted(i["Placement"]["AvailabilityZone"] for i in world.instances())
        listed = {p.split("?")[0] for _m, p, _c in world.server.requests("GET", r"/(services|replicasets)\b")}
        # the sweeps and the interruption function hand their loaders the same setting
        from karpenter_lambda.controllers.disrupt import DisruptionSweep
        from karpenter_lambda.controllers.interrupt import Interruption

        for controller in (DisruptionSweep.from_environment(world.env, "drift"),
                           DisruptionSweep.from_environment(world.env, "consolidation"),
                           Interruption.from_environment(world.env)):
            assert controller.loader.scheduler_config is world.env.config.scheduler_config
        # and the lifecycle function's launches ahead (a user-deleted NodeClaim, a failing instance, a deleted
        # NodePool) load their snapshots with it and the minValues policy
        from karpenter_lambda.controllers.lifecycle import Lifecycle

        lc = Lifecycle.from_environment(world.env)
        for part in (lc, lc.instance_health, lc.nodepool_deletion):
            assert part.loader_options == {"min_values_policy": world.env.config.min_values_policy,
                                           "scheduler_config": world.env.config.scheduler_config}
        if configured:
            assert len(zones) == 3 and len(set(zones)) == 3, zones
            assert listed == {"/api/v1/services", "/apis/apps/v1/replicasets"}
        else:
            assert len(zones) == 1 and listed == set()
