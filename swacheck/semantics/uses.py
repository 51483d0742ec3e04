"""Where a location is consumed, and the index space it must be in there.

A *use* is a point where a value is handed to something that reads or writes one pool
(I9): an SWA write location or page table by its name (a field, a dict entry, a local, a
keyword or a parameter of the callee named so: ``metadata.swa_out_cache_loc = ...``,
``KVWriteLoc(loc, swa_loc=...)``, ``bufs["swa_page_table"] = ...``), a buffer so named
filled in place, a sub-pool or sub-allocator of one side (``self.swa_kv_pool.set_kv_buffer
(None, loc, ...)``), the full->SWA table's own rows and values
(``mapping[full] = swa``), the input of a full->SWA translation (full ids), a parameter
that the callee hands to any of these (``set_full_to_swa_mapping(full, swa)``), and a
construct keyed by a space constant (``IdSpace(key=(IdSpaceKind.SLIDING_WINDOW, ...),
write=<translator>)``), whose translators and tables must be of that space.

The rules compare each use's required space with the spaces the value may have
(:mod:`swacheck.semantics.values`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from swacheck.semantics.function import BIND, CALL, FILL, RETURN, Event, Span, call_name
from swacheck.semantics.model import FULL, SWA, Model
from swacheck.semantics.project import Function
from swacheck.semantics.roles import Roles, project_roles
from swacheck.semantics.terms import (
    NO_GUARD,
    Attr,
    Call,
    Const,
    Global,
    Guard,
    Index,
    Local,
    Mapping,
    Param,
    Phi,
    Seq,
    Slice,
    Term,
    render,
    view_root,
)
from swacheck.semantics.values import TABLE, Ctx, Values

# What a use checks: a location value, or a callable (a translator) or table given to a
# construct keyed by a space.
LOCATION = "location"
TRANSLATOR = "translator"


@dataclass(frozen=True)
class Use:
    event: Event
    value: Term
    space: str  # the space required
    role: str | None
    where: str  # what it is handed to, for the message
    guard: Guard = NO_GUARD  # what must hold besides the event's path (a receiver's branch)
    checks: str = LOCATION
    # The use is a local named for the SWA side: it counts unless the function translates
    # that local later (a buffer filled from the full side, then translated in place).
    local: str | None = None
    # Where to report it, when not the event's own place (a kernel's argument).
    span: Span | None = None
    # A local's: how its value leaves the function (`` and is returned at line 12``),
    # and whether only into a call (``handed``).
    leaves: str = ""
    handed: bool = False
    # The name it is handed to by (``swa_out_cache_loc``, ``swa_loc``), where one.
    slot: str = ""

    @property
    def place(self) -> Span:
        return self.span or self.event.span


def target_name(term: Term | None) -> str | None:
    """The name a binding or fill target has: a local, a field, a constant dict key."""
    if isinstance(term, Local):
        return term.name
    if isinstance(term, Attr):
        return term.name
    if (
        isinstance(term, Index)
        and isinstance(term.index, Const)
        and isinstance(term.index.value, str)
    ):
        return term.index.value
    return None


def _written(event: Event) -> str:
    return event.text or render(event.target) if event.target is not None else event.text


def _named(model: Model, name: str, engine_names: bool = True) -> tuple[str, str | None] | None:
    """The side and role a location's name states. The engine's own location names
    (``slot_mapping``) count for what is bound to them (``engine_names``), not for a
    callee's keywords and parameters, where such a name is too common to trust."""
    role = model.location_role(name) if engine_names else model.swa_role(name)
    if role is not None:
        return SWA, role
    role = model.full_role(name)
    if role is not None:
        return FULL, role
    return None


def uses(function: Function, values: Values, roles: Roles | None = None) -> Iterator[Use]:
    """Every use of a location in ``function`` (see the module docstring); with
    ``roles``, only those :func:`role_uses` keeps (no other is looked for)."""
    model = values.model
    ctx = Ctx(function)
    # a module's or class body's own names are globals and fields, not locals
    scoped = function.facts.name not in ("<module>", "<body>")
    for event in function.facts.events:
        if roles is not None and event.how == "launch":
            continue
        if event.kind == BIND:
            for use in _binding(event, model):
                yield use if scoped else replace(use, local=None)
        elif event.kind == FILL:
            for use in _fill(event, values, ctx, roles):
                yield use if scoped else replace(use, local=None)
        elif event.kind == CALL and isinstance(event.value, Call):
            yield from _call(event, event.value, values, ctx, roles)


