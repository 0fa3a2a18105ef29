"""OffPeakSchedule (``karpenter-lambda.io/v1alpha1``): the contract of an off-peak window, and its validation.

```yaml
apiVersion: karpenter-lambda.io/v1alpha1
kind: OffPeakSchedule
metadata: {name: nights}
spec:
  timeZone: Europe/Berlin          # IANA name; default UTC
  schedule: "0 20 * * 1-5"         # window start: 5-field cron or @daily-style, in timeZone
  duration: 12h                    # window length: 1s .. 168h (units h, m, s: 12h, 90m, 1h30m)
  workloads:                       # optional: scaled during the window, restored after
    - namespaces: [dev, staging]   # and/or namespaceSelector; and/or selector (see below)
      selector: {matchLabels: {tier: web}}
      kinds: [Deployment, StatefulSet]   # the default
      replicas: 0                  # the default; >= 0
  nodePools:                       # optional: overrides during the window, restored after
    - name: default
      limits: {cpu: "16"}          # replaces spec.limits during the window
      disruption: {consolidateAfter: 0s}   # merged into spec.disruption during the window
    - name: batch
      drain: true                  # held at zero capacity and its nodes drained
```

The typed object is :class:`~.objects.OffPeakSchedule` (defined in :mod:`.objects` next to the Karpenter kinds so
that ``objects.KINDS`` registers it; re-exported here).  Its accessors give :class:`WorkloadTarget` and
:class:`NodePoolOverride` (defined in :mod:`.offpeak_types`, below both modules; re-exported here).  The window
arithmetic (DST) and the plan are the pure package ``karpenter_lambda.offpeak``.

Validation (``api.validation.validate_and_default("OffPeakSchedule", doc)``, which uses :func:`spec_schema`)
reports every problem with its field path, e.g. ``spec.workloads[0].replicas``, ``spec.nodePools[0].limits.cpu``:

* ``spec.schedule``: required; robfig's grammar as for disruption budgets (:mod:`.cron`), the message says which
  field is wrong.  A ``TZ=``/``CRON_TZ=`` prefix is refused: the time zone is ``spec.timeZone``.
* ``spec.timeZone``: an IANA name known to ``zoneinfo`` (``Europe/Berlin``, ``UTC``); not empty, not ``localtime``.
* ``spec.duration``: required; ``([0-9]+(h|m|s))+``, more than 0 and at most 168h (7 days).
* at least one of ``spec.workloads`` / ``spec.nodePools`` (non-empty).
* a workload entry: at least one of ``namespaces``, ``namespaceSelector``, ``selector`` (an entry selecting every
  workload of the cluster, kube-system included, is almost certainly a mistake; ``namespaceSelector: {}``
  says "every namespace" on purpose); ``replicas`` >= 0; ``kinds`` from Deployment, StatefulSet; label selectors
  as Kubernetes' (In/NotIn need values, Exists/DoesNotExist take none).  Several selectors in one entry are ANDed.
* a NodePool entry: ``name`` required (a DNS subdomain), at most once per schedule; ``limits`` values are
  non-negative quantities; ``drain: true`` together with ``limits`` is an error (a drained NodePool is held at
  zero); an entry must change something (``limits``, ``disruption`` or ``drain: true``).
* unknown fields anywhere are errors (with a did-you-mean hint); ``metadata.name`` is required.

Defaults written into the stored object (as a CRD would): ``timeZone: UTC``, per workload entry
``kinds: [Deployment, StatefulSet]`` and ``replicas: 0``, per NodePool entry ``drain: false``.  Pure: no I/O
beyond ``zoneinfo`` reading the time-zone database.
"""

from __future__ import annotations

from .cron import CronError, parse_cron
from .durations import DURATION_RE, NILLABLE_DURATION_RE, DurationError
from .errors import FieldError
from .objects import OffPeakSchedule
from .offpeak_types import (MAX_DURATION_SECONDS, WORKLOAD_KINDS, NodePoolOverride, WorkloadTarget,
                            parse_window_duration, selector_matches, time_zone_problem)
