"""Violation kinds, the record of one violation, and one exception type per kind.

The kind strings are a stable interface: reports, JSON, pytest output and the
exception classes all use them, so users can grep and filter on them.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field
from typing import Any

UNINVALIDATED_MAPPING_WRITE = "uninvalidated-mapping-write"
STALE_TRANSLATION = "stale-translation"
SWA_LOC_DTYPE = "swa-loc-dtype"
PADDING_NOT_ZEROED = "padding-not-zeroed"
CAPTURE_CACHE_POLLUTION = "capture-cache-pollution"
FORWARD_WITHOUT_INVALIDATION = "forward-without-invalidation"
UNFLUSHED_FRESH_TRANSLATION = "unflushed-fresh-translation"
SWA_KV_CORRUPTION = "swa-kv-corruption"
SWA_LOC_MISTRANSLATED = "swa-loc-mistranslated"

KINDS: tuple[str, ...] = (
    UNINVALIDATED_MAPPING_WRITE,
    STALE_TRANSLATION,
    SWA_LOC_DTYPE,
    PADDING_NOT_ZEROED,
    CAPTURE_CACHE_POLLUTION,
    FORWARD_WITHOUT_INVALIDATION,
    UNFLUSHED_FRESH_TRANSLATION,
    SWA_LOC_MISTRANSLATED,
    SWA_KV_CORRUPTION,
)

INVARIANT_OF_KIND: dict[str, str] = {
    UNINVALIDATED_MAPPING_WRITE: "I1",
    STALE_TRANSLATION: "I2",
    SWA_LOC_DTYPE: "I3",
    PADDING_NOT_ZEROED: "I4",
    CAPTURE_CACHE_POLLUTION: "I5",
    FORWARD_WITHOUT_INVALIDATION: "I6",
    UNFLUSHED_FRESH_TRANSLATION: "I7",
    SWA_LOC_MISTRANSLATED: "I9",
    SWA_KV_CORRUPTION: "consequence",
}

# Each invariant in words, for reports that must stand on their own.
INVARIANT_TEXT: dict[str, str] = {
    "I1": "every write to the full->SWA mapping must be followed by an invalidation of the "
    "translation cache",
    "I2": "a cached translation may only be served for the very tensor, contents and mapping "
    "it was computed from",
    "I3": "SWA-space locations must have the SWA dtype where they are consumed",
    "I4": "a padded CUDA-graph batch must reset every location buffer's padded tail to the "
    "sentinel slot 0",
    "I5": "each graph warm-up/capture run must start with an invalidated translation cache",
    "I6": "every forward must invalidate the translation cache before it builds attention "
    "metadata or replays",
    "I7": "translating a freshly computed index tensor must be bracketed by invalidations",
    "I9": "at an SWA KV write, each live row's SWA location must be the translation of its "
    "full location under the current mapping, and each padded row the sentinel slot 0",
    "consequence": "a forward may write SWA KV only into the batch's own slots and the sentinel",
}

# How many offending values a violation keeps: enough to debug, small enough to print.
MAX_VALUES = 8


def current_rank() -> int | None:
    """This process's rank in torch.distributed's default group; ``None`` outside one.

    Looked up in ``sys.modules`` so that recording a violation never imports
    torch.distributed: a process that never imported it is in no group.
    """
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return int(dist.get_rank())


def plural(n: int, word: str) -> str:
    """``1 violation``, ``2 violations``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# A wrong row of a mistranslated SWA location: (row, full location, expected SWA
# location, actual SWA location).
Row = tuple[int, int, int, int]

# Rows (or slots) a picture keeps: enough to see the shape of a batch, small enough to keep.
MAX_PICTURE_ROWS = 64
# In a picture, a value that was not read or is not known.
UNKNOWN = -1


@dataclass(frozen=True)
class Picture:
    """What a failure report can draw of the write or buffer a violation is about.

    Rows (a KV write's or a location buffer's, from ``first_row`` on, at most
    ``MAX_PICTURE_ROWS``): per row the full location, the SWA location expected there and
    the one found (``UNKNOWN`` where not read); rows from ``raw`` on are padding. Slots (the
    consequence check): the SWA slots the forward was allowed to write (the batch's real
    slots and the sentinel) and those it wrote outside them."""

    label: str
    first_row: int = 0
    raw: int | None = None
    full: tuple[int, ...] = ()
    expected: tuple[int, ...] = ()
    actual: tuple[int, ...] = ()
    allowed: tuple[int, ...] = ()
    written: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "label": self.label,
            "first_row": self.first_row,
            "raw": self.raw,
            "full": list(self.full),
            "expected": list(self.expected),
            "actual": list(self.actual),
            "allowed": list(self.allowed),
            "written": list(self.written),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Picture:
        sequences = ("full", "expected", "actual", "allowed", "written")
        return cls(
            label=data["label"],
            first_row=data["first_row"],
            raw=data["raw"],
            **{key: tuple(data[key]) for key in sequences},
        )


