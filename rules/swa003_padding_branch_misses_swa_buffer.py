"""SWA003 padding-branch-misses-swa-buffer."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import libcst as cst

from swacheck.analysis.names import dotted_name
from swacheck.analysis.padding import (
    LOCATION_WORDS,
    BufferWrite,
    block_writes,
    is_location_name,
    padding_block,
    padding_trigger_strings,
    single_assignments,
)
from swacheck.analysis.walk import walk
from swacheck.config import DEFAULT_SWA_LOC_PATTERN, Config
from swacheck.finding import Applicability
from swacheck.rule import FixSafety, Invalid, Rule, Valid
from swacheck.triggers import Trigger, TriggerSet, all_of

if TYPE_CHECKING:
    from swacheck.analysis.index import ClassInfo, ProjectIndex
    from swacheck.analysis.names import Names
    from swacheck.context import FileContext


# -- first-pass facts ------------------------------------------------------------------


@dataclass
class ClassFacts:
    """What SWA003 needs to know about one class beyond the project index."""

    # attribute -> class name of the object it holds (``self.buffers = DecodeInputBuffers(...)``)
    attr_types: dict[str, str] = field(default_factory=dict)
    # attributes that may hold ``None`` (``Optional`` fields, ``x if c else None``, ``= None``)
    optional: set[str] = field(default_factory=set)
    # method -> attributes it resets on ``self`` (``zero_``/``fill_``/slice store/rebinding)
    method_writes: dict[str, set[str]] = field(default_factory=dict)


@dataclass
class FileFacts:
    classes: dict[str, ClassFacts] = field(default_factory=dict)
    # attribute names compared with ``None`` anywhere in the file (``x.buf is not None``)
    none_checked: set[str] = field(default_factory=set)
    # SWA attribute names this file fills with real slots (``buf[:n].copy_(src)``,
    # ``dsts.append(buf[:n])``, ``buf[:n] = src``, ``out=buf``, a kernel argument, ...)
    # on an object other than ``self`` (whose class is not known here)
    filled: set[str] = field(default_factory=set)
    # (class, attribute) filled on ``self`` in a method of that class
    self_filled: set[tuple[str, str]] = field(default_factory=set)


def _annotation_class(annotation: cst.BaseExpression | None) -> str | None:
    """``X`` for ``X``, ``mod.X``, ``Optional[X]``, ``X | None``, ``"X"``; else ``None``."""
    if annotation is None:
        return None
    if isinstance(annotation, cst.SimpleString):
        value = annotation.evaluated_value
        if not isinstance(value, str):
            return None
        try:
            annotation = cst.parse_expression(value)
        except cst.ParserSyntaxError:
            return None
    if isinstance(annotation, cst.Subscript):
        name = dotted_name(annotation.value)
        if name and name.rsplit(".", 1)[-1] == "Optional" and len(annotation.slice) == 1:
            inner = annotation.slice[0].slice
            if isinstance(inner, cst.Index):
                return _annotation_class(inner.value)
        return None
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        sides = [s for s in (annotation.left, annotation.right) if not _is_none(s)]
        return _annotation_class(sides[0]) if len(sides) == 1 else None
    name = dotted_name(annotation)
    if name is None:
        return None
    last = name.rsplit(".", 1)[-1]
    return last if last[:1].isupper() else None


def _is_zero(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Integer | cst.Float):
        return float(expr.evaluated_value) == 0.0
    return False


def _is_none(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _annotation_optional(annotation: cst.BaseExpression) -> bool:
    if isinstance(annotation, cst.SimpleString):
        value = annotation.evaluated_value
        return isinstance(value, str) and ("Optional" in value or "None" in value)
    if isinstance(annotation, cst.Subscript):
        name = dotted_name(annotation.value) or ""
        return name.rsplit(".", 1)[-1] == "Optional"
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        return _is_none(annotation.left) or _is_none(annotation.right)
    return False


def _may_be_none(value: cst.BaseExpression, locals_: dict[str, cst.BaseExpression]) -> bool:
    if _is_none(value):
        return True
    if isinstance(value, cst.IfExp):
        return _may_be_none(value.body, locals_) or _may_be_none(value.orelse, locals_)
    if isinstance(value, cst.Name) and value.value in locals_:
        return _may_be_none(locals_[value.value], {})
    return False


def _constructed_class(value: cst.BaseExpression) -> str | None:
    """``X`` for ``X(...)`` or ``X.factory(...)`` where ``X`` looks like a class name."""
    if not isinstance(value, cst.Call):
        return None
    func = value.func
    name = dotted_name(func)
    if name is None:
        return None
    parts = name.split(".")
    for part in reversed(parts):
        if part[:1].isupper():
            return part
    return None


@dataclass
class _Method:
    """The method being walked: its class's facts and what is pending until it ends."""

    cls: ClassFacts
    class_name: str
    name: str
    written: set[str]
    # local name -> values assigned to it
    locals_: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    # (attribute, value) whose None-ness depends on the locals
    pending: list[tuple[str, cst.BaseExpression]] = field(default_factory=list)


