"""CloudWatch dashboard and alarms.

The functions emit EMF metrics with Powertools in namespace ``KarpenterLambda`` with a
``cluster`` dimension; Powertools also adds a ``service`` dimension (one per function), so the
graphs use ``SEARCH`` over the namespace filtered by cluster and aggregate, which matches
whichever extra dimensions a function adds.  Alarms use AWS metrics only (DLQ depth,
function errors), which need no search.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from .functions import METRICS_NAMESPACE

# (metric name, statistic, aggregate over series, label)
CUSTOM_METRICS = (
    ("NodesLaunched", "Sum", "SUM", "nodes launched"),
    ("NodesTerminated", "Sum", "SUM", "nodes terminated"),
    ("PodsScheduled", "Sum", "SUM", "pods scheduled"),
    ("DecisionLatencyMs", "p99", "MAX", "decision latency p99 (ms)"),
    ("Interruptions", "Sum", "SUM", "interruptions"),
    ("CostPerHour", "Maximum", "MAX", "cost per hour (USD)"),
    ("NodesDisrupted", "Sum", "SUM", "nodes disrupted"),
)


def search_metric(cluster: str, metric: str, statistic: str, aggregate: str, label: str, period: Duration = Duration.minutes(1)) -> cw.MathExpression:
    return cw.MathExpression(
        expression=f"{aggregate}(SEARCH('Namespace=\"{METRICS_NAMESPACE}\" MetricName=\"{metric}\" cluster=\"{cluster}\"', '{statistic}', {int(period.to_seconds())}))",
        using_metrics={},
        label=label,
        period=period,
    )


class Monitoring(Construct):
    """``dashboard`` and ``alarms`` (one per DLQ, one per function, one per ``queue_age_alarms`` queue)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: str,
        functions: dict[str, lambda_.IFunction],
        dead_letter_queues: dict[str, sqs.IQueue],
        alarm_topic_arn: str | None = None,
        metric_alarms: dict[str, tuple[str, tuple[str, ...]]] | None = None,
        queue_age_alarms: dict[str, tuple[sqs.IQueue, int]] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cw.Alarm] = []
        action = cw_actions.SnsAction(sns.Topic.from_topic_arn(self, "AlarmTopic", alarm_topic_arn)) if alarm_topic_arn else None

        def alarm(construct: str, description: str, metric: cw.IMetric, threshold: int = 0) -> None:
            """Alarm as soon as the metric is above ``threshold`` (missing data is fine)."""
            self.alarms.append(cw.Alarm(
                self,
                construct,
                alarm_description=f"karpenter-lambda {cluster}: {description}",
                metric=metric,
                threshold=threshold,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ))

        for name, dlq in dead_letter_queues.items():
            alarm(f"{name}DlqDepth", f"messages in the {name} dead-letter queue (they failed every retry)",
                  dlq.metric_approximate_number_of_messages_visible(period=Duration.minutes(1), statistic="Maximum"))
        # a queue nobody consumes (the trigger disabled, the function starved of concurrency) expires its messages at
        # their retention without any reaching the DLQ: the age of the oldest message says so first
        for name, (queue, seconds) in (queue_age_alarms or {}).items():
            alarm(f"{name}OldestMessage", f"a message waited over {seconds} s in the {name} queue (not consumed)",
                  queue.metric_approximate_age_of_oldest_message(period=Duration.minutes(1), statistic="Maximum"),
                  threshold=seconds)
        for name, fn in functions.items():
            alarm(f"{name}Errors", f"the {name} function failed (errors or timeouts)",
                  fn.metric_errors(period=Duration.minutes(5), statistic="Sum"))
        # a function's own EMF metrics (registry "alarmMetrics"), e.g. the disruption sweeps' replacement failures;
        # Powertools publishes them with exactly the dimensions cluster + service, so no SEARCH is needed
        for name, (service, metrics) in (metric_alarms or {}).items():
            for metric in metrics:
                alarm(f"{name.capitalize()}{metric}", f"{metric} reported by the {name} function",
                      cw.Metric(namespace=METRICS_NAMESPACE, metric_name=metric, statistic="Sum",
                                period=Duration.minutes(5), dimensions_map={"cluster": cluster, "service": service}))
        if action:
            for alarm in self.alarms:
                alarm.add_alarm_action(action)

        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=f"karpenter-lambda-{cluster}")
        custom = [search_metric(cluster, *m) for m in CUSTOM_METRICS]
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Nodes", left=[custom[0], custom[1]], width=8),
            cw.GraphWidget(title="Pods scheduled", left=[custom[2]], width=8),
            cw.GraphWidget(title="Decision latency", left=[custom[3]], width=8),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Interruptions", left=[custom[4]], width=8),
            cw.GraphWidget(title="Cost per hour", left=[custom[5]], width=8),
            cw.GraphWidget(title="Disruptions", left=[custom[6]], width=8),
            cw.GraphWidget(
                title="Dead-letter queue depth",
                left=[q.metric_approximate_number_of_messages_visible(label=f"{n} DLQ", statistic="Maximum") for n, q in dead_letter_queues.items()],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Function errors", left=[fn.metric_errors(label=n) for n, fn in functions.items()], width=12),
            cw.GraphWidget(title="Function duration p99", left=[fn.metric_duration(label=n, statistic="p99") for n, fn in functions.items()], width=12),
        )
        self.dashboard.add_widgets(cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24))
