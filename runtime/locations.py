"""Which tensors are SWA-space locations and which are the batch's own locations, by name.

SWA locations follow the linter's ``swa-loc-pattern`` (so ``out_cache_loc_swa`` and
``swa_loc`` are, ``full_to_swa_index_mapping`` is not); the batch's locations are the
attributes named in ``batch_loc_names`` (SGLang's ``out_cache_loc``).

Scans run on every forward, so they are written for speed: a batch is read through a
plan per class and attribute names (``LocationNames.scan_batch``), and long-lived objects
(graph runners, their input buffers) are rescanned only when one of their attributes was
rebound (:class:`AttributeScan`).
"""

from __future__ import annotations

import enum
import functools
import inspect
import operator
import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch

# Where a tensor lies: (device, first byte, one past its last byte).
Span = tuple[torch.device, int, int]

# What an attribute name says a tensor is (bits); names remembered, at most.
_BATCH_LOC = 1
_SWA_LOC = 2
MAX_NAMES = 4096
# Batch plans kept (one per class scanned); they start over when full.
MAX_PLANS = 64
# Values never looked into for a dataclass: tensors, numbers, strings, containers, enums.
_NEVER_HOLDERS = (torch.Tensor, int, float, complex, str, bytes, list, tuple, dict, set, enum.Enum)


class BatchPlan(NamedTuple):
    """How to read a namespace with these attribute names (in this order): the attributes
    with location names and their kind bits, and the attributes that may hold a dataclass."""

    names: tuple[str, ...]
    locations: tuple[tuple[str, int], ...]
    holders: tuple[str, ...]


class LocationNames:
    def __init__(self, swa_loc_pattern: str, batch_loc_names: tuple[str, ...]) -> None:
        self._swa = re.compile(swa_loc_pattern)
        self.batch_loc_names = batch_loc_names
        self.is_swa = functools.lru_cache(maxsize=MAX_NAMES)(self._is_swa)
        self._kinds: dict[str, int] = {}  # attribute name -> _BATCH_LOC | _SWA_LOC bits
        self._plans: dict[type, BatchPlan] = {}  # the last plan per class of namespace

    def _is_swa(self, name: str) -> bool:
        return self._swa.search(name.lstrip("_")) is not None

    def batch_locs(self, obj: object) -> list[torch.Tensor]:
        """The batch-location tensors held by ``obj`` or by a dataclass it holds."""
        return [
            value
            for _, name, value in attributes(obj)
            if isinstance(value, torch.Tensor) and name in self.batch_loc_names
        ]

    def scan_batch(self, obj: object) -> tuple[list[torch.Tensor], list[tuple[str, torch.Tensor]]]:
        """The batch-location tensors held by ``obj`` (or by a dataclass it holds), and its
        SWA-location tensors as ``(label, tensor)``.

        It runs on every forward, and a Python-level pass over a batch's attributes costs
        more than everything else a forward's checks do, so a namespace is read through a
        :class:`BatchPlan` made once per class and attribute names (checked on every scan
        as one tuple comparison in C): its attributes with location names, and those that
        may hold a dataclass to look into (the ones that held ``None`` or an instance of a
        class other than a tensor, number, string, container or enum when it was made)."""
        locs: list[torch.Tensor] = []
        swa: list[tuple[str, torch.Tensor]] = []
        namespace = getattr(obj, "__dict__", None)
        if namespace is not None:
            self._collect(type(obj), namespace, "", locs, swa, True)
        return locs, swa

    def _collect(
        self,
        cls: type,
        namespace: dict[str, Any],
        prefix: str,
        locs: list[torch.Tensor],
        swa: list[tuple[str, torch.Tensor]],
        outer: bool,
    ) -> None:
        names = tuple(namespace)
        plan = self._plans.get(cls)
        if plan is None or plan.names != names:
            plan = self._plan(cls, namespace, names)
        for name, kind in plan.locations:
            value = namespace[name]
            if isinstance(value, torch.Tensor):
                if kind & _BATCH_LOC:
                    locs.append(value)
                if kind & _SWA_LOC:
                    swa.append((prefix + name, value))
        if outer:
            for name in plan.holders:
                value = namespace[name]
                if value is not None and _is_dataclass_instance(value):
                    self._collect(type(value), vars(value), name + ".", locs, swa, False)

    def _plan(self, cls: type, namespace: dict[str, Any], names: tuple[str, ...]) -> BatchPlan:
        locations, holders = [], []
        for name, value in namespace.items():
            kind = self._kinds.get(name)
            if kind is None:
                kind = self._kind(name)
            if kind:
                locations.append((name, kind))
            elif not isinstance(value, _NEVER_HOLDERS):
                holders.append(name)
        plan = BatchPlan(names, tuple(locations), tuple(holders))
        if len(self._plans) >= MAX_PLANS:
            self._plans.clear()
        self._plans[cls] = plan
        return plan

    def plans(self) -> int:
        """Batch plans kept (at most ``MAX_PLANS``)."""
        return len(self._plans)

    def known_names(self) -> int:
        """Attribute names classified so far (at most ``MAX_NAMES``)."""
        return len(self._kinds)

    def _kind(self, name: str) -> int:
        kind = (_BATCH_LOC if name in self.batch_loc_names else 0) | (
            _SWA_LOC if self.is_swa(name) else 0
        )
        if len(self._kinds) < MAX_NAMES:
            self._kinds[name] = kind
        return kind

    def swa_params(self, fn: Callable[..., Any]) -> list[tuple[int | None, str]]:
        """``(positional index or None, name)`` of the SWA-location parameters of ``fn``."""
        return [(index, name) for index, name in parameters(fn) if self.is_swa(name)]