class _FactsCollector(cst.CSTVisitor):
    """One walk of a module collecting :class:`FileFacts`."""

    def __init__(self, names: Names) -> None:
        self.names = names
        self.facts = FileFacts()
        # innermost scope last: a ClassFacts for a class body, a _Method or None for a function
        self._scopes: list[ClassFacts | _Method | None] = []
        self._class_names: list[str] = []

    # -- fills of SWA buffers (any object, any scope) ------------------------------------

    def _fill(self, expr: cst.BaseExpression) -> None:
        while isinstance(expr, cst.Subscript):
            expr = expr.value
        if not isinstance(expr, cst.Attribute) or not self.names.is_swa_loc(expr.attr.value):
            return
        method = self._method
        if _is_self_attribute(expr) and method is not None:
            self.facts.self_filled.add((method.class_name, expr.attr.value))
        else:
            self.facts.filled.add(expr.attr.value)

    def _note_fills(self, node: cst.Call) -> None:
        """Destinations only: a source (``srcs.append(forward_batch.out_cache_loc_swa)``)
        fills nothing."""
        func = node.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method.endswith("_") and not method.startswith("_"):
                # in-place on the buffer: everything but a reset to the sentinel fills it
                zero = method == "zero_" or (
                    method == "fill_" and len(node.args) == 1 and _is_zero(node.args[0].value)
                )
                if not zero:
                    self._fill(func.value)
            if method in ("append", "extend", "insert") and _is_destination(func.value):
                for arg in node.args:
                    self._fill_all(arg.value)
        positional = [a for a in node.args if a.keyword is None]
        name = (dotted_name(func) or "").lower()
        if positional and any(word in name for word in ("copy", "scatter")):
            # ``torch._foreach_copy_(dsts, srcs)``, ``copy_into(dst, src)``: the first is written
            self._fill_all(positional[0].value)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "out":
                self._fill_all(arg.value)
            elif isinstance(func, cst.Subscript) and _is_self_attribute(_strip(arg.value)):
                # a kernel launch writing into the object's own buffer
                self._fill(arg.value)

    def _fill_all(self, expr: cst.BaseExpression) -> None:
        if isinstance(expr, cst.List | cst.Tuple):
            for element in expr.elements:
                self._fill(element.value)
        else:
            self._fill(expr)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        facts = self.facts.classes.setdefault(node.name.value, ClassFacts())
        self._scopes.append(facts)
        self._class_names.append(node.name.value)
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        for stmt in body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    self._annotated(facts, small.target.value, small.annotation.annotation)
                    if small.value is not None and _may_be_none(small.value, {}):
                        facts.optional.add(small.target.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()
        self._class_names.pop()

    @staticmethod
    def _annotated(facts: ClassFacts, attr: str, annotation: cst.BaseExpression) -> None:
        cls_name = _annotation_class(annotation)
        if cls_name and cls_name not in ("Tensor", "Optional"):
            facts.attr_types.setdefault(attr, cls_name)
        if _annotation_optional(annotation):
            facts.optional.add(attr)

    @property
    def _method(self) -> _Method | None:
        scope = self._scopes[-1] if self._scopes else None
        return scope if isinstance(scope, _Method) else None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        parent = self._scopes[-1] if self._scopes else None
        if isinstance(parent, ClassFacts):
            written = parent.method_writes.setdefault(node.name.value, set())
            self._scopes.append(_Method(parent, self._class_names[-1], node.name.value, written))
        else:
            self._scopes.append(None)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        method = self._scopes.pop()
        if not isinstance(method, _Method):
            return
        single = {k: v[0] for k, v in method.locals_.items() if len(v) == 1}
        for attr, value in method.pending:
            if _may_be_none(value, single):
                method.cls.optional.add(attr)

    def _self_write(self, attr: str, value: cst.BaseExpression | None, bind: bool) -> None:
        method = self._method
        if method is None:
            return
        method.written.add(attr)
        if bind and value is not None:
            method.pending.append((attr, value))
            built = _constructed_class(value)
            if built:
                method.cls.attr_types.setdefault(attr, built)

    def visit_Call(self, node: cst.Call) -> None:
        self._note_fills(node)
        method = self._method
        if method is None:
            return
        func = node.func
        if isinstance(func, cst.Name) and func.value == "cls":
            # factories: ``cls(out_cache_loc_swa=x if c else None)``
            for arg in node.args:
                if arg.keyword is not None:
                    method.pending.append((arg.keyword.value, arg.value))
        elif isinstance(func, cst.Attribute) and func.attr.value in ("zero_", "fill_"):
            target = func.value
            while isinstance(target, cst.Subscript):
                target = target.value
            if _is_self_attribute(target):
                assert isinstance(target, cst.Attribute)
                self._self_write(target.attr.value, None, bind=False)

    def _store(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if isinstance(target, cst.Name) and value is not None and _is_destination(target):
            # ``dsts = [self.out_cache_loc_swa[:n], ...]``
            self._fill_all(value)
        # ``buf[:n] = src`` / ``self.out_cache_loc_swa = forward_batch.out_cache_loc_swa``
        if (
            value is not None
            and not _is_zero(value)
            and not _is_none(value)
            and (
                isinstance(target, cst.Subscript)
                or (
                    isinstance(target, cst.Attribute)
                    and isinstance(value, cst.Attribute | cst.Subscript)
                )
            )
        ):
            self._fill(target)
        method = self._method
        if method is None:
            return
        if isinstance(target, cst.Name):
            method.locals_.setdefault(target.value, []).append(value or cst.Name("None"))
        elif _is_self_attribute(target):
            assert isinstance(target, cst.Attribute)
            self._self_write(target.attr.value, value, bind=True)
        elif isinstance(target, cst.Subscript):
            base = target.value
            while isinstance(base, cst.Subscript):
                base = base.value
            if _is_self_attribute(base):
                assert isinstance(base, cst.Attribute)
                self._self_write(base.attr.value, None, bind=False)
        elif isinstance(target, cst.Tuple | cst.List):
            for element in target.elements:
                self._store(element.value, None)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._store(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._store(node.target, node.value)
        method = self._method
        if method is None:
            return
        if _is_self_attribute(node.target):
            assert isinstance(node.target, cst.Attribute)
            self._annotated(method.cls, node.target.attr.value, node.annotation.annotation)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._store(node.target, None)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) != 1:
            return
        comparison = node.comparisons[0]
        if (
            isinstance(comparison.operator, cst.Is | cst.IsNot)
            and _is_none(comparison.comparator)
            and isinstance(node.left, cst.Attribute)
        ):
            self.facts.none_checked.add(node.left.attr.value)


def _strip(expr: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return expr


_DESTINATION_WORDS = ("dst", "dest", "out", "target")


def _is_destination(expr: cst.BaseExpression) -> bool:
    """A list named like a copy destination (``dsts``, ``out_tensors``, ``targets``)."""
    if not isinstance(expr, cst.Name | cst.Attribute):
        return False
    name = (expr.value if isinstance(expr, cst.Name) else expr.attr.value).lower()
    return any(word in name for word in _DESTINATION_WORDS)


def _is_self_attribute(node: cst.BaseExpression) -> bool:
    return (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
    )


# -- the project-wide view of those facts ----------------------------------------------


class _Facts:
    """SWA003's facts of every audited file, looked up by (path, class name)."""

    def __init__(self, project: ProjectIndex) -> None:
        self.by_class: dict[tuple[str, str], ClassFacts] = {}
        self.none_checked: dict[str, set[str]] = {}
        self.filled: set[str] = set()
        self.self_filled: set[tuple[str, str, str]] = set()
        for path, facts in project.rule_facts(PaddingBranchMissesSwaBuffer.code):
            for name, cls in facts.classes.items():
                self.by_class[(path, name)] = cls
            self.none_checked[path] = facts.none_checked
            self.filled |= facts.filled
            self.self_filled |= {(path, cls, attr) for cls, attr in facts.self_filled}

    def of(self, info: ClassInfo) -> ClassFacts:
        return self.by_class.get((info.path, info.name), ClassFacts())


_FACTS_CACHE: weakref.WeakKeyDictionary[Any, _Facts] = weakref.WeakKeyDictionary()


def _project_facts(project: ProjectIndex) -> _Facts:
    facts = _FACTS_CACHE.get(project)
    if facts is None:
        facts = _FACTS_CACHE[project] = _Facts(project)
    return facts


# -- the rule --------------------------------------------------------------------------


@dataclass
class _OwnerGroup:
    owner: cst.BaseExpression
    code: str
    resets: list[BufferWrite]


class PaddingBranchMissesSwaBuffer(Rule):
    """
    ## What it does
    Finds the branch a CUDA-graph runner takes when the batch it is about to replay
    was padded up to a captured batch size, recognised by comparing a raw size with a
    padded one in any spelling: `if bs != raw_bs:`, `if raw_bs < bs:`,
    `if num_tokens != self.raw_num_tokens:`, `if static_num_tokens != num_tokens:`
    (one side named with the word `raw`, `real` or `unpadded`, or with `static`,
    `padded` or `captured`), `elif bs > raw_bs:`, the `else:` of
    `if bs == raw_bs:`, `if padded:` where `padded = bs != raw_bs`, and `and`/`or`/`not`
    combinations of these. When that branch resets at least one location buffer of an
    object to the sentinel slot 0 (`obj.out_cache_loc.zero_()`, `.fill_(0)`,
    `obj.out_cache_loc[raw:] = 0`), the rule checks that every SWA location buffer
    (a name matching `swa-loc-pattern`) *the same object owns* is reset too.

    An object owns an attribute when the audited tree assigns it on `self` in any
    method of its class or of a base class, declares it as a (dataclass) field, or
    passes it by keyword to `cls(...)` in a factory classmethod. The object is `self`
    (the enclosing class) or a local name or `self` attribute whose class is known
    from an annotation (`buffers: DecodeInputBuffers`) or a construction
    (`self.buffers = DecodeInputBuffers.create(...)`). A reset counts wherever it is in
    the branch, guarded (`if self.out_cache_loc_swa is not None: ...zero_()`) or not,
    in a `self.helper()` the branch calls, or as a `zero_()`/`fill_()` elsewhere in the
    same function. An SWA buffer that nothing in the audited tree ever fills with
    slots (no `copy_` or other in-place write, slice store, `out=`, kernel or copy
    helper argument, entry of a copy list such as `dsts.append(buf[:n])`) holds only
    its initial zeros, so its padded tail already is the sentinel: it is not reported.

    ## Why is this bad?
    Padded slots of a replayed graph still run attention and still write K/V through
    the location buffers. Reset to 0, a padded token writes only to the sentinel slot;
    left holding the previous replay's slots, it overwrites the SWA KV of live
    requests (invariant I4). SGLang's `DecodeInputBuffers.populate_from_forward_batch`
    zeroed `out_cache_loc` in its `if bs != raw_bs:` branch but not the
    `out_cache_loc_swa` buffer PR #23552 added; the padding fix that added the guarded
    `zero_()` recovered 10 points of AIME24-25 accuracy on MiMoV2.5 Pro.

    ## Fix safety
    The fix inserts `<obj>.<buffer>.zero_()` right after the branch's last existing
    location reset, guarded by `if <obj>.<buffer> is not None:` when the branch guards
    its other resets that way or the buffer may be `None` (an `Optional` field, a
    conditional allocation `x if is_hybrid_swa else None`, a `None` check elsewhere in
    the file). It only writes the sentinel into a buffer the replay overwrites for real
    tokens, so it is safe. No fix is offered when the branch is on one line with its
    `if`.
    """

    code = "SWA003"
    name = "padding-branch-misses-swa-buffer"
    summary = "padding branch resets location buffers but misses an SWA location buffer"
    fix_safety = FixSafety.SAFE
    config_keys = ("swa-loc-pattern",)
    invariant = "I4"
    origin = "SGLang padding fix (zero out_cache_loc_swa on padded replays) after PR #23552"

    VALID = [
        Valid(
            """
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class DecodeInputBuffers:
    seq_lens: torch.Tensor
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: Optional[torch.Tensor]

    def populate_from_forward_batch(self, forward_batch, raw_bs, bs, seq_len_fill_value):
        if bs != raw_bs:
            self.seq_lens.fill_(seq_len_fill_value)
            self.out_cache_loc.zero_()
            if self.out_cache_loc_swa is not None:
                self.out_cache_loc_swa.zero_()
"""
        ),
        # An object that owns no SWA buffer has nothing to miss.
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n, dtype=torch.int64)

    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs:
            self.out_cache_loc.zero_()
"""
        ),
        # Not a padding test: a size compared with a literal.
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def step(self, raw_bs):
        if raw_bs > 0:
            self.out_cache_loc.zero_()
"""
        ),
        # The SWA buffer reset by a helper the branch calls.
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def _reset_swa(self):
        self.out_cache_loc_swa.zero_()

    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs:
            self.out_cache_loc.zero_()
            self._reset_swa()
"""
        ),
        # The whole SWA buffer is zeroed before the branch, on every path.
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs):
        self.out_cache_loc_swa.fill_(0)
        if bs != raw_bs:
            self.out_cache_loc.zero_()
"""
        ),
        # A branch that resets no location buffer is not about slots (out of scope).
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.seq_lens = torch.ones(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs:
            self.seq_lens.fill_(1)
"""
        ),
        # Another object's buffers: `other` is not known to own an SWA buffer.
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, other, raw_bs, bs):
        if bs != raw_bs:
            other.out_cache_loc.zero_()
"""
        ),
        # An SWA buffer nothing in the audited tree ever fills holds only zeros:
        # its padded tail already is the sentinel (a dead buffer).
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs:
            self.out_cache_loc.zero_()
        self.out_cache_loc[:raw_bs].copy_(self.src)
"""
        ),
        # The padded tail of the SWA buffer is written by a slice assignment.
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_num_tokens, num_tokens):
        if raw_num_tokens < num_tokens:
            self.out_cache_loc[raw_num_tokens:] = 0
            self.out_cache_loc_swa[raw_num_tokens:] = 0
"""
        ),
    ]
    INVALID = [
        # Seed 003: the dataclass-declared buffer, created by a factory with a
        # multi-line conditional allocation, missed in the `bs != raw_bs` branch.
        Invalid(
            """
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class DecodeInputBuffers:
    seq_lens: torch.Tensor
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: Optional[torch.Tensor]
    mamba_track_indices: Optional[torch.Tensor]

    @classmethod
    def create(cls, max_bs, max_num_token, is_hybrid_swa=False):
        out_cache_loc_swa = (
            torch.zeros((max_num_token,), dtype=torch.int32)
            if is_hybrid_swa
            else None
        )
        return cls(
            seq_lens=torch.ones((max_bs,), dtype=torch.int32),
            out_cache_loc=torch.zeros((max_num_token,), dtype=torch.int64),
            out_cache_loc_swa=out_cache_loc_swa,
            mamba_track_indices=None,
        )

    def populate_from_forward_batch(self, forward_batch, raw_bs, bs, seq_len_fill_value):
        if bs != raw_bs:
            self.seq_lens.fill_(seq_len_fill_value)
            self.out_cache_loc.zero_()
            if self.mamba_track_indices is not None:
                self.mamba_track_indices.zero_()

        dsts = [self.out_cache_loc[:raw_bs]]
        if self.out_cache_loc_swa is not None:
            dsts.append(self.out_cache_loc_swa[:raw_bs])
""",
            line=30,
            fixed="""
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class DecodeInputBuffers:
    seq_lens: torch.Tensor
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: Optional[torch.Tensor]
    mamba_track_indices: Optional[torch.Tensor]

    @classmethod
    def create(cls, max_bs, max_num_token, is_hybrid_swa=False):
        out_cache_loc_swa = (
            torch.zeros((max_num_token,), dtype=torch.int32)
            if is_hybrid_swa
            else None
        )
        return cls(
            seq_lens=torch.ones((max_bs,), dtype=torch.int32),
            out_cache_loc=torch.zeros((max_num_token,), dtype=torch.int64),
            out_cache_loc_swa=out_cache_loc_swa,
            mamba_track_indices=None,
        )

    def populate_from_forward_batch(self, forward_batch, raw_bs, bs, seq_len_fill_value):
        if bs != raw_bs:
            self.seq_lens.fill_(seq_len_fill_value)
            self.out_cache_loc.zero_()
            if self.out_cache_loc_swa is not None:
                self.out_cache_loc_swa.zero_()
            if self.mamba_track_indices is not None:
                self.mamba_track_indices.zero_()

        dsts = [self.out_cache_loc[:raw_bs]]
        if self.out_cache_loc_swa is not None:
            dsts.append(self.out_cache_loc_swa[:raw_bs])
""",
        ),
        # `raw < padded` spelling; an unguarded buffer gets an unguarded reset.
        Invalid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n, dtype=torch.int64)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs):
        if raw_bs < bs:
            self.out_cache_loc.zero_()
        self.out_cache_loc[:raw_bs].copy_(self.src)
        self.out_cache_loc_swa[:raw_bs].copy_(self.src_swa)
