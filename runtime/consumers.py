"""Where SWA locations are consumed, and their dtype checked there (I3).

An int64 index breaks a kernel where the kernel takes it, so the dtype contract is
checked at the consumers, by value, whatever the tensor is called:

- a pool's KV writes (``kv-write-methods``, SGLang's ``set_kv_buffer``): arguments whose
  parameter name is an SWA location (``out_cache_loc_swa``), and the SWA-location fields
  of a location holder passed for a location parameter (SGLang's ``loc_info``, a
  ``KVWriteLoc`` whose ``swa_loc`` is checked);
- the KV writes of the pool's SWA sub-pool (an object attribute of the pool named with
  the word ``swa``, such as ``swa_kv_pool``): every location it is given is an SWA
  location, whatever the caller called it (``set_kv_buffer(layer, loc, ...)``).

The graph runners' static buffers and the batch's SWA fields are checked by
``graph_watch`` and ``checks``; a translation's own result only where
``check-translate-dtype`` asks (engines that translate to int64 and cast at the
consumer are correct).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from . import violations as V
from .checks import Checks
from .locations import argument, parameters

# Left out of a violation's pytest traceback (``violations.hide_from_traceback``).
__tracebackhide__ = V.hide_from_traceback

# The word that makes a parameter or field a location (``loc``, ``loc_info``, ``raw_loc``).
LOCATION_WORD = "loc"
SWA_WORD = "swa"
# Values never looked into for SWA-location fields.
_PLAIN = (torch.Tensor, int, float, str, bytes, bool, list, tuple, dict, set, type(None))

# A KV write's full location and the SWA location it was handed (each ``None`` if absent).
WritePair = tuple["torch.Tensor | None", "torch.Tensor | None"]
ArgumentCheck = Callable[[tuple[Any, ...], dict[str, Any]], WritePair]


def words(name: str) -> list[str]:
    return name.strip("_").split("_")


def pool_write_check(checks: Checks, original: Callable[..., Any], what: str) -> ArgumentCheck:
    """Checks of one call of a pool's KV write: the dtype of its SWA-named tensor
    arguments and of the SWA-location fields of a holder passed for a location parameter
    (``loc_info``), as write indices; returns the full location and the SWA location the
    call was handed (for I9, ``translation.py``). Which parameters those are is worked
    out here, once."""
    names = checks.names
    swa_params = names.swa_params(original)
    locations = [
        (index, name)
        for index, name in parameters(original)
        if LOCATION_WORD in words(name) and (index, name) not in swa_params
    ]

    def check(args: tuple[Any, ...], kwargs: dict[str, Any]) -> WritePair:
        # ``locations.argument``, inlined: this runs on every KV write of an eager forward.
        n = len(args)
        full = swa = None
        for index, name in swa_params:
            if name in kwargs:
                value = kwargs[name]
            elif index is not None and index < n:
                value = args[index]
            else:
                continue
            if isinstance(value, torch.Tensor):
                swa = value
                # ``checks.check_dtype``, inlined: the message is built only on a failure.
                allowed = checks.write_dtypes
                if allowed is None:
                    checks.check_dtype(value, f"{what}({name}=...)")
                else:
                    checks.dtype_checks += 1
                    if value.dtype not in allowed:
                        checks.flag_dtype(value, f"{what}({name}=...)")
        for index, name in locations:
            if name in kwargs:
                value = kwargs[name]
            elif index is not None and index < n:
                value = args[index]
            else:
                continue
            if isinstance(value, torch.Tensor):
                if full is None:
                    full = value
            elif not isinstance(value, _PLAIN) and hasattr(value, "__dict__"):
                for field, tensor in names.scan_batch(value)[1]:
                    swa = tensor
                    checks.check_dtype(tensor, f"{what}({name}={type(value).__name__}.{field})")
                if full is None:
                    full = _full_field(value)
        return full, swa

    return check


def _full_field(holder: object) -> torch.Tensor | None:
    """The full location a location holder carries (``KVWriteLoc.loc``): its first tensor
    field named with the word ``loc`` and not ``swa``."""
    for field, value in vars(holder).items():
        parts = words(field)
        if isinstance(value, torch.Tensor) and LOCATION_WORD in parts and SWA_WORD not in parts:
            return value
    return None


def swa_subpools(pool: object) -> list[tuple[str, object]]:
    """``(attribute, sub-pool)``: the objects a pool holds under a name with the word
    ``swa`` (not a mapping), such as SGLang's ``swa_kv_pool``."""
    found = []
    for name, value in list(getattr(pool, "__dict__", {}).items()):
        parts = words(name)
        if SWA_WORD not in parts or "mapping" in parts or isinstance(value, _PLAIN):
            continue
        if hasattr(value, "__dict__") and not isinstance(value, type):
            found.append((name, value))
    return found


def install_subpool_writes(
    checks: Checks, pool: object, label: str, written: Callable[[torch.Tensor], None]
) -> int:
    """Wrap the KV writes of ``pool``'s SWA sub-pools; how many were wrapped. ``written``
    is told the SWA location each write receives (the one the pool's write really used)."""
    wrapped = 0
    for attribute, sub in swa_subpools(pool):
        for name in checks.config.kv_write_methods:
            if callable(getattr(sub, name, None)):
                what = f"{label}.{attribute}.{name}"
                checks.patcher.wrap_method(
                    sub,
                    name,
                    lambda original, what=what: _subpool_write(checks, original, what, written),
                )
                wrapped += 1
    return wrapped


def _subpool_write(
    checks: Checks,
    original: Callable[..., Any],
    what: str,
    written: Callable[[torch.Tensor], None],
) -> Callable[..., Any]:
    """A KV write into an SWA sub-pool: its location argument is an SWA write index."""
    location = next(
        ((index, name) for index, name in parameters(original) if LOCATION_WORD in words(name)),
        None,
    )
    if location is None:
        return original
    index, name = location

    def write(*args: Any, **kwargs: Any) -> Any:
        value = argument(args, kwargs, index, name)
        if isinstance(value, torch.Tensor):
            checks.check_dtype(value, f"{what}({name}=...), an SWA location")
            written(value)  # before the write: a wrong location is reported first
        elif value is not None and not isinstance(value, _PLAIN):
            for field, tensor in vars(value).items():
                if isinstance(tensor, torch.Tensor) and LOCATION_WORD in words(field):
                    checks.check_dtype(tensor, f"{what}({name}.{field}), an SWA location")
                    if SWA_WORD in words(field):
                        written(tensor)
        return original(*args, **kwargs)

    return write