def parameters(fn: Callable[..., Any]) -> list[tuple[int | None, str]]:
    """``(positional index or None, name)`` of each named parameter of ``fn`` (``[]`` if its
    signature cannot be read)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    named = (*positional, inspect.Parameter.KEYWORD_ONLY)
    return [
        (index if p.kind in positional else None, p.name)
        for index, p in enumerate(params)
        if p.kind in named
    ]


_DATACLASS_TYPES: dict[type, bool] = {}


def _is_dataclass_instance(value: object) -> bool:
    cls = type(value)
    found = _DATACLASS_TYPES.get(cls)
    if found is None:
        found = hasattr(cls, "__dataclass_fields__") and not issubclass(cls, type)
        if len(_DATACLASS_TYPES) < MAX_NAMES:
            _DATACLASS_TYPES[cls] = found
    return found


def attributes(obj: object, into_dicts: bool = False) -> Iterator[tuple[str, str, Any]]:
    """``(label, name, value)`` of ``obj``'s attributes and of the dataclasses it holds;
    with ``into_dicts``, also of what the string-keyed dictionaries it holds map to
    (tensors, and the fields of dataclasses: a buffer registry's
    ``_slots["out_cache_loc"].buffer``, named by its key)."""
    namespace = getattr(obj, "__dict__", None)
    if namespace is None:
        return
    for name, value in list(namespace.items()):
        yield name, name, value
        if isinstance(value, torch.Tensor):
            continue
        if _is_dataclass_instance(value):
            for inner, inner_value in vars(value).items():
                yield f"{name}.{inner}", inner, inner_value
        elif into_dicts and type(value) is dict:
            for key, entry in list(value.items()):
                if not isinstance(key, str):
                    continue
                if isinstance(entry, torch.Tensor):
                    yield f"{name}[{key!r}]", key, entry
                elif _is_dataclass_instance(entry):
                    for inner, inner_value in vars(entry).items():
                        if isinstance(inner_value, torch.Tensor):
                            yield f"{name}[{key!r}].{inner}", key, inner_value


def _namespaces(value: object, into_dicts: bool) -> Iterator[dict[str, Any]]:
    """The namespaces under one attribute value that ``attributes`` reads."""
    if isinstance(value, torch.Tensor):
        return
    if _is_dataclass_instance(value):
        yield vars(value)
    elif into_dicts and type(value) is dict:
        yield value  # type: ignore[misc]
        for entry in value.values():  # type: ignore[attr-defined]
            if not isinstance(entry, torch.Tensor) and _is_dataclass_instance(entry):
                yield vars(entry)


class AttributeScan:
    """``(label, name, tensor)`` for the tensors of a long-lived object (see
    :func:`attributes`) that pass ``wanted(name, tensor)``.

    The scan is redone only when an attribute of the object or of one of those
    dataclasses was rebound, added or removed since the last one, so a graph runner's
    static buffers cost nothing to find again on every populate, and a buffer reallocated
    by the engine is still seen (compared by identity, a pointer comparison per value).
    """

    def __init__(
        self,
        obj: object,
        wanted: Callable[[str, torch.Tensor], bool],
        into_dicts: bool = False,
    ) -> None:
        self.obj = obj
        self.wanted = wanted
        self.into_dicts = into_dicts
        # Per namespace looked at: the namespace and its values at the last scan.
        self.snapshots: list[tuple[dict[str, Any], tuple[Any, ...]]] = []
        # The wanted tensors found by the last scan (a new list object on every scan).
        self.found: list[tuple[str, str, torch.Tensor]] = []
        self.rescan()

    def tensors(self) -> list[tuple[str, str, torch.Tensor]]:
        """The wanted tensors now (the same list object until a rescan)."""
        if not unchanged(self.snapshots):
            self.rescan()
        return self.found

    def snapshot_size(self) -> int:
        """Attribute values held to tell a rebinding (constant while the object is)."""
        return sum(len(values) for _, values in self.snapshots)

    def rescan(self) -> None:
        namespace = getattr(self.obj, "__dict__", None)
        self.snapshots = []
        if namespace is None:
            self.found = []
            return
        values = tuple(namespace.values())
        self.snapshots.append((namespace, values))
        for value in values:
            for inner in _namespaces(value, self.into_dicts):
                self.snapshots.append((inner, tuple(inner.values())))
        self.found = [
            (label, name, value)
            for label, name, value in attributes(self.obj, self.into_dicts)
            if isinstance(value, torch.Tensor) and self.wanted(name, value)
        ]


def unchanged(snapshots: list[tuple[dict[str, Any], tuple[Any, ...]]]) -> bool:
    """Whether every namespace still holds exactly the values snapshotted (by identity)."""
    for namespace, values in snapshots:
        if len(namespace) != len(values) or not all(map(operator.is_, namespace.values(), values)):
            return False
    return True


BATCH_PARAM = "forward_batch"


def batch_argument(args: tuple[Any, ...], kwargs: dict[str, Any]) -> object | None:
    """The forward batch a call was given: by name, else the first object argument."""
    if BATCH_PARAM in kwargs:
        return kwargs[BATCH_PARAM]
    for value in args:
        if hasattr(value, "__dict__") and not isinstance(value, type):
            return value
    return None


def argument(args: tuple[Any, ...], kwargs: dict[str, Any], index: int | None, name: str) -> Any:
    """The value passed for a parameter, positionally or by name (``None`` if absent)."""
    if name in kwargs:
        return kwargs[name]
    if index is not None and index < len(args):
        return args[index]
    return None


def span(t: torch.Tensor) -> Span:
    """The bytes ``t`` covers (at least one, so that an empty tensor still has a place)."""
    start = t.data_ptr()
    return (t.device, start, start + max(t.numel(), 1) * t.element_size())