""",
            line=8,
            fixed="""
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n, dtype=torch.int64)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs):
        if raw_bs < bs:
            self.out_cache_loc.zero_()
            self.out_cache_loc_swa.zero_()
        self.out_cache_loc[:raw_bs].copy_(self.src)
        self.out_cache_loc_swa[:raw_bs].copy_(self.src_swa)
""",
        ),
        # `elif` padding branch against a raw size kept on `self`; a multi-line
        # conditional allocation in `__init__` makes the buffer optional.
        Invalid(
            """
class PiecewiseRunner:
    def __init__(self, n, is_hybrid_swa):
        self.out_cache_loc = torch.zeros(n, dtype=torch.int64)
        self.out_cache_loc_swa = (
            torch.zeros(n, dtype=torch.int32)
            if is_hybrid_swa
            else None
        )

    def replay_prepare(self, num_tokens, use_eager):
        if use_eager:
            return
        elif num_tokens != self.raw_num_tokens:
            self.out_cache_loc.fill_(0)
        self.out_cache_loc_swa[:num_tokens] = self.swa_src
""",
            line=14,
            fixed="""
class PiecewiseRunner:
    def __init__(self, n, is_hybrid_swa):
        self.out_cache_loc = torch.zeros(n, dtype=torch.int64)
        self.out_cache_loc_swa = (
            torch.zeros(n, dtype=torch.int32)
            if is_hybrid_swa
            else None
        )

    def replay_prepare(self, num_tokens, use_eager):
        if use_eager:
            return
        elif num_tokens != self.raw_num_tokens:
            self.out_cache_loc.fill_(0)
            if self.out_cache_loc_swa is not None:
                self.out_cache_loc_swa.zero_()
        self.out_cache_loc_swa[:num_tokens] = self.swa_src