def _binding(event: Event, model: Model) -> Iterator[Use]:
    value = event.value
    if value is None or isinstance(value, Const):
        return
    if isinstance(value, Mapping):
        yield from _mapping_entries(event, value, model)
    name = target_name(event.target)
    if name is None:
        return
    named = _named(model, name)
    if named is None:
        return
    space, role = named
    local = name if isinstance(event.target, Local) else None
    yield Use(event, value, space, role, f"`{_written(event)}`", local=local, slot=name)


def _mapping_entries(event: Event, value: Mapping, model: Model) -> Iterator[Use]:
    for key, item in value.items:
        if isinstance(key, Const) and isinstance(key.value, str):
            named = _named(model, key.value)
            if named is not None and not isinstance(item, Const):
                yield Use(
                    event, item, named[0], named[1], f"the entry `{key.value!r}`", slot=key.value
                )


def _fill(event: Event, values: Values, ctx: Ctx, roles: Roles | None) -> Iterator[Use]:
    model = values.model
    value = event.value
    region = event.region
    if value is None or (roles is not None and not isinstance(region, Const)):
        return
    named = []
    plain = not isinstance(value, Const) and event.how not in ("zero_", "fill_")
    if plain:
        if isinstance(region, Const) and isinstance(region.value, str):
            # an entry of a dict: ``bufs["swa_out_cache_loc"] = ...``
            found = _named(model, region.value)
            if found is not None:
                where = f"[{region.value!r}]"
                where = f"`{event.text}{where}`" if event.text else f"the entry {region.value!r}"
                named.append(Use(event, value, found[0], found[1], where))
        else:
            name = target_name(event.target)
            found = _named(model, name) if name is not None else None
            if found is not None:
                local = name if isinstance(event.target, Local) else None
                where = f"`{_written(event)}`"
                named.append(Use(event, value, *found, where, local=local, slot=name or ""))
    if roles is not None and not named:
        return  # none of a role: the table's own rows and values are of no role
    # the full->SWA table's rows are full locations, its values SWA ones
    if event.target is not None and any(f.space == TABLE for f in values.space(event.target, ctx)):
        if isinstance(region, Term) and not isinstance(region, Slice | Seq | Const):
            yield Use(event, region, FULL, None, "the rows of the full->SWA table")
        if not isinstance(value, Const) and not _is_call_result(value):
            yield Use(event, value, SWA, None, "the full->SWA table")
        return
    yield from named
    if roles is None and plain and isinstance(region, Term) and isinstance(value, Call):
        keyed = _space_key(region, values, ctx)
        if keyed is not None:
            yield from _keyed(event, value, keyed, values, ctx)


def _is_call_result(value: Term) -> bool:
    return (
        isinstance(value, Call) and isinstance(value.func, Attr) and value.func.name.endswith("_")
    )


def _call(event: Event, call: Call, values: Values, ctx: Ctx, roles: Roles | None) -> Iterator[Use]:
    model = values.model
    func = call.func
    if event.how == "launch":
        # a kernel fills the buffers it is handed: with full ids when it reads request
        # pages and is handed neither the table nor a translator
        for entry in event.names:
            if entry is None:
                continue
            name, span = entry
            named = _named(model, name.rsplit(".", 1)[-1])
            if named is not None and named[0] == SWA:
                local = name if "." not in name else None
                yield Use(
                    event,
                    call,
                    SWA,
                    named[1],
                    f"`{name}` (filled by this kernel)",
                    local=local,
                    span=span,
                )
    for arg in call.args:
        if isinstance(arg, Mapping):
            yield from _mapping_entries(event, arg, model)
    # keywords named for a side: KVWriteLoc(loc, swa_loc=...), build(..., full_loc=...)
    for keyword, value in call.kwargs:
        named = _named(model, keyword, engine_names=False)
        if named is not None and not isinstance(value, Const):
            yield Use(event, value, named[0], named[1], f"`{keyword}=`", slot=keyword)
    if isinstance(func, Attr):
        translator = model.translator(func.name)
        if translator is not None and translator.to == SWA and call.args:
            yield Use(event, call.args[0], FULL, None, f"`{func.name}`", checks=LOCATION)
            return
        if roles is None and translator is None and func.name not in model.fills:
            spaces = values.container_spaces(func.base, ctx)
            if spaces:
                for label, arg in _pool_locations(call, func.name, values, ctx):
                    for guard, space in spaces:
                        yield Use(
                            event, arg, space, None, f"`{render(func)}` ({label})", guard=guard
                        )
    if roles is None:
        keyed = None
        for part in (*call.args, *(v for _, v in call.kwargs)):
            keyed = keyed or _space_key(part, values, ctx)
        if keyed is not None:
            yield from _keyed(event, call, keyed, values, ctx)
    elif call_name(func) not in roles.called:
        return  # it runs no function whose parameters reach a location of a role
    # parameters named for a side, or that the callee hands to a use of one space
    for callee, inner in values.callees(call, ctx):
        if roles is not None and callee.qual not in roles.carriers:
            continue
        requirements = parameter_uses(callee, values)
        for param, term, _ in inner.bindings:
            if isinstance(term, Const) or param == callee.self_param:
                continue
            if any(k == param for k, _ in call.kwargs):
                continue  # checked as a keyword above
            named = _named(model, param, engine_names=False)
            if named is not None and not _only_to_allocators(callee, param):
                yield Use(
                    event,
                    term,
                    named[0],
                    named[1],
                    f"`{param}` of `{callee.facts.name}`",
                    slot=param,
                )
                continue
            required = requirements.get(param)
            if required is not None:
                space, role, where = required
                yield Use(event, term, space, role, f"`{param}` of `{callee.facts.name}` ({where})")


