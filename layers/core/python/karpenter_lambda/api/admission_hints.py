"""Warnings for workloads the API server's pod admission would refuse or change against the RuntimeClasses,
PriorityClasses and LimitRanges of the same load (pure; ``validate``, ``plan`` and ``simulate`` print them).  The
admission itself is :mod:`.admission` (plan and the simulated API server apply it); here is what ``validate`` says:

* **PriorityClasses** (warnings): a pod spec naming a PriorityClass the load does not have (nor a built-in one):
  refused when the load has others, kept at priority 0 when it has none.
* **LimitRanges** (warnings): a pod spec whose containers a LimitRange of its namespace refuses (below ``min``, above
  ``max``).
* **RuntimeClasses** (warnings): a pod spec whose ``runtimeClassName`` the RuntimeClass admission would refuse
  against the classes given (a class not given, when some are; an ``overhead`` or ``nodeSelector`` at odds with the
  class's), or naming one when the load has none (its overhead is then not counted).

Warnings, not errors: the cluster's objects may differ from the files'.
"""

from __future__ import annotations

from .crosscheck import pod_specs
from .errors import FieldError
from .text import did_you_mean, near

__all__ = ["runtime_class_warnings", "priority_class_warnings", "limit_range_warnings", "admission_warnings"]


def admission_warnings(docs: list[object]) -> list[tuple[int, FieldError]]:
    """Every warning below, for ``docs`` (the load's manifests)."""
    return runtime_class_warnings(docs) + limit_range_warnings(docs) + priority_class_warnings(docs)


def runtime_class_warnings(docs: list[object]) -> list[tuple[int, FieldError]]:
    """(position in ``docs``, warning) per workload whose pods the RuntimeClass admission would refuse against the
    RuntimeClasses given (``api/runtimeclass.py``): a class not given (when some are), an ``overhead`` other than the
    class's, a ``nodeSelector`` conflicting with the class's.  Warnings: the cluster's class may differ."""
    from .runtimeclass import admit, runtime_classes

    classes = runtime_classes(docs)
    out: list[tuple[int, FieldError]] = []
    for pos, _key, path, spec in pod_specs(docs):
        if not spec.get("runtimeClassName"):
            continue
        if not classes:   # none given: nothing known of the cluster's classes, so nothing of this one is counted
            out.append((pos, FieldError(f"{path}.runtimeClassName",
                                        f"RuntimeClass {spec['runtimeClassName']} is not among the objects given: plan "
                                        "and simulate do not count its overhead, node selector or tolerations (add "
                                        "the RuntimeClass)")))
            continue
        _, problem = admit({"spec": spec}, classes)
        if problem is None:
            continue
        if problem.startswith("RuntimeClass "):
            known = ", ".join(sorted(classes))
            hint = did_you_mean(near(spec["runtimeClassName"], classes))
            problem = (f"no RuntimeClass {spec['runtimeClassName']} among the objects given (RuntimeClasses: {known}): "
                       f"the API server refuses its pods{hint}")
        out.append((pos, FieldError(f"{path}.runtimeClassName", problem)))
    return out


def priority_class_warnings(docs: list[object]) -> list[tuple[int, FieldError]]:
    """(position in ``docs``, warning) per workload naming a PriorityClass the files do not have (nor a built-in one),
    when they have some (``api/priority.py``: the API server refuses its pods).  Warnings: it may be the cluster's."""
    from .priority import BUILTIN, priority_classes

    classes = priority_classes(docs)
    out: list[tuple[int, FieldError]] = []
    for pos, _key, spec_path, spec in pod_specs(docs):
        path = f"{spec_path}.priorityClassName"
        name = spec.get("priorityClassName")
        if isinstance(name, str) and name and not classes and name not in BUILTIN:
            out.append((pos, FieldError(path, f"PriorityClass {name} is not among the objects given: simulate keeps "
                                              "its pods at priority 0 (add the PriorityClass)")))
        elif isinstance(name, str) and name and name not in classes and name not in BUILTIN:
            known = sorted(classes) + sorted(BUILTIN)
            hint = did_you_mean(near(name, known))
            out.append((pos, FieldError(path, f"no PriorityClass {name} among the objects given (PriorityClasses: "
                                              f"{', '.join(known)}): the API server refuses its pods{hint}")))
    return out


def limit_range_warnings(docs: list[object]) -> list[tuple[int, FieldError]]:
    """(position in ``docs``, warning) per workload whose pods the LimitRanger admission would refuse against the
    LimitRanges given in its namespace (``api/limitrange.py``: a request below a ``min``, a request or limit above a
    ``max``).  Warnings: the cluster's LimitRanges may differ."""
    from .limitrange import admit, limit_ranges

    ranges = limit_ranges(docs)
    out: list[tuple[int, FieldError]] = []
    for pos, key, path, spec in pod_specs(docs):
        if ranges.get(key[2]):
            _, problem = admit({"spec": spec}, ranges[key[2]])
            if problem:
                out.append((pos, FieldError(f"{path}.containers",
                                            f"{problem}: the API server refuses its pods (LimitRange in namespace "
                                            f"{key[2]})")))
    return out
