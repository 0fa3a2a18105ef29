"""Capacity reservations of an EC2NodeClass: its ``capacityReservationSelectorTerms`` through
DescribeCapacityReservations (karpenter-provider-aws's ``capacityreservation`` provider).

One query per term, as upstream: a term with ``id`` asks for that id (``CapacityReservationIds``; a reservation EC2
does not know is no error, just none); a term with ``tags`` and/or ``instanceMatchCriteria`` filters on them, and on
``owner-id`` when ``ownerID`` is given (``*`` as a tag value: the key exists).  Every query filters ``state=active``.
The answers are merged, deduplicated, parsed and filtered (unexpired) by
:func:`karpenter_lambda.catalog.reservations.parse_reservations`.

``read_file(path, now)`` reads a saved DescribeCapacityReservations answer (JSON: ``{"CapacityReservations": [...]}``
or the list itself) and ``select(entries, terms, now)`` picks what an EC2NodeClass's terms select from it, as EC2
would, for ``plan --capacity-reservations FILE``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ...catalog.reservations import CapacityReservation, parse_reservations

log = logging.getLogger(__name__)

NOT_FOUND = ("InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed")


def queries(terms: list[dict] | None) -> list[dict]:
    """The DescribeCapacityReservations parameters for selector terms (one dict per query)."""
    out: list[dict] = []
    for t in terms or []:
        active = [{"Name": "state", "Values": ["active"]}]
        if t.get("id"):
            out.append({"CapacityReservationIds": [t["id"]], "Filters": active})
        if t.get("tags") or t.get("instanceMatchCriteria"):
            filters = list(active)
            if t.get("ownerID"):
                filters.append({"Name": "owner-id", "Values": [str(t["ownerID"])]})
            for k, v in sorted((t.get("tags") or {}).items()):
                filters.append({"Name": "tag-key", "Values": [k]} if v == "*" else {"Name": f"tag:{k}", "Values": [str(v)]})
            if t.get("instanceMatchCriteria"):
                filters.append({"Name": "instance-match-criteria", "Values": [t["instanceMatchCriteria"]]})
            out.append({"Filters": filters, "MaxResults": 1000})
    return out


def _code(e: Exception) -> str:
    return ((getattr(e, "response", None) or {}).get("Error") or {}).get("Code", "")


def describe(ec2: Any, terms: list[dict] | None) -> list[dict]:
    """Every DescribeCapacityReservations entry the terms select (paginated; an unknown id selects nothing)."""
    found: list[dict] = []
    for q in queries(terms):
        params = dict(q)
        while True:
            try:
                resp = ec2.describe_capacity_reservations(**params)
            except Exception as e:  # noqa: BLE001
                if _code(e) in NOT_FOUND:
                    break
                raise
            found.extend(resp.get("CapacityReservations") or [])
            token = resp.get("NextToken")
            if not token:
                break
            params["NextToken"] = token
    return found


def resolve(ec2: Any, terms: list[dict] | None, now: float) -> tuple[list[CapacityReservation], list[str]]:
    """``(reservations, problems)``: the active, unexpired reservations the terms select, sorted by id; no terms, no
    call.  ``problems`` names reservations left out (an instance match criteria or type upstream refuses too)."""
    if not terms:
        return [], []
    reservations, problems = parse_reservations(describe(ec2, terms), now)
    for p in problems:
        log.warning("%s", p)
    return reservations, problems


def _selected(desc: dict, term: dict) -> bool:
    if term.get("id"):
        return desc.get("CapacityReservationId") == term["id"]
    if not term.get("tags") and not term.get("instanceMatchCriteria"):
        return False
    tags = {t.get("Key"): t.get("Value") for t in desc.get("Tags") or []}
    if term.get("ownerID") and str(desc.get("OwnerId") or "") != str(term["ownerID"]):
        return False
    if term.get("instanceMatchCriteria") and desc.get("InstanceMatchCriteria") != term["instanceMatchCriteria"]:
        return False
    return all(k in tags if v == "*" else tags.get(k) == str(v) for k, v in (term.get("tags") or {}).items())


def select(descs: list[dict], terms: list[dict] | None, now: float) -> list[CapacityReservation]:
    """The reservations of ``descs`` (a saved DescribeCapacityReservations answer) that ``terms`` select, as
    :func:`resolve` would get them from EC2 (active, unexpired, sorted by id)."""
    chosen = [d for d in descs if any(_selected(d, t) for t in terms or [])]
    return parse_reservations(chosen, now)[0]


def read_file(path: str, now: float) -> list[dict]:
    """The entries of a saved DescribeCapacityReservations answer (JSON: ``{"CapacityReservations": [...]}`` or the
    list); ValueError naming the file when it is not one or an entry cannot be used."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable JSON file ({e})") from None
    entries = doc.get("CapacityReservations") if isinstance(doc, dict) else doc
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError(f"{path}: expected a DescribeCapacityReservations answer: {{\"CapacityReservations\": [...]}}")
    problems = parse_reservations(entries, now)[1]
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return entries