def _pool_locations(
    call: Call, method: str, values: Values, ctx: Ctx
) -> Iterator[tuple[str, Term]]:
    """The arguments of a pool's method that are locations in the pool's own space: by
    the callee's parameter names where the audit has it (a location word, no side named),
    else by the model's ``pool-methods``."""
    model = values.model
    callees = values.callees(call, ctx)
    if callees:
        found = [
            (param, term)
            for param, term, _ in callees[0][1].bindings
            if model.is_location_name(param) and model.name_space(param) is None
        ]
        for param, term in found:
            if not isinstance(term, Const):
                yield f"`{param}`", term
        if found:
            return
    entry = model.pool_methods.get(method)
    if entry is None:
        return
    for position in entry.locations:
        if position < len(call.args) and not isinstance(call.args[position], Const):
            yield f"argument {position + 1}", call.args[position]
    for keyword, value in call.kwargs:
        if keyword in entry.keywords and not isinstance(value, Const):
            yield f"`{keyword}=`", value


def _space_key(term: Term, values: Values, ctx: Ctx) -> str | None:
    """The space a key names (``IdSpaceKind.SLIDING_WINDOW``, or a tuple holding one)."""
    if isinstance(term, Global):
        return values.model.constant_space(term.name)
    if isinstance(term, Seq):
        for item in term.items:
            found = _space_key(item, values, ctx)
            if found is not None:
                return found
    return None


def _keyed(event: Event, call: Call, space: str, values: Values, ctx: Ctx) -> Iterator[Use]:
    """A construct keyed by ``space``: its translators and tables must be of it."""
    for name, value in ((None, a) for a in call.args):
        yield from _keyed_part(event, name, value, space, values, ctx)
    for name, value in call.kwargs:
        yield from _keyed_part(event, name, value, space, values, ctx)


def _keyed_part(
    event: Event, name: str | None, value: Term, space: str, values: Values, ctx: Ctx
) -> Iterator[Use]:
    if isinstance(value, Const) or _space_key(value, values, ctx) is not None:
        return
    label = f"`{name}=`" if name else "an argument"
    if values.translator_space(value, ctx):
        yield Use(event, value, space, None, f"{label} of a {space}-space entry", checks=TRANSLATOR)
    elif name is not None and values.model.name_space(name) is None:
        yield Use(event, value, space, None, f"{label} of a {space}-space entry")


def parameter_uses(function: Function, values: Values) -> dict[str, tuple[str, str | None, str]]:
    """The parameters ``function`` hands straight (a view or cast of them) to a use of
    one space: parameter -> (space, role, what it reaches)."""
    memo = values._memo
    key = ("parameter-uses", Global(function.qual), Ctx(function))
    if key in memo:
        return memo[key]  # type: ignore[return-value]
    memo[key] = {}
    found: dict[str, tuple[str, str | None, str]] = {}
    params = set(p.lstrip("*") for p in function.facts.params) - {function.self_param}
    for use in uses(function, values):
        root = view_root(use.value)
        if isinstance(root, Phi):
            continue
        if (
            isinstance(root, Param)
            and root.name in params
            and use.checks == LOCATION
            and use.local is None
        ):
            found.setdefault(root.name, (use.space, use.role, use.where))
    memo[key] = found
    return found


