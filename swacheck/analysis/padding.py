"""Padding branches and buffer resets: the syntax SWA003 (I4) reasons about.

A *padding branch* is the block a CUDA-graph runner executes when the batch it is
about to replay was padded up to a captured size: the comparison of a raw size with
a padded one (``bs != raw_bs``, ``raw_bs < bs``, ``num_tokens != self.raw_num_tokens``,
``static_num_tokens != num_tokens``: one side's name marked raw or padded by a word),
a flag assigned such a comparison (``padded = bs != raw_bs; if padded:``), the
``else`` of ``if bs == raw_bs:``, ``not``/``and``/``or`` combinations of these, and
``elif`` forms (an ``elif`` is an ``If`` node of its own in libcst).

A *write* to a buffer is an in-place reset of an attribute (``obj.buf.zero_()``,
``obj.buf.fill_(v)``, ``obj.buf[a:] = v``, the same through a slice
``obj.buf[raw:].zero_()``) or a rebinding ``obj.buf = ...``. A *zero reset* is the
sentinel-0 subset (``zero_()``, ``fill_(0)``, slice assignment of ``0``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from swacheck.analysis.names import target_name
from swacheck.analysis.walk import walk
from swacheck.triggers import word

Polarity = Literal["body", "orelse"]

# A location buffer's name holds the word ``loc`` (``out_cache_loc``, ``swa_loc``,
# ``loc_swa``); as a ``_``-separated word, so that ``block_table`` or ``lock`` do not count.
_LOC_WORD = re.compile(r"(?:^|_)(?:loc|locs|location|locations)(?:_|$)", re.IGNORECASE)
# The same words as prefilter triggers (a ``word`` is bounded by ``_`` in a name).
LOCATION_WORDS = frozenset(word(w) for w in ("loc", "locs", "location", "locations"))
_RESET_METHODS = {"zero_", "fill_"}


def is_location_name(name: str) -> bool:
    """Whether ``name`` names a location buffer (DESIGN.md: its name holds ``loc``)."""
    return _LOC_WORD.search(name) is not None


def _words(name: str) -> list[str]:
    return [w for w in name.lower().split("_") if w]


# Words that mark a size as the batch's own (unpadded) one, and as the padded one.
RAW_WORDS = frozenset({"raw", "real", "unpadded"})
PADDED_WORDS = frozenset({"static", "padded", "captured"})


def _size_words(expr: cst.BaseExpression) -> list[str]:
    if not isinstance(expr, cst.Name | cst.Attribute):
        return []
    return _words(target_name(expr) or "")


def _marked(expr: cst.BaseExpression, marks: frozenset[str]) -> bool:
    """A name with one of ``marks`` as a ``_``-separated word and at least one more word."""
    words = _size_words(expr)
    return len(words) > 1 and any(w in marks for w in words)


def is_raw_size(expr: cst.BaseExpression) -> bool:
    """``raw_bs``, ``self.raw_num_tokens``, ``bs_raw``, ``real_num_tokens``."""
    return _marked(expr, RAW_WORDS)


def is_padded_size(expr: cst.BaseExpression) -> bool:
    """``static_num_tokens``, ``padded_bs``, ``self.captured_bs``."""
    return _marked(expr, PADDED_WORDS) and not is_raw_size(expr)


def _is_size_operand(expr: cst.BaseExpression) -> bool:
    """The other side: a name, attribute, call or subscript, not itself marked."""
    if is_raw_size(expr) or is_padded_size(expr):
        return False
    return isinstance(expr, cst.Name | cst.Attribute | cst.Call | cst.Subscript)


def _comparison_polarity(node: cst.Comparison) -> Polarity | None:
    if len(node.comparisons) != 1:
        return None
    left = node.left
    op = node.comparisons[0].operator
    right = node.comparisons[0].comparator
    raw_left, raw_right = is_raw_size(left), is_raw_size(right)
    if raw_left != raw_right:
        # ``raw_bs`` against anything unmarked, or against a padded size
        other = right if raw_left else left
        if not (_is_size_operand(other) or is_padded_size(other)):
            return None
    elif not raw_left:
        # ``static_num_tokens != num_tokens``: the unmarked side is the raw one
        padded_left, padded_right = is_padded_size(left), is_padded_size(right)
        if padded_left == padded_right:
            return None
        other = right if padded_left else left
        if not _is_size_operand(other):
            return None
        raw_left, raw_right = padded_right, padded_left
    else:
        return None
    if isinstance(op, cst.NotEqual):
        return "body"
    if isinstance(op, cst.Equal):
        return "orelse"
    # raw < padded / padded > raw: padded; the other directions are not padding tests.
    if isinstance(op, cst.LessThan) and raw_left:
        return "body"
    if isinstance(op, cst.GreaterThan) and raw_right:
        return "body"
    if isinstance(op, cst.GreaterThanEqual) and raw_left:
        return "orelse"  # raw >= padded: not padded
    if isinstance(op, cst.LessThanEqual) and raw_right:
        return "orelse"  # padded <= raw: not padded
    return None


def padding_trigger_strings() -> frozenset[str]:
    """Text every padding test holds: a marked word next to another word."""
    return frozenset(text for word in RAW_WORDS | PADDED_WORDS for text in (f"{word}_", f"_{word}"))


def _flip(polarity: Polarity | None) -> Polarity | None:
    if polarity is None:
        return None
    return "orelse" if polarity == "body" else "body"


def padding_polarity(
    test: cst.BaseExpression,
    flags: Mapping[str, cst.BaseExpression] | None = None,
    _depth: int = 0,
) -> Polarity | None:
    """Which block of ``if test:`` runs when the batch is padded, or ``None``.

    ``flags`` maps a local name to the single expression it was assigned in the same
    function, so ``padded = bs != raw_bs; if padded:`` is recognised.
    """
    if _depth > 8:
        return None
    if isinstance(test, cst.Comparison):
        return _comparison_polarity(test)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _flip(padding_polarity(test.expression, flags, _depth + 1))
    if isinstance(test, cst.BooleanOperation):
        left = padding_polarity(test.left, flags, _depth + 1)
        right = padding_polarity(test.right, flags, _depth + 1)
        # ``padded and x``: the body runs only when padded.
        if isinstance(test.operator, cst.And) and "body" in (left, right):
            return "body"
        # ``not_padded or x``: the else runs only when padded.
        if isinstance(test.operator, cst.Or) and "orelse" in (left, right):
            return "orelse"
        return None
    if isinstance(test, cst.Name) and flags and test.value in flags:
        return padding_polarity(flags[test.value], None, _depth + 1)
    return None


def padding_block(
    node: cst.If, flags: Mapping[str, cst.BaseExpression] | None = None
) -> cst.BaseSuite | None:
    """The block of ``node`` that runs when the batch is padded, if its test says so.

    An ``elif`` chain yields each ``If`` separately; the ``else`` of an ``if`` whose
    ``orelse`` is another ``If`` (an ``elif``) is not a padding block of the outer test.
    """
    polarity = padding_polarity(node.test, flags)
    if polarity == "body":
        return node.body
    if polarity == "orelse" and isinstance(node.orelse, cst.Else):
        return node.orelse.body
    return None


def single_assignments(func: cst.FunctionDef) -> dict[str, cst.BaseExpression]:
    """Local names assigned exactly once in ``func`` (nested scopes excluded), with the value."""
    seen: dict[str, list[cst.BaseExpression]] = {}

    class Visitor(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is func

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    seen.setdefault(target.target.value, []).append(node.value)
                else:
                    for name in _names_in(target.target):
                        seen.setdefault(name, []).append(cst.Name("None"))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if isinstance(node.target, cst.Name) and node.value is not None:
                seen.setdefault(node.target.value, []).append(node.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Name):
                seen.setdefault(node.target.value, []).append(cst.Name("None"))

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            if isinstance(node.target, cst.Name):
                seen.setdefault(node.target.value, []).append(node.value)

    walk(func, Visitor())
    return {name: values[0] for name, values in seen.items() if len(values) == 1}


def _names_in(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, cst.Tuple | cst.List):
        for element in target.elements:
            yield from _names_in(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _names_in(target.value)


# -- writes to buffers ---------------------------------------------------------------


@dataclass(frozen=True)
class BufferWrite:
    """One write to ``<owner>.<attr>`` found in a block."""

    owner: cst.BaseExpression  # the receiver object expression (``self``, ``buffers``)
    attr: str
    node: cst.CSTNode  # the call or assignment
    # "reset" (``zero_``/``fill_``), "store" (subscript assignment), "bind" (``obj.buf = ...``)
    kind: Literal["reset", "store", "bind"]
    zero: bool  # a reset to the sentinel 0
    # The ``if <x> is not None:`` test guarding it inside the block, if any.
    guard: cst.BaseExpression | None


def _buffer_of(expr: cst.BaseExpression) -> cst.Attribute | None:
    """``obj.buf`` for ``obj.buf`` or a subscript of it (``obj.buf[raw:]``)."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return expr if isinstance(expr, cst.Attribute) else None


