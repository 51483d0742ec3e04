"""The sanitizer's data model: what is watched, what each cached translation was computed
from, and which forward or capture run is in progress.

Checks compare the present against these records, so every record holds only
host-side facts (pointers, sizes, version counters, weak references): building
one never touches the device and is safe during CUDA-graph capture.
"""

from __future__ import annotations

import enum
import weakref
from dataclasses import dataclass, field

import torch
from torch.multiprocessing.reductions import StorageWeakRef


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
    return None if t.is_inference() else t._version


@dataclass(frozen=True)
class TensorIdentity:
    """Which tensor, at which contents: the same storage (a weak reference, so a freed
    and reallocated block never passes for the original), the same view into it, and
    the same in-place version."""

    storage: StorageWeakRef
    data_ptr: int
    numel: int
    dtype: torch.dtype
    version: int | None

    @classmethod
    def of(cls, t: torch.Tensor) -> TensorIdentity:
        return cls(
            StorageWeakRef(t.untyped_storage()), t.data_ptr(), t.numel(), t.dtype, tensor_version(t)
        )

    @property
    def key(self) -> tuple[int, int]:
        """The ``(data_ptr, numel)`` key a correct pool caches on (I2)."""
        return (self.data_ptr, self.numel)

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


@dataclass
class CacheEntry:
    """One memoised translation as the pool holds it: its key tensor, the mapping it was
    gathered from, the result handed out, and where and when it was filled."""

    key: TensorIdentity
    mapping: TensorIdentity
    result: weakref.ref[torch.Tensor]
    result_version: int | None
    fresh: bool
    scope_id: int
    site: str
    invalidated: bool = False
    # Kinds already reported against this entry: one missing invalidation, one report.
    reported: set[str] = field(default_factory=set)

    @property
    def live(self) -> bool:
        return not self.invalidated

    def serves(self, result: torch.Tensor) -> bool:
        """Whether ``result`` is this entry handed out again (a cache hit)."""
        return self.result() is result and tensor_version(result) == self.result_version


class ScopeKind(str, enum.Enum):
    IDLE = "idle"
    FORWARD = "forward"
    CAPTURE_RUN = "capture-run"


@dataclass
class Scope:
    """The forward or capture run in progress. Entries remember the scope id they were
    filled in, which is how I5/I6 (an entry from an earlier scope) and I7 (a key change
    within one scope) are told apart."""

    kind: ScopeKind = ScopeKind.IDLE
    scope_id: int = 0
    depth: int = 0
    dispatched: bool = False
    batch: object | None = None
    batch_locs: list[torch.Tensor] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.kind is not ScopeKind.IDLE