from .quantity import QuantityError, parse_quantity
from .schema import AnyValue, Bool, Int, List, Map, Obj, Str, describe, index, join
from .selectors import OPERATORS as SELECTOR_OPERATORS
from .validators import (BUDGET, CONSOLIDATION_POLICIES, DNS1123_SUBDOMAIN_RE, NILLABLE_DURATION_MSG,
                         dns_subdomain_check, label_key_problem, label_value_check)

__all__ = [
    "API_VERSION",
    "KIND",
    "OffPeakSchedule",
    "WorkloadTarget",
    "NodePoolOverride",
    "WORKLOAD_KINDS",
    "MAX_DURATION_SECONDS",
    "parse_window_duration",
    "time_zone_problem",
    "selector_matches",
    "spec_schema",
]

API_VERSION = OffPeakSchedule.api_version          # "karpenter-lambda.io/v1alpha1" (labels.PROJECT_API_VERSION)
KIND = OffPeakSchedule.kind_name                   # "OffPeakSchedule"


# ----------------------------------------------------------------------------- validation rules
def _schedule_check(value, path, errors):
    if not isinstance(value, str):
        return
    if value.strip().startswith(("TZ=", "CRON_TZ=")):
        errors.append(FieldError(path, f"schedule {value!r}: set the time zone with spec.timeZone, not a TZ= prefix"))
        return
    try:
        parse_cron(value)
    except CronError as e:
        errors.append(FieldError(path, str(e)))


def _time_zone_check(value, path, errors):
    if isinstance(value, str):
        problem = time_zone_problem(value)
        if problem:
            errors.append(FieldError(path, problem))


def _duration_check(value, path, errors):
    if not isinstance(value, str):
        return
    if not DURATION_RE.match(value):
        errors.append(FieldError(path, f"invalid duration {value!r}: expected digits with units h, m or s, e.g. 12h, 90m or 1h30m"))
        return
    try:
        parse_window_duration(value)
    except DurationError as e:
        errors.append(FieldError(path, str(e)))


def _limits_check(value, path, errors):
    """Resource name -> non-negative quantity; paths are ``limits.cpu`` (as the design's contract says)."""
    if not isinstance(value, dict):
        errors.append(FieldError(path, f"must be a mapping of resource name to quantity, got {describe(value)}"))
        return
    if not value:
        errors.append(FieldError(path, "must name at least one resource (e.g. cpu: \"16\"); omit limits to keep the NodePool's"))
    for k, q in value.items():
        here = join(path, str(k))
        if not isinstance(k, str) or label_key_problem(k):
            errors.append(FieldError(here, f"invalid resource name {k!r}"))
            continue
        if isinstance(q, bool) or not isinstance(q, (str, int, float)):
            errors.append(FieldError(here, f"must be a quantity such as 16, 500m or 64Gi, got {describe(q)}"))
            continue
        try:
            parsed = parse_quantity(q)
        except QuantityError as e:
            errors.append(FieldError(here, str(e)))
            continue
        if parsed < 0:
            errors.append(FieldError(here, f"{q!r} must not be negative"))


def _label_selector() -> Obj:
    def expression_check(e, path, errors):
        op, values = e.get("operator"), e.get("values")
        if op in ("In", "NotIn") and not values:
            errors.append(FieldError(join(path, "values"), f"operator {op} requires at least one value"))
        if op in ("Exists", "DoesNotExist") and values:
            errors.append(FieldError(join(path, "values"), f"operator {op} takes no values"))
        k = e.get("key")
        if isinstance(k, str) and k and label_key_problem(k):
            errors.append(FieldError(join(path, "key"), label_key_problem(k)))

    return Obj(
        {
            "matchLabels": Map(Str(max_len=63, checks=[label_value_check]), key_check=label_key_problem),
            "matchExpressions": List(
                Obj({"key": Str(not_empty=True), "operator": Str(enum=SELECTOR_OPERATORS), "values": List(Str())},
                    required=("key", "operator"), checks=[expression_check])
            ),
        }
    )


