"""A faster moto for the embedded environment: the names moto's response serializer tries, worked out once.

moto 5.2 serializes a response by walking the operation's output shape; for every member of every structure it asks
its attribute picker (``XFormedAttributePicker``) which attribute names to try on the Python object (``InstanceId``,
``instance_id``, ``Id``, ``id``, ...), running six alias providers each time. For an EC2 DescribeInstances of twenty
instances that is thousands of provider runs, most of the response's cost. Apart from the first provider
(``ExplicitAlias``, an object's ``Meta.serialization_aliases``, still asked every time), the names depend only on
the member's key, its shape and the shape's parent structure (botocore shapes, which live as long as their service
model) and the object's class (``ClassPrefixAlias`` reads its name), so they are kept per (class, key, shape,
parent). The picker then tries them in the same order with moto's own ``get_value``, and applies the same response
transformer, its path found once per key path and set of transformer paths (moto tried every path's suffix on
every member: a million ``str.endswith`` for twenty DescribeInstances). ``tests/sim/test_moto_speedups.py`` holds responses equal to moto's own, byte for byte.
"""

from __future__ import annotations

from typing import Any

_MAX_ENTRIES = 100_000   # shapes are cached by botocore; the bound only guards against a model built per request


def install() -> bool:
    """Patch moto's ``XFormedAttributePicker`` (once); False when its alias providers are not the ones checked."""
    from botocore import xform_name
    from moto.core import serialize as s
    from moto.core.utils import get_value

    picker = s.XFormedAttributePicker
    if getattr(picker, "karpenter_lambda_cached_keys", False):
        return True
    checked = [s.ExplicitAlias, s.ShapeNameAlias, s.NoAlias, s.ShapePrefixAlias, s.ClassPrefixAlias, s.ModelAlias]
    if list(s.DEFAULT_ALIAS_PROVIDERS) != checked:
        return False
    defaults, rest_providers = s.DEFAULT_ALIAS_PROVIDERS, checked[1:]
    original_keys, original_call = picker.get_possible_keys, picker.__call__
    cache: dict[tuple, tuple[str, ...]] = {}
    transforms: dict[tuple[str, ...], dict[str, str | None]] = {}   # transformer paths -> key path -> matching path
    MISSING = s.MISSING

    def rest(context: Any) -> tuple[str, ...]:
        """What the five providers after ExplicitAlias yield, each name followed by its snake_case form."""
        names: list[str] = []
        key = context.key
        for provider_cls in rest_providers:
            provider = provider_cls(context)
            if provider.has_alias(key):
                alias = provider.get_alias(key)
                names += (alias, xform_name(alias))
        return tuple(names)

    def possible_keys(self: Any, context: Any) -> tuple[str, ...]:
        if self.alias_providers is not defaults:
            return tuple(original_keys(self, context))
        obj, key, shape = context.obj, context.key, context.shape
        ck = (obj.__class__, key, shape, getattr(shape, "parent", None))
        names = cache.get(ck)
        if names is None:
            if len(cache) >= _MAX_ENTRIES:
                cache.clear()
            names = cache[ck] = rest(context)
        explicit = s.ExplicitAlias(context)
        if explicit.has_alias(key):
            alias = explicit.get_alias(key)
            return (alias, xform_name(alias)) + names
        return names

    def get_possible_keys(self: Any, context: Any):
        yield from possible_keys(self, context)

    def call(self: Any, context: Any) -> Any:
        if type(self) is not picker:
            return original_call(self, context)
        obj = context.obj
        for possible_key in possible_keys(self, context):
            value = get_value(obj, possible_key, MISSING)
            if value is not MISSING:
                break
        else:
            value = None
        transformers = self.response_transformers
        if transformers:
            path = matching_path(self, transformers, f"{context.key_path}.{context.key}")
            if path is not None:
                value = transformers[path](value)
        return value

    def matching_path(self: Any, transformers: dict, key_path: str) -> str | None:
        """The first transformer path that ends ``key_path`` (moto's loop), kept per table of paths (checked once
        per picker, that is per response: moto's handlers may set a path's transformer before serializing)."""
        found = self.__dict__.get("karpenter_lambda_paths")
        if found is None:
            paths = tuple(transformers)
            entry = transforms.get(paths)
            if entry is None:
                if len(transforms) >= 64:
                    transforms.clear()
                entry = transforms[paths] = {}
            found = self.karpenter_lambda_paths = entry
        if key_path not in found:
            if len(found) >= _MAX_ENTRIES:
                found.clear()
            found[key_path] = next((path for path in transformers if key_path.endswith(path)), None)
        return found[key_path]

    picker.get_possible_keys, picker.__call__ = get_possible_keys, call
    picker.karpenter_lambda_cached_keys = True
    picker.karpenter_lambda_originals = (original_keys, original_call)
    return True


def uninstall() -> None:
    from moto.core.serialize import XFormedAttributePicker as picker

    if getattr(picker, "karpenter_lambda_cached_keys", False):
        picker.get_possible_keys, picker.__call__ = picker.karpenter_lambda_originals
        picker.karpenter_lambda_cached_keys = False