def is_zero(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Integer):
        return expr.evaluated_value == 0
    if isinstance(expr, cst.Float):
        return expr.evaluated_value == 0.0
    return False


def is_not_none_test(test: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` for ``x is not None`` (also one operand of an ``and``), else ``None``."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return is_not_none_test(test.left) or is_not_none_test(test.right)
    if (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.IsNot)
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    ):
        return test.left
    return None


def _live_rows(expr: cst.BaseExpression) -> bool:
    """``buf[:n]``: a prefix of the rows, which zeroing leaves the tail of as it was."""
    if not isinstance(expr, cst.Subscript) or not expr.slice:
        return False
    index = expr.slice[0].slice
    return (
        isinstance(index, cst.Slice)
        and index.upper is not None
        and index.step is None
        and (index.lower is None or is_zero(index.lower))
    )


class _WriteCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.writes: list[BufferWrite] = []
        self.self_calls: list[cst.Call] = []
        self._guards: list[cst.BaseExpression | None] = []

    # nested scopes run later, not as part of this block
    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_If(self, node: cst.If) -> None:
        self._guards.append(is_not_none_test(node.test))

    def leave_If(self, original_node: cst.If) -> None:
        self._guards.pop()

    @property
    def _guard(self) -> cst.BaseExpression | None:
        for guard in reversed(self._guards):
            if guard is not None:
                return guard
        return None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        if func.attr.value in _RESET_METHODS:
            buffer = _buffer_of(func.value)
            if buffer is not None and not _live_rows(func.value):
                zero = func.attr.value == "zero_" or (
                    len(node.args) == 1 and is_zero(node.args[0].value)
                )
                self.writes.append(
                    BufferWrite(buffer.value, buffer.attr.value, node, "reset", zero, self._guard)
                )
        elif isinstance(func.value, cst.Name | cst.Attribute):
            self.self_calls.append(node)

    def _store(
        self, target: cst.BaseExpression, value: cst.BaseExpression, node: cst.CSTNode
    ) -> None:
        if isinstance(target, cst.Subscript):
            buffer = _buffer_of(target)
            if buffer is not None and not (is_zero(value) and _live_rows(target)):
                zero = is_zero(value)
                self.writes.append(
                    BufferWrite(buffer.value, buffer.attr.value, node, "store", zero, self._guard)
                )
        elif isinstance(target, cst.Attribute):
            self.writes.append(
                BufferWrite(target.value, target.attr.value, node, "bind", False, self._guard)
            )

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._store(target.target, node.value, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._store(node.target, node.value, node)


@dataclass(frozen=True)
class BlockWrites:
    writes: tuple[BufferWrite, ...]
    # Method calls in the block (``self.helper(...)``, ``buffers.reset(...)``).
    calls: tuple[cst.Call, ...]


def block_writes(block: cst.CSTNode) -> BlockWrites:
    """Every buffer write and method call in ``block`` (nested scopes excluded)."""
    collector = _WriteCollector()
    walk(block, collector)
    return BlockWrites(tuple(collector.writes), tuple(collector.self_calls))