def _namespace_name_check(value, path, errors):
    if isinstance(value, str) and value and (len(value) > 63 or "." in value or not DNS1123_SUBDOMAIN_RE.match(value)):
        errors.append(FieldError(path, f"invalid namespace name {value!r}: must be a lowercase DNS-1123 label (a-z, 0-9, '-', at most 63 characters)"))


def _workload_check(entry, path, errors):
    if not any(k in entry for k in ("namespaces", "namespaceSelector", "selector")):
        errors.append(FieldError(path, "set at least one of namespaces, namespaceSelector or selector "
                                       "(namespaceSelector: {} selects every namespace on purpose)"))


def _nodepool_check(entry, path, errors):
    if entry.get("drain") is True and "limits" in entry:
        errors.append(FieldError(join(path, "limits"), "must not be set with drain: true (a drained NodePool is held at zero capacity)"))
    if not ("limits" in entry or "disruption" in entry or entry.get("drain") is True):
        errors.append(FieldError(path, "nothing to override: set limits, disruption or drain: true"))


def _nodepools_unique(entries, path, errors):
    seen: dict[str, int] = {}
    for i, e in enumerate(entries):
        name = e.get("name") if isinstance(e, dict) else None
        if not isinstance(name, str) or not name:
            continue
        if name in seen:
            errors.append(FieldError(join(index(path, i), "name"), f"NodePool {name!r} is already listed at {index(path, seen[name])}: one entry per NodePool"))
        else:
            seen[name] = i


def _spec_check(spec, path, errors):
    if not spec.get("workloads") and not spec.get("nodePools"):
        errors.append(FieldError(path, "set at least one of workloads or nodePools (a schedule that holds nothing does nothing)"))


def spec_schema() -> Obj:
    """The ``spec`` schema; ``validation.SCHEMAS["OffPeakSchedule"]`` wraps it with apiVersion/kind/metadata.

    Built on the shared pieces of :mod:`.validators` (label checks, budgets)."""
    disruption = Obj(        # the NodePool's disruption block without its defaults: only what is given is merged
        {
            "consolidateAfter": Str(pattern=NILLABLE_DURATION_RE.pattern, pattern_msg=NILLABLE_DURATION_MSG),
            "consolidationPolicy": Str(enum=CONSOLIDATION_POLICIES),
            "budgets": List(BUDGET, max_items=50),
        }
    )
    workload = Obj(
        {
            "namespaces": List(Str(not_empty=True, checks=[_namespace_name_check])),
            "namespaceSelector": _label_selector(),
            "selector": _label_selector(),
            "kinds": List(Str(enum=WORKLOAD_KINDS), min_items=1, default=list(WORKLOAD_KINDS)),
            "replicas": Int(minimum=0, default=0),
        },
        checks=[_workload_check],
    )
    nodepool = Obj(
        {
            "name": Str(not_empty=True, checks=[dns_subdomain_check]),
            "limits": AnyValue(checks=[_limits_check]),
            "disruption": disruption,
            "drain": Bool(default=False),
        },
        required={"name": "the NodePool to override"},
        checks=[_nodepool_check],
    )
    return Obj(
        {
            "timeZone": Str(default="UTC", checks=[_time_zone_check]),
            "schedule": Str(checks=[_schedule_check]),
            "duration": Str(checks=[_duration_check]),
            "workloads": List(workload),
            "nodePools": List(nodepool, checks=[_nodepools_unique]),
        },
        required={"schedule": "when the window starts, e.g. \"0 20 * * 1-5\"",
                  "duration": "how long the window lasts, e.g. 12h"},
        checks=[_spec_check],
    )
