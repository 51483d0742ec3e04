"""Which dtype a tensor value has, and where it is decided (I3).

:meth:`Dtypes.of` answers, for a term in its context, each dtype the value may have
with the kind of decision that gives it — an allocation with a ``dtype=`` (or a dtype
held in a variable, a default argument, another tensor's ``.dtype``), a factory's
default (``torch.arange(n)`` is int64), a cast (``.long()``, ``.to(torch.int32)``), a
gather through the full->SWA table or a translation (the table's dtype, what the
project's translation returns), the engine's own tensors (the model's ``dtypes``), a
parameter its function asserts — and where: the function and the call that decides it,
so a rule can point at the literal and fix it. Values are followed as
:mod:`swacheck.semantics.values` follows them: joins, views, dtype-keeping methods,
arithmetic with a scalar, in-place fills, fields, module names, helpers' results (with
the dtype a caller passes for a helper's ``dtype`` parameter).

This is PyTorch's behaviour, not an engine's, so it is code, not model data.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from swacheck.semantics.function import ASSERT, Event, FunctionFacts
from swacheck.semantics.model import SWA
from swacheck.semantics.project import Function
from swacheck.semantics.terms import (
    NO_GUARD,
    Attr,
    Call,
    Const,
    Filled,
    Global,
    Guard,
    Index,
    Lambda,
    Op,
    Param,
    Phi,
    Seq,
    Slice,
    Term,
    consistent,
    render,
)
from swacheck.semantics.values import TABLE, Ctx, Values

ALLOCATION = "allocation"  # torch.zeros(..., dtype=torch.int64), or a dtype variable's
DEFAULT = "default"  # torch.arange(n): int64 where no dtype is given
CAST = "cast"  # .long(), .int(), .to(torch.int64)
TRANSLATION = "translation"  # a gather through the table, a translation
ENGINE = "engine"  # the engine's own tensor (the model's `dtypes`)
ASSERTED = "asserted"  # a parameter its function asserts

_NAMES = {
    "int64": "int64",
    "long": "int64",
    "LongTensor": "int64",
    "int32": "int32",
    "int": "int32",
    "IntTensor": "int32",
    "int16": "int16",
    "short": "int16",
    "uint8": "uint8",
    "bool": "bool",
    "float32": "float32",
    "float": "float32",
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "float64": "float64",
    "double": "float64",
}
_CASTS = {"long": "int64", "int": "int32", "short": "int16", "bool": "bool", "float": "float32"}
_INT64_BY_DEFAULT = frozenset({"arange", "randint", "randperm", "tensor", "as_tensor", "asarray"})
_FLOAT_BY_DEFAULT = frozenset({"zeros", "ones", "empty", "empty_strided", "rand", "randn"})
_LIKE = frozenset({"zeros_like", "ones_like", "empty_like", "full_like"})
_NEW = frozenset({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"})
_JOINS = frozenset({"cat", "concat", "concatenate", "stack"})
_KEEPS = frozenset(
    {
        "view",
        "reshape",
        "flatten",
        "squeeze",
        "unsqueeze",
        "contiguous",
        "clone",
        "detach",
        "narrow",
        "expand",
        "expand_as",
        "repeat",
        "repeat_interleave",
        "index_select",
        "masked_select",
        "masked_fill",
        "clamp",
        "clamp_min",
        "clamp_max",
        "cpu",
        "cuda",
        "t",
        "transpose",
        "permute",
        "flip",
        "roll",
        "view_as",
        "pin_memory",
        "abs",
        "neg",
    }
)
_SCALAR_OPS = frozenset({"+", "-", "*", "//", "%", "neg"})


def dtype_name(dotted: str) -> str | None:
    """``int64`` for ``torch.int64``/``torch.long``/``torch.cuda.LongTensor``."""
    if not dotted.startswith("torch."):
        return None
    return _NAMES.get(dotted.rsplit(".", 1)[1])


@dataclass(frozen=True)
class Decision:
    """One dtype a value may have: ``dtype`` of ``kind``, under ``guard``; decided by
    ``call`` in ``function`` (``None`` where nothing in the project decides it: the
    engine's own tensors), ``literal`` when written there as a literal a fix may edit;
    ``via``: the helpers it came through (``_alloc_index_buffer``)."""

    guard: Guard
    dtype: str
    kind: str
    what: str
    function: Function | None = None
    call: Term | None = None
    literal: bool = False
    via: tuple[str, ...] = ()


# The most call sites a parameter's dtype is read from (a helper called everywhere
# decides nothing of one call).
_CALLERS = 8


class Dtypes:
    """The dtype queries of one audit (memoised on :class:`Values`)."""

    def __init__(self, values: Values) -> None:
        self.values = values
        self.model = values.model
        self.project = values.project

    def of(self, term: Term, ctx: Ctx) -> tuple[Decision, ...]:
        return self.values._memoised("dtype", term, ctx, lambda: self._of(term, ctx), ())

    def _of(self, term: Term, ctx: Ctx) -> tuple[Decision, ...]:
        if isinstance(term, Phi):
            out = []
            for guard, alternative in self.values.choices(term, ctx):
                for d in self.of(alternative, ctx):
                    if consistent(guard, d.guard):
                        out.append(_guarded(d, guard))
            return tuple(out)
        if isinstance(term, Param):
            bound = ctx.binding(term.name)
            if bound is not None:
                return self.of(*bound)
            asserted = self.asserted(ctx.function).get(term.name)
            if asserted is not None:
                return (Decision(NO_GUARD, asserted, ASSERTED, f"`{term.name}`"),)
            return ()
        if isinstance(term, Global):
            found = self.project.global_value(term.name)
            if found is not None:
                return self.of(found[0], Ctx(found[1], depth=ctx.depth + 1))
            return ()
        if isinstance(term, Attr):
            return self._attr(term, ctx)
        if isinstance(term, Index):
            return self._index(term, ctx)
        if isinstance(term, Filled):
            return self.of(term.base, ctx)
        if isinstance(term, Call):
            return self._call(term, ctx)
        if isinstance(term, Op) and term.op in _SCALAR_OPS:
            for operand in term.operands:
                found = self.of(operand, ctx)
                if found:
                    return found
        return ()

    def _attr(self, term: Attr, ctx: Ctx) -> tuple[Decision, ...]:
        engine = self.model.dtypes.get(term.name)
        if engine is not None:
            return (Decision(NO_GUARD, engine, ENGINE, f"`{render(term)}`"),)
        out: list[Decision] = []
        for cls in self.values.classes(term.base, ctx):
            for store_fn, event in self.project.field_stores(cls, term.name):
                if event.value is not None:
                    inner = Ctx(store_fn, depth=ctx.depth + 1)
                    out += [_guarded(d, NO_GUARD, reset=True) for d in self.of(event.value, inner)]
        return tuple(out)

    def _index(self, term: Index, ctx: Ctx) -> tuple[Decision, ...]:
        if isinstance(term.index, Const) and isinstance(term.index.value, int):
            parts = self.values.component(term.base, term.index.value, ctx)
            if parts:
                return tuple(d for part, inner in parts for d in self.of(part, inner))
        base = self.of(term.base, ctx)
        if not isinstance(term.index, Slice | Seq) and any(
            f.space == TABLE for f in self.values.space(term.base, ctx)
        ):
            # a gather through the full->SWA table: a translation, of the table's dtype
            table = base or self.mapping()
            return tuple(
                Decision(d.guard, d.dtype, TRANSLATION, f"a gather through `{render(term.base)}`")
                for d in table
            )
        return base

    def _call(self, term: Call, ctx: Ctx) -> tuple[Decision, ...]:
        func = term.func
        here = ctx.function
        if isinstance(func, Global):
            name = func.name
            short = name.rsplit(".", 1)[-1]
            if name in ("dataclasses.field", "field"):
                # a dataclass field: its default, or what its factory makes
                made = term.keyword("default_factory")
                if isinstance(made, Lambda):
                    return self.of(made.body, ctx)
                default = term.keyword("default")
                return self.of(default, ctx) if default is not None else ()
            if name.startswith("torch.") and name.count(".") == 1:
                dtype = term.keyword("dtype")
                if dtype is not None and short not in _JOINS:
                    return self._allocation(dtype, term, ctx, ALLOCATION)
                if short in _INT64_BY_DEFAULT or (short == "full" and _int_fill(term)):
                    what = f"`{render(term, 40)}`"
                    return (Decision(NO_GUARD, "int64", DEFAULT, what, here, term, True),)
                if short in _FLOAT_BY_DEFAULT:
                    what = f"`{render(term, 40)}`"
                    return (Decision(NO_GUARD, "float32", DEFAULT, what, here, term, True),)
                if short in _LIKE and term.args:
                    return self.of(term.args[0], ctx)
                if short in _JOINS and term.args:
                    first = term.args[0]
                    items = first.items if isinstance(first, Seq) else (first,)
                    return self.of(items[0], ctx) if items else ()
                if short == "where" and len(term.args) == 3:
                    return self.of(term.args[1], ctx)
                return ()
        if isinstance(func, Attr):
            method = func.name
            if method in _CASTS and not term.args:
                dtype = _CASTS[method]
                return (Decision(NO_GUARD, dtype, CAST, f"`.{method}()`", here, term, True),)
            if method in ("to", "type"):
                target = term.keyword("dtype") or next(
                    (a for a in term.args if self._is_dtype(a, ctx)), None
                )
                if target is None:
                    return self.of(func.base, ctx)
                return self._allocation(target, term, ctx, CAST)
            if method == "type_as" and term.args:
                # the other tensor's dtype: ``x.type_as(y)`` is ``x.to(y.dtype)``
                return self._allocation(Attr(term.args[0], "dtype"), term, ctx, CAST)
            if method in _NEW:
                dtype = term.keyword("dtype")
                if dtype is not None:
                    return self._allocation(dtype, term, ctx, ALLOCATION)
                return self.of(func.base, ctx)
            if method in _KEEPS:
                return self.of(func.base, ctx)
            translator = self.model.translator(method)
            if translator is not None and translator.to == SWA:
                # decided where it is called: the caller chose to hand on its result
                return tuple(
                    Decision(d.guard, d.dtype, d.kind, d.what, here, term)
                    for d in self.translation(term, ctx)
                )
        if isinstance(func, Lambda):
            return ()
        out: list[Decision] = []
        callees = self.values.callees(term, ctx)
        for callee, inner in callees:
            for d in self.of(callee.facts.returns, inner):
                out.append(
                    Decision(
                        d.guard if not d.guard else NO_GUARD,
                        d.dtype,
                        d.kind,
                        d.what,
                        d.function,
                        d.call,
                        d.literal,
                        (callee.facts.name, *d.via),
                    )
                )
        dtype = term.keyword("dtype")
        if not out and dtype is not None:
            # a helper or holder given the dtype of what it allocates
            # (``self._make_buffer(n, dtype=torch.int32)``)
            return self._allocation(dtype, term, ctx, ALLOCATION)
        return tuple(out)

    def _allocation(self, dtype: Term, call: Term, ctx: Ctx, kind: str) -> tuple[Decision, ...]:
        """A factory or cast given ``dtype`` (a literal, a variable, a default argument,
        another tensor's ``.dtype``)."""
        here = ctx.function
        out: list[Decision] = []
        for guard, name, literal, where in self.dtype_value(dtype, ctx):
            if where:
                what = f"`{where}`"
            elif kind == CAST:
                what = f"`.to(torch.{name})`"
            else:
                what = f"`dtype=torch.{name}`"
            out.append(Decision(guard, name, kind, what, here, call, literal and where == ""))
        return tuple(out)

    def dtype_value(self, term: Term, ctx: Ctx) -> list[tuple[Guard, str, bool, str]]:
        """What a dtype expression denotes: ``(guard, dtype, literal, from)`` — ``from``
        names a variable or tensor it comes from (empty for a literal written here)."""
        if isinstance(term, Global):
            name = dtype_name(term.name)
            if name is not None:
                return [(NO_GUARD, name, True, "")]
            found = self.project.global_value(term.name)
            if found is not None:
                inner = Ctx(found[1], depth=ctx.depth + 1)
                return [
                    (g, d, False, term.name.rsplit(".", 1)[-1])
                    for g, d, _, _ in self.dtype_value(found[0], inner)
                ]
            return []
        if isinstance(term, Const) and isinstance(term.value, str):
            name = dtype_name(
                term.value if term.value.startswith("torch.") else f"torch.{term.value}"
            )
            return [(NO_GUARD, name, True, "")] if name else []
        if isinstance(term, Phi):
            return [
                (guard | g, d, lit, w)
                for guard, alternative in self.values.choices(term, ctx)
                for g, d, lit, w in self.dtype_value(alternative, ctx)
            ]
        if isinstance(term, Param):
            bound = ctx.binding(term.name)
            if bound is not None:
                return [(g, d, False, term.name) for g, d, _, _ in self.dtype_value(*bound)]
            default = ctx.function.facts.default(term.name)
            if default is not None:
                return [(g, d, False, term.name) for g, d, _, _ in self.dtype_value(default, ctx)]
            if ctx.bindings or ctx.depth > 0:
                return []
            # read in the function's own context: what its callers pass
            # (``create(cache_loc_dtype=self._cache_loc_dtype())``)
            out = []
            for _, inner in self.values.callers(ctx.function)[:_CALLERS]:
                passed = inner.binding(term.name)
                if passed is not None:
                    out += [
                        (NO_GUARD, d, False, term.name) for _, d, _, _ in self.dtype_value(*passed)
                    ]
            return out
        if isinstance(term, Attr) and term.name == "dtype":
            return [
                (d.guard, d.dtype, False, f"{render(term.base)}.dtype")
                for d in self.of(term.base, ctx)
            ]
        return []

    def _is_dtype(self, term: Term, ctx: Ctx) -> bool:
        if isinstance(term, Global):
            return dtype_name(term.name) is not None
        if isinstance(term, Attr):
            return term.name == "dtype"
        return bool(self.dtype_value(term, ctx))

    # -- project facts --------------------------------------------------------------------

    def mapping(self) -> tuple[Decision, ...]:
        """The full->SWA table's dtype: how the project builds it (int64 where it does not,
        or the builds disagree: SGLang's table)."""
        memo = self.values._memo
        key = ("mapping-dtype", Const(0), None)
        if key in memo:
            return memo[key]  # type: ignore[return-value]
        memo[key] = ()
        built: list[Decision] = []
        is_mapping = self.model.is_mapping_name
        for function in self.project.functions.values():
            if not any(is_mapping(name) for name in function.facts.index.binds):
                continue
            for event in function.facts.events:
                target = event.target
                if (
                    event.kind == "bind"
                    and isinstance(target, Attr)
                    and self.model.is_mapping_name(target.name)
                    and event.value is not None
                ):
                    built += self.of(event.value, Ctx(function))
        dtypes = {d.dtype for d in built}
        if len(dtypes) == 1:
            found: tuple[Decision, ...] = (built[0],)
        else:
            found = (
                Decision(
                    NO_GUARD,
                    self.model.dtypes.get(next(iter(self.model.mapping_attributes), ""), "int64"),
                    ENGINE,
                    "the full->SWA table",
                ),
            )
        memo[key] = found  # type: ignore[index]
        return found

    def translation(self, call: Call, ctx: Ctx) -> tuple[Decision, ...]:
        """A translation's dtype: what the translate it runs returns (any of the
        project's translate methods where the receiver's class is unknown)."""
        callees = self.values.callees(call, ctx)
        functions = [(c, inner) for c, inner in callees]
        if not functions:
            functions = [(f, Ctx(f, depth=ctx.depth + 1)) for f in self.translate_methods()]
        out = []
        for function, inner in functions:
            for d in self.of(function.facts.returns, inner):
                # whatever decides it inside (a cast, an allocation, an assert on what it
                # returns), to its caller it is the translation's dtype: no cast or assert
                # written where it is called
                out.append(
                    Decision(
                        NO_GUARD,
                        d.dtype,
                        TRANSLATION,
                        f"`{function.facts.name}`",
                        d.function,
                        d.call,
                    )
                )
        return tuple(out)

    @cached_property
    def _translate_methods(self) -> list[Function]:
        names = {t for t, entry in self.model.translators.items() if entry.to == SWA}
        names |= set(self.model.translate_methods)
        return [
            f
            for f in self.project.functions.values()
            if f.facts.name in names and not f.facts.trivial and f.facts.analysed
        ]

    def translate_methods(self) -> list[Function]:
        """The project's translations to the SWA space (by the model's names)."""
        return self._translate_methods

    def asserted(self, function: Function) -> dict[str, str]:
        """The parameters ``function`` asserts one dtype of (``assert p.dtype ==
        torch.int32``, ``if p.dtype != torch.int32: raise``) or annotates
        (``p: torch.IntTensor``), when it does not bind them again first."""
        return asserted_parameters(function.facts)


def asserted_parameters(facts: FunctionFacts) -> dict[str, str]:
    found: dict[str, str] = {}
    for param, annotation in facts.annotations:
        name = dtype_name(annotation.replace("torch.cuda.", "torch."))
        if name is not None:
            found[param] = name
    for event in facts.events:
        if event.kind == ASSERT and event.value is not None:
            for test in _conjuncts(event.value):
                checked = dtype_test(test)
                if checked is not None:
                    param, dtype = checked
                    found.setdefault(param, dtype)
    return found


def dtype_test(test: Term) -> tuple[str, str] | None:
    """``p.dtype == torch.int32`` (or ``is``, ``in (torch.int32,)``) -> ``(p, int32)``."""
    if not isinstance(test, Op) or test.op not in ("==", "is", "in") or len(test.operands) != 2:
        return None
    left, right = test.operands
    if not (isinstance(left, Attr) and left.name == "dtype" and isinstance(left.base, Param)):
        return None
    items = right.items if isinstance(right, Seq) else (right,)
    names = {dtype_name(i.name) if isinstance(i, Global) else None for i in items}
    if len(names) != 1 or None in names:
        return None
    return left.base.name, next(iter(names))  # type: ignore[return-value]


def _conjuncts(term: Term) -> list[Term]:
    if isinstance(term, Op) and term.op == "and":
        return [c for operand in term.operands for c in _conjuncts(operand)]
    return [term]


def _int_fill(call: Call) -> bool:
    value = call.argument(1, "fill_value")
    return (
        isinstance(value, Const)
        and isinstance(value.value, int)
        and not isinstance(value.value, bool)
    )


def _guarded(d: Decision, guard: Guard, reset: bool = False) -> Decision:
    new = NO_GUARD if reset else guard | d.guard
    return Decision(new, d.dtype, d.kind, d.what, d.function, d.call, d.literal, d.via)


def decider(function: Function, call: Term, near: Event | None = None) -> Event | None:
    """The call event of ``function`` whose value is ``call`` (a tensor-making call is
    one per place written; another may be written in several: the one in ``near``'s
    statement, else the last before it, else the last)."""
    found = [e for e in function.facts.events if e.kind == "call" and e.value == call]
    if not found:
        return None
    if near is not None and len(found) > 1:
        same = [e for e in found if e.stmt == near.stmt]
        if same:
            return same[-1]
        before = [e for e in found if (e.span.line, e.span.col) <= (near.span.line, near.span.col)]
        if before:
            return before[-1]
    return found[-1]
