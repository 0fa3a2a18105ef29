"""List prices (USD, us-east-1, no free tier, no Savings Plan) the control-plane cost report (:mod:`.cost`) uses,
and the assumptions it cannot measure in the simulator.  One place: change a price here.

Read on 2026-12 through the project's search tool; each constant names its source page.  Free tiers (Lambda's 1M
requests and 400,000 GB-s, SQS's 1M requests, X-Ray's 100,000 traces, EventBridge Scheduler's 14M invocations,
CloudWatch's 10 metrics) are account-wide and shared with everything else in the account: they are left out, so the
figures are an upper bound for a fresh account.
"""

from __future__ import annotations

PRICES_READ = "2026-12"
REGION = "us-east-1"

# https://aws.amazon.com/lambda/pricing/ (per GB-second of billed duration, by architecture; per request)
LAMBDA_GB_SECOND = {"arm64": 0.0000133334, "x86_64": 0.0000166667}
LAMBDA_PER_REQUEST = 0.20 / 1e6
# Lambda bills the handler's duration rounded up to the next millisecond
LAMBDA_BILLING_GRANULARITY_MS = 1
# a Lambda function gets one full vCPU at 1,769 MB and CPU in proportion below it (Lambda developer guide,
# "memory and computing power"); Python runs on one core, so more memory does not make it faster
LAMBDA_FULL_VCPU_MB = 1769

# https://aws.amazon.com/dynamodb/pricing/on-demand/ (on-demand, after the 2024-11-01 reduction)
DYNAMODB_PER_RRU = 0.125 / 1e6     # read request unit: 4 KB strongly consistent (half for eventually consistent)
DYNAMODB_PER_WRU = 0.625 / 1e6     # write request unit: 1 KB
DYNAMODB_READ_UNIT_BYTES = 4096
DYNAMODB_WRITE_UNIT_BYTES = 1024

# https://aws.amazon.com/sqs/pricing/ (standard queue; every 64 KB chunk of a payload is one request)
SQS_PER_REQUEST = 0.40 / 1e6
SQS_CHUNK_BYTES = 64 * 1024

# https://aws.amazon.com/eventbridge/pricing/ (custom events put on a bus; EventBridge Scheduler invocations
# priced at the same $1.00/M -- the legacy schedule rules the stack uses are counted at that rate too, an upper bound)
EVENTBRIDGE_PER_EVENT = 1.00 / 1e6
EVENTBRIDGE_PER_SCHEDULED_INVOCATION = 1.00 / 1e6

# https://aws.amazon.com/cloudwatch/pricing/ (custom metrics, first 10,000 metrics; log ingestion, standard class)
CLOUDWATCH_PER_METRIC_MONTH = 0.30
CLOUDWATCH_LOGS_PER_GB = 0.50

# https://aws.amazon.com/xray/pricing/ (traces recorded; the functions run with tracing Active)
XRAY_PER_TRACE = 5.00 / 1e6

# https://aws.amazon.com/fargate/pricing/ (Linux/x86) for pricing Karpenter's own controller beside this
FARGATE_VCPU_HOUR = 0.04048
FARGATE_GB_HOUR = 0.004445

HOURS_PER_MONTH = 730.0            # AWS's own monthly convention (8,760 h / 12)
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600.0

# -- assumptions (not measurable in the simulator; each one is listed in the report's "assumptions") -------------
# latency of one AWS call as Lambda would wait for it (the SDK's own work included); moto answers in-process, so the
# simulator's time inside an AWS call is replaced by these
AWS_CALL_MS_DEFAULT = 20.0
AWS_CALL_MS = {"dynamodb": 6.0, "sqs": 10.0, "ssm": 15.0, "sts": 15.0, "eks": 60.0, "ec2": 120.0,
               "pricing": 200.0, "events": 20.0, "scheduler": 20.0, "cloudwatch": 20.0}
AWS_OPERATION_MS = {("ec2", "CreateFleet"): 1500.0, ("ec2", "RunInstances"): 1000.0,
                    ("ec2", "TerminateInstances"): 300.0, ("ec2", "CreateLaunchTemplate"): 200.0}
# one Kubernetes API request from a function to the EKS endpoint (the local API server answers in another thread)
KUBE_CALL_MS = 10.0
# Lambda writes START, END and REPORT lines for every invocation (about this many bytes together)
LAMBDA_PLATFORM_LOG_BYTES = 260
# the INIT phase is billed (since 2025-08); an execution environment is recycled every few hours (AWS does not say
# when): these many cold starts per function per day, each this long (imports + clients, docs tooling measurement)
COLD_STARTS_PER_FUNCTION_PER_DAY = 12
COLD_START_SECONDS = 2.8
# Lambda's SQS event source long-polls each queue with 5 pollers (20 s waits) even when the queue is empty
SQS_EVENT_SOURCE_POLLERS = 5
SQS_LONG_POLL_SECONDS = 20.0
