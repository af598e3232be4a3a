"""A validated config made read-only: `freeze(conf)` returns a frozen deep copy, so a job's one
typed config cannot change between its validation and its record (docs/architecture.md).

The schema classes stay plain dataclasses (Hydra sets overrides on them); a frozen copy's
dataclasses refuse assignment, its lists and dicts refuse change, and each prints as before.
"""

from __future__ import annotations

import copy
import dataclasses
from functools import cache

_MARK = "_rlbench_frozen"


def _refused(self, *args, **kwargs):
    raise dataclasses.FrozenInstanceError(f"a job's config is frozen: {type(self).__name__} cannot change")


class FrozenList(list):
    """A list that refuses change; prints, compares and serialises as a list."""

    append = extend = insert = remove = pop = clear = sort = reverse = _refused
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refused

    def __reduce__(self):
        return FrozenList, (list(self),)


class FrozenDict(dict):
    """A dict that refuses change; prints, compares and serialises as a dict."""

    __setitem__ = __delitem__ = pop = popitem = clear = update = setdefault = __ior__ = _refused

    def __reduce__(self):
        return FrozenDict, (dict(self),)


class _Frozen:
    def __setattr__(self, name, value):
        if self.__dict__.get(_MARK):
            raise dataclasses.FrozenInstanceError(f"a job's config is frozen: cannot assign to {name!r}")
        object.__setattr__(self, name, value)

    __delattr__ = _refused
    __hash__ = None

    def __eq__(self, other):  # equal to its unfrozen original, as a dataclass is to its copy
        return _unfrozen(type(self)) is _unfrozen(type(other)) and dataclasses.asdict(self) == dataclasses.asdict(other)

    def __reduce__(self):
        return _thawed_frozen, (_unfrozen(type(self)), {k: v for k, v in self.__dict__.items() if k != _MARK})


def _unfrozen(cls: type) -> type:
    return cls.__mro__[2] if issubclass(cls, _Frozen) else cls


@cache
def _frozen_class(cls: type) -> type:
    return type(cls.__name__, (_Frozen, cls), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})


def _thawed_frozen(cls: type, state: dict):
    obj = object.__new__(_frozen_class(cls))
    obj.__dict__.update(state)
    obj.__dict__[_MARK] = True
    return obj


def _freeze_in_place(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            value.__dict__[f.name] = _freeze_in_place(getattr(value, f.name))
        if not isinstance(value, _Frozen):
            value.__class__ = _frozen_class(type(value))
        value.__dict__[_MARK] = True
        return value
    if isinstance(value, list):
        return FrozenList(_freeze_in_place(v) for v in value)
    if isinstance(value, dict):
        return FrozenDict({k: _freeze_in_place(v) for k, v in value.items()})
    return value


def freeze(conf):
    """A frozen deep copy of a validated config (the caller's stays as it was); a frozen one as is."""
    if is_frozen(conf):
        return conf
    return _freeze_in_place(copy.deepcopy(conf))


def is_frozen(conf) -> bool:
    return isinstance(conf, _Frozen) and bool(conf.__dict__.get(_MARK))