""",
        ),
        # A padding flag, and a buffers object whose class declares the SWA buffer.
        Invalid(
            """
from dataclasses import dataclass

import torch


@dataclass
class Buffers:
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: torch.Tensor


def prepare(buffers: Buffers, raw_bs: int, bs: int):
    padded = bs != raw_bs
    if padded:
        buffers.out_cache_loc[raw_bs:] = 0
    buffers.out_cache_loc_swa[:raw_bs].copy_(buffers.out_cache_loc[:raw_bs])
""",
            line=15,
            fixed="""
from dataclasses import dataclass

import torch


@dataclass
class Buffers:
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: torch.Tensor


def prepare(buffers: Buffers, raw_bs: int, bs: int):
    padded = bs != raw_bs
    if padded:
        buffers.out_cache_loc[raw_bs:] = 0
        buffers.out_cache_loc_swa.zero_()
    buffers.out_cache_loc_swa[:raw_bs].copy_(buffers.out_cache_loc[:raw_bs])
""",
        ),
        # A subclass in another file: the base class owns the SWA buffer.
        Invalid(
            """
from base_runner import BaseRunner


class DraftRunner(BaseRunner):
    def replay_prepare(self, raw_bs, bs):
        if bs == raw_bs:
            return
        else:
            self.out_cache_loc.zero_()
