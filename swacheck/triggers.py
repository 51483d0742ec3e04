"""Prefilter triggers: the text a file must contain for a rule to have anything to say.

A rule's ``triggers`` returns a set of these; a file matching none of the enabled rules'
triggers is never parsed. Plain strings are case-insensitive substrings (the fast path:
``bytes.__contains__`` on the lowercased file); :func:`word` additionally requires the
match not to sit inside a longer word (``swa`` but not ``swap``); :func:`exact` is
case-sensitive; :func:`all_of` holds where each of its groups has a match (``raw_``
and ``loc``: a padding test that resets a location buffer). Regular-expression
alternations were measured 10x slower than this on SGLang's tree.

Per top-level definition (``engine.regions``), a conjunction's *first* group must match
the definition itself and the others may match anywhere in its file: ``all_of(graph
words, tensor words)`` keeps a class with a ``replay`` method in a file that imports
torch, which the class need not name again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache


class Word(str):
    """A trigger that must not be preceded or followed by a letter or digit."""

    __slots__ = ()


class Exact(str):
    """A case-sensitive substring trigger (``SWA`` in ``SWAKVPool``)."""

    __slots__ = ()


def word(text: str) -> Word:
    return Word(text)


def exact(text: str) -> Exact:
    return Exact(text)


@dataclass(frozen=True)
class AllOf:
    """A conjunction: text matches when every group has one of its triggers in it; a
    definition, when its first group matches there and the others in its file."""

    groups: tuple[frozenset[str], ...]


def all_of(*groups: Iterable[str]) -> AllOf:
    return AllOf(tuple(frozenset(group) for group in groups))


Trigger = str | AllOf


class TriggerSet:
    """Compiled triggers; :meth:`matches` answers on a file's raw bytes."""

    def __init__(self, triggers: Iterable[Trigger]) -> None:
        self.literals: list[bytes] = []
        self.exact: list[bytes] = []
        self.words: list[tuple[bytes, re.Pattern[bytes]]] = []
        self.conjunctions: list[tuple[TriggerSet, ...]] = []
        for trigger in set(triggers):
            if isinstance(trigger, AllOf):
                self.conjunctions.append(tuple(TriggerSet(g) for g in trigger.groups))
        for trigger in sorted(t for t in set(triggers) if isinstance(t, str)):
            text = trigger.lower().encode()
            if isinstance(trigger, Exact):
                self.exact.append(trigger.encode())
            elif isinstance(trigger, Word):
                bounded = rb"(?<![a-z0-9])" + re.escape(text) + rb"(?![a-z0-9])"
                self.words.append((text, re.compile(bounded)))
            else:
                self.literals.append(text)

    def matches(self, data: bytes | FileText) -> bool:
        """Whether ``data`` (a file's bytes, or its :class:`FileText` when several sets
        are matched against it: lowercased once) holds a trigger."""
        if isinstance(data, FileText):
            return self._matches(*data.both)
        return self._matches(data, data.lower())

    def matches_definition(self, block: bytes, file: FileText) -> bool:
        """Whether a top-level definition's text ``block`` holds a trigger, a
        conjunction's groups after the first being looked for in the whole ``file``."""
        lowered = block.lower()
        if self._single(block, lowered):
            return True
        return any(
            c[0]._matches(block, lowered) and all(g._matches(*file.both) for g in c[1:])
            for c in self.conjunctions
        )

    def _single(self, data: bytes, lowered: bytes) -> bool:
        if any(text in data for text in self.exact):
            return True
        if any(literal in lowered for literal in self.literals):
            return True
        return any(text in lowered and pattern.search(lowered) for text, pattern in self.words)

    def _matches(self, data: bytes, lowered: bytes) -> bool:
        if self._single(data, lowered):
            return True
        return any(all(g._matches(data, lowered) for g in c) for c in self.conjunctions)


class FileText:
    """A file's bytes and their lowercase form, computed once for all its definitions."""

    def __init__(self, data: bytes) -> None:
        self.both = (data, data.lower())


@cache
def compiled(triggers: frozenset[Trigger]) -> TriggerSet:
    """``triggers`` compiled, once per process."""
    return TriggerSet(triggers)
