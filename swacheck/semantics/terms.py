"""Symbolic values: what an expression of a function evaluates to, as plain data.

The first pass evaluates every expression of an analysed function to a :class:`Term`
over the function's own inputs (its parameters, globals, the object's fields, the
results of calls) with its locals substituted, joins at control-flow merges as a
:class:`Phi` whose alternatives carry the branch conditions that choose them
(:mod:`swacheck.semantics.guards`), and records in-place writes to a local tensor as a
:class:`Filled` term. Terms are immutable, hashable and picklable: they are cached with
a file's facts and read later, with the project at hand, by the queries of
:mod:`swacheck.semantics.values` (which space, dtype, origin a value has).

Terms know no engine: ``forward_batch.out_cache_loc`` is ``Attr(Param("forward_batch"),
"out_cache_loc")`` here; that it is a full-pool write location is the model's to say.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A branch literal: (the tested value, the truth it holds with). See guards.py.
Literal = tuple["Term", bool]
Guard = frozenset[Literal]
NO_GUARD: Guard = frozenset()


class Term:
    """Base class of every symbolic value.

    Terms are never changed once made (by convention: they are plain slotted objects,
    which are much cheaper to make than frozen ones), and are compared and hashed
    structurally; the hash is computed once per term and kept (terms are joined and
    looked up in dicts many times, and are deep)."""

    __slots__ = ("_hash",)
    # A C-level getter of the class's fields, as a tuple (set per class, below).
    _values: Callable[[Term], tuple[object, ...]]

    def __init_subclass__(cls) -> None:
        # ``dataclass(slots=True)`` makes the class again with its fields as slots
        slots = cls.__dict__.get("__slots__")
        if slots is not None:
            getter = operator.attrgetter(*slots) if slots else (lambda term: ())
            cls._values = (lambda term: (getter(term),)) if len(slots) == 1 else getter  # type: ignore[assignment]

    def __hash__(self) -> int:
        try:
            return self._hash  # type: ignore[no-any-return]
        except AttributeError:
            pass
        cls = type(self)
        value = hash((cls.__name__, cls._values(self)))
        self._hash = value
        return value

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        cls = type(self)
        if type(other) is not cls or hash(self) != hash(other):
            return False
        return bool(cls._values(self) == cls._values(other))

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __getstate__(self) -> tuple[object, ...]:
        return tuple(getattr(self, f) for f in self.__slots__)

    def __setstate__(self, state: tuple[object, ...]) -> None:
        for name, value in zip(self.__slots__, state, strict=True):
            setattr(self, name, value)


@dataclass(slots=True, eq=False)
class Unknown(Term):
    """A value nothing is known of (a star argument, an unsupported expression)."""

    why: str = ""


UNKNOWN = Unknown()


@dataclass(slots=True, eq=False)
class Const(Term):
    """A literal: int, float, str, bytes, bool, None."""

    value: Any


@dataclass(slots=True, eq=False)
class Global(Term):
    """A module-level or imported name, or a builtin, by its qualified spelling: a
    name bound by ``import``/``from ... import`` is its module path (``torch``,
    ``torch.int32``, ``sglang.srt.mem_cache.kv_loc_plan.IdSpaceKind``), a name defined
    in the module is ``<module>.<name>``; attribute chains on a global fold into it
    (``torch.int32``)."""

    name: str


@dataclass(slots=True, eq=False)
class Param(Term):
    """A parameter of the function being analysed (``self`` included)."""

    name: str


@dataclass(slots=True, eq=False)
class Local(Term):
    """A local variable of the function, as the *target* of a binding event (a value
    read from a local is the term bound to it, never this)."""

    name: str


@dataclass(slots=True, eq=False)
class Attr(Term):
    """``base.name``, read."""

    base: Term
    name: str


@dataclass(slots=True, eq=False)
class Index(Term):
    """``base[index]``, read: a gather (``index`` a term) or a slice (:class:`Slice`)."""

    base: Term
    index: Term


@dataclass(slots=True, eq=False)
class Slice(Term):
    """``lower:upper:step`` inside a subscript (``None`` where omitted)."""

    lower: Term | None
    upper: Term | None
    step: Term | None = None


@dataclass(slots=True, eq=False)
class Call(Term):
    """The result of calling ``func``; ``star`` when ``*args``/``**kwargs`` were passed.

    ``site``: which call that makes a new tensor (an allocation, a cast) it is, numbered
    within its module (:meth:`Scope.site`), so that two written alike are two values; 0
    for others, which compare by what they call (two tests of ``mode.is_decode()`` line
    up)."""

    func: Term
    args: tuple[Term, ...] = ()
    kwargs: tuple[tuple[str, Term], ...] = ()
    star: bool = False
    site: int = 0

    def keyword(self, name: str) -> Term | None:
        for key, value in self.kwargs:
            if key == name:
                return value
        return None

    def argument(self, position: int, name: str | None = None) -> Term | None:
        """The argument bound to a parameter at ``position`` or called ``name``."""
        if name is not None:
            found = self.keyword(name)
            if found is not None:
                return found
        if 0 <= position < len(self.args):
            return self.args[position]
        return None


@dataclass(slots=True, eq=False)
class Op(Term):
    """An operator applied to operands: ``+ - * // % & | << >>`` (binary), ``neg``,
    ``not``, comparisons (``== != < <= > >= is is not in``), ``and``/``or``."""

    op: str
    operands: tuple[Term, ...]


@dataclass(slots=True, eq=False)
class Seq(Term):
    """A tuple or list display."""

    items: tuple[Term, ...]
    kind: str = "tuple"


@dataclass(slots=True, eq=False)
class Mapping(Term):
    """A dict display; keys are terms (``Const`` for string keys)."""

    items: tuple[tuple[Term, Term], ...]


@dataclass(slots=True, eq=False)
class Lambda(Term):
    """A ``lambda`` (its body, over its own parameters as :class:`Param`)."""

    params: tuple[str, ...]
    body: Term


@dataclass(slots=True, eq=False)
class Phi(Term):
    """One of several values, each under the branch literals that choose it."""

    alternatives: tuple[tuple[Guard, Term], ...]


@dataclass(slots=True, eq=False)
class Filled(Term):
    """The tensor ``base`` after an in-place write of ``value`` into ``region``.

    ``region`` says which rows: ``"all"`` (``copy_``/``zero_``/``fill_`` of the whole
    tensor), or the :class:`Slice`/index term of the subscript written."""

    base: Term
    region: Term | str
    value: Term


def phi(alternatives: list[tuple[Guard, Term]], limit: int = 12) -> Term:
    """The join of ``alternatives``: nested joins flattened, duplicates merged (their
    guards intersected), a single value returned as it is; past ``limit`` distinct
    values nothing useful is left and the join is :data:`UNKNOWN`."""
    flat: dict[Term, Guard] = {}
    for guard, term in alternatives:
        if isinstance(term, Phi):
            for inner_guard, inner in term.alternatives:
                _merge(flat, guard | inner_guard, inner)
        else:
            _merge(flat, guard, term)
    if len(flat) == 1:
        return next(iter(flat))
    if len(flat) > limit:
        return Unknown("join")
    return Phi(tuple((guard, term) for term, guard in flat.items()))


def _merge(flat: dict[Term, Guard], guard: Guard, term: Term) -> None:
    known = flat.get(term)
    flat[term] = guard if known is None else known & guard


def alternatives(term: Term) -> tuple[tuple[Guard, Term], ...]:
    """The values ``term`` may be, each with its guard."""
    if isinstance(term, Phi):
        return term.alternatives
    return ((NO_GUARD, term),)


def parts(term: Term) -> tuple[Term, ...]:
    """The terms ``term`` is made of, one level down (a join's alternatives, a call's
    function and arguments, a filled tensor's base and value)."""
    if isinstance(term, Attr):
        return (term.base,)
    if isinstance(term, Index):
        return (term.base, term.index)
    if isinstance(term, Call):
        return (term.func, *term.args, *(v for _, v in term.kwargs))
    if isinstance(term, Op):
        return term.operands
    if isinstance(term, Seq):
        return term.items
    if isinstance(term, Mapping):
        return tuple(t for item in term.items for t in item)
    if isinstance(term, Slice):
        return tuple(p for p in (term.lower, term.upper, term.step) if p is not None)
    if isinstance(term, Phi):
        return tuple(alt for _, alt in term.alternatives)
    if isinstance(term, Filled):
        return (term.base, term.value)
    if isinstance(term, Lambda):
        return (term.body,)
    return ()


def contains(term: Term, found: Callable[[Term], bool], limit: int = 400) -> bool:
    """Whether ``term`` or a term it is made of satisfies ``found`` (at most ``limit``
    terms are looked at: a join of joins can be wide)."""
    stack = [term]
    seen = 0
    while stack and seen < limit:
        node = stack.pop()
        seen += 1
        if found(node):
            return True
        stack += parts(node)
    return False


def consistent(*guards: Guard) -> bool:
    """Whether the literals of ``guards`` can hold together (no test both ways)."""
    seen: dict[str, bool] = {}
    for guard in guards:
        for key, polarity in guard:
            if seen.setdefault(key, polarity) != polarity:
                return False
    return True


def render(term: Term, limit: int = 60) -> str:
    """Source-like text of ``term`` for messages (``forward_batch.out_cache_loc``)."""
    text = _render(term)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _render(term: Term) -> str:
    if isinstance(term, Param | Local):
        return term.name
    if isinstance(term, Global):
        return term.name.rsplit(".", 1)[-1] if "." in term.name else term.name
    if isinstance(term, Attr):
        return f"{_render(term.base)}.{term.name}"
    if isinstance(term, Const):
        return repr(term.value)
    if isinstance(term, Index):
        return f"{_render(term.base)}[{_render(term.index)}]"
    if isinstance(term, Slice):
        parts = [_render(p) if p is not None else "" for p in (term.lower, term.upper)]
        return ":".join(parts)
    if isinstance(term, Call):
        args = [_render(a) for a in term.args] + [f"{k}={_render(v)}" for k, v in term.kwargs]
        return f"{_render(term.func)}({', '.join(args)})"
    if isinstance(term, Seq):
        return f"({', '.join(_render(i) for i in term.items)})"
    if isinstance(term, Op):
        if len(term.operands) == 2:
            return f"{_render(term.operands[0])} {term.op} {_render(term.operands[1])}"
        return f"{term.op} {', '.join(_render(o) for o in term.operands)}"
    if isinstance(term, Filled):
        return _render(term.base)
    if isinstance(term, Phi):
        return " | ".join(_render(t) for _, t in term.alternatives[:2])
    return "..."


# Methods whose result holds the receiver's values (a view, a cast, a copy).
KEEPS = frozenset(
    {
        "to",
        "long",
        "int",
        "clone",
        "contiguous",
        "view",
        "reshape",
        "flatten",
        "squeeze",
        "unsqueeze",
        "narrow",
        "detach",
        "cpu",
        "cuda",
        "tolist",
        "numpy",
        "type",
        "expand",
        "expand_as",
        "repeat",
        "repeat_interleave",
        "index_select",
        "masked_select",
        "view_as",
        "t",
        "transpose",
        "permute",
        "flip",
        "roll",
        "unique",
        "sort",
        "item",
        "new_tensor",
    }
)


def view_root(term: Term) -> Term:
    """The tensor a view, slice or cast of it is taken from."""
    while True:
        if isinstance(term, Index) and isinstance(term.index, Slice | Seq):
            term = term.base
        elif isinstance(term, Call) and isinstance(term.func, Attr) and term.func.name in KEEPS:
            term = term.func.base
        else:
            return term