""",
            line=7,
            files={
                "base_runner.py": (
                    "class BaseRunner:\n"
                    "    def __init__(self, n):\n"
                    "        self.out_cache_loc = torch.zeros(n)\n"
                    "        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)\n"
                    "\n"
                    "    def populate(self, forward_batch, n):\n"
                    "        self.out_cache_loc_swa[:n].copy_(forward_batch.out_cache_loc_swa)\n"
                )
            },
            fixed="""
from base_runner import BaseRunner


class DraftRunner(BaseRunner):
    def replay_prepare(self, raw_bs, bs):
        if bs == raw_bs:
            return
        else:
            self.out_cache_loc.zero_()
            self.out_cache_loc_swa.zero_()
""",
        ),
        # The piecewise runner's spelling (padded size named `static_...`), through a
        # local alias of a buffers object built by a factory of a class in another file.
        Invalid(
            """
from buffers import PrefillInputBuffers


class PiecewiseCudaGraphRunner:
    def __init__(self, max_num_tokens, is_hybrid_swa):
        self.buffers = PrefillInputBuffers.create(max_num_tokens, is_hybrid_swa)

    def replay_prepare(self, num_tokens):
        buffers = self.buffers
        static_num_tokens = self.capture_num_tokens[self.bucket(num_tokens)]
        if static_num_tokens != num_tokens:
            buffers.out_cache_loc.zero_()
            buffers.input_ids[num_tokens:static_num_tokens].zero_()
        if buffers.out_cache_loc_swa is not None:
            buffers.out_cache_loc_swa[:num_tokens].copy_(self.swa_src)
