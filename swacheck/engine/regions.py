"""Parse only the top-level definitions that can matter: the prefilter, per block.

The prefilter decides per file; a candidate engine file is often thousands of lines
of which one class mentions SWA. For the *region-safe* rules (``Rule.region_safe``:
the trigger argument holds per top-level definition, not just per file), each
top-level ``def``/``class`` whose text matches no trigger (a conjunction's groups after
the first may match elsewhere in the file: :mod:`swacheck.triggers`) is blanked out
before libcst parses the file: it becomes a string literal holding only its line
breaks, so every position libcst reports is the position in the real file; every other
top-level statement (imports, constants, ``if``/``try`` blocks) is kept as written.

A file holding a trigger of a rule that is not region-safe (SWA002 follows a helper into
a definition that need not name SWA) is parsed whole: those rules read only such files,
so each rule sees what it would see without the prefilter.

The blocks come from :func:`ast.parse` (CPython's parser, about ten times faster than
libcst's), which doubles as the syntax check: a file it rejects is left whole, so
libcst reports a syntax error exactly as it would without the prefilter.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterable

from swacheck.catalogue import RuleSpec
from swacheck.triggers import FileText, Trigger, TriggerSet

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class Regions:
    """What to keep of a file: the definitions holding a trigger of ``definitions``, or
    everything where a trigger of ``whole`` occurs."""

    def __init__(self, definitions: TriggerSet, whole: TriggerSet | None = None) -> None:
        self.definitions = definitions
        self.whole = whole

    @classmethod
    def of(cls, rules: Iterable[RuleSpec]) -> Regions:
        """The regions of an audit by ``rules``, every one of which has triggers."""
        safe: set[Trigger] = set()
        whole: set[Trigger] = set()
        for rule in rules:
            assert rule.triggers is not None, "no regions without every rule's triggers"
            (safe if rule.region_safe else whole).update(rule.triggers)
        return cls(TriggerSet(safe), TriggerSet(whole) if whole else None)


def blank_irrelevant_definitions(data: bytes, regions: Regions) -> bytes | None:
    """``data`` with each top-level definition that matches no trigger blanked out.

    Returns ``data`` itself when nothing is blanked (the whole file is wanted), and
    ``None`` when CPython rejects the file (so a caller knows whether CPython accepted
    it: its nesting is then fine).
    """
    triggers = regions.definitions
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like
            tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    whole = FileText(data)
    if regions.whole is not None and regions.whole.matches(whole):
        return data
    lines = data.splitlines(keepends=True)
    blanked = False
    for node in tree.body:
        if not isinstance(node, _DEFINITIONS):
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
        last = node.end_lineno or node.lineno
        if triggers.matches_definition(b"".join(lines[first:last]), whole):
            continue
        filler = [line[len(line.rstrip(b"\r\n")) :] for line in lines[first:last]]
        # One string literal over the same lines: a single node for libcst to build,
        # where as many blank lines would each become one.
        filler[0] = b'"""' + filler[0]
        filler[-1] = b'"""' + filler[-1]
        lines[first:last] = filler
        blanked = True
    return b"".join(lines) if blanked else data
