"""Context parameters: parsing, defaults and the errors a deployer sees (no synth here)."""

from __future__ import annotations

import pytest

from infra.config import INT_PARAMS, ConfigError, load_config


def test_missing_cluster_name_names_the_flag():
    with pytest.raises(ConfigError) as e:
        load_config({})
    assert "clusterName" in str(e.value)
    assert "-c clusterName=" in str(e.value)


def test_blank_cluster_name_is_missing():
    with pytest.raises(ConfigError, match="-c clusterName="):
        load_config({"clusterName": "  "})


@pytest.mark.parametrize("name", ["-bad", "has space", "x" * 101, "dots.are.bad"])
def test_invalid_cluster_name(name):
    with pytest.raises(ConfigError, match="not a valid EKS cluster name"):
        load_config({"clusterName": name})


def test_defaults():
    cfg = load_config({"clusterName": "prod"})
    assert cfg.cluster_name == "prod"
    assert cfg.kubernetes_version is None
    assert cfg.node_pools_dir is None
    assert cfg.lifecycle_interval_minutes == 1
    assert cfg.interval_minutes("lifecycleIntervalMinutes") == 1
    assert cfg.interval_minutes("offpeakIntervalMinutes") == 5
    assert cfg.log_retention_days == 30
    assert cfg.log_level == "INFO"
    assert (cfg.pod_batch_size, cfg.pod_batch_window_seconds, cfg.provisioner_concurrency) == (500, 10, 2)
    assert cfg.kubernetes_access == "rbac"
    assert cfg.alarm_topic_arn is None


def test_string_values_from_the_command_line_are_parsed(tmp_path):
    cfg = load_config(
        {
            "clusterName": "prod",
            "kubernetesVersion": "1.33",
            "nodePools": str(tmp_path),
            "lifecycleIntervalMinutes": "5",
            "logRetentionDays": "90",
            "logLevel": "debug",
            "podBatchSize": "100",
            "podBatchWindowSeconds": "1",
            "provisionerConcurrency": "4",
            "kubernetesAccess": "cluster-admin",
            "alarmTopicArn": "arn:aws:sns:us-east-1:123456789012:ops",
        }
    )
    assert cfg.kubernetes_version == "1.33"
    assert cfg.node_pools_dir == tmp_path
    assert cfg.interval_minutes("lifecycleIntervalMinutes") == 5
    assert cfg.log_retention_days == 90
    assert cfg.log_level == "DEBUG"
    assert (cfg.pod_batch_size, cfg.pod_batch_window_seconds, cfg.provisioner_concurrency) == (100, 1, 4)
    assert cfg.kubernetes_access == "cluster-admin"
    assert cfg.alarm_topic_arn.endswith(":ops")


def test_relative_node_pools_folder_resolves_against_base_dir(tmp_path):
    (tmp_path / "pools").mkdir()
    assert load_config({"clusterName": "c", "nodePools": "pools"}, base_dir=tmp_path).node_pools_dir == tmp_path / "pools"


@pytest.mark.parametrize(
    "key,value,message",
    [
        ("kubernetesVersion", "v1.33", "kubernetesVersion"),
        ("nodePools", "/nonexistent/folder", "nodePools: /nonexistent/folder is not a directory"),
        ("lifecycleIntervalMinutes", "often", "lifecycleIntervalMinutes: expected an integer"),
        ("lifecycleIntervalMinutes", "0", "lifecycleIntervalMinutes: 0 is out of range 1..1440"),
        ("logRetentionDays", "10", "logRetentionDays: 10 is not a CloudWatch Logs retention"),
        ("logLevel", "LOUD", "logLevel"),
        ("podBatchSize", "20000", "podBatchSize: 20000 is out of range"),
        ("provisionerConcurrency", "1", "provisionerConcurrency: 1 is out of range 2.."),
        ("kubernetesAccess", "root", "kubernetesAccess"),
        ("podBatchWindowSeconds", "0", "podBatchSize: 500 needs a batching window"),
        ("alarmTopicArn", "my-topic", "alarmTopicArn"),
    ],
)
def test_bad_values_name_the_parameter(key, value, message):
    with pytest.raises(ConfigError) as e:
        load_config({"clusterName": "c", key: value})
    assert message in str(e.value)


def test_unknown_schedule_parameter_is_a_clear_error():
    cfg = load_config({"clusterName": "c"})
    with pytest.raises(ConfigError, match="INT_PARAMS"):
        cfg.interval_minutes("nightlyIntervalMinutes")


def test_every_interval_parameter_is_exposed():
    cfg = load_config({"clusterName": "c"})
    assert set(cfg.intervals) == {k for k in INT_PARAMS if k.endswith("IntervalMinutes")}