""",
            line=12,
            files={
                "buffers.py": (
                    "from dataclasses import dataclass\n"
                    "from typing import Optional\n"
                    "\n"
                    "\n"
                    "@dataclass\n"
                    "class PrefillInputBuffers:\n"
                    "    input_ids: torch.Tensor\n"
                    "    out_cache_loc: torch.Tensor\n"
                    "    out_cache_loc_swa: Optional[torch.Tensor]\n"
                )
            },
            fixed="""
from buffers import PrefillInputBuffers


class PiecewiseCudaGraphRunner:
    def __init__(self, max_num_tokens, is_hybrid_swa):
        self.buffers = PrefillInputBuffers.create(max_num_tokens, is_hybrid_swa)

    def replay_prepare(self, num_tokens):
        buffers = self.buffers
        static_num_tokens = self.capture_num_tokens[self.bucket(num_tokens)]
        if static_num_tokens != num_tokens:
            buffers.out_cache_loc.zero_()
            if buffers.out_cache_loc_swa is not None:
                buffers.out_cache_loc_swa.zero_()
            buffers.input_ids[num_tokens:static_num_tokens].zero_()
        if buffers.out_cache_loc_swa is not None:
            buffers.out_cache_loc_swa[:num_tokens].copy_(self.swa_src)
