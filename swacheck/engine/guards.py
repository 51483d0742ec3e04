"""Shapes libcst's native parser cannot take, recognised before it is given them.

libcst's parser is native code. On some shapes of valid Python it takes time quadratic
in their length, memory in gigabytes, or overflows the C stack and kills the process
(libcst issues #619, #1000): long chains of attribute, call or subscript links, of
binary or boolean operators, of unary operators (``not not … x``, ``- - … x``) and of
conditional expressions, and literals or calls with tens of thousands of elements. The
worker processes bound any file by the operating system's limits (``engine/workers.py``);
this module answers the known shapes at once, in every layout (spaces, tabs, a newline
in brackets, a comment, a backslash before each link), so a hook or an editor does not
wait out a limit for them.

What is measured, on the bytes with comments and string literals removed:

- a *run*: operators, dots and brackets in a row with nothing between two of them but
  names, numbers and spaces, lines joined where one ends or the next begins with an
  operator or a dot, or ends with a backslash; ``and``, ``or``, ``not``, ``if`` and
  ``else`` count as operators. Real engine code stays under 100 (SGLang 0.5.23's most
  is 98); beyond :data:`MAX_RUN` a file is not parsed;
- the elements of one literal or call (looked for only in a file holding that many
  commas: the commas between two brackets, else CPython's parse of the file): beyond
  :data:`MAX_ELEMENTS` a file is not parsed;
- a decimal integer of more digits than CPython converts (4,300 by default): CPython
  rejects the file (``Exceeds the limit … for integer string conversion``), so it is a
  syntax error, reported as CPython words it.

A guard never skips a file silently: its answer is the file's ``SWA999``, naming the
shape and the row it starts on. It can err only towards that answer, on a file no
engine's code looks like. Shapes it does not know are left to the limits.
"""

from __future__ import annotations

import ast
import re
import sys
import warnings
from typing import NamedTuple

MAX_RUN = 200
MAX_ELEMENTS = 50_000


class Shape(NamedTuple):
    """Why a file is not handed to libcst: the row the shape starts on, and the shape."""

    row: int
    reason: str


# Comments and string literals (their prefixes stay behind as names): what they hold is
# not code. Unterminated strings run to the end of the line (or of the file).
_NOT_CODE = re.compile(
    rb"#[^\r\n]*"
    rb"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*(?:'''|\Z)"
    rb'|"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*(?:"""|\Z)'
    rb"|'[^'\\\r\n]*(?:\\.[^'\\\r\n]*)*'?"
    rb'|"[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*"?',
    re.S,
)
_WORD_OPERATORS = re.compile(rb"\b(?:and|or|not|if|else)\b")


def _table(classes: dict[bytes, bytes], default: bytes) -> bytes:
    table = bytearray(default * 256)
    for chars, cls in classes.items():
        for char in chars:
            table[char] = cls[0]
    return bytes(table)


_NAME_CHARS = bytes(range(ord("a"), ord("z") + 1)) + bytes(range(ord("A"), ord("Z") + 1))
_NAME_CHARS += b"0123456789_" + bytes(range(128, 256))
# Operators and dots (D), brackets (B), names and numbers (w), newlines (N); spaces,
# tabs, form feeds and carriage returns are dropped; anything else (commas, colons,
# ``=``, …) ends a run (|).
_RUN_CLASSES = _table(
    {_NAME_CHARS: b"w", b".+-*/%@&|^<>~": b"D", b"()[]{}": b"B", b"\n": b"N"}, b"|"
)
# The same, keeping NUL, which marks a line break that joins (for counting rows).
_ROW_CLASSES = b"\0" + _RUN_CLASSES[1:]
# Names and numbers dropped, spaces (s) kept: words in a row with nothing else between.
_WORD_CLASSES = _table({b" \t\f": b"s", b"\n": b"|"}, b"|")


def _runs(code: bytes) -> bytes:
    """``code`` (comments and strings removed) as classes, lines joined where a run
    continues on the next line."""
    classes = code.replace(b"\\\r\n", b" ").replace(b"\\\n", b" ")
    classes = classes.translate(_RUN_CLASSES, b" \t\f\r")
    while b"NN" in classes:  # blank lines
        classes = classes.replace(b"NN", b"N")
    return classes.replace(b"DN", b"D").replace(b"ND", b"D")


def _longest_run(classes: bytes) -> int:
    return max(map(len, classes.translate(None, b"w").replace(b"N", b"|").split(b"|")))