def role_uses(function: Function, values: Values) -> Iterator[Use]:
    """The SWA locations of a role (I3) that ``function`` binds or hands on: every use of
    :func:`uses` that needs SWA ids in a role, except an in-place copy into a buffer (it
    takes the buffer's dtype) and a kernel's fill; a local's only where
    its value leaves the function (:func:`leaves`) — a cast or gather into a local that
    stays is an intermediate (host-side bookkeeping, a value converted again)."""
    roles = project_roles(values)
    for use in uses(function, values, roles):
        if use.space != SWA or use.role is None or use.checks != LOCATION:
            continue
        if use.event.kind == FILL and not isinstance(use.event.region, Const):
            continue  # copied into a buffer: it takes the buffer's dtype (a dict entry binds)
        if use.event.how == "launch":
            continue
        if use.local is not None:
            found = leaves(function, use.event, use.value, values)
            if found is None:
                continue
            how, span, handed = found
            use = replace(use, leaves=f" and is {how} at line {span.line}", handed=handed)
        yield use


def leaves(
    function: Function, event: Event, value: Term, values: Values
) -> tuple[str, Span, bool] | None:
    """How a local's ``value`` (bound at ``event``) leaves ``function`` after it:
    ``(how, where, only into a call)`` — returned, stored on an object or in a container,
    handed to a kernel, else handed to a call (not an allocator's: its own input).
    ``None``: it stays."""
    after = (event.span.line, event.span.col)
    handed: tuple[str, Span, bool] | None = None
    for later in function.facts.events:
        if (later.span.line, later.span.col) <= after:
            continue
        if later.kind == RETURN and later.value is not None and _holds(later.value, value):
            return "returned", later.span, False
        if (
            later.kind == BIND
            and not isinstance(later.target, Local)
            and later.value is not None
            and _holds(later.value, value)
        ):
            return "stored", later.span, False
        if later.kind == CALL and isinstance(later.value, Call):
            call = later.value
            parts = (*call.args, *(v for _, v in call.kwargs))
            if not any(_holds(p, value) for p in parts):
                continue
            if later.how == "launch":
                return "handed to a kernel", later.span, False
            if _to_allocator(call):
                continue  # an allocator's own input, in its own index space and dtype
            name = call.func.name if isinstance(call.func, Attr) else ""
            if handed is None and not isinstance(call.func, Global):
                handed = (f"handed to `{name or render(call.func)}`", later.span, True)
    return handed


def _to_allocator(call: Call) -> bool:
    """Whether ``call`` hands its arguments to an allocator (``alloc*()``, a method of
    an ``*allocator``): its own input, in the allocator's index space and dtype."""
    if not isinstance(call.func, Attr):
        return False
    return call.func.name.startswith("alloc") or "allocator" in render(call.func.base)


def _only_to_allocators(callee: Function, param: str) -> bool:
    """Whether the callee's body hands its parameter ``param`` only to allocators (a
    helper freeing SWA slots, ``_release_swa(swa_indices)``): its name then states the
    pool, not a role its consumer's dtype is fixed by."""
    value = Param(param)
    handed = False
    for event in callee.facts.events:
        if event.value is None:
            continue
        if event.kind == CALL and isinstance(event.value, Call):
            call = event.value
            if any(_holds(p, value) for p in (*call.args, *(v for _, v in call.kwargs))):
                if not _to_allocator(call):
                    return False
                handed = True
        elif (
            event.kind in (RETURN, FILL)
            or (event.kind == BIND and not isinstance(event.target, Local))
        ) and _holds(event.value, value):
            return False  # returned, stored on an object or in a container
    return handed


# Methods whose result is the receiver's values in its dtype (a view, a copy): a cast is
# another value (cast again before it leaves, the local was an intermediate).
_SAME_VALUE = frozenset(
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
        "cpu",
        "cuda",
        "expand",
        "t",
        "transpose",
        "permute",
        "view_as",
    }
)


def _holds(term: Term, value: Term, depth: int = 0) -> bool:
    """Whether ``term`` is ``value``, a view, slice or cast of it, or a tuple holding one."""
    if term is value or term == value:
        return True
    if depth > 6:
        return False
    if isinstance(term, Index):
        return _holds(term.base, value, depth + 1)
    if isinstance(term, Call) and isinstance(term.func, Attr) and term.func.name in _SAME_VALUE:
        return _holds(term.func.base, value, depth + 1)
    if isinstance(term, Seq):
        return any(_holds(item, value, depth + 1) for item in term.items)
    if isinstance(term, Phi):
        return any(_holds(alt, value, depth + 1) for _, alt in term.alternatives)
    return False
