"""Trigger matching against its definition, written out with regular expressions.

The matcher looks each atomic trigger up once per file (:class:`FileText`) and finds
bounded words with a literal scan and a look at the neighbours; what it answers must be
what the definition says, for every rule's triggers, on real files and on the edges of
a word's bounds.
"""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

import pytest

from rules import all_rules
from swacheck.config import Config
from swacheck.triggers import AllOf, Exact, FileText, Trigger, TriggerSet, Word, all_of, word

REPO = Path(__file__).resolve().parents[2]
STDLIB = Path(sysconfig.get_paths()["stdlib"])


def _reference(triggers: frozenset[Trigger] | set[Trigger], data: bytes) -> bool:
    lowered = data.lower()
    for trigger in triggers:
        if isinstance(trigger, AllOf):
            if all(_reference(set(group), data) for group in trigger.groups):
                return True
        elif isinstance(trigger, Exact):
            if trigger.encode() in data:
                return True
        elif isinstance(trigger, Word):
            text = re.escape(trigger.lower().encode())
            if re.search(rb"(?<![a-z0-9])" + text + rb"(?![a-z0-9])", lowered):
                return True
        elif trigger.lower().encode() in lowered:
            return True
    return False


def _rule_triggers() -> list[tuple[str, frozenset[Trigger]]]:
    found = []
    for rule in all_rules():
        triggers = rule.triggers(Config())
        if triggers is not None:
            found.append((rule.code, frozenset(triggers)))
    return found


def _files() -> list[bytes]:
    paths = [
        *sorted((REPO / "rules").glob("*.py")),
        *sorted((REPO / "examples").glob("*.py")),
        *sorted((REPO / "reference_impl").glob("*.py")),
        *(STDLIB / name for name in ("dataclasses.py", "argparse.py", "ast.py", "typing.py")),
    ]
    return [path.read_bytes() for path in paths if path.exists()]


@pytest.mark.parametrize(("code", "triggers"), _rule_triggers())
def test_each_rule_s_triggers_match_where_their_definition_says(
    code: str, triggers: frozenset[Trigger]
) -> None:
    compiled = TriggerSet(triggers)
    answers = [(compiled.matches(data), _reference(triggers, data)) for data in _files()]
    assert [mine for mine, _ in answers] == [ref for _, ref in answers]
    # One FileText shared by every rule's set answers as each set alone does.
    for data in _files()[:8]:
        shared = FileText(data)
        for _, other in _rule_triggers():
            assert TriggerSet(other).matches(shared) == _reference(other, data)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"swa", True),  # the whole file
        (b"x = swa_pool", True),  # an underscore is no letter or digit
        (b"x = self.swa", True),
        (b"SWA = 1", True),  # case-insensitive
        (b"swap(a, b)", False),
        (b"aswa", False),
        (b"swa2 = 1", False),
        (b"2swa = 1", False),
        (b"swap; aswa; swa", True),  # a later occurrence is bounded
        (b"swaswa", False),
        ("é_swa".encode(), True),  # non-ASCII bytes are not [a-z0-9]
        (b"", False),
    ],
)
def test_a_word_is_bounded_by_anything_but_a_letter_or_digit(data: bytes, expected: bool) -> None:
    assert TriggerSet({word("swa")}).matches(data) is expected
    assert _reference({word("swa")}, data) is expected


def test_a_conjunction_needs_each_group_and_a_definition_its_first_group() -> None:
    triggers = TriggerSet({all_of({"replay", word("cg")}, {"torch"})})
    assert triggers.matches(b"def replay(self):\n    pass\nimport torch\n")
    assert not triggers.matches(b"def replay(self):\n    pass\n")
    whole = FileText(b"import torch\ndef replay(self):\n    pass\n")
    assert triggers.matches_definition(b"def replay(self):\n    pass\n", whole)
    assert not triggers.matches_definition(b"import torch\n", whole)
