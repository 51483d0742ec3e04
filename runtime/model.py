"""The sanitizer's data model: what is watched, what each cached translation was computed
from, and which forward or capture run is in progress.

Checks compare the present against these records, so every record holds only
host-side facts (pointers, sizes, version counters, weak references): building
one never touches the device and is safe during CUDA-graph capture. The record built
on every translation, :class:`CacheEntry`, is an immutable tuple made in C: no
Python-level constructor or destructor runs on a decode step.
"""

from __future__ import annotations

import enum
import os
import sys
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import CodeType
from typing import NamedTuple

import torch


class Role(str, enum.Enum):
    """What a watched object is, recognised by duck typing (see ``roles.py``)."""

    POOL = "pool"
    ALLOCATOR = "allocator"
    BACKEND = "backend"
    GRAPH_RUNNER = "graph-runner"
    # A graph runner's static input buffers, filled from each batch by a populate method.
    INPUT_BUFFERS = "input-buffers"
    MODEL_RUNNER = "model-runner"


# How a pool may be declared to cache translations (``cache-model``; ``auto``: observed).
NO_CACHE = "none"
MEMOISING = "memoising"
ATTRIBUTE = "attribute"


@dataclass(frozen=True)
class CacheModel:
    """How a pool caches translations, and so which cache checks apply to it: a memoising
    translate method (it hands back the same tensor for the same key: I1, I2, I5, I6, I7),
    attributes it keeps translations in and reads back later (a read after a mapping
    change is stale: I2), both, or neither (no cache checks at all). ``how`` says why."""

    memoising: bool
    attributes: tuple[str, ...]
    how: str

    @property
    def kind(self) -> str:
        parts = ["memoising translate"] if self.memoising else []
        if self.attributes:
            parts.append(f"attribute cache ({', '.join(self.attributes)})")
        return " + ".join(parts) or "no cache"

    @property
    def has_cache(self) -> bool:
        return self.memoising or bool(self.attributes)


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
    """A weak reference to a tensor's storage, for a torch that does not keep one Python
    object per storage (see ``storage_ref``): torch's ``StorageWeakRef`` without the
    attribute lookups that make it cost several times the reference itself. Called, it
    gives a token for the storage (``None`` once it has been freed)."""

    __slots__ = ("cdata",)

    def __init__(self, t: torch.Tensor) -> None:
        self.cdata: int = t.untyped_storage()._weak_ref()

    def __call__(self) -> int | None:
        return None if torch.UntypedStorage._expired(self.cdata) else self.cdata

    def __del__(self, _free: object = torch.UntypedStorage._free_weak_ref) -> None:
        # ``_free`` is bound at definition: module globals may be gone at interpreter exit.
        _free(self.cdata)  # type: ignore[operator]


def _storage_objects_preserved() -> bool:
    """Whether torch keeps a storage's Python object alive exactly as long as the storage
    (PyObject preservation, torch >= 2.1): then a plain weak reference to that object is
    a weak reference to the storage, and ``untyped_storage()`` returns that very object."""
    t = torch.empty(2)
    ref = weakref.ref(t.untyped_storage())
    kept = ref() is not None and ref() is t[1:].untyped_storage()
    del t
    return kept and ref() is None


STORAGE_OBJECTS_PRESERVED = _storage_objects_preserved()

# A weak reference to ``t``'s storage, called for a token of it (``None`` once freed), and
# whether a live tensor's storage is the one a token stands for. The plain weak reference
# costs no Python-level constructor or destructor: one is taken on every cache miss.
StorageWeakRef = Callable[[], object]
if STORAGE_OBJECTS_PRESERVED:

    def storage_ref(t: torch.Tensor) -> StorageWeakRef:
        return weakref.ref(t.untyped_storage())

    def same_storage(token: object, t: torch.Tensor) -> bool:
        return t.untyped_storage() is token

else:  # pragma: no cover - torch before 2.1
    storage_ref = StorageRef

    def same_storage(token: object, t: torch.Tensor) -> bool:
        return t.untyped_storage()._cdata == token


def difference(
    storage: StorageWeakRef,
    data_ptr: int,
    numel: int,
    dtype: torch.dtype,
    version: int | None,
    t: torch.Tensor,
) -> str | None:
    """Why ``t`` is not the tensor with these facts, at this version (``None``: no
    version to compare), or ``None`` if it is."""
    token = storage()
    if token is None:
        return "the tensor it was computed from has been freed"
    if not same_storage(token, t):
        return "it was computed from a different storage"
    if t.data_ptr() != data_ptr:
        return f"it was computed from another view (offset {data_ptr - t.data_ptr():+d} B)"
    if t.numel() != numel:
        return f"it was computed from {numel} elements, not {t.numel()}"
    if t.dtype != dtype:
        return f"it was computed from a {dtype} tensor, not {t.dtype}"
    now = tensor_version(t)
    if now is not None and version is not None and now != version:
        return f"the tensor was written in place since (version {version} -> {now})"
    return None