""",
        ),
        # The branch on the `if` line: reported, but no line-insertion fix.
        Invalid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs: self.out_cache_loc.zero_()
        self.out_cache_loc_swa[:raw_bs].copy_(self.src)
""",
            line=8,
        ),
    ]

    # The padding branch and the class owning the buffers are each a trigger block.
    region_safe = True

    @classmethod
    def triggers(cls, config: Config) -> frozenset[Trigger] | None:
        """A marked size word with a location word, or ``swa_``/``_swa`` (default names),
        else nothing.

        A finding sits on a padding test, which compares a size whose name has a
        marking ``_``-separated word (``raw``, ``real``, ``unpadded``, ``static``,
        ``padded``, ``captured``) and at least one more word, so it holds ``raw_`` or
        ``_raw`` (or the like for the other words; directly, or in the flag's
        assignment in the same function); and its branch zeroes a location buffer, whose
        name holds ``loc``, ``locs``, ``location`` or ``locations`` as a ``_``-separated
        word, or is an SWA location (below). The reported block holds both.
        The facts a finding depends on in *other* blocks and files name the SWA buffer
        the object owns; under the default ``swa-loc-pattern`` that name has the word
        ``swa`` next to another word (it must also hold ``loc``, ``slot``, ``indices`` or
        ``index``), so it holds ``swa_`` or ``_swa``. Listing
        those keeps a base class that declares the buffer in the audit even when it has
        no padding branch. (A class in between that names neither, such as a base that
        only binds ``self.buffers = Buffers()``, is not kept: the engine builds its class
        index from the blocks the prefilter lets through.) A custom pattern may match
        names without ``swa``, so no trigger set is given then.
        """
        if config.swa_loc_pattern != DEFAULT_SWA_LOC_PATTERN:
            return None
        return frozenset({all_of(padding_trigger_strings(), LOCATION_WORDS), "swa_", "_swa"})

    @classmethod
    def collect_facts(cls, context: FileContext) -> FileFacts | None:
        triggers = cls.triggers(context.config)
        if triggers is not None and not TriggerSet(triggers).matches(context.text.encode()):
            # The same argument as the prefilter's: nothing here can matter.
            return None
        collector = _FactsCollector(context.names)
        walk(context.module, collector)
        return collector.facts

    # -- checking ---------------------------------------------------------------------

    def visit_If(self, node: cst.If) -> None:
        ctx = self.context
        func = ctx.enclosing(node, cst.FunctionDef)
        flags = ctx.memo(("swa003-flags", func), lambda: single_assignments(func)) if func else {}
        block = padding_block(node, flags)
        if block is None:
            return
        writes = block_writes(block)
        groups: dict[str, _OwnerGroup] = {}
        for write in writes.writes:
            if write.zero and self._is_location(write.attr):
                code = ctx.module.code_for_node(write.owner)
                groups.setdefault(code, _OwnerGroup(write.owner, code, [])).resets.append(write)
        for group in groups.values():
            self._check_owner(node, block, func, group, writes.writes, writes.calls)

    def _is_location(self, name: str) -> bool:
        return is_location_name(name) or self.context.names.is_swa_loc(name)

    def _check_owner(
        self,
        node: cst.If,
        block: cst.BaseSuite,
        func: cst.FunctionDef | None,
        group: _OwnerGroup,
        writes: tuple[BufferWrite, ...],
        calls: tuple[cst.Call, ...],
    ) -> None:
        ctx = self.context
        info = self._owner_class(group.owner, func)
        if info is None:
            return
        project = ctx.project
        owned = project.owned_attributes(info)
        swa = sorted(a for a in owned if ctx.names.is_swa_loc(a))
        if not swa:
            return
        covered = self._covered(group, func, writes, calls, info)
        # A buffer nothing in the tree fills keeps its zeros: its tail is the sentinel.
        missing = [a for a in swa if a not in covered and self._filled(info, a)]
        if not missing:
            return
        reset_names = ", ".join(dict.fromkeys(f"`{group.code}.{w.attr}`" for w in group.resets))
        missing_names = ", ".join(f"`{group.code}.{a}`" for a in missing)
        test = ctx.module.code_for_node(node.test)
        self.report(
            node.test,
            f"padding branch (`{test}`) resets {reset_names} but not {missing_names}; "
            "padded tokens would write through stale SWA slots into live requests' "
            "SWA KV (I4)",
            fix=self._fix(block, group, missing, writes, info),
        )

    def _filled(self, info: ClassInfo, attr: str) -> bool:
        """Whether anything fills ``attr``: on another object, or on ``self`` in the class,
        a base or a subclass of ``info``."""
        facts = _project_facts(self.context.project)
        if attr in facts.filled:
            return True
        project = self.context.project
        family = {(c.path, c.name) for c in project.mro(info)}
        key = (info.path, info.name)
        for path, cls_name, filled_attr in facts.self_filled:
            if filled_attr != attr:
                continue
            if (path, cls_name) in family:
                return True
            other = project.resolve_class(cls_name, near=path)
            if other is not None and any((c.path, c.name) == key for c in project.mro(other)):
                return True
        return False

    def _owner_class(
        self, owner: cst.BaseExpression, func: cst.FunctionDef | None
    ) -> ClassInfo | None:
        ctx = self.context
        project = ctx.project
        if isinstance(owner, cst.Name) and owner.value == "self":
            return self._self_class(owner)
        if (
            isinstance(owner, cst.Attribute)
            and isinstance(owner.value, cst.Name)
            and owner.value.value == "self"
        ):
            return self._attribute_class(self._self_class(owner), owner.attr.value)
        if isinstance(owner, cst.Name) and func is not None:
            name = owner.value
            for param in _all_params(func):
                if param.name.value == name and param.annotation is not None:
                    cls_name = _annotation_class(param.annotation.annotation)
                    return project.resolve_class(cls_name, near=ctx.path) if cls_name else None
            annotated = _local_annotation(func, name)
            if annotated is not None:
                cls_name = _annotation_class(annotated)
                return project.resolve_class(cls_name, near=ctx.path) if cls_name else None
            flags = ctx.memo(("swa003-flags", func), lambda: single_assignments(func))
            value = flags.get(name)
            if value is None:
                return None
            if (
                isinstance(value, cst.Attribute)
                and isinstance(value.value, cst.Name)
                and value.value.value == "self"
            ):
                return self._attribute_class(self._self_class(owner), value.attr.value)
            built = _constructed_class(value)
            return project.resolve_class(built, near=ctx.path) if built else None
        return None

    def _self_class(self, node: cst.CSTNode) -> ClassInfo | None:
        ctx = self.context
        cls = ctx.enclosing(node, cst.ClassDef)
        if cls is None:
            return None
        return ctx.project.resolve_class(cls.name.value, near=ctx.path)

    def _attribute_class(self, info: ClassInfo | None, attr: str) -> ClassInfo | None:
        if info is None:
            return None
        facts = _project_facts(self.context.project)
        for cls in self.context.project.mro(info):
            cls_name = facts.of(cls).attr_types.get(attr)
            if cls_name:
                return self.context.project.resolve_class(cls_name, near=cls.path)
        return None

    def _covered(
        self,
        group: _OwnerGroup,
        func: cst.FunctionDef | None,
        writes: tuple[BufferWrite, ...],
        calls: tuple[cst.Call, ...],
        info: ClassInfo,
    ) -> set[str]:
        ctx = self.context
        code = group.code
        covered = {w.attr for w in writes if ctx.module.code_for_node(w.owner) == code}
        if func is not None:
            everywhere = ctx.memo(("swa003-func-writes", func), lambda: block_writes(func.body))
            covered |= {
                w.attr
                for w in everywhere.writes
                if (w.kind == "reset" or w.zero) and ctx.module.code_for_node(w.owner) == code
            }
        facts = _project_facts(ctx.project)
        for call in calls:
            assert isinstance(call.func, cst.Attribute)
            if ctx.module.code_for_node(call.func.value) != code:
                continue
            found = ctx.project.find_method(info, call.func.attr.value)
            if found is not None:
                cls, method = found
                covered |= facts.of(cls).method_writes.get(method.name, set())
        return covered

    # -- the fix ----------------------------------------------------------------------

    def _fix(
        self,
        block: cst.BaseSuite,
        group: _OwnerGroup,
        missing: list[str],
        writes: tuple[BufferWrite, ...],
        info: ClassInfo,
    ):  # type: ignore[no-untyped-def]
        ctx = self.context
        if not isinstance(block, cst.IndentedBlock):
            return None
        anchor = _top_statement(ctx, group.resets[-1].node, block)
        if anchor is None:
            return None
        branch_guards = any(w.guard is not None for w in writes)
        facts = _project_facts(ctx.project)
        optional: set[str] = set(facts.none_checked.get(ctx.path, set()))
        for cls in ctx.project.mro(info):
            optional |= facts.of(cls).optional
        indent = ctx.module.default_indent
        lines: list[str] = []
        for attr in missing:
            buffer = f"{group.code}.{attr}"
            if branch_guards or attr in optional:
                lines += [f"if {buffer} is not None:", f"{indent}{buffer}.zero_()"]
            else:
                lines.append(f"{buffer}.zero_()")
        names = ", ".join(f"{group.code}.{a}" for a in missing)
        return ctx.insert_statements(
            anchor,
            lines,
            f"Reset {names} to the sentinel slot 0 in the padding branch",
            after=True,
            applicability=Applicability.SAFE,
        )


def _all_params(func: cst.FunctionDef) -> list[cst.Param]:
    params = func.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def _local_annotation(func: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
    found: list[cst.BaseExpression] = []

    class Visitor(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is func

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if isinstance(node.target, cst.Name) and node.target.value == name:
                found.append(node.annotation.annotation)

    walk(func, Visitor())
    return found[0] if len(found) == 1 else None


def _top_statement(
    ctx: FileContext, node: cst.CSTNode, block: cst.IndentedBlock
) -> cst.BaseStatement | None:
    """The statement directly in ``block`` that contains ``node``."""
    current: cst.CSTNode | None = node
    while current is not None:
        parent = ctx.parent(current)
        if parent is block:
            return current if isinstance(current, cst.BaseStatement) else None
        current = parent
    return None
