"""The labels an instance type offers, as Karpenter's instance types offer them (aws types.go ``computeRequirements``):
a Windows build and a capacity reservation's labels do not exist where they do not apply, ``nitro-sandbox`` says
whether the type supports Nitro Enclaves, and ``instance-tenancy`` is ``default`` (the only tenancy karpenter-lambda
launches).  Each case put a pod on a node that does not have what it selected, before."""

from karpenter_lambda.api import labels as L
from karpenter_lambda.catalog.types import Offering

from .helpers import catalog, itype, nodepool, pod, run

ALL_CAPACITY = [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand", "spot", "reserved"]}]


def test_a_windows_build_selector_gets_no_linux_node():
    res = run([pod("w", nodeSelector={L.WINDOWS_BUILD: "10.0.17763"})])
    assert not res.nodeclaims and "windows-build" in res.unschedulable[0].reason


def test_a_reservation_selector_needs_a_reserved_offering():
    pool = nodepool(requirements=ALL_CAPACITY)
    sel = {L.CAPACITY_RESERVATION_TYPE: "default"}
    res = run([pod("r", nodeSelector=sel)], pools=[pool])
    assert not res.nodeclaims and res.unschedulable, "a spot or on-demand node carries no reservation"
    # with an ODCR for m5.large in zone a, the pod goes into it, as reserved capacity
    types = catalog()
    m5 = next(t for t in types if t.name == "m5.large")
    m5.offerings.append(Offering("us-east-1a", "reserved", 0.0001, reservation_id="cr-0123", reservation_type="default",
                                 reservation_capacity=4))
    res = run([pod("r", nodeSelector=sel), pod("plain")], pools=[pool], types=types)
    placed = {p: n for n in res.nodeclaims for p in n.pods}
    assert placed["default/r"].capacity_type == "reserved" and placed["default/r"].instance_type == "m5.large"
    assert placed["default/r"].labels.get(L.CAPACITY_TYPE) == "reserved"
    # NotIn does not ask for a reservation: any capacity
    res = run([pod("n", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": L.CAPACITY_RESERVATION_ID, "operator": "NotIn",
                                                     "values": ["cr-0123"]}]}]}}})], pools=[pool], types=types)
    assert res.nodeclaims and not res.unschedulable and res.nodeclaims[0].capacity_type != "reserved"


def test_nitro_sandbox_selects_by_enclave_support():
    types = [itype("c5.large", 2, 4, 0.085, extra_labels={L.NITRO_SANDBOX: "true"}),
             itype("t3.large", 2, 8, 0.0832, extra_labels={L.NITRO_SANDBOX: "false"}),
             itype("t3.small", 2, 2, 0.0208)]   # no such label (catalog without the field): does not exist
    for want, got in (("true", "c5.large"), ("false", "t3.large")):
        res = run([pod("e", cpu="500m", nodeSelector={L.NITRO_SANDBOX: want})], types=types)
        assert [n.instance_type for n in res.nodeclaims] == [got], want


def test_tenancy_default_is_offered_and_dedicated_is_not():
    res = run([pod("d", nodeSelector={L.INSTANCE_TENANCY: "default"})],
              types=[itype("m5.large", 2, 8, 0.096, extra_labels={L.INSTANCE_TENANCY: "default"})])
    assert res.nodeclaims and not res.unschedulable
    res = run([pod("x", nodeSelector={L.INSTANCE_TENANCY: "dedicated"})],
              types=[itype("m5.large", 2, 8, 0.096, extra_labels={L.INSTANCE_TENANCY: "default"})])
    assert not res.nodeclaims and "instance-tenancy=dedicated" in res.unschedulable[0].reason


def test_the_catalog_gives_the_labels():
    from karpenter_lambda.catalog.instancetypes import compute_labels

    info = {"InstanceType": "c7g.large", "VCpuInfo": {"DefaultVCpus": 2}, "MemoryInfo": {"SizeInMiB": 4096},
            "NitroEnclavesSupport": "supported"}
    labels = compute_labels(info, "us-east-1", "arm64")
    assert labels[L.NITRO_SANDBOX] == "true" and labels[L.INSTANCE_TENANCY] == "default"
    assert compute_labels({**info, "NitroEnclavesSupport": "unsupported"}, "us-east-1", "arm64")[L.NITRO_SANDBOX] == "false"
