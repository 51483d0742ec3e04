"""The sanitizer's data model: what is watched, what each cached translation was computed
from, and which forward or capture run is in progress.

Checks compare the present against these records, so every record holds only
host-side facts (pointers, sizes, version counters, weak references): building
one never touches the device and is safe during CUDA-graph capture. Records built
on every translation are plain ``__slots__`` classes: a frozen dataclass costs a
``object.__setattr__`` per field, paid on every decode step.
"""

from __future__ import annotations

import enum
import os
import sys
import weakref
from dataclasses import dataclass
from types import CodeType

import torch


class Role(str, enum.Enum):
    """What a watched object is, recognised by duck typing (see ``roles.py``)."""

    POOL = "pool"
    ALLOCATOR = "allocator"
    BACKEND = "backend"
    GRAPH_RUNNER = "graph-runner"
    MODEL_RUNNER = "model-runner"


@dataclass(frozen=True)
class Watched:
    role: Role
    label: str


def tensor_version(t: torch.Tensor) -> int | None:
    """The in-place version counter, or ``None`` for inference tensors (they keep none)."""
    try:
        return t._version
    except RuntimeError:  # "Inference tensors do not track version counter"
        return None


class StorageRef:
    """A weak reference to a tensor's storage: torch's ``StorageWeakRef`` without the
    attribute lookups that make it cost several times the reference itself."""

    __slots__ = ("cdata",)

    def __init__(self, t: torch.Tensor) -> None:
        self.cdata: int = t.untyped_storage()._weak_ref()

    def expired(self) -> bool:
        return torch.UntypedStorage._expired(self.cdata)

    def __del__(self, _free: object = torch.UntypedStorage._free_weak_ref) -> None:
        # ``_free`` is bound at definition: module globals may be gone at interpreter exit.
        _free(self.cdata)  # type: ignore[operator]


_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__))
# Code objects classified by :func:`caller` (inside the sanitizer or not), at most.
MAX_CODES = 4096
_INTERNAL: dict[CodeType, bool] = {}


def site_codes() -> int:
    """Code objects classified so far by :func:`caller` (at most ``MAX_CODES``)."""
    return len(_INTERNAL)


def caller() -> tuple[CodeType | None, int]:
    """Code and line of the nearest frame outside the sanitizer: where a record is made,
    kept raw and spelled (like ``violations.call_site``) only when a message needs it."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        internal = _INTERNAL.get(code)
        if internal is None:
            internal = os.path.dirname(os.path.abspath(code.co_filename)) == _RUNTIME_DIR
            if len(_INTERNAL) < MAX_CODES:
                _INTERNAL[code] = internal
        if not internal:
            return code, frame.f_lineno
        frame = frame.f_back
    return None, 0


class TensorIdentity:
    """Which tensor, at which contents: the same storage (a weak reference, so a freed
    and reallocated block never passes for the original), the same view into it, and
    the same in-place version. Never mutated after construction."""

    __slots__ = ("data_ptr", "dtype", "numel", "storage", "version")

    def __init__(
        self,
        storage: StorageRef,
        data_ptr: int,
        numel: int,
        dtype: torch.dtype,
        version: int | None,
    ) -> None:
        self.storage = storage
        self.data_ptr = data_ptr
        self.numel = numel
        self.dtype = dtype
        self.version = version

    @classmethod
    def of(cls, t: torch.Tensor, storage: StorageRef | None = None) -> TensorIdentity:
        """``t`` as it is now; ``storage`` reuses a weak reference already taken to ``t``'s
        storage."""
        return cls(
            storage or StorageRef(t),
            t.data_ptr(),
            t.numel(),
            t.dtype,
            tensor_version(t),
        )

    def difference(self, t: torch.Tensor) -> str | None:
        """Why ``t`` is not this tensor with these contents, or ``None`` if it is."""
        if self.storage.expired():
            return "the tensor it was computed from has been freed"
        if t.untyped_storage()._cdata != self.storage.cdata:
            return "it was computed from a different storage"
        if t.data_ptr() != self.data_ptr:
            return f"it was computed from another view (offset {self.data_ptr - t.data_ptr():+d} B)"
        if t.numel() != self.numel:
            return f"it was computed from {self.numel} elements, not {t.numel()}"
        if t.dtype != self.dtype:
            return f"it was computed from a {self.dtype} tensor, not {t.dtype}"
        version = tensor_version(t)
        if version is not None and self.version is not None and version != self.version:
            return f"the tensor was written in place since (version {self.version} -> {version})"
        return None


class CacheEntry:
    """One memoised translation as the pool holds it: its key tensor, the mapping it was
    gathered from, the result handed out, and where and when it was filled."""

    __slots__ = (
        "fresh",
        "invalidated",
        "key",
        "mapping",
        "reported",
        "result",
        "result_version",
        "scope_id",
        "site_code",
        "site_line",
    )

    def __init__(
        self,
        key: TensorIdentity,
        mapping: TensorIdentity,
        result: weakref.ref[torch.Tensor],
        result_version: int | None,
        fresh: bool,
        scope_id: int,
        site: tuple[CodeType | None, int],
    ) -> None:
        self.key = key
        self.mapping = mapping
        self.result = result
        self.result_version = result_version
        self.fresh = fresh
        self.scope_id = scope_id
        self.site_code, self.site_line = site
        self.invalidated = False
        # Kinds already reported against this entry: one missing invalidation, one report.
        self.reported: set[str] = set()

    @property
    def site(self) -> str:
        """Where the entry was filled, as ``path:line in function``."""
        code = self.site_code
        if code is None:
            return "<unknown>"
        return f"{code.co_filename}:{self.site_line} in {code.co_name}"

    def serves(self, result: torch.Tensor) -> bool:
        """Whether ``result`` is this entry handed out again (a cache hit)."""
        return self.result() is result and tensor_version(result) == self.result_version


class ScopeKind(str, enum.Enum):
    IDLE = "idle"
    FORWARD = "forward"
    CAPTURE_RUN = "capture-run"


class Scope:
    """The forward or capture run in progress. Entries remember the scope id they were
    filled in, which is how I5/I6 (an entry from an earlier scope) and I7 (a key change
    within one scope) are told apart. ``batch_spans`` are the batch's location tensors
    as ``(device, first byte, end byte)``, for telling its own translations from fresh ones.
    """

    __slots__ = ("active", "batch_spans", "depth", "dispatched", "kind", "scope_id")

    def __init__(
        self,
        kind: ScopeKind = ScopeKind.IDLE,
        scope_id: int = 0,
        depth: int = 0,
        batch_spans: tuple[tuple[torch.device, int, int], ...] = (),
    ) -> None:
        self.kind = kind
        self.scope_id = scope_id
        self.depth = depth
        self.dispatched = False
        self.batch_spans = batch_spans
        self.active = kind is not ScopeKind.IDLE


# Between scopes: never mutated (only active scopes are dispatched or nested), so one will do.
IDLE = Scope()
