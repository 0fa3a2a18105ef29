"""What counts as gone for the termination flow (Karpenter's node termination and NodeClaim finalizers):

* an instance missing from the caller's listing is asked for by id -- a registered NodeClaim's too: a running one is
  drained and terminated, never left running with its record deleted;
* a shutting-down instance still exists (Karpenter's instance provider lists it; both finalizers requeue until the
  cloud provider says NotFound): the record, the Node and the launch claim (what the NodePool's limits count) stay
  until EC2 reports it terminated, and TerminateInstances is not called again.

moto terminates at once; :class:`ShuttingDown` stands in for real EC2, which reports shutting-down for about a minute.
"""

from .conftest import CountingCloud

SHUTTING_DOWN = {"Code": 32, "Name": "shutting-down"}


class ShuttingDown(CountingCloud):
    """The real cloud provider (moto) whose DescribeInstances reports ``shutting-down`` for ``after_terminate`` calls
    after a TerminateInstances, and always while ``forced`` (someone else is terminating it: a spot reclaim, a user)."""

    def __init__(self, cloud, after_terminate: int = 0):
        super().__init__(cloud)
        self.after_terminate = after_terminate
        self.forced = False
        self._left = 0

    def terminate(self, ids):
        super().terminate(ids)
        self._left = self.after_terminate

    def describe(self, ids):
        out = super().describe(ids)
        if self.forced or self._left > 0:
            if not self.forced:
                self._left -= 1
            out = {k: {**v, "State": dict(SHUTTING_DOWN)} for k, v in out.items()}
        return out


def _claimed(d, x) -> bool:
    """Does the NodeClaim still hold its launch claim (its NodePool's usage and limits)?"""
    nc = d.w.store.get("NodeClaim", x["name"]) or None
    _totals, claims = d.w.env.claims.usage(nc.nodepool_name if nc else "default")
    return x["name"] in claims


def test_a_registered_nodeclaim_missing_from_the_listing_is_drained_and_terminated(make_world):
    """The lifecycle sweep passes the instance from its tag-filtered listing: None when the karpenter.sh/nodeclaim tag
    was removed.  Asked by id, it runs: drained, terminated, then deleted."""
    d = make_world()
    x = d.node_with_pods(2)
    d.request(x)
    nc = d.w.store.get("NodeClaim", x["name"])
    assert d.terminator().finalize(nc, d.server.store.get("nodes", x["node"]), None) == "deleted"  # moto: at once
    assert sorted(d.evictions()) == ["app-0", "app-1"]
    assert d.cloud.terminated == [x["iid"]] and d.state(x["iid"]) == "terminated" and d.running() == set()
    assert d.w.store.get("NodeClaim", x["name"]) is None and d.server.store.get("nodes", x["node"]) is None


def test_a_shutting_down_instance_keeps_its_nodeclaim_until_terminated(make_world):
    d = make_world()
    x = d.node_with_pods(1)
    d.cloud = ShuttingDown(d.cloud.cloud, after_terminate=2)
    d.request(x)
    assert _claimed(d, x)
    assert d.finalize(x) == "terminating"                 # drained, TerminateInstances, then shutting-down
    assert d.cloud.terminated == [x["iid"]] and d.evictions() == ["app-0"]
    assert d.w.store.get("NodeClaim", x["name"]) is not None and d.server.store.get("nodes", x["node"]) is not None
    assert _claimed(d, x)                                 # still counted against the NodePool's limits
    assert d.finalize(x) == "terminating"                 # still shutting down: waited for, not terminated again
    assert d.cloud.terminated == [x["iid"]] and _claimed(d, x)
    assert d.finalize(x) == "deleted"                     # terminated now
    assert d.w.store.get("NodeClaim", x["name"]) is None and d.server.store.get("nodes", x["node"]) is None
    assert not _claimed(d, x) and d.cloud.terminated == [x["iid"]]


def test_an_instance_shutting_down_by_itself_is_drained_then_waited_for(make_world):
    """Terminated by someone else (a spot reclaim, a user): Karpenter's cloudProvider.Get still finds it, so the node
    is drained; no TerminateInstances; the record stays until it is terminated."""
    d = make_world()
    x = d.node_with_pods(1)
    d.cloud = ShuttingDown(d.cloud.cloud)
    d.cloud.forced = True
    d.request(x)
    assert d.finalize(x) == "terminating"
    assert d.evictions() == ["app-0"] and d.cloud.terminated == []
    assert d.w.store.get("NodeClaim", x["name"]) is not None and _claimed(d, x)
    d.w.ec2.terminate_instances(InstanceIds=[x["iid"]])  # EC2 finishes it
    d.cloud.forced = False
    assert d.finalize(x) == "deleted"
    assert d.cloud.terminated == [] and not _claimed(d, x)