def _longest_words(code: bytes) -> int:
    return max(map(len, code.translate(_WORD_CLASSES, _NAME_CHARS).split(b"|")))


def shape_problem(data: bytes) -> Shape | None:
    """The shape of ``data`` that libcst must not be given, or ``None``."""
    code = _NOT_CODE.sub(b"", data)
    too_long = _longest_run(_runs(code)) > MAX_RUN
    if not too_long and _longest_words(code) > MAX_RUN:
        # Some line holds a long run of words: do its operator words make a run?
        too_long = _longest_run(_runs(_WORD_OPERATORS.sub(b"~", code))) > MAX_RUN
    if too_long:
        return Shape(
            _run_row(data),
            f"a chain of more than {MAX_RUN} operators, dots or brackets in a row "
            "is too long to analyse",
        )
    if code.count(b",") > MAX_ELEMENTS:
        flat = _flat_elements(data)
        if flat is not None:
            return flat
        return _python_verdict(data)
    if _DIGITS.search(code):
        return _python_verdict(data)
    return None


def _keep_rows(match: re.Match[bytes]) -> bytes:
    """A comment or string removed, the line breaks it spans kept (for counting rows)."""
    return b"\0" * match.group().count(b"\n")


# Brackets end a stretch of elements; every other byte stays (and keeps offsets).
_BRACKETS_ONLY = bytes(ord("|") if chr(c) in "()[]{}" else c for c in range(256))


def _flat_elements(data: bytes) -> Shape | None:
    """A literal or call whose elements hold no brackets, over :data:`MAX_ELEMENTS`: the
    commas between two brackets (no parse needed)."""
    code = _NOT_CODE.sub(_keep_rows, data)
    stretches = code.translate(_BRACKETS_ONLY).split(b"|")
    counts = [stretch.count(b",") for stretch in stretches]
    longest = max(range(len(counts)), key=counts.__getitem__)
    if counts[longest] <= MAX_ELEMENTS:
        return None
    start = sum(map(len, stretches[:longest])) + longest
    row = 1 + code.count(b"\n", 0, start) + code.count(b"\0", 0, start)
    return Shape(row, _too_many(counts[longest], exact=False))


def _too_many(count: int, exact: bool = True) -> str:
    elements = f"{count:,}" if exact else f"at least {count:,}"
    return (
        f"a literal or call of {elements} elements, more than {MAX_ELEMENTS:,}, "
        "is too large to analyse"
    )


def _run_row(data: bytes) -> int:
    """The row the longest run of ``data`` starts on (slow; only for a file that has one)."""

    # The line breaks a comment or string spans are kept, as line breaks that join.
    code = _WORD_OPERATORS.sub(b"~", _NOT_CODE.sub(_keep_rows, data))
    classes = code.replace(b"\\\r\n", b"\0").replace(b"\\\n", b"\0")
    classes = classes.translate(_ROW_CLASSES, b" \t\f\r")
    while b"NN" in classes:
        classes = classes.replace(b"NN", b"\0N")
    classes = classes.replace(b"DN", b"D\0").replace(b"ND", b"\0D")
    best, start = -1, 0
    for run in re.finditer(rb"[^|N]+", classes):
        length = sum(run.group().count(c) for c in (b"D", b"B"))
        if length > best:
            best, start = length, run.start()
    return 1 + sum(classes.count(c, 0, start) for c in (b"N", b"\0"))


_INT_DIGITS = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
_DIGITS = re.compile(rb"\d[\d_]{%d}" % _INT_DIGITS) if _INT_DIGITS else re.compile(rb"(?!)")


def _python_verdict(data: bytes) -> Shape | None:
    """CPython's parse of a file with very many commas or a very long number: a
    syntax error (an integer beyond its limit), or a literal or call that has too many
    elements for libcst."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(data)
    except SyntaxError as exc:
        if "integer string conversion" in str(exc.msg):
            return Shape(exc.lineno or 1, f"syntax error: {exc.msg}")
        return None  # libcst reports it, at CPython's position (engine/parse.py)
    except (ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            count = len(node.elts)
        elif isinstance(node, ast.Dict):
            count = len(node.keys)
        elif isinstance(node, ast.Call):
            count = len(node.args) + len(node.keywords)
        else:
            continue
        if count > MAX_ELEMENTS:
            return Shape(getattr(node, "lineno", 1), _too_many(count))
    return None