@dataclass(frozen=True)
class Violation:
    """What one check concluded when it failed: the kind, where, and the evidence; in a
    distributed run also which rank saw it (a tensor-parallel rank has its own pools).
    ``rows``: for a mistranslation, the first wrong rows as (row, full location, expected
    SWA location, actual); ``picture``: the batch as a report draws it, where the check
    read it."""

    kind: str
    message: str
    site: str
    values: tuple[int, ...] = ()
    details: dict[str, object] = field(default_factory=dict)
    rank: int | None = field(default_factory=current_rank)
    rows: tuple[Row, ...] = ()
    picture: Picture | None = None

    @property
    def invariant(self) -> str:
        return INVARIANT_OF_KIND[self.kind]

    def headline(self) -> str:
        """The first line: the kind first (pytest's short summary keeps the start of a
        line at 80 columns), then what happened."""
        where = "" if self.rank is None else f" on rank {self.rank}"
        return f"{self.kind}{where}: {self.message}"

    def __str__(self) -> str:
        lines = [self.headline()]
        if self.values:
            lines[0] += f" [values: {', '.join(map(str, self.values))}]"
        if self.rows:
            lines.append(
                "  first wrong rows (row: full location -> expected SWA location, actual):"
            )
            lines += [
                f"    row {row}: {full} -> {expected}, actual {actual}"
                for row, full, expected, actual in self.rows
            ]
        lines.append(f"  at {self.site}")
        lines.append(f"  {self.invariant}: {INVARIANT_TEXT[self.invariant]}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "invariant": self.invariant,
            "message": self.message,
            "site": self.site,
            "values": list(self.values),
            "rows": [list(row) for row in self.rows],
            "details": {k: str(v) for k, v in self.details.items()},
            "rank": self.rank,
            "picture": None if self.picture is None else self.picture.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Violation:
        """The inverse of :meth:`to_dict` (details come back as strings): how a violation
        travels between ranks and out of a launched run."""
        return cls(
            kind=data["kind"],
            message=data["message"],
            site=data["site"],
            values=tuple(data["values"]),
            details=dict(data["details"]),
            rank=data["rank"],
            rows=tuple(tuple(row) for row in data.get("rows", ())),  # type: ignore[misc]
            picture=Picture.from_dict(data["picture"]) if data.get("picture") else None,
        )


class SWASanitizerError(Exception):
    """Base of every sanitizer exception; ``violation`` holds the evidence. The message
    leads with the violation kind."""

    kind: str = ""

    def __init__(self, violation: Violation) -> None:
        super().__init__(str(violation))
        self.violation = violation


class UninvalidatedMappingWriteError(SWASanitizerError):
    kind = UNINVALIDATED_MAPPING_WRITE


class StaleTranslationError(SWASanitizerError):
    kind = STALE_TRANSLATION


class SWALocDtypeError(SWASanitizerError):
    kind = SWA_LOC_DTYPE


class PaddingNotZeroedError(SWASanitizerError):
    kind = PADDING_NOT_ZEROED


class CaptureCachePollutionError(SWASanitizerError):
    kind = CAPTURE_CACHE_POLLUTION


class ForwardWithoutInvalidationError(SWASanitizerError):
    kind = FORWARD_WITHOUT_INVALIDATION


class UnflushedFreshTranslationError(SWASanitizerError):
    kind = UNFLUSHED_FRESH_TRANSLATION


class SWALocMistranslatedError(SWASanitizerError):
    kind = SWA_LOC_MISTRANSLATED


class SWAKVCorruptionError(SWASanitizerError):
    kind = SWA_KV_CORRUPTION


ERROR_BY_KIND: dict[str, type[SWASanitizerError]] = {
    cls.kind: cls
    for cls in (
        UninvalidatedMappingWriteError,
        StaleTranslationError,
        SWALocDtypeError,
        PaddingNotZeroedError,
        CaptureCachePollutionError,
        ForwardWithoutInvalidationError,
        UnflushedFreshTranslationError,
        SWALocMistranslatedError,
        SWAKVCorruptionError,
    )
}
# Shown as ``swacheck.runtime.PaddingNotZeroedError`` (where users import them from), not
# the defining module's longer path.
for _cls in (SWASanitizerError, *ERROR_BY_KIND.values()):
    _cls.__module__ = "swacheck.runtime"


def hide_from_traceback(excinfo: Any) -> bool:
    """pytest's ``__tracebackhide__`` protocol: the sanitizer's own frames are left out of
    the traceback of a violation (its report names where it happened), never out of
    that of any other error."""
    return bool(excinfo.errisinstance(SWASanitizerError))


_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__))


@functools.lru_cache(maxsize=1024)
def _is_internal(filename: str) -> bool:
    return os.path.dirname(os.path.abspath(filename)) == _RUNTIME_DIR


def call_site() -> str:
    """``path:line in function`` of the nearest frame outside the sanitizer itself."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if not _is_internal(code.co_filename):
            return f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"
        frame = frame.f_back
    return "<unknown>"