# Source files classified by :func:`caller` (inside the sanitizer or not), at most.
_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__))
MAX_CODES = 4096
INTERNAL_FILES: dict[str, bool] = {}


def site_codes() -> int:
    """Source files classified so far by :func:`caller` (at most ``MAX_CODES``)."""
    return len(INTERNAL_FILES)


def caller() -> tuple[CodeType | None, int]:
    """Code and instruction offset of the nearest frame outside the sanitizer: where a
    record is made, kept raw and spelled (:func:`site_of`) only when a message needs it.
    Frames are told apart by file name (a string keeps its hash; a code object's is
    recomputed from its contents on every lookup), and the line is left to ``site_of``
    (``f_lineno`` walks the line table)."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename
        internal = INTERNAL_FILES.get(filename)
        if internal is None:
            internal = os.path.dirname(os.path.abspath(filename)) == _RUNTIME_DIR
            if len(INTERNAL_FILES) < MAX_CODES:
                INTERNAL_FILES[filename] = internal
        if not internal:
            return code, frame.f_lasti
        frame = frame.f_back
    return None, 0


def site_of(code: CodeType | None, offset: int) -> str:
    """``path:line in function`` for what :func:`caller` returned."""
    if code is None:
        return "<unknown>"
    line = next((ln for start, end, ln in code.co_lines() if start <= offset < end), None)
    return (
        f"{code.co_filename}:{line if line is not None else code.co_firstlineno} in {code.co_name}"
    )


class TensorIdentity:
    """Which tensor: the same storage (a weak reference, so a freed and reallocated block
    never passes for the original) and the same view into it. Its contents at some moment
    are this identity plus the version counter then (kept by whoever records them)."""

    __slots__ = ("data_ptr", "dtype", "numel", "storage")

    def __init__(self, t: torch.Tensor) -> None:
        self.storage = storage_ref(t)
        self.data_ptr = t.data_ptr()
        self.numel = t.numel()
        self.dtype = t.dtype

    def difference(self, t: torch.Tensor, version: int | None) -> str | None:
        """Why ``t`` is not this tensor at ``version``, or ``None`` if it is."""
        return difference(self.storage, self.data_ptr, self.numel, self.dtype, version, t)


class CacheEntry(NamedTuple):
    """One memoised translation as the pool holds it: its key tensor (storage, view,
    version), the mapping it was gathered from (and its version), the result handed out
    (and its version), and where and in which scope it was filled.

    Immutable and built on every cache miss (twice a decode step): a tuple, made with
    ``tuple.__new__(CacheEntry, fields)`` (no Python-level constructor or destructor).
    What changes afterwards, whether an invalidation followed it and which kinds were
    reported against it, the pool's watch keeps."""

    key_storage: StorageWeakRef
    key_ptr: int
    key_numel: int
    key_dtype: torch.dtype
    key_version: int | None
    mapping: TensorIdentity
    mapping_version: int | None
    result: weakref.ref[torch.Tensor]
    result_version: int | None
    in_kv_write: bool  # translated inside set_kv_buffer (then never a fresh tensor's, I7)
    scope_id: int
    site_code: CodeType | None
    site_offset: int

    def key_difference(self, t: torch.Tensor) -> str | None:
        """Why ``t`` is not the key this entry was filled for, or ``None`` if it is."""
        return difference(
            self.key_storage, self.key_ptr, self.key_numel, self.key_dtype, self.key_version, t
        )

    def mapping_difference(self, mapping: torch.Tensor) -> str | None:
        """Why ``mapping`` is not the mapping this entry was gathered from, as it was."""
        return self.mapping.difference(mapping, self.mapping_version)

    @property
    def site(self) -> str:
        """Where the entry was filled, as ``path:line in function``."""
        return site_of(self.site_code, self.site_offset)


NOTHING_REPORTED: frozenset[str] = frozenset()


class ScopeKind(str, enum.Enum):
    IDLE = "idle"
    FORWARD = "forward"
    CAPTURE_RUN = "capture-run"


class Scope:
    """The forward or capture run in progress. Entries remember the scope id they were
    filled in, which is how I5/I6 (an entry from an earlier scope) and I7 (a key change
    within one scope) are told apart. ``locs`` are the batch's location tensors (held
    for the scope only) and ``spans``, once a check asked (``Sanitizer.own_spans``),
    where they lie as ``(device, first byte, end byte)``, for telling the batch's own
    translations from fresh ones.

    Each sanitizer has one idle scope (``active`` false) for the time between scopes,
    never dispatched or nested, and one active scope object that every scope reuses.
    """

    __slots__ = ("active", "depth", "dispatched", "kind", "locs", "scope_id", "spans")

    def __init__(
        self,
        kind: ScopeKind = ScopeKind.IDLE,
        scope_id: int = 0,
        depth: int = 0,
        spans: tuple[tuple[torch.device, int, int], ...] | None = None,
    ) -> None:
        self.kind = kind
        self.scope_id = scope_id
        self.depth = depth
        self.dispatched = False
        self.locs: Sequence[torch.Tensor] = ()
        self.spans = spans
        self.active = kind is not ScopeKind.IDLE
