"""The API server's checks of a pod spec's volumes and of the containers' mounts of them (pure).

``pkg/apis/core/validation`` (``validateVolumes``, ``ValidateVolumeMounts``, ``ValidateVolumeDevices``) refuses, with
this wording:

* a volume without a name, with a name that is not a DNS-1123 label, or with the name of an earlier one
  (``spec.volumes[1].name: Duplicate value: "data"``);
* a volume with no source or with two (``spec.volumes[0]: Required value: must specify a volume type``), and a
  ``persistentVolumeClaim`` without ``claimName``;
* a container's ``volumeMounts`` entry naming no volume of the pod
  (``spec.containers[0].volumeMounts[0].name: Not found: "dat"``), without a ``mountPath``, with a ``mountPath``
  another mount of that container has, or with a ``subPath`` that is absolute or climbs out with ``..``;
* a ``volumeDevices`` entry naming no volume, or one that is not a claim (block devices come only from
  ``persistentVolumeClaim`` or ``ephemeral`` volumes), or without a ``devicePath``.

The schema already refuses unknown fields and wrong types; these are the rules it cannot express.  A StatefulSet's
pods also get one volume per ``volumeClaimTemplates`` entry, named after it (its controller adds them and they
replace a template volume of the same name): ``claim_templates`` names them, so a mount of ``data`` with a claim
template ``data`` is fine.  The API server does not check a StatefulSet's pod template (it stores the StatefulSet)
but refuses every pod made from it: :func:`volume_errors` reports the same errors, and its caller says so.
"""

from __future__ import annotations

import json
import re

from .errors import FieldError
from .text import did_you_mean, near

Errors = list[FieldError]

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: sources that give a block device (``volumeDevices``)
_BLOCK_SOURCES = ("persistentVolumeClaim", "ephemeral")


def _dicts(value) -> list:
    return [x if isinstance(x, dict) else {} for x in value] if isinstance(value, list) else []


def volume_errors(spec: dict, path: str, claim_templates: tuple[str, ...] = ()) -> Errors:
    """The volume rules above on the pod spec ``spec`` at ``path`` (``spec``, ``spec.template.spec``)."""
    errors: Errors = []
    sources: dict[str, str | None] = {}    # volume name -> its source field (None: no single source)
    for i, vol in enumerate(_dicts(spec.get("volumes"))):
        where = f"{path}.volumes[{i}]"
        name = vol.get("name")
        if not isinstance(name, str) or not name:
            errors.append(FieldError(f"{where}.name", "Required value"))
        elif len(name) > 63 or not _DNS1123_LABEL.match(name):
            errors.append(FieldError(f"{where}.name", f"Invalid value: {json.dumps(name)}: a lowercase RFC 1123 label "
                                                      "must consist of lower case alphanumeric characters or '-', and "
                                                      "must start and end with an alphanumeric character"))
        elif name in sources:
            errors.append(FieldError(f"{where}.name", f"Duplicate value: {json.dumps(name)}"))
        kinds = [k for k, v in vol.items() if k != "name" and v is not None]
        if not kinds:
            errors.append(FieldError(where, "Required value: must specify a volume type"))
        elif len(kinds) > 1:
            errors.append(FieldError(f"{where}.{kinds[1]}", "Forbidden: may not specify more than 1 volume type"))
        claim = vol.get("persistentVolumeClaim")
        if isinstance(claim, dict) and not claim.get("claimName"):
            errors.append(FieldError(f"{where}.persistentVolumeClaim.claimName", "Required value"))
        if isinstance(name, str) and name and name not in sources:
            sources[name] = kinds[0] if len(kinds) == 1 else None
    for name in claim_templates:
        sources[name] = "persistentVolumeClaim"
    for group in ("initContainers", "containers"):
        for i, c in enumerate(_dicts(spec.get(group))):
            _mounts(c, f"{path}.{group}[{i}]", sources, errors)
    return errors


def _mounts(container: dict, where: str, sources: dict, errors: Errors) -> None:
    paths: set = set()
    for j, m in enumerate(_dicts(container.get("volumeMounts"))):
        at = f"{where}.volumeMounts[{j}]"
        _named(m, at, sources, errors)
        _unique_path(m, "mountPath", at, paths, errors)
        sub = m.get("subPath")
        if isinstance(sub, str) and sub:
            if sub.startswith("/"):
                errors.append(FieldError(f"{at}.subPath", f"Invalid value: {json.dumps(sub)}: must be a relative path"))
            elif ".." in sub.split("/"):
                errors.append(FieldError(f"{at}.subPath", f"Invalid value: {json.dumps(sub)}: must not contain '..'"))
    devices: set = set()
    for j, d in enumerate(_dicts(container.get("volumeDevices"))):
        at = f"{where}.volumeDevices[{j}]"
        name = _named(d, at, sources, errors)
        if name is not None and sources.get(name) not in _BLOCK_SOURCES:
            errors.append(FieldError(f"{at}.name", f"Invalid value: {json.dumps(name)}: can only use volume source "
                                                   "type of PersistentVolumeClaim or Ephemeral for block mode"))
        _unique_path(d, "devicePath", at, devices, errors)


def _unique_path(entry: dict, field: str, at: str, seen: set, errors: Errors) -> None:
    """A mount's ``mountPath`` or a device's ``devicePath``: required, and unique within the container."""
    path = entry.get(field)
    if not isinstance(path, str) or not path:
        errors.append(FieldError(f"{at}.{field}", "Required value"))
    elif path in seen:
        errors.append(FieldError(f"{at}.{field}", f"Invalid value: {json.dumps(path)}: must be unique"))
    else:
        seen.add(path)


def _named(entry: dict, at: str, sources: dict, errors: Errors) -> str | None:
    """The volume ``entry`` (a mount or a device) names, when the pod has it; else the error, and None."""
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        errors.append(FieldError(f"{at}.name", "Required value"))
        return None
    if name not in sources:
        known = ", ".join(sorted(sources)) or "none"
        errors.append(FieldError(f"{at}.name", f"Not found: {json.dumps(name)} (the pod's volumes: {known})"
                                               f"{did_you_mean(near(name, sources))}"))
        return None
    return name
