"""Every candidate file's first-pass result, kept across calls: in memory, in the
project's facts entry of the cache, or beside it.

A call on one changed file of a large project needs the facts of all its other files.
Reading them from thousands of entries costs more than the call may take, so the whole
project's facts are one cache entry (read once per workspace). Rewriting that entry on
every call that changes one file would cost as much again, so facts computed since it
was written are kept beside it, one entry per file version, until more than
:data:`OVERLAY_FILES` (or :data:`OVERLAY_SHARE` of the project) are; then it is
rewritten. A record is valid for one version of a file's bytes (its digest) under the
*profile* it was collected for (regions or whole file, and the rules whose facts were
collected) and any profile it covers (:func:`covers`): a narrower ``select`` reuses the
facts of a wider one. A record that is an SWA999 finding is valid under the bounds
(``max-file-size``, ``max-file-time``) it was found under only; facts do not depend on
them (a file analysed once costs nothing more under a tighter bound).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

from swacheck.engine.cache import ResultCache, facts_digest
from swacheck.finding import Finding

OVERLAY_FILES = 16
OVERLAY_SHARE = 0.05


# (max-file-size, max-file-time): the bounds an SWA999 record was found under.
Bounds = tuple[int, float]


def covers(stored: str, wanted: str) -> bool:
    """Whether facts collected under the profile ``stored`` serve an audit under
    ``wanted``: they hold every wanted rule's facts (a rule reads its own, and the order
    rules, which read skeletons, build them for the same files), and they are of the
    whole file or of the same regions mode (regions keep whatever a rule's triggers
    match, so a wider rule set keeps more: findings are the same either way, as
    ``--no-prefilter`` shows)."""
    if stored == wanted:
        return True
    stored_mode, _, stored_codes = stored.partition(":")
    wanted_mode, _, wanted_codes = wanted.partition(":")
    if stored_mode not in ("whole", wanted_mode):
        return False
    return set(filter(None, wanted_codes.split(","))) <= set(stored_codes.split(","))


@dataclass(frozen=True, eq=False)
class FactsRecord:
    """One file version's first-pass result. Pickled with its facts as one bytes object,
    read back when first asked for: a call whose findings are all cached reads the
    project's records for their digests only (:attr:`facts_digest`), not every file's
    facts."""

    digest: str
    profile: str
    # ModuleFacts, or the SWA999 finding of a file that does not parse; or, read back
    # from the cache and not asked for yet, their pickle.
    stored: Any
    facts_digest: str
    # The bounds an SWA999 record was found under (``None`` for facts).
    bounds: Bounds | None = None

    @property
    def failed(self) -> bool:
        """Whether the record is an SWA999 finding (known without reading it back)."""
        return self.bounds is not None

    @property
    def facts(self) -> Any:
        stored = self.stored
        if isinstance(stored, bytes):
            stored = pickle.loads(stored)
            object.__setattr__(self, "stored", stored)
        return stored

    def __reduce__(self) -> tuple[type[FactsRecord], tuple[Any, ...]]:
        stored = self.stored
        if not isinstance(stored, bytes):
            stored = pickle.dumps(stored, protocol=pickle.HIGHEST_PROTOCOL)
        return FactsRecord, (self.digest, self.profile, stored, self.facts_digest, self.bounds)

    def same_as(self, other: FactsRecord | None) -> bool:
        return (
            other is not None
            and other.digest == self.digest
            and other.profile == self.profile
            and other.facts_digest == self.facts_digest
        )

    def serves(self, digest: str, profile: str, bounds: Bounds) -> bool:
        return (
            self.digest == digest
            and covers(self.profile, profile)
            and self.bounds in (None, bounds)
        )


class FactsStore:
    def __init__(self, cache: ResultCache | None, scope: str, bounds: Bounds) -> None:
        self._cache = cache
        self._scope = scope
        self._bounds = bounds
        self._memory: dict[str, FactsRecord] = {}
        self._stored: dict[str, FactsRecord] | None = None

    def record(self, digest: str, profile: str, facts: Any) -> FactsRecord:
        """The record of ``facts`` (or an SWA999 finding) collected now."""
        bounds = self._bounds if isinstance(facts, Finding) else None
        return FactsRecord(digest, profile, facts, facts_digest(facts), bounds)

    def _entry_key(self) -> str:
        assert self._cache is not None
        return self._cache.key("project-facts", b"", self._scope)

    def _overlay_key(self, key: str, digest: str) -> str:
        """One overlay per file version: its profile is the record's (it may serve others)."""
        assert self._cache is not None
        return self._cache.key("facts", b"", f"{key}\0{digest}")

    def _entry(self) -> dict[str, FactsRecord]:
        if self._stored is None:
            hit = self._cache.get(self._entry_key()) if self._cache is not None else None
            self._stored = hit if isinstance(hit, dict) else {}
        return self._stored

    def get(self, key: str, digest: str, profile: str) -> FactsRecord | None:
        """The record of ``key``'s version ``digest`` under ``profile``, if kept."""
        bounds = self._bounds
        record = self._memory.get(key)
        if record is not None and record.serves(digest, profile, bounds):
            return record
        record = self._entry().get(key)
        if record is None or not record.serves(digest, profile, bounds):
            if self._cache is None:
                return None
            hit = self._cache.get(self._overlay_key(key, digest))
            record = hit if isinstance(hit, FactsRecord) else None
        if record is None or not record.serves(digest, profile, bounds):
            return None
        self._memory[key] = record
        return record

    def put(self, records: dict[str, FactsRecord], new: list[str], unsaved: set[str]) -> None:
        """Remember ``records`` (every candidate's), of which ``new`` were computed now;
        those of ``unsaved`` (documents whose bytes are not on disk) in memory only."""
        for key in new:
            if key in records:
                self._memory[key] = records[key]
        if self._cache is None:
            return
        lasting = {key: record for key, record in records.items() if key not in unsaved}
        stored = self._entry()
        behind = sum(1 for key, record in lasting.items() if not record.same_as(stored.get(key)))
        if behind > max(OVERLAY_FILES, OVERLAY_SHARE * len(lasting)):
            self._stored = lasting
            self._cache.put(self._entry_key(), self._stored)
            return
        for key in new:
            record = lasting.get(key)
            if record is not None:
                self._cache.put(self._overlay_key(key, record.digest), record)
