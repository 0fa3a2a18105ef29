"""A step-by-step simulated world for tests: moto + local Kubernetes API + the real handlers, no loop.

    with World(manifest_text) as w:
        pods = w.add_pods(deployment_pods)            # pending, PodScheduled=False/Unschedulable
        resp = w.provision(w.sqs_event(pods))          # the real provisioner handler on a real SQS event
        w.join_all(ready=True)                         # nodes for the launched instances (KWOK-like)
        report = w.sweep()                             # the real lifecycle handler
        w.schedule()                                   # the simulated kube-scheduler binds pods

Everything runs inside ``moto.mock_aws`` on a :class:`VirtualClock` (``w.clock.advance(...)``), set up by the
same :class:`~.environment.SimEnvironment` as ``simulate``.

EC2 (:mod:`.moto_ec2`): ClientToken idempotency is on; a launched instance stays invisible to DescribeInstances for
``w.ec2_visibility_delay`` virtual seconds (0 by default here, so a test can provision and join at once; set it, or
pass ``World(..., ec2_visibility_delay=5)``, for EC2's eventual consistency).  ``w.instances()`` is what EC2 answers,
``w.launched_instances()`` what runs (the kubelets' view).  ``w.join`` registers a Node as the instance's kubelet
would (:mod:`.kubelet`: capacity from the instance type, labels and taints from its userData).
"""

from __future__ import annotations

import contextlib
import io
import json
import threading

import boto3
from moto.core.botocore_stubber import BotocoreStubber

from ..api.manifests import load_text
from ..controllers import environment
from . import kubelet, kubescheduler, moto_ec2, storage
from . import nodes as simnodes
from .clock import VirtualClock
from .environment import LambdaContext, SimEnvironment, capture_logs, load_module, repo_root
from .feeds import sqs_record

UNREGISTERED = simnodes.UNREGISTERED_TAINT   # kubelet registers with it (userData)


