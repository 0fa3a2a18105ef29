"""karpenter-lambda watcher: forwards unschedulable pods and node/pod events to SQS.

Needs only ``boto3`` (its ``urllib3`` included) in a pod; ``kubernetes`` for a kubeconfig off a cluster.  See docs/watcher.md.
"""

from .watcher import (  # noqa: F401
    MAX_BATCH_ENTRIES,
    MAX_MESSAGE_BYTES,
    SqsBatchSender,
    Stats,
    is_provisionable,
    node_summary,
    pod_message,
    run,
    slim_pod,
)

__version__ = "0.1.0"
