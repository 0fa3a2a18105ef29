"""`plan` and the NodeClaims given in its files: manual NodeClaims (docs/provisioning.md, "Manual NodeClaims"), which
``apply`` stores and the lifecycle sweep launches as they are.  Each is reported with what it would launch as (the
instance types it may launch as, :func:`~karpenter_lambda.controllers.manual_nodeclaims.launch_options`, and the
offering a launch is expected to take), and offered to the pending pods as in-flight capacity, as the provisioner
offers a launched NodeClaim: pods that fit there need no new node.  One that cannot launch (no instance type left, an
EC2NodeClass not in the files) is reported with the reason the lifecycle sweep would delete it for."""

from __future__ import annotations

from karpenter_lambda.api.objects import NodeClaim
from karpenter_lambda.controllers.manual_nodeclaims import (expected_offering, in_flight_doc, launch_options,
                                                            nodeclass_name, nodeclass_ref_problem)

from .table import render_table


def given_nodeclaims(objects) -> list[NodeClaim]:
    return sorted((o for o in objects if isinstance(o, NodeClaim)), key=lambda o: o.name)


def nodeclasses_needed(given: list[NodeClaim], nodeclasses: dict) -> list:
    """The EC2NodeClasses of the files the given NodeClaims launch from (their catalogs are loaded too)."""
    names = {nodeclass_name(nc) for nc in given if nodeclass_ref_problem(nc) is None}
    return [nodeclasses[n] for n in sorted(names) if n in nodeclasses]


def plan_given(given: list[NodeClaim], nodeclasses: dict, catalogs: dict, snap) -> list[dict]:
    """One entry per given NodeClaim (``--json`` ``givenNodeClaims``); those that can launch are added to ``snap`` as
    in-flight NodeClaims of the type they are expected to launch as."""
    out = []
    for nc in given:
        entry = {"name": nc.name, "nodePool": nc.nodepool_name or None, "launchable": False, "instanceTypes": [],
                 "instanceType": None, "zone": None, "capacityType": None, "pricePerHour": None,
                 "priceEstimated": False, "pods": [], "reason": None}
        out.append(entry)
        ref = nodeclass_name(nc)
        problem = nodeclass_ref_problem(nc)
        if problem:
            entry["reason"] = f"{problem}: not launched"
            continue
        if ref not in nodeclasses:
            entry["reason"] = (f"EC2NodeClass {ref!r} is not in the given files: the lifecycle sweep deletes it "
                               f"(insufficient capacity, as Karpenter); add it with -f")
            continue
        options = launch_options(nc, catalogs.get(ref) or [])
        chosen = expected_offering(options) if not options.why else None
        if chosen is None:
            entry["reason"] = f"InsufficientCapacity: {options.why or 'no offering its requirements allow'}: the lifecycle sweep deletes it"
            continue
        it, o = chosen
        entry.update(launchable=True, instanceTypes=[t.name for t in options.types], instanceType=it.name,
                     zone=o.zone, capacityType=o.capacity_type, pricePerHour=round(float(o.price), 6),
                     priceEstimated=bool(o.price_estimated))
        snap.nodeclaims[nc.name] = in_flight_doc(nc, it, o)
    return out


def add_placements(entries: list[dict], existing: dict) -> None:
    """The pending pods the solver placed on each given NodeClaim (``existing``: the result's in-flight placements)."""
    for e in entries:
        e["pods"] = list(existing.get(e["name"]) or []) if e["launchable"] else []


def render(entries: list[dict]) -> str:
    """The human table: given NodeClaims, launched as they are."""
    rows = []
    for e in entries:
        if e["launchable"]:
            price = f"{'~' if e['priceEstimated'] else ''}${e['pricePerHour']:.4f}"
            rows.append([e["name"], e["nodePool"] or "-", e["instanceType"], e["zone"], e["capacityType"], price,
                         len(e["pods"]), len(e["instanceTypes"])])
        else:
            rows.append([e["name"], e["nodePool"] or "-", "-", "-", "-", "-", 0, 0])
    text = render_table(["GIVEN NODECLAIM", "NODEPOOL", "INSTANCE-TYPE", "ZONE", "CAPACITY", "PRICE/H", "PODS",
                         "OPTIONS"], rows, right={5, 6, 7})
    notes = ["given NodeClaims are launched as they are (the lifecycle sweep's launch of a manual NodeClaim); PODS: "
             "pending pods placed on them"]
    notes += [f"{e['name']}: not launched: {e['reason']}" for e in entries if not e["launchable"]]
    return text + "\n" + "\n".join(notes)
