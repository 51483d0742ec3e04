"""Every candidate file's first-pass result, kept across calls: in memory, in the
project's facts entry of the cache, or beside it.

A call on one changed file of a large project needs the facts of all its other files.
Reading them from thousands of entries costs more than the call may take, so the whole
project's facts are one cache entry (read once per workspace). Rewriting that entry on
every call that changes one file would cost as much again, so facts computed since it
was written are kept beside it, one entry per file version, until more than
:data:`OVERLAY_FILES` (or :data:`OVERLAY_SHARE` of the project) are; then it is
rewritten. A record is valid for one version of a file's bytes (its digest) under one
*profile* (regions or whole file, and the rules whose facts were collected).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from swacheck.engine.cache import ResultCache

OVERLAY_FILES = 16
OVERLAY_SHARE = 0.05


@dataclass(frozen=True)
class FactsRecord:
    digest: str
    profile: str
    # ModuleFacts, or the SWA999 finding of a file that does not parse.
    facts: Any
    facts_digest: str

    def same_as(self, other: FactsRecord | None) -> bool:
        return (
            other is not None
            and other.digest == self.digest
            and other.profile == self.profile
            and other.facts_digest == self.facts_digest
        )


class FactsStore:
    def __init__(self, cache: ResultCache | None, scope: str) -> None:
        self._cache = cache
        self._scope = scope
        self._memory: dict[str, FactsRecord] = {}
        self._stored: dict[str, FactsRecord] | None = None

    def _entry_key(self) -> str:
        assert self._cache is not None
        return self._cache.key("project-facts", b"", self._scope)

    def _overlay_key(self, key: str, digest: str, profile: str) -> str:
        assert self._cache is not None
        return self._cache.key("facts", b"", f"{key}\0{digest}\0{profile}")

    def _entry(self) -> dict[str, FactsRecord]:
        if self._stored is None:
            hit = self._cache.get(self._entry_key()) if self._cache is not None else None
            self._stored = hit if isinstance(hit, dict) else {}
        return self._stored

    def get(self, key: str, digest: str, profile: str) -> FactsRecord | None:
        """The record of ``key``'s version ``digest`` under ``profile``, if kept."""
        record = self._memory.get(key)
        if record is None or record.digest != digest or record.profile != profile:
            record = self._entry().get(key)
        if record is None or record.digest != digest or record.profile != profile:
            if self._cache is None:
                return None
            hit = self._cache.get(self._overlay_key(key, digest, profile))
            record = hit if isinstance(hit, FactsRecord) else None
        if record is not None:
            self._memory[key] = record
        return record

    def put(self, records: dict[str, FactsRecord], new: list[str]) -> None:
        """Remember ``records`` (every candidate's), of which ``new`` were computed now."""
        for key in new:
            if key in records:
                self._memory[key] = records[key]
        if self._cache is None or self._cache.read_only:
            return
        stored = self._entry()
        behind = sum(1 for key, record in records.items() if not record.same_as(stored.get(key)))
        if behind > max(OVERLAY_FILES, OVERLAY_SHARE * len(records)):
            self._stored = dict(records)
            self._cache.put(self._entry_key(), self._stored)
            return
        for key in new:
            record = records.get(key)
            if record is not None:
                self._cache.put(self._overlay_key(key, record.digest, record.profile), record)
