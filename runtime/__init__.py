"""swacheck's runtime sanitizer: wraps live SWA pools, attention backends, CUDA-graph
runners and model runners by duck typing, and checks the SWA-cache invariants on every
real forward.

    from swacheck.runtime import Sanitizer
    with Sanitizer(level="fast", action="raise") as san:
        san.watch(pool)
        ...
        print(san.report().to_text())
"""

from .model import Role
from .report import SanitizerReport
from .sanitizer import ACTIONS, LEVELS, Sanitizer
from .violations import (
    CAPTURE_CACHE_POLLUTION,
    ERROR_BY_KIND,
    FORWARD_WITHOUT_INVALIDATION,
    KINDS,
    PADDING_NOT_ZEROED,
    STALE_TRANSLATION,
    SWA_KV_CORRUPTION,
    SWA_LOC_DTYPE,
    SWA_LOC_MISTRANSLATED,
    UNFLUSHED_FRESH_TRANSLATION,
    UNINVALIDATED_MAPPING_WRITE,
    CaptureCachePollutionError,
    ForwardWithoutInvalidationError,
    PaddingNotZeroedError,
    StaleTranslationError,
    SWAKVCorruptionError,
    SWALocDtypeError,
    SWALocMistranslatedError,
    SWASanitizerError,
    UnflushedFreshTranslationError,
    UninvalidatedMappingWriteError,
    Violation,
)

__all__ = [
    "ACTIONS",
    "CAPTURE_CACHE_POLLUTION",
    "ERROR_BY_KIND",
    "FORWARD_WITHOUT_INVALIDATION",
    "KINDS",
    "LEVELS",
    "PADDING_NOT_ZEROED",
    "STALE_TRANSLATION",
    "SWA_KV_CORRUPTION",
    "SWA_LOC_DTYPE",
    "SWA_LOC_MISTRANSLATED",
    "UNFLUSHED_FRESH_TRANSLATION",
    "UNINVALIDATED_MAPPING_WRITE",
    "CaptureCachePollutionError",
    "ForwardWithoutInvalidationError",
    "PaddingNotZeroedError",
    "Role",
    "SWAKVCorruptionError",
    "SWALocDtypeError",
    "SWALocMistranslatedError",
    "SWASanitizerError",
    "Sanitizer",
    "SanitizerReport",
    "StaleTranslationError",
    "UnflushedFreshTranslationError",
    "UninvalidatedMappingWriteError",
    "Violation",
]
