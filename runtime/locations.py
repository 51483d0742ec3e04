"""Which tensors are SWA-space locations and which are the batch's own locations, by name.

SWA locations follow the linter's ``swa-loc-pattern`` (so ``out_cache_loc_swa`` and
``swa_loc`` are, ``full_to_swa_index_mapping`` is not); the batch's locations are the
attributes named in ``batch_loc_names`` (SGLang's ``out_cache_loc``).

Scans run on every forward, so they are written for speed: one pass over a batch finds
both kinds, and long-lived objects (graph runners, their input buffers) are rescanned
only when one of their attributes was rebound (:class:`AttributeScan`).
"""

from __future__ import annotations

import functools
import inspect
import operator
import re
from collections.abc import Callable, Iterator
from typing import Any

import torch

# Where a tensor lies: (device, first byte, one past its last byte).
Span = tuple[torch.device, int, int]

# What an attribute name says a tensor is (bits); names remembered, at most.
_BATCH_LOC = 1
_SWA_LOC = 2
MAX_NAMES = 4096


class LocationNames:
    def __init__(self, swa_loc_pattern: str, batch_loc_names: tuple[str, ...]) -> None:
        self._swa = re.compile(swa_loc_pattern)
        self.batch_loc_names = batch_loc_names
        self.is_swa = functools.lru_cache(maxsize=MAX_NAMES)(self._is_swa)
        self._kinds: dict[str, int] = {}  # attribute name -> _BATCH_LOC | _SWA_LOC bits

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
        SWA-location tensors as ``(label, tensor)``, in one pass: it runs on every forward,
        so names are classified once and only non-tensor values asked for dataclass-ness."""
        locs: list[torch.Tensor] = []
        swa: list[tuple[str, torch.Tensor]] = []
        namespace = getattr(obj, "__dict__", None)
        if namespace is None:
            return locs, swa
        kinds, dataclass_types = self._kinds, _DATACLASS_TYPES
        tensor = torch.Tensor
        for name, value in namespace.items():
            if isinstance(value, tensor):
                kind = kinds.get(name)
                if kind is None:
                    kind = self._kind(name)
                if kind & _BATCH_LOC:
                    locs.append(value)
                if kind & _SWA_LOC:
                    swa.append((name, value))
            elif dataclass_types.get(type(value), True) and _is_dataclass_instance(value):
                for inner, inner_value in vars(value).items():
                    if isinstance(inner_value, torch.Tensor):
                        kind = kinds.get(inner)
                        if kind is None:
                            kind = self._kind(inner)
                        if kind & _BATCH_LOC:
                            locs.append(inner_value)
                        if kind & _SWA_LOC:
                            swa.append((f"{name}.{inner}", inner_value))
        return locs, swa

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


def attributes(obj: object) -> Iterator[tuple[str, str, Any]]:
    """``(label, name, value)`` of ``obj``'s attributes and of those of dataclasses it holds."""
    namespace = getattr(obj, "__dict__", None)
    if namespace is None:
        return
    for name, value in list(namespace.items()):
        yield name, name, value
        if not isinstance(value, torch.Tensor) and _is_dataclass_instance(value):
            for inner, inner_value in vars(value).items():
                yield f"{name}.{inner}", inner, inner_value


class AttributeScan:
    """``(label, name, tensor)`` for the tensor attributes of a long-lived object (and of
    the dataclasses it holds) that pass ``wanted(name, tensor)``.

    The scan is redone only when an attribute of the object or of one of those
    dataclasses was rebound, added or removed since the last one (compared by identity,
    a few pointer comparisons), so a graph runner's static buffers cost nothing to find
    again on every populate, and a buffer reallocated by the engine is still seen.
    """

    def __init__(self, obj: object, wanted: Callable[[str, torch.Tensor], bool]) -> None:
        self.obj = obj
        self.wanted = wanted
        self._snapshots: list[tuple[dict[str, Any], tuple[Any, ...]]] = []
        self._found: list[tuple[str, str, torch.Tensor]] = []
        self._scan()

    def tensors(self) -> list[tuple[str, str, torch.Tensor]]:
        for namespace, values in self._snapshots:
            if len(namespace) != len(values) or not all(
                map(operator.is_, namespace.values(), values)
            ):
                self._scan()
                break
        return self._found

    def snapshot_size(self) -> int:
        """Attribute values held to tell a rebinding (constant while the object is)."""
        return sum(len(values) for _, values in self._snapshots)

    def _scan(self) -> None:
        namespace = getattr(self.obj, "__dict__", None)
        self._snapshots = []
        if namespace is None:
            self._found = []
            return
        self._snapshots.append((namespace, tuple(namespace.values())))
        for value in namespace.values():
            if not isinstance(value, torch.Tensor) and _is_dataclass_instance(value):
                inner = vars(value)
                self._snapshots.append((inner, tuple(inner.values())))
        self._found = [
            (label, name, value)
            for label, name, value in attributes(self.obj)
            if isinstance(value, torch.Tensor) and self.wanted(name, value)
        ]


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


def starts_in(t: torch.Tensor, spans: tuple[Span, ...] | list[Span]) -> bool:
    """Whether ``t`` starts inside one of ``spans`` (a view or slice of that tensor)."""
    if not spans:
        return False
    pointer = t.data_ptr()
    device = None
    for where, start, end in spans:
        if start <= pointer < end:
            device = device or t.device
            if device == where:
                return True
    return False
