"""Which tensors are SWA-space locations and which are the batch's own locations, by name.

SWA locations follow the linter's ``swa-loc-pattern`` (so ``out_cache_loc_swa`` and
``swa_loc`` are, ``full_to_swa_index_mapping`` is not); the batch's locations are the
attributes named in ``batch_loc_names`` (SGLang's ``out_cache_loc``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import torch


class LocationNames:
    def __init__(self, swa_loc_pattern: str, batch_loc_names: tuple[str, ...]) -> None:
        self._swa = re.compile(swa_loc_pattern)
        self.batch_loc_names = batch_loc_names
        self.is_swa = functools.lru_cache(maxsize=4096)(self._is_swa)

    def _is_swa(self, name: str) -> bool:
        return self._swa.search(name.lstrip("_")) is not None

    def swa_tensors(self, obj: object) -> Iterator[tuple[str, torch.Tensor]]:
        """``(name, tensor)`` for SWA-location tensors held by ``obj`` or by a dataclass it
        holds (graph runners keep their static buffers in one, e.g. ``DecodeInputBuffers``)."""
        for label, name, value in attributes(obj):
            if isinstance(value, torch.Tensor) and self.is_swa(name):
                yield label, value

    def batch_locs(self, obj: object) -> list[torch.Tensor]:
        """The batch-location tensors held by ``obj`` or by a dataclass it holds."""
        return [
            value
            for _, name, value in attributes(obj)
            if isinstance(value, torch.Tensor) and name in self.batch_loc_names
        ]

    def swa_params(self, fn: Callable[..., Any]) -> list[tuple[int | None, str]]:
        """``(positional index or None, name)`` of the SWA-location parameters of ``fn``."""
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            return []
        found = []
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for index, p in enumerate(params):
            if self.is_swa(p.name):
                found.append((index if p.kind in positional else None, p.name))
        return found


def attributes(obj: object) -> Iterator[tuple[str, str, Any]]:
    """``(label, name, value)`` of ``obj``'s attributes and of those of dataclasses it holds."""
    namespace = getattr(obj, "__dict__", None)
    if namespace is None:
        return
    for name, value in list(namespace.items()):
        yield name, name, value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            for inner, inner_value in vars(value).items():
                yield f"{name}.{inner}", inner, inner_value


def argument(args: tuple[Any, ...], kwargs: dict[str, Any], index: int | None, name: str) -> Any:
    """The value passed for a parameter, positionally or by name (``None`` if absent)."""
    if name in kwargs:
        return kwargs[name]
    if index is not None and index < len(args):
        return args[index]
    return None


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` starts inside ``b``'s memory (a view or slice of it)."""
    if a.device != b.device:
        return False
    start = b.data_ptr()
    return start <= a.data_ptr() < start + max(b.numel(), 1) * b.element_size()
