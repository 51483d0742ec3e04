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


# A trigger's atomic part: how it is looked for, and the bytes looked for.
_LITERAL, _EXACT, _WORD = 0, 1, 2
Atom = tuple[int, bytes]
# Bytes a word trigger must not touch (``Word``).
_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789")


class TriggerSet:
    """Compiled triggers; :meth:`matches` answers on a file's raw bytes or its
    :class:`FileText` (each atomic trigger then looked for once per file, however many
    rule sets ask)."""

    def __init__(self, triggers: Iterable[Trigger]) -> None:
        atoms: set[Atom] = set()
        self.conjunctions: list[tuple[TriggerSet, ...]] = []
        for trigger in set(triggers):
            if isinstance(trigger, AllOf):
                self.conjunctions.append(tuple(TriggerSet(g) for g in trigger.groups))
            elif isinstance(trigger, Exact):
                atoms.add((_EXACT, trigger.encode()))
            elif isinstance(trigger, Word):
                atoms.add((_WORD, trigger.lower().encode()))
            else:
                atoms.add((_LITERAL, trigger.lower().encode()))
        # Cheapest first: a case-sensitive or lowercase substring, then bounded words.
        self.atoms: tuple[Atom, ...] = tuple(sorted(atoms))

    def matches(self, data: bytes | FileText) -> bool:
        """Whether ``data`` (a file's bytes, or its :class:`FileText` when several sets
        are matched against it) holds a trigger."""
        file = data if isinstance(data, FileText) else FileText(data)
        return self._single(file) or self._conjunct(file)

    def matches_definition(self, block: bytes, file: FileText) -> bool:
        """Whether a top-level definition's text ``block`` holds a trigger, a
        conjunction's groups after the first being looked for in the whole ``file``."""
        own = FileText(block)
        if self._single(own):
            return True
        return any(
            c[0].matches(own) and all(g.matches(file) for g in c[1:]) for c in self.conjunctions
        )

    def _single(self, file: FileText) -> bool:
        return any(file.has(atom) for atom in self.atoms)

    def _conjunct(self, file: FileText) -> bool:
        return any(all(g.matches(file) for g in c) for c in self.conjunctions)


class FileText:
    """A file's bytes, their lowercase form, and which atomic triggers occur in them
    (each looked for once, on first question)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.lowered = data.lower()
        self._found: dict[Atom, bool] = {}

    def has(self, atom: Atom) -> bool:
        found = self._found.get(atom)
        if found is None:
            kind, text = atom
            if kind == _EXACT:
                found = text in self.data
            elif kind == _LITERAL:
                found = text in self.lowered
            else:
                found = _has_word(self.lowered, text)
            self._found[atom] = found
        return found


def _has_word(lowered: bytes, text: bytes) -> bool:
    """Whether ``text`` occurs in ``lowered`` with no letter or digit on either side.

    A scan for the literal, then a look at its two neighbours: a regular expression with
    a look-behind first cannot use the literal's fast search (2.7 s of a 4,719-file
    classification, against milliseconds)."""
    size = len(text)
    at = lowered.find(text)
    while at != -1:
        before = lowered[at - 1] if at else None
        after = lowered[at + size] if at + size < len(lowered) else None
        if before not in _ALNUM and after not in _ALNUM:
            return True
        at = lowered.find(text, at + 1)
    return False


@cache
def compiled(triggers: frozenset[Trigger]) -> TriggerSet:
    """``triggers`` compiled, once per process."""
    return TriggerSet(triggers)
