"""What a term means in the project: its class, the function a call runs, its space.

The queries every rule asks, answered over the first pass's terms with the project and
the engine's model at hand, memoised per audit:

* :meth:`Values.classes` — the classes an object may be of (``self``, an annotated
  parameter, a field bound to a construction, a method's annotated result);
* :meth:`Values.callees` — what a call runs, with its arguments bound to the callee's
  parameters (so the callee's terms are read in the caller's context);
* :meth:`Values.space` — which index space a location value lives in: the full pool's
  (``out_cache_loc``, ``req_to_token`` pages, a full translator's result), the SWA
  pool's (a translation, a gather through the full->SWA table, an SWA sub-pool's
  allocation, the model's per-kind translators), or the table itself — each possibility
  with the branch literals it needs, and why (for the message);
* :meth:`Values.translator_space` — the space a *callable* translates into
  (``alloc.translate_loc_from_full_to_swa``, a ``lambda`` around one);
* :meth:`Values.kind` — the space a ``kind`` argument names (``IdSpaceKind.FULL``).

A value is followed through locals (already substituted in the terms), joins, views,
casts and arithmetic, in-place fills, fields of objects (every binding of the field in
the class's methods), module-level names, and into the functions a call runs and back
out through their returns, to a bounded depth. What cannot be followed is unknown, and
an unknown value is never reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from swacheck.semantics.function import CALL, FILL, Event, FunctionFacts
from swacheck.semantics.guards import assume
from swacheck.semantics.model import FULL, SWA, Model
from swacheck.semantics.project import Class, Function, Project
from swacheck.semantics.terms import (
    KEEPS,
    NO_GUARD,
    UNKNOWN,
    Attr,
    Call,
    Const,
    Filled,
    Global,
    Guard,
    Index,
    Lambda,
    Mapping,
    Op,
    Param,
    Phi,
    Seq,
    Slice,
    Term,
    alternatives,
    consistent,
    render,
    view_root,
)

TABLE = "table"  # the full->SWA table: a gather through it is SWA
FULL_TABLE = "full-table"  # req_to_token: a gather of its rows is full-pool locations
EITHER = "?"  # one pool's locations, which one a kind known only at run time says

MAX_DEPTH = 4
T = TypeVar("T")

# Attributes that are no location whatever their object holds.
_METADATA = frozenset(
    {
        "shape",
        "dtype",
        "device",
        "is_cuda",
        "ndim",
        "layout",
        "data_ptr",
        "numel",
        "size",
        "stride",
        "is_translated",
        "is_translating",
        "requires_grad",
        "key",
        "row_stride",
        "entry_page_size",
    }
)
_JOINS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.stack", "torch.where"})
_ALLOCATIONS = frozenset(
    {
        "torch.zeros",
        "torch.empty",
        "torch.ones",
        "torch.full",
        "torch.arange",
        "torch.tensor",
        "torch.as_tensor",
        "torch.zeros_like",
        "torch.empty_like",
        "torch.ones_like",
        "torch.full_like",
    }
)


@dataclass(frozen=True)
class Ctx:
    """Where a term is read: its function, and the arguments its parameters are bound
    to when it is read as the callee of a call (each in its caller's context)."""

    function: Function
    bindings: tuple[tuple[str, Term, Ctx], ...] = ()
    depth: int = 0

    def binding(self, name: str) -> tuple[Term, Ctx] | None:
        for param, term, ctx in self.bindings:
            if param == name:
                return term, ctx
        return None


@dataclass(frozen=True)
class Space:
    """One possibility of a value's space: under ``guard``, ``space`` (``full``, ``swa``,
    ``table``, ``full-table``), because of ``why``."""

    guard: Guard
    space: str
    why: str
    role: str | None = None
    # Read off a name only (``swa_page_table``), not off where the value comes from.
    weak: bool = False


class Values:
    def __init__(self, project: Project, model: Model) -> None:
        self.project = project
        self.model = model
        self._memo: dict[tuple[str, Term, Ctx], object] = {}
        self._active: set[tuple[str, Term, Ctx]] = set()
        self._evidence: dict[str, dict[str, Space]] = {}
        self._handed: dict[str, list[tuple[Event, Term]]] = {}

    def once(self, name: str, compute: Callable[[], T]) -> T:
        """``compute()``, once per analysis: a result about the whole project."""
        key = (name, UNKNOWN, None)
        if key not in self._memo:
            self._memo[key] = compute()  # type: ignore[index]
        return self._memo[key]  # type: ignore[index, return-value]

    def ctx(self, function: Function) -> Ctx:
        return Ctx(function)

    def _memoised(self, kind: str, term: Term, ctx: Ctx, compute: Callable[[], T], empty: T) -> T:
        key = (kind, term, ctx)
        if key in self._memo:
            return self._memo[key]  # type: ignore[return-value]
        if key in self._active or ctx.depth > MAX_DEPTH:
            return empty
        self._active.add(key)
        try:
            value = compute()
        finally:
            self._active.discard(key)
        self._memo[key] = value
        return value

    # -- classes and calls ---------------------------------------------------------------

    def classes(self, term: Term, ctx: Ctx) -> tuple[Class, ...]:
        return self._memoised("classes", term, ctx, lambda: self._classes(term, ctx), ())

    def _classes(self, term: Term, ctx: Ctx) -> tuple[Class, ...]:
        project = self.project
        function = ctx.function
        if isinstance(term, Phi):
            return _unique(c for _, alt in term.alternatives for c in self.classes(alt, ctx))
        if isinstance(term, Param):
            bound = ctx.binding(term.name)
            if bound is not None:
                return self.classes(*bound)
            if term.name == function.self_param:
                own = project.class_of_function(function)
                return (own,) if own is not None else ()
            annotation = function.facts.annotation(term.name)
            found = project.annotated_class(annotation, function.module) if annotation else None
            return (found,) if found is not None else ()
        if isinstance(term, Call):
            func = term.func
            if isinstance(func, Global):
                target = project.callee_by_name(func)
                if isinstance(target, Class):
                    return (target,)
                if isinstance(target, Function) and target.facts.returns_annotation:
                    found = project.annotated_class(target.facts.returns_annotation, target.module)
                    return (found,) if found is not None else ()
                return ()
            out: list[Class] = []
            for callee, _ in self.callees(term, ctx):
                annotation = callee.facts.returns_annotation
                if annotation:
                    found = project.annotated_class(annotation, callee.module)
                    if found is not None:
                        out.append(found)
            return _unique(out)
        if isinstance(term, Attr):
            out = []
            for cls in self.classes(term.base, ctx):
                annotation = project.field_annotation(cls, term.name)
                if annotation:
                    found = project.annotated_class(annotation, cls.module)
                    if found is not None:
                        out.append(found)
                        continue
                for store_fn, event in project.field_stores(cls, term.name):
                    if event.value is not None:
                        out += self.classes(event.value, Ctx(store_fn, depth=ctx.depth + 1))
            return _unique(out)
        if isinstance(term, Global):
            found_value = project.global_value(term.name)
            if found_value is not None:
                value, top = found_value
                return self.classes(value, Ctx(top, depth=ctx.depth + 1))
        return ()

    def callees(self, call: Call, ctx: Ctx) -> tuple[tuple[Function, Ctx], ...]:
        """The functions ``call`` may run, each with the context its body is read in."""
        return self._memoised("callees", call, ctx, lambda: self._callees(call, ctx), ())

    def _callees(self, call: Call, ctx: Ctx) -> tuple[tuple[Function, Ctx], ...]:
        project = self.project
        func = call.func
        targets: list[tuple[Function, Term | None]] = []
        if isinstance(func, Attr):
            receiver = func.base
            if isinstance(receiver, Call) and receiver.func == Global("super"):
                own = project.class_of_function(ctx.function)
                if own is not None:
                    for base in project.mro(own)[1:]:
                        found = project.functions.get(f"{base.qual}.{func.name}")
                        if found is not None:
                            targets.append((found, Param(ctx.function.self_param or "self")))
                            break
            else:
                classes = self.classes(receiver, ctx)
                for cls in classes:
                    found = project.method(cls, func.name)
                    if found is not None:
                        targets.append((found, receiver))
                if not classes and not func.name.startswith("__"):
                    # an object of no known class: the one method of that name, unless it
                    # is the caller's own class's (a composite delegating to its parts)
                    candidates = project.methods_named(func.name)
                    own = project.class_of_function(ctx.function)
                    family = {c.qual for c in project.mro(own)} if own is not None else set()
                    if len(candidates) == 1 and candidates[0].cls not in family:
                        targets.append((candidates[0], receiver))
        elif isinstance(func, Global):
            target = project.callee_by_name(func)
            if isinstance(target, Function):
                targets.append((target, None))
            elif isinstance(target, Class):
                init = project.method(target, "__init__")
                if init is not None:
                    targets.append((init, None))
        out = []
        for callee, receiver in targets:
            out.append((callee, self._bind(callee, call, receiver, ctx)))
        return tuple(out)

    def _bind(self, callee: Function, call: Call, receiver: Term | None, ctx: Ctx) -> Ctx:
        params = callee.facts.positional
        bindings: list[tuple[str, Term, Ctx]] = []
        own = callee.self_param
        if own is not None and receiver is not None and not own.startswith("*"):
            bindings.append((own, receiver, ctx))
        for param, arg in zip(params, call.args, strict=False):
            bindings.append((param, arg, ctx))
        for name, value in call.kwargs:
            if name in params:
                bindings.append((name, value, ctx))
        if not any(p.startswith("*") for p in callee.facts.params):
            # a parameter the call leaves out has its default (``**kwargs`` may pass it)
            bound = {name for name, _, _ in bindings}
            own = Ctx(callee, depth=ctx.depth + 1)
            for name, value in callee.facts.defaults:
                if name not in bound:
                    bindings.append((name, value, own))
        return Ctx(callee, tuple(bindings), ctx.depth + 1)

    def constant(self, name: str, ctx: Ctx) -> Const | None:
        """The constant parameter ``name`` is bound to in ``ctx`` (an argument or a
        default), if it is one."""
        for _ in range(8):
            bound = ctx.binding(name)
            if bound is None:
                return None
            term, ctx = bound
            if isinstance(term, Const):
                return term
            if not isinstance(term, Param):
                return None
            name = term.name
        return None

    def choices(self, term: Phi, ctx: Ctx) -> list[tuple[Guard, Term]]:
        """The alternatives of ``term`` that can be taken in ``ctx``, each guard narrowed
        by the constants its parameters are bound to there (:func:`guards.assume`)."""
        if not ctx.bindings:
            return list(term.alternatives)
        out = []
        for guard, alternative in term.alternatives:
            narrowed = assume(guard, lambda name: self.constant(name, ctx))
            if narrowed is not None:
                out.append((narrowed, alternative))
        return out

    def callers(self, function: Function) -> list[tuple[Function, Ctx]]:
        """Every call of ``function`` in the project, as the callee context it reads its
        parameters in (its arguments bound). Only the functions that call something of
        its name are read (:meth:`Project.possible_callers`)."""
        memo = self._memo
        key = ("callers", Global(function.qual), None)
        found = memo.get(key)  # type: ignore[arg-type]
        if found is None:
            found = []
            for caller in self.project.possible_callers(function):
                ctx = Ctx(caller)
                for event in caller.facts.events:
                    if event.kind == CALL and isinstance(event.value, Call):
                        for callee, inner in self.callees(event.value, ctx):
                            if callee == function:
                                found.append((caller, inner))
            memo[key] = found  # type: ignore[index]
        return found  # type: ignore[return-value]

    def returned(self, call: Call, ctx: Ctx) -> list[tuple[Term, Ctx]]:
        """The values the functions ``call`` runs return, each in its callee context."""
        return [(callee.facts.returns, inner) for callee, inner in self.callees(call, ctx)]

    # -- spaces -------------------------------------------------------------------------------

    def space(self, term: Term, ctx: Ctx) -> tuple[Space, ...]:
        """Each space ``term`` may be in (see :class:`Space`); empty: not a location,
        or nothing known."""
        return self._memoised("space", term, ctx, lambda: self._space(term, ctx), ())

    def _space(self, term: Term, ctx: Ctx) -> tuple[Space, ...]:
        model = self.model
        if isinstance(term, Phi):
            out = []
            for guard, alternative in self.choices(term, ctx):
                for fact in self.space(alternative, ctx):
                    if consistent(guard, fact.guard):
                        out.append(
                            Space(guard | fact.guard, fact.space, fact.why, fact.role, fact.weak)
                        )
            return tuple(out)
        if isinstance(term, Param):
            bound = ctx.binding(term.name)
            if bound is not None:
                return self.space(*bound)
            return self._param_space(term.name, ctx)
        if isinstance(term, Global):
            if model.constant_space(term.name) is not None:
                return ()
            found = self.project.global_value(term.name)
            if found is not None:
                value, top = found
                return self.space(value, Ctx(top, depth=ctx.depth + 1))
            return ()
        if isinstance(term, Attr):
            return self._attr_space(term, ctx)
        if isinstance(term, Index):
            return self._index_space(term, ctx)
        if isinstance(term, Filled):
            return self._filled_space(term, ctx)
        if isinstance(term, Call):
            return self._call_space(term, ctx)
        if isinstance(term, Op):
            if term.op in ("+", "-", "*", "//", "%", "<<", ">>", "&", "|", "neg", "or"):
                return _strip_tables(
                    fact for operand in term.operands for fact in self.space(operand, ctx)
                )
            return ()
        if isinstance(term, Lambda):
            return ()
        return ()

    def _param_space(self, name: str, ctx: Ctx) -> tuple[Space, ...]:
        model = self.model
        bare = name.lstrip("*")
        if model.is_mapping_name(bare):
            return (Space(NO_GUARD, TABLE, f"the parameter `{bare}`"),)
        source = model.sources.get(bare)
        if source is not None:
            space = FULL_TABLE if source.table else source.space
            return (Space(NO_GUARD, space, f"the parameter `{bare}`", source.role),)
        evidence = self.param_evidence(ctx.function).get(bare)
        if evidence is not None:
            return (evidence,)
        named = model.name_space(bare)
        if named is not None:
            role = model.swa_role(bare) or model.full_role(bare)
            return (Space(NO_GUARD, named, f"the parameter `{bare}`", role, weak=True),)
        return ()

    def translated_arguments(self, function: Function) -> list[tuple[Event, Term]]:
        """What ``function`` hands to a full->SWA translation: the first argument of a
        translator of the model, of a translating callable kept in a field or handed in,
        and the argument of any call whose callee hands that parameter to one."""
        known = self._handed.get(function.qual)
        if known is not None:
            return known
        found: list[tuple[Event, Term]] = []
        self._handed[function.qual] = found
        ctx = Ctx(function)
        for event in function.facts.events:
            if event.kind != CALL or not isinstance(event.value, Call):
                continue
            call = event.value
            func = call.func
            translator = self.model.translator(func.name) if isinstance(func, Attr) else None
            if translator is not None:
                if translator.to == SWA and call.args:
                    found.append((event, call.args[0]))
                continue
            callees = self.callees(call, ctx)
            if not callees:
                if call.args and any(f.space == SWA for f in self.translator_space(func, ctx)):
                    found.append((event, call.args[0]))
                continue
            for callee, inner in callees:
                for name in self.param_evidence(callee):
                    bound = inner.binding(name)
                    if bound is not None and bound[1] == ctx:
                        found.append((event, bound[0]))
        return found

    def param_evidence(self, function: Function) -> dict[str, Space]:
        """Spaces the function's own code shows its parameters in: a parameter handed
        to a full->SWA translation, or used to gather through the table, holds full-pool
        locations."""
        known = self._evidence.get(function.qual)
        if known is not None:
            return known
        found: dict[str, Space] = {}
        self._evidence[function.qual] = found
        written = _written_before(function.facts)
        for event, argument in self.translated_arguments(function):
            for _, alternative in alternatives(rows_root(argument)):
                root = rows_root(alternative)
                if not isinstance(root, Param) or root.name == function.self_param:
                    continue
                first = written.get(root.name)
                if first is not None and first < (event.stmt.line, event.stmt.col):
                    continue  # a buffer the function fills, then translates in place
                found.setdefault(
                    root.name,
                    Space(
                        NO_GUARD,
                        FULL,
                        f"`{root.name}` (translated to the SWA side elsewhere in "
                        f"`{function.facts.name}`: a full-pool location)",
                        None,
                    ),
                )
        ctx = Ctx(function)
        for term in _gathers(function.facts):
            base, index = term.base, term.index
            root = view_root(index)
            if isinstance(root, Param) and any(
                fact.space == TABLE for fact in self.space(base, ctx)
            ):
                found.setdefault(
                    root.name,
                    Space(
                        NO_GUARD,
                        FULL,
                        f"`{root.name}` (gathered through the full->SWA table in "
                        f"`{function.facts.name}`: a full-pool location)",
                    ),
                )
        return found

    def _attr_space(self, term: Attr, ctx: Ctx) -> tuple[Space, ...]:
        model = self.model
        name = term.name
        if name in _METADATA:
            return ()
        if model.is_mapping_name(name):
            return (Space(NO_GUARD, TABLE, f"`{render(term)}`"),)
        source = model.sources.get(name)
        if source is not None:
            space = FULL_TABLE if source.table else source.space
            return (Space(NO_GUARD, space, f"`{render(term)}`", source.role),)
        named = model.name_space(name)
        if named is not None:
            role = model.swa_role(name) or model.full_role(name)
            return (Space(NO_GUARD, named, f"`{render(term)}`", role, weak=True),)
        # an attribute of a value of one space: the table or ids of a per-kind read
        carried = [f for f in self.space(term.base, ctx) if f.space in (FULL, SWA)]
        if carried:
            return tuple(carried)
        out: list[Space] = []
        for cls in self.classes(term.base, ctx):
            for store_fn, event in self.project.field_stores(cls, name):
                if event.value is not None:
                    inner = Ctx(store_fn, depth=ctx.depth + 1)
                    out += [
                        Space(NO_GUARD, f.space, f.why, f.role, f.weak)
                        for f in self.space(event.value, inner)
                    ]
        return tuple(out)

    def _index_space(self, term: Index, ctx: Ctx) -> tuple[Space, ...]:
        index = term.index
        if isinstance(index, Const) and isinstance(index.value, int):
            parts = self.component(term.base, index.value, ctx)
            if parts:
                return tuple(f for part, part_ctx in parts for f in self.space(part, part_ctx))
        out: list[Space] = []
        for fact in self.space(term.base, ctx):
            if fact.space == TABLE and not isinstance(index, Slice):
                out.append(
                    Space(fact.guard, SWA, f"a gather through the full->SWA table {fact.why}")
                )
            elif fact.space == FULL_TABLE:
                out.append(Space(fact.guard, FULL, f"{fact.why} pages", "page-table"))
            elif fact.space in (FULL, SWA):
                out.append(fact)
        return tuple(out)

    def component(self, term: Term, position: int, ctx: Ctx) -> list[tuple[Term, Ctx]]:
        """Item ``position`` of a tuple-valued term (a literal, or what a call returns)."""
        if isinstance(term, Seq):
            if 0 <= position < len(term.items):
                return [(term.items[position], ctx)]
            return []
        if isinstance(term, Phi):
            return [
                p for _, alt in self.choices(term, ctx) for p in self.component(alt, position, ctx)
            ]
        if isinstance(term, Call):
            out = []
            for value, inner in self.returned(term, ctx):
                out += self.component(value, position, inner)
            return out
        if isinstance(term, Param):
            bound = ctx.binding(term.name)
            if bound is not None:
                return self.component(bound[0], position, bound[1])
        return []

    def _filled_space(self, term: Filled, ctx: Ctx) -> tuple[Space, ...]:
        value = term.value
        if not isinstance(value, Const):
            written = self.space(value, ctx)
            if written:
                return written
        return self.space(term.base, ctx)

    def _call_space(self, term: Call, ctx: Ctx) -> tuple[Space, ...]:
        model = self.model
        func = term.func
        if isinstance(func, Attr):
            method = func.name
            translator = model.translator(method)
            if translator is not None:
                space = translator.space(self._kind_argument(term, translator, ctx))
                if translator.of_receiver:
                    space = self.container_space(func.base, ctx) or space
                if space is None:
                    return ()
                return (Space(NO_GUARD, space, _translated(method, space), translator.role),)
            fill = model.fills.get(method)
            if fill is not None:
                space = self._kind_argument(term, fill, ctx) or fill.default
                return (
                    (Space(NO_GUARD, space, _translated(method, space), fill.role),)
                    if space
                    else ()
                )
            if method in KEEPS:
                return self.space(func.base, ctx)
            container = self.container_space(func.base, ctx)
            if container is not None and method.startswith("alloc"):
                return (Space(NO_GUARD, container, f"an allocation of `{render(func.base)}`"),)
        elif isinstance(func, Global):
            if func.name in _JOINS:
                items: list[Term] = []
                for arg in term.args:
                    items += list(arg.items) if isinstance(arg, Seq) else [arg]
                if func.name == "torch.where":
                    items = items[1:]
                return tuple(f for item in items for f in self.space(item, ctx))
            if func.name in _ALLOCATIONS:
                return ()
        elif isinstance(func, Index):
            return self._launch_space(term, ctx)
        elif isinstance(func, Lambda):
            return ()
        out: list[Space] = []
        callees = self.returned(term, ctx)
        for value, inner in callees:
            out += self.space(value, inner)
        if not callees and isinstance(func, Attr | Param):
            # a callable held in a field or handed in: what it translates into
            out += self.translator_space(func, ctx)
            if not out and isinstance(func, Attr) and func.name not in _METADATA:
                # a method of no known body, from what it is handed
                # (``spec_info.generate_attn_arg_prefill(..., self.req_to_token)``)
                out += self._launch_space(term, ctx, f"`{func.name}(...)`")
        return tuple(out)

    def _launch_space(self, term: Call, ctx: Ctx, who: str = "a kernel") -> tuple[Space, ...]:
        """What a kernel launch (``who``) writes into the buffers it is handed: SWA ids when it
        is handed the full->SWA table or a translator, full ids when it reads request
        pages without either."""
        spaces = [
            f.space
            for arg in (*term.args, *(v for _, v in term.kwargs))
            for f in self.space(arg, ctx)
        ]
        if TABLE in spaces:
            return (Space(NO_GUARD, SWA, f"{who} handed the full->SWA table"),)
        if FULL_TABLE in spaces:
            return (Space(NO_GUARD, FULL, f"{who} reading `req_to_token` pages"),)
        return ()

    def _kind_argument(self, call: Call, entry: object, ctx: Ctx) -> str | None:
        name = getattr(entry, "kind_argument", None)
        if name is None:
            return None
        argument = call.argument(getattr(entry, "kind_position", -1), name)
        if argument is None:
            return None
        kinds = self.kind(argument, ctx)
        return kinds[0] if len(kinds) == 1 else EITHER

    def kind(self, term: Term, ctx: Ctx) -> tuple[str, ...]:
        """The spaces a ``kind`` value may name (``IdSpaceKind.SLIDING_WINDOW``)."""
        return self._memoised("kind", term, ctx, lambda: self._kind(term, ctx), ())

    def _kind(self, term: Term, ctx: Ctx) -> tuple[str, ...]:
        if isinstance(term, Global):
            space = self.model.constant_space(term.name)
            if space is not None:
                return (space,)
            found = self.project.global_value(term.name)
            return self.kind(found[0], Ctx(found[1], depth=ctx.depth + 1)) if found else ()
        if isinstance(term, Phi):
            return tuple(
                sorted({k for _, alt in self.choices(term, ctx) for k in self.kind(alt, ctx)})
            )
        if isinstance(term, Param):
            bound = ctx.binding(term.name)
            if bound is not None:
                return self.kind(*bound)
            default = ctx.function.facts.default(term.name)
            return self.kind(default, ctx) if default is not None else ()
        if isinstance(term, Attr):
            out: set[str] = set()
            for cls in self.classes(term.base, ctx):
                method = self.project.method(cls, term.name)
                if method is not None and "property" in method.facts.decorators:
                    out.update(self.kind(method.facts.returns, Ctx(method, depth=ctx.depth + 1)))
                for store_fn, event in self.project.field_stores(cls, term.name):
                    if event.value is not None:
                        out.update(self.kind(event.value, Ctx(store_fn, depth=ctx.depth + 1)))
            return tuple(sorted(out))
        if isinstance(term, Call):
            return tuple(
                sorted(
                    {
                        k
                        for value, inner in self.returned(term, ctx)
                        for k in self.kind(value, inner)
                    }
                )
            )
        return ()

    def container_space(self, term: Term, ctx: Ctx) -> str | None:
        """The space of a sub-pool or sub-allocator: ``swa_<x>`` (or ``full_<x>``) of an
        object whose class holds both ``swa_<x>`` and ``full_<x>`` (a hybrid pool's
        halves: ``swa_kv_pool``/``full_kv_pool``, ``swa_attn_allocator``/
        ``full_attn_allocator``)."""
        if isinstance(term, Phi):
            return None
        if not isinstance(term, Attr):
            return None
        name = term.name.lstrip("_")
        parts = name.split("_", 1)
        if len(parts) != 2 or parts[0] not in (SWA, FULL):
            return None
        twin = ("full_" if parts[0] == SWA else "swa_") + parts[1]
        for cls in self.classes(term.base, ctx):
            if self.project.owns(cls, twin) or self.project.owns(cls, "_" + twin):
                return parts[0]
        return None

    def container_spaces(self, term: Term, ctx: Ctx) -> tuple[tuple[Guard, str], ...]:
        """:meth:`container_space` of each value ``term`` may be, with its guard."""
        if isinstance(term, Phi):
            out = []
            for guard, alternative in self.choices(term, ctx):
                space = self.container_space(alternative, ctx)
                if space is not None:
                    out.append((guard, space))
            return tuple(out)
        space = self.container_space(term, ctx)
        return ((NO_GUARD, space),) if space is not None else ()

    def translator_space(self, term: Term, ctx: Ctx) -> tuple[Space, ...]:
        """The space a callable translates into (a translator method taken as a value,
        a ``lambda`` whose body translates, ``functools.partial`` of one, a callable
        kept in a field)."""
        return self._memoised(
            "translator", term, ctx, lambda: self._translator_space(term, ctx), ()
        )

    def _translator_space(self, term: Term, ctx: Ctx) -> tuple[Space, ...]:
        if isinstance(term, Phi):
            return tuple(
                Space(g | f.guard, f.space, f.why)
                for g, alt in self.choices(term, ctx)
                for f in self.translator_space(alt, ctx)
            )
        if isinstance(term, Attr):
            translator = self.model.translator(term.name)
            if translator is not None and translator.to is not None:
                return (Space(NO_GUARD, translator.to, f"`{render(term)}`"),)
            return self._held_translator(term, ctx)
        if isinstance(term, Lambda):
            return tuple(f for f in self.space(term.body, ctx) if f.space in (FULL, SWA))
        if isinstance(term, Param):
            bound = ctx.binding(term.name)
            return self.translator_space(*bound) if bound is not None else ()
        if isinstance(term, Call) and term.func == Global("functools.partial") and term.args:
            return self.translator_space(term.args[0], ctx)
        return ()

    def _held_translator(self, term: Attr, ctx: Ctx) -> tuple[Space, ...]:
        """The space a callable kept in a field translates into: each value stored
        there, a translator method taken as a value (``self._to_swa =
        pool.translate_loc_from_full_to_swa``) or another such callable."""
        out: list[Space] = []
        for cls in self.classes(term.base, ctx):
            for store_fn, event in self.project.field_stores(cls, term.name):
                if event.value is not None:
                    inner = Ctx(store_fn, depth=ctx.depth + 1)
                    out += self.translator_space(event.value, inner)
        return _unique(out)


def _translated(method: str, space: str) -> str:
    side = "the SWA side" if space == SWA else "the full side"
    return f"`{method}(...)` ({side})"


def _strip_tables(facts: Iterable[Space]) -> tuple[Space, ...]:
    return tuple(f for f in facts if f.space in (FULL, SWA))


def rows_root(term: Term) -> Term:
    """The tensor whose rows a term reads: :func:`view_root` through any subscript too
    (``buf[i][:n]`` reads rows of ``buf``)."""
    while True:
        root = view_root(term)
        if isinstance(root, Index):
            term = root.base
        else:
            return root


def tensor_root(term: Term) -> Term:
    """The tensor a term is rows of, through what was written into it in place
    (``buf[n:].zero_()`` then ``buf[:n]`` is ``buf``)."""
    root = rows_root(term)
    while isinstance(root, Filled):
        root = rows_root(root.base)
    return root


def _written_before(facts: FunctionFacts) -> dict[str, tuple[int, int]]:
    """The statement where each parameter is first written into: filled in place, or
    handed to a kernel launch (which writes the buffers it is handed). What such a parameter holds
    when it is later translated is what the function wrote, not what it was handed."""
    found: dict[str, tuple[int, int]] = {}
    for event in facts.events:
        if event.kind == FILL:
            written: list[Term] = [t for t in (event.before, event.target) if t is not None]
        elif event.kind == CALL and event.how == "launch" and isinstance(event.value, Call):
            written = [*event.value.args, *(v for _, v in event.value.kwargs)]
        else:
            continue
        for term in written:
            root = rows_root(term)
            if isinstance(root, Param):
                found.setdefault(root.name, (event.stmt.line, event.stmt.col))
    return found


def _gathers(facts: FunctionFacts) -> list[Index]:
    """Every gather ``base[index]`` (not a slice) in the function's event terms."""
    found: list[Index] = []
    seen: set[int] = set()
    stack: list[Term] = []
    for event in facts.events:
        for part in (event.value, event.target, event.before):
            if part is not None:
                stack.append(part)
        if event.kind == FILL and isinstance(event.region, Term):
            stack.append(event.region)
    while stack:
        term = stack.pop()
        if id(term) in seen:
            continue
        seen.add(id(term))
        if isinstance(term, Index):
            if not isinstance(term.index, Slice | Seq | Const):
                found.append(term)
            stack += [term.base, term.index]
        elif isinstance(term, Attr):
            stack.append(term.base)
        elif isinstance(term, Call):
            stack += [term.func, *term.args, *(v for _, v in term.kwargs)]
        elif isinstance(term, Op):
            stack += list(term.operands)
        elif isinstance(term, Seq):
            stack += list(term.items)
        elif isinstance(term, Mapping):
            stack += [v for _, v in term.items]
        elif isinstance(term, Phi):
            stack += [alt for _, alt in term.alternatives]
        elif isinstance(term, Filled):
            stack += [term.base, term.value]
    return found


def _unique(items: Iterable[T]) -> tuple[T, ...]:
    seen: dict[T, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return tuple(seen)
