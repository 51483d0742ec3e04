"""Parse only the top-level definitions that can matter: the prefilter, per block.

The prefilter decides per file; a candidate engine file is often thousands of lines
of which one class mentions SWA. When every rule of the audit is *region-safe*
(``Rule.region_safe``: its trigger argument holds per top-level definition, not
just per file), each top-level ``def``/``class`` whose text matches no trigger is
blanked out before libcst parses the file: it becomes a string literal holding only
its line breaks, so every position libcst reports is the position in the real file;
every other top-level statement (imports, constants, ``if``/``try`` blocks) is kept
as written.

The blocks come from :func:`ast.parse` (CPython's parser, about ten times faster than
libcst's), which doubles as the syntax check: a file it rejects is left whole, so
libcst reports a syntax error exactly as it would without the prefilter.
"""

from __future__ import annotations

import ast
import warnings

from swacheck.triggers import TriggerSet

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def blank_irrelevant_definitions(data: bytes, triggers: TriggerSet) -> bytes | None:
    """``data`` with each top-level definition that matches no trigger blanked out.

    Returns ``data`` itself when nothing is blanked, and ``None`` when CPython rejects
    the file (so a caller knows whether CPython accepted it: its nesting is then fine).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like
            tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = data.splitlines(keepends=True)
    blanked = False
    for node in tree.body:
        if not isinstance(node, _DEFINITIONS):
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
        last = node.end_lineno or node.lineno
        if triggers.matches(b"".join(lines[first:last])):
            continue
        filler = [line[len(line.rstrip(b"\r\n")) :] for line in lines[first:last]]
        # One string literal over the same lines: a single node for libcst to build,
        # where as many blank lines would each become one.
        filler[0] = b'"""' + filler[0]
        filler[-1] = b'"""' + filler[-1]
        lines[first:last] = filler
        blanked = True
    return b"".join(lines) if blanked else data