class World:
    def __init__(self, manifests: str | list, cluster: str = "test-cluster", region: str = "us-east-1",
                 k8s_version: str = "1.31", start: float | None = None, ec2_visibility_delay: float = 0.0):
        self.manifests = manifests
        self._visibility_delay = ec2_visibility_delay
        self.cluster = cluster
        self.region = region
        self.k8s_version = k8s_version
        self.clock = VirtualClock(start)     # start: epoch seconds of the virtual clock (default: now)
        self.logs = io.StringIO()
        self.default_spread: tuple = ()      # the simulated kube-scheduler's default topology spread constraints
        self._stack = contextlib.ExitStack()

    # -- set-up / tear-down -------------------------------------------------------------------
    def __enter__(self) -> "World":
        if isinstance(self.manifests, str):
            res = load_text(self.manifests, "<world>")
            if res.issues:
                raise ValueError("invalid manifests: " + "; ".join(str(i) for i in res.issues))
            objects = res.objects
        else:
            objects = list(self.manifests)
        nodeclasses = [o for o in objects if o.kind == "EC2NodeClass"]
        env = self._stack.enter_context(SimEnvironment(self.clock, nodeclasses, cluster=self.cluster, region=self.region,
                                                       k8s_version=self.k8s_version))
        self.server, self.url, self.account = env.server, env.url, env.account
        self.env = environment.get_environment()
        self.store = self.env.store
        for o in sorted(objects, key=lambda o: o.kind != "EC2NodeClass"):
            self.store.put(o)
        root = repo_root()
        self.provisioner = load_module(root / "functions" / "provisioner" / "handler.py", "world_provisioner_handler")
        self.lifecycle = load_module(root / "functions" / "lifecycle" / "handler.py", "world_lifecycle_handler")
        for mod in (self.provisioner, self.lifecycle):
            capture_logs(mod, self.logs)
        self.ec2 = self.env.ec2
        self.sqs = boto3.client("sqs", region_name=self.region)
        self.ec2_visibility_delay = self._visibility_delay
        return self

    @property
    def ec2_visibility_delay(self) -> float:
        """Virtual seconds a launched instance stays invisible to DescribeInstances (EC2's eventual consistency)."""
        return moto_ec2.visibility_delay(self.region)

    @ec2_visibility_delay.setter
    def ec2_visibility_delay(self, seconds: float) -> None:
        moto_ec2.set_visibility_delay(self.region, seconds)

    def __exit__(self, *exc) -> None:
        self._stack.close()

    # -- pods ---------------------------------------------------------------------------------------
    def add_pods(self, pods: list[dict]) -> list[dict]:
        """Create pods in the API as pending (PodScheduled=False/Unschedulable); returns them as stored."""
        out = []
        for p in pods:
            d = json.loads(json.dumps(p))
            d.pop("status", None)
            ns = d.setdefault("metadata", {}).setdefault("namespace", "default")
            d["metadata"].pop("uid", None)
            created = self.server.store.create("pods", d, ns)
            created = self.server.store.patch("pods", created["metadata"]["name"], {"status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/0 nodes are available"}]}},
                namespace=ns, subresource="status")
            out.append(created)
        return out

    def message_body(self, pod: dict) -> str:
        return json.dumps({"type": "pod", "pod": pod, "cluster": self.cluster, "sentAt": self.clock.isoformat()})

    def sqs_event(self, pods: list[dict] | None = None, bodies: list[str] | None = None) -> dict:
        """Send the messages through the real (moto) queue and return Lambda's SQS event for them."""
        bodies = list(bodies or []) + [self.message_body(p) for p in pods or []]
        for b in bodies:
            self.sqs.send_message(QueueUrl=self.account.queue_url, MessageBody=b)
        msgs = []
        while len(msgs) < len(bodies):
            got = self.sqs.receive_message(QueueUrl=self.account.queue_url, MaxNumberOfMessages=10,
                                           VisibilityTimeout=3600, AttributeNames=["All"]).get("Messages", [])
            if not got:
                break
            msgs.extend(got)
        return {"Records": [sqs_record(m, self.account.queue_url, self.region) for m in msgs]}

    # -- handlers ---------------------------------------------------------------------------------
    def provision(self, event: dict) -> dict:
        with contextlib.redirect_stdout(self.logs):
            return self.provisioner.handler(event, LambdaContext(f"{self.cluster}-provisioner"))

    def sweep(self) -> dict:
        event = {"version": "0", "detail-type": "Scheduled Event", "source": "aws.events", "time": self.clock.isoformat(),
                 "region": self.region, "resources": [], "detail": {}}
        with contextlib.redirect_stdout(self.logs):
            return self.lifecycle.handler(event, LambdaContext(f"{self.cluster}-lifecycle"))

    def invoke(self, function: str) -> dict:
        """Run a scheduled function's real handler (``functions/<function>/handler.py``) on an EventBridge
        Scheduled Event, e.g. ``w.invoke("drift")``, ``w.invoke("consolidation")``."""
        mods = self.__dict__.setdefault("_functions", {})
        if function not in mods:
            mod = load_module(repo_root() / "functions" / function / "handler.py", f"world_{function}_handler")
            capture_logs(mod, self.logs)
            mods[function] = mod
        event = {"version": "0", "detail-type": "Scheduled Event", "source": "aws.events", "time": self.clock.isoformat(),
                 "region": self.region, "resources": [], "detail": {}}
        with contextlib.redirect_stdout(self.logs):
            return mods[function].handler(event, LambdaContext(f"{self.cluster}-{function}"))

    def schedule(self):
        """One pass of the simulated kube-scheduler; ``w.default_spread`` (default none): its configured default
        topology spread constraints, as ``simulate --scheduler-config`` gives them."""
        storage.sync(self.server.store, self.region)    # the storage controllers, as before every pass of simulate
        return kubescheduler.schedule_pending(self.server, default_spread=self.default_spread)

    # -- EC2 / nodes ------------------------------------------------------------------------------
    def instances(self, states=("pending", "running")) -> list[dict]:
        """What DescribeInstances answers now (an instance launched less than ``ec2_visibility_delay`` ago is missing)."""
        return moto_ec2.all_instances(self.ec2, Filters=[{"Name": "instance-state-name", "Values": list(states)}])

    def launched_instances(self, states=("pending", "running")) -> list[dict]:
        """Every instance in ``states``, visible to DescribeInstances yet or not (what runs: the kubelets' view)."""
        with moto_ec2.unfiltered():
            return self.instances(states)

    def join(self, instance: dict, ready: bool = True, remove_startup_taints: bool = True) -> dict:
        """The kubelet of ``instance`` registers its Node (:func:`.kubelet.register`: capacity and allocatable from the
        instance type, labels and taints from its userData -- no NodeClaim needed); ``ready``: then Ready, and the
        startup taints removed (as the node's agents do) unless ``remove_startup_taints`` is False."""
        node, boot = kubelet.register(self.server, self.store, self.region, instance, self.ec2, now=self.clock.isoformat())
        name = node["metadata"]["name"]
        if ready:
            simnodes.set_node_ready(self.server, name, True)
            if boot.startup_taints and remove_startup_taints:
                simnodes.remove_startup_taints(self.server, name, boot.startup_taints)
        return self.server.store.get("nodes", name)

    def join_all(self, ready: bool = True) -> list[dict]:
        """A Node for every launched instance without one (visible to DescribeInstances yet or not)."""
        have = {(n.get("spec") or {}).get("providerID") for n in self.server.store.list("nodes")}
        out = []
        for inst in self.launched_instances():
            pid = f"aws:///{inst['Placement']['AvailabilityZone']}/{inst['InstanceId']}"
            if pid not in have:
                out.append(self.join(inst, ready=ready))
        return out


# -- a small scenario for tests ---------------------------------------------------------------------
# the EC2NodeClass of every embedded test cluster (the world's, the fault run's): one copy
NODECLASS_YAML = """apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: test-cluster
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: test-cluster
"""

TEST_MANIFESTS = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    metadata:
      labels:
        team: platform
      annotations:
        example.com/owner: platform
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
        - key: karpenter.k8s.aws/instance-family
          operator: In
          values: ["m5", "c5", "m6i"]
      taints:
        - key: dedicated
          value: apps
          effect: NoSchedule
      startupTaints:
        - key: example.com/agent-not-ready
          effect: NoSchedule
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
  limits:
    cpu: "%(cpu_limit)s"
---
""" + NODECLASS_YAML + """  tags:
    team: platform
"""


def scenario_manifests(cpu_limit="1000"):
    return TEST_MANIFESTS % {"cpu_limit": cpu_limit}


def make_pod(name, cpu="500m", memory="512Mi", owner="web", tolerate=True, **spec_extra):
    spec = {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if tolerate:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "apps", "effect": "NoSchedule"}]
    spec.update(spec_extra)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": owner},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": f"rs-{owner}", "controller": True}]},
            "spec": spec}


@contextlib.contextmanager
def atomic_aws_requests():
    """Make every in-process moto request atomic, as each real DynamoDB request is.

    moto's backends are not thread-safe: a conditional write (or a transaction) checks and then writes
    without a lock, so two threads can both pass the same condition -- something real DynamoDB never
    allows.  Concurrency tests run under this context manager so they test our conditions, not moto's race.
    """
    lock = threading.RLock()
    original = BotocoreStubber.process_request

    def process_request(self, request):
        with lock:
            return original(self, request)

    BotocoreStubber.process_request = process_request
    try:
        yield
    finally:
        BotocoreStubber.process_request = original
