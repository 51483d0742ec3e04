"""One function, executed symbolically: its values as terms, its events in order.

The analysis walks the function's control-flow graph (:mod:`swacheck.semantics.cfg`) in
reverse post-order with an abstract state per point: each local (and each field path
of a local, ``metadata.swa_page_table``, ``self.forward_metadata``) bound to the
:mod:`~swacheck.semantics.terms` term it holds there, and the branch literals that hold
on the way (:mod:`swacheck.semantics.guards`). At a merge the values that differ become a
``Phi`` whose alternatives carry the literals that tell the incoming paths apart, so a
binding made on one branch reaches only the uses that branch reaches, and two tests of
the same value line up. Loops are run twice: once from their entry, once more with what
the first round carried round the back edge.

Every point records its :class:`Event` s in evaluation order — a binding (of a local, a
field, a dict entry), an in-place *fill* of a tensor (a subscript store, a ``*_``
method, ``out=``, ``torch.index_put_``-style functions), a call, a ``return``, a
``del``, an ``assert`` — each with the terms involved, the literals of its path and its
position. That list, the graph's shape and the returned value are the function's
:class:`FunctionFacts`: plain data, computed once per file version, that every rule's
query reads.
"""

from __future__ import annotations

import ast
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from swacheck.places import position
from swacheck.semantics import cfg as cfgs
from swacheck.semantics.guards import literals, reads
from swacheck.semantics.terms import (
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
    Literal,
    Local,
    Mapping,
    Op,
    Param,
    Phi,
    Seq,
    Slice,
    Term,
    Unknown,
    phi,
    view_root,
)

# Event kinds.
BIND = "bind"  # target (Local / Attr / Index with a constant key) := value
FILL = "fill"  # in-place write of value into target's region
CALL = "call"  # value is the Call term
RETURN = "return"
DELETE = "delete"
ASSERT = "assert"  # value is the asserted test (also ``if not test: raise``)

# ``*_`` methods that change no tensor data.
_NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "retain_grad_"})
# Methods that return a view of their receiver's rows as they are.
_VIEWS = frozenset(
    {"view", "reshape", "flatten", "squeeze", "unsqueeze", "contiguous", "detach", "view_as"}
)
_TORCH_MODULES = ("torch", "torch_npu", "torch_mlu", "torch_musa")
_CAST_METHODS = frozenset({"long", "int", "short", "byte", "bool", "float", "half", "double"})
# Calls that make a new tensor (each written place is its own value).
_FACTORIES = frozenset(
    {
        "zeros",
        "ones",
        "empty",
        "full",
        "arange",
        "tensor",
        "as_tensor",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "new_zeros",
        "new_ones",
        "new_empty",
        "new_full",
        "randint",
        "randperm",
        "empty_strided",
    }
)

_BINARY = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.MatMult: "@",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
}
_COMPARE = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}
_UNARY = {ast.Not: "not", ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "~"}


@dataclass(slots=True)
class Span:
    """A source range: 1-based rows, 0-based character columns."""

    line: int = position()
    col: int = position()
    end_line: int = position()
    end_col: int = position()


@dataclass(slots=True)
class Event:
    kind: str
    node: int  # the CFG node it happens at
    span: Span  # the expression (the call, the target written)
    stmt: Span  # the statement it is part of
    guard: Guard  # the literals of its path
    target: Term | None = None
    value: Term | None = None
    # FILL: the rows written ("all", a Slice, an index term).
    region: Term | str | None = None
    # FILL: the buffer's value before the write (``target`` names it: a Local, a field).
    before: Term | None = None
    # BIND/FILL: the target as written (``metadata.swa_page_table``), where it is a name.
    text: str = ""
    # BIND of an assignment: where its value is written (a fix may wrap it).
    vspan: Span | None = None
    # How: "assign", "augassign", "annassign", "walrus", "unpack", "setattr", a method
    # name ("copy_", "zero_"), "out=", "setitem", "launch", "with", "for"...
    how: str = ""
    # CALL: where its dtype is decided, when it decides one: the ``dtype=`` value, a
    # cast's dtype argument or its method name (``long`` of ``.long()``).
    decides: Span | None = None
    # CALL: each positional argument's name as written (``window_kv_indices``,
    # ``self.cuda_graph_swa_out_cache_loc``) and where, None for other expressions.
    names: tuple[tuple[str, Span] | None, ...] = ()
    # The event may not run when its node does (right of ``and``/``or``, a branch of a
    # conditional expression, a comprehension's body).
    conditional: bool = False


@dataclass
class FunctionFacts:
    """What the first pass keeps of one function (picklable)."""

    key: str  # within its module: ``Class.method``, ``func``, ``outer.<locals>.inner``
    name: str
    cls: str | None  # the class it is a method of (its key), or None
    params: tuple[str, ...]
    defaults: tuple[tuple[str, Term], ...]
    # Parameter -> its annotation's text (``torch.Tensor``, ``Optional[SWAKVPool]``).
    annotations: tuple[tuple[str, str], ...]
    returns_annotation: str
    decorators: tuple[str, ...]
    span: Span
    # The graph: per node, its kind, normal and exceptional successors, edge labels, the
    # test term of a test node.
    kinds: tuple[str, ...] = ()
    succs: tuple[tuple[int, ...], ...] = ()
    exc_succs: tuple[tuple[int, ...], ...] = ()
    labels: tuple[tuple[tuple[int, str], ...], ...] = ()
    tests: tuple[Term | None, ...] = ()
    lines: tuple[int, ...] = position(default=())  # each node's first row (0: virtual)
    events: tuple[Event, ...] = ()
    returns: Term = UNKNOWN
    # The body is only a docstring, ``pass``, ``...``, a bare ``return`` or ``raise``.
    trivial: bool = False
    # Analysed (its values and events computed) or only declared (not relevant).
    analysed: bool = True

    @property
    def is_method(self) -> bool:
        return self.cls is not None and "staticmethod" not in self.decorators

    @property
    def receiver(self) -> str | None:
        """The parameter its object is bound to (``self``), for a method."""
        if not self.is_method or not self.params or "classmethod" in self.decorators:
            return None
        return self.params[0]

    @property
    def positional(self) -> list[str]:
        """The parameters a call's positional arguments bind to, in order: the
        receiver (a method's object, a classmethod's class) and star parameters left
        out."""
        params = [p for p in self.params if not p.startswith("*")]
        if params and (params[0] == self.receiver or "classmethod" in self.decorators):
            return params[1:]
        return params

    def default(self, name: str) -> Term | None:
        for param, value in self.defaults:
            if param == name:
                return value
        return None

    def annotation(self, name: str) -> str:
        for param, text in self.annotations:
            if param == name:
                return text
        return ""

    def node_events(self) -> dict[int, list[Event]]:
        out: dict[int, list[Event]] = {}
        for event in self.events:
            out.setdefault(event.node, []).append(event)
        return out

    @property
    def index(self) -> FunctionIndex:
        """What the project looks up across functions without reading their bodies."""
        found = self.__dict__.get("_index")
        if found is None:
            found = self.__dict__["_index"] = FunctionIndex.of(self.events, self.receiver)
        return found  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Callable[[dict[str, object]], FunctionFacts], tuple[object]]:
        """Pickled with its body (graph, events, returned value) as one bytes object, read
        back when a query first reads it: a call on one file loads the whole project's
        facts and reads the bodies of a few dozen functions of thousands."""
        state = dict(self.__dict__)
        if "_body" not in state:  # read back never: the body goes as it came
            state["_index"] = self.index
            body = tuple(state.pop(name) for name in BODY)
            state["_body"] = pickle.dumps(body, protocol=pickle.HIGHEST_PROTOCOL)
        return _restore, (state,)


# The fields of a function's body (see :meth:`FunctionFacts.__reduce__`).
BODY = ("kinds", "succs", "exc_succs", "labels", "tests", "lines", "events", "returns")


class _BodyField:
    """A body field of a :class:`FunctionFacts` read back from pickle: the first read
    unpickles the whole body into the instance, which then answers every later read
    itself (a descriptor without ``__set__`` yields to the instance's own value)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, instance: FunctionFacts | None, owner: type) -> object:
        if instance is None:
            return self
        state = instance.__dict__
        body = state.pop("_body", None)
        if body is None:
            raise AttributeError(self.name)
        state.update(zip(BODY, pickle.loads(body), strict=True))
        return state[self.name]


for _name in BODY:
    setattr(FunctionFacts, _name, _BodyField(_name))


def _restore(state: dict[str, object]) -> FunctionFacts:
    facts = FunctionFacts.__new__(FunctionFacts)
    facts.__dict__.update(state)
    return facts


@dataclass(frozen=True)
class FunctionIndex:
    """The names a function's events mention that the project indexes: what it calls
    (a method's or a global's last name), the fields it binds, and of those the ones
    bound on its own receiver; the names it hands values to by name (a binding's or a
    fill's target, a dict entry, a keyword), each with the parameter the value is a
    view or cast of (``""``: none); and the parameters it hands to calls: (the call's
    name, the argument's position or keyword, the parameter)."""

    calls: frozenset[str]
    binds: frozenset[str]
    binds_own: frozenset[str]
    slots: frozenset[tuple[str, str]]
    hands: frozenset[tuple[str, str, str]]

    @classmethod
    def of(cls, events: Iterable[Event], receiver: str | None) -> FunctionIndex:
        calls: set[str] = set()
        binds: set[str] = set()
        own: set[str] = set()
        slots: set[tuple[str, str]] = set()
        hands: set[tuple[str, str, str]] = set()
        for event in events:
            value = event.value
            if event.kind in (BIND, FILL) and value is not None:
                param = _param_of(value, receiver)
                slots.update((name, param) for name in _names(event.target, event.region))
            if isinstance(value, Mapping):
                slots.update(_entries(value, receiver))
            if event.kind == CALL and isinstance(value, Call):
                name = call_name(value.func)
                if name is not None:
                    calls.add(name)
                arguments = [(str(i), arg) for i, arg in enumerate(value.args)]
                arguments += value.kwargs
                for slot, arg in arguments:
                    param = _param_of(arg, receiver)
                    if name is not None and param:
                        hands.add((name, slot, param))
                    if not slot.isdigit():
                        slots.add((slot, param))
                    elif isinstance(arg, Mapping):
                        slots.update(_entries(arg, receiver))
            elif event.kind == BIND and isinstance(event.target, Attr):
                binds.add(event.target.name)
                if receiver is not None and event.target.base == Param(receiver):
                    own.add(event.target.name)
        return cls(*map(frozenset, (calls, binds, own, slots, hands)))


def call_name(func: Term) -> str | None:
    """The name a call is indexed by: a method's (``super().<name>`` through ``super()``:
    only a subclass's method calls so), or a global's last part."""
    if isinstance(func, Attr):
        if isinstance(func.base, Call) and func.base.func == Global("super"):
            return f"super().{func.name}"
        return func.name
    if isinstance(func, Global):
        return func.name.rpartition(".")[2]
    return None


def _names(target: Term | None, region: Term | str | None) -> Iterator[str]:
    """The names a binding or fill target has (a local, a field, a constant key)."""
    for term in (target, region):
        if isinstance(term, Index):
            term = term.index
        if isinstance(term, Local | Attr):
            yield term.name
        elif isinstance(term, Const) and isinstance(term.value, str):
            yield term.value


def _entries(mapping: Mapping, receiver: str | None) -> Iterator[tuple[str, str]]:
    for key, item in mapping.items:
        if isinstance(key, Const) and isinstance(key.value, str):
            yield key.value, _param_of(item, receiver)


def _param_of(term: Term, receiver: str | None) -> str:
    """The parameter ``term`` is a view or cast of (not the receiver), else ``""``."""
    root = view_root(term)
    return root.name if isinstance(root, Param) and root.name != receiver else ""


class Columns:
    """UTF-8 byte offsets (what :mod:`ast` gives) to character columns, per row."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines
        # Rows where the two differ (most files have none).
        self.wide = frozenset(i + 1 for i, line in enumerate(lines) if not line.isascii())

    def __call__(self, row: int, offset: int) -> int:
        if row in self.wide:
            encoded = self.lines[row - 1].encode("utf-8")[:offset]
            return len(encoded.decode("utf-8", "replace"))
        return offset


# Modules a snippet may use without importing them (``torch.zeros`` in an example).
WELL_KNOWN_MODULES = frozenset(
    {"torch", "triton", "tl", "np", "numpy", "functools", "dataclasses", "typing", "math"}
)


class Scope:
    """What a function's names mean outside it: the module's imports and definitions."""

    def __init__(
        self,
        module: str,
        imports: dict[str, str],
        defined: set[str],
        classes: set[str] = frozenset(),  # type: ignore[assignment]
    ) -> None:
        self.module = module
        self.imports = imports
        self.defined = defined
        # Globals naming a module or a class: their attributes fold into one dotted name
        # (``torch.int32``, ``IdSpaceKind.FULL``); a module-level variable's do not. A
        # name defined nowhere is taken as a class when it is capitalised.
        self.foldable = {*imports.values(), *WELL_KNOWN_MODULES}
        self.foldable.update(self.global_name(c) for c in classes)
        # Each call that makes a new tensor, numbered in the order the module's analysis
        # meets it (see :class:`Call`'s ``site``).
        self._sites: dict[tuple[int, int], int] = {}

    def site(self, node: ast.expr | ast.stmt) -> int:
        """The module-wide number of the new tensor ``node`` makes: the same on every
        visit of the node, different for two nodes, and the same after an edit elsewhere
        shifts rows (the module's facts then differ in their positions only)."""
        return self._sites.setdefault((node.lineno, node.col_offset), len(self._sites) + 1)

    def global_name(self, name: str) -> str:
        if name in self.imports:
            return self.imports[name]
        if name in self.defined:
            return f"{self.module}.{name}" if self.module else name
        return name


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names, else ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> tuple[str, ...]:
    names = []
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = dotted(target)
        if name:
            names.append(name)
    return tuple(names)


def scope_names(body: Iterable[ast.stmt], walrus: bool = True) -> tuple[set[str], set[str]]:
    """The names a function body binds (its locals) and those it declares ``global`` or
    ``nonlocal``, not looking into nested scopes. Expressions are searched (for a walrus
    ``:=``) only where ``walrus``; statements' targets are read directly."""
    found: set[str] = set()
    declared: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Name:
            if not isinstance(node.ctx, ast.Load):  # type: ignore[attr-defined]
                found.add(node.id)  # type: ignore[attr-defined]
            continue
        if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            found.add(node.name)  # type: ignore[attr-defined]
            if walrus:
                stack.extend(node.decorator_list)  # type: ignore[attr-defined]
            continue
        if kind in (ast.Global, ast.Nonlocal):
            declared.update(node.names)  # type: ignore[attr-defined]
            continue
        if kind in (ast.Import, ast.ImportFrom):
            for alias in node.names:  # type: ignore[attr-defined]
                found.add((alias.asname or alias.name).split(".", 1)[0])
            continue
        if isinstance(node, ast.stmt):
            if kind in (ast.Assign, ast.Delete):
                stack.extend(node.targets)  # type: ignore[attr-defined]
            elif kind in (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor):
                stack.append(node.target)  # type: ignore[attr-defined]
            elif kind in (ast.With, ast.AsyncWith):
                stack.extend(
                    i.optional_vars
                    for i in node.items
                    if i.optional_vars is not None  # type: ignore[attr-defined]
                )
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                stack.extend(getattr(node, name, ()))
            if walrus:
                stack.extend(_statement_expressions(node))
            continue
        if kind is ast.ExceptHandler:
            if node.name:  # type: ignore[attr-defined]
                found.add(node.name)  # type: ignore[attr-defined]
            stack.extend(node.body)  # type: ignore[attr-defined]
            continue
        if kind is ast.match_case:
            for inner in ast.walk(node.pattern):  # type: ignore[attr-defined]
                for attr in ("name", "rest"):
                    value = getattr(inner, attr, None)
                    if isinstance(value, str):
                        found.add(value)
            stack.extend(node.body)  # type: ignore[attr-defined]
            continue
        if kind in (ast.Tuple, ast.List, ast.Starred):
            stack.extend(ast.iter_child_nodes(node))
            continue
        if kind is ast.NamedExpr and isinstance(node.target, ast.Name):  # type: ignore[attr-defined]
            found.add(node.target.id)  # type: ignore[attr-defined]
        if kind is ast.Lambda or not walrus or kind in (ast.Attribute, ast.Subscript):
            if kind in (ast.Attribute, ast.Subscript) and walrus:
                stack.extend(ast.iter_child_nodes(node))
            continue
        if kind in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
            for generator in node.generators:  # type: ignore[attr-defined]
                stack.append(generator.iter)
                stack.extend(generator.ifs)
            stack.extend(getattr(node, f) for f in ("elt", "key", "value") if hasattr(node, f))
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found - declared, declared


def _statement_expressions(node: ast.stmt) -> list[ast.AST]:
    """The expressions a statement evaluates itself (not its nested statements)."""
    out: list[ast.AST] = []
    for name, value in ast.iter_fields(node):
        if name in ("body", "orelse", "finalbody", "handlers", "cases", "targets", "target"):
            continue
        if isinstance(value, ast.AST):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, ast.expr | ast.withitem | ast.keyword))
    return out


def is_trivial(body: Sequence[ast.stmt]) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.Pass | ast.Raise):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Return) and (
            stmt.value is None or isinstance(stmt.value, ast.Constant)
        ):
            continue
        return False
    return True


@dataclass
class _State:
    env: dict[str, Term]  # locals
    guard: Guard = NO_GUARD
    # Field paths of locals: ``metadata.swa_page_table``, ``self.forward_metadata``.
    fields: dict[str, Term] = field(default_factory=dict)

    def copy(self) -> _State:
        return _State(dict(self.env), self.guard, dict(self.fields))


@dataclass
class Nested:
    """A function defined inside the one analysed, with the values of its enclosing
    scope where it is defined (what its free names read)."""

    node: ast.FunctionDef | ast.AsyncFunctionDef
    key: str
    env: dict[str, Term] = field(default_factory=dict)
    fields: dict[str, Term] = field(default_factory=dict)


def signature(
    node: ast.FunctionDef | ast.AsyncFunctionDef,
    key: str,
    cls: str | None,
    columns: Columns,
    evaluate: Callable[[ast.expr], Term] | None = None,
) -> FunctionFacts:
    """The declared part of a function's facts: no values, no events."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    params = [a.arg for a in positional]
    if args.vararg:
        params.append("*" + args.vararg.arg)
    params += [a.arg for a in args.kwonlyargs]
    if args.kwarg:
        params.append("**" + args.kwarg.arg)
    defaults: list[tuple[str, Term]] = []
    evaluate = evaluate or _constant
    for arg, value in zip(
        positional[len(positional) - len(args.defaults) :], args.defaults, strict=True
    ):
        defaults.append((arg.arg, evaluate(value)))
    for arg, value in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if value is not None:
            defaults.append((arg.arg, evaluate(value)))
    annotations = tuple(
        (a.arg, ast.unparse(a.annotation))
        for a in [*positional, *args.kwonlyargs]
        if a.annotation is not None
    )
    return FunctionFacts(
        key=key,
        name=node.name,
        cls=cls,
        params=tuple(params),
        defaults=tuple(defaults),
        annotations=annotations,
        returns_annotation=ast.unparse(node.returns) if node.returns is not None else "",
        decorators=decorator_names(node),
        span=span_of(node, columns),
        trivial=is_trivial(node.body),
        analysed=False,
    )


def _constant(node: ast.expr) -> Term:
    return Const(node.value) if isinstance(node, ast.Constant) else UNKNOWN


def span_of(node: ast.AST, columns: Columns) -> Span:
    line = getattr(node, "lineno", 0)
    end_line = getattr(node, "end_lineno", None) or line
    return Span(
        line,
        columns(line, getattr(node, "col_offset", 0)),
        end_line,
        columns(end_line, getattr(node, "end_col_offset", None) or 0),
    )


class Analysis:
    """The symbolic execution of one function (see the module docstring)."""

    def __init__(
        self,
        node: ast.FunctionDef | ast.AsyncFunctionDef,
        key: str,
        cls: str | None,
        scope: Scope,
        columns: Columns,
        outer: dict[str, Term] | None = None,
        interner: dict[Term, Term] | None = None,
        walrus: bool = True,
    ) -> None:
        if interner is None:
            interner = {}
        self.interner = interner
        self.fn = node
        self.key = key
        self.cls = cls
        self.scope = scope
        self.columns = columns
        self.outer = outer or {}
        self.locals, self.globals = scope_names(node.body, walrus)
        self.events: list[Event] = []
        self.nested: list[Nested] = []
        # Evaluation context of the statement being executed.
        self.state = _State({})
        self.node_id = 0
        self.stmt_span = Span(0, 0, 0, 0)
        self.conditional = 0
        self.returned: list[tuple[Guard, Term]] = []
        self.vspan: Span | None = None
        # One object per distinct term, so that comparing two is comparing identities
        # (joins compare every value at every merge); shared with nested functions.
        self.intern: Callable[[Term], Term] = lambda term: interner.setdefault(term, term)

    # -- driver -------------------------------------------------------------------------

    def run(self) -> FunctionFacts:
        facts = signature(self.fn, self.key, self.cls, self.columns, self._default)
        graph = cfgs.build(self.fn.body)
        order = graph.order()
        position = {n: i for i, n in enumerate(order)}
        back = any(position.get(p, -1) >= position[n] for n in order for p in graph.predecessors(n))
        params = {p.lstrip("*") for p in facts.params}
        entry = _State(
            self._initial_env(facts),
            fields={
                path: term
                for path, term in self.outer.items()
                if "." in path and path.split(".", 1)[0] not in self.locals | params
            },
        )
        tests: list[Term | None] = [None] * len(graph)
        previous: dict[int, _State] = {}
        for _round in range(2 if back else 1):
            self.events = []
            self.nested = []
            self.returned = []
            outs: dict[int, _State] = {}
            incoming: dict[int, list[_State]] = {cfgs.ENTRY: [entry]}
            for n in order:
                states = incoming.get(n, [])
                for p in graph.predecessors(n):
                    if position.get(p, -1) >= position[n] and p in previous:
                        states.append(self._edge(graph, p, n, previous[p], tests))
                if not states:
                    continue
                state = _merge(states, self.intern)
                self.state = state
                self.node_id = n
                node = graph.nodes[n]
                out = self._execute(node, tests)
                outs[n] = out
                for s in node.succs:
                    if position.get(s, -1) > position[n]:
                        incoming.setdefault(s, []).append(self._edge(graph, n, s, out, tests))
                for s in node.exc_succs:
                    incoming.setdefault(s, []).append(state)
            previous = outs
        facts.kinds = tuple(node.kind for node in graph.nodes)
        facts.succs = tuple(tuple(node.succs) for node in graph.nodes)
        facts.exc_succs = tuple(tuple(node.exc_succs) for node in graph.nodes)
        facts.labels = tuple(tuple(node.labels.items()) for node in graph.nodes)
        facts.tests = tuple(tests)
        facts.lines = tuple(getattr(node.stmt, "lineno", 0) for node in graph.nodes)
        facts.events = tuple(self.events)
        facts.returns = phi(self.returned) if self.returned else Const(None)
        facts.analysed = True
        return facts

    def _initial_env(self, facts: FunctionFacts) -> dict[str, Term]:
        env = {
            name: term
            for name, term in self.outer.items()
            if "." not in name and name not in self.locals
        }
        for param in facts.params:
            name = param.lstrip("*")
            env[name] = Param(name) if not param.startswith("*") else Unknown("star")
        return env

    def _default(self, node: ast.expr) -> Term:
        saved = self.events
        self.events = []
        try:
            return self.ev(node)
        finally:
            self.events = saved

    def _edge(
        self, graph: cfgs.CFG, source: int, target: int, out: _State, tests: list[Term | None]
    ) -> _State:
        label = graph.nodes[source].labels.get(target)
        test = tests[source]
        if label is None or test is None:
            return out
        lits = literals(test, label == cfgs.TRUE)
        if not lits:
            return out
        return _State(out.env, out.guard | lits, out.fields)

    # -- statements ------------------------------------------------------------------------

    def _execute(self, node: cfgs.Node, tests: list[Term | None]) -> _State:
        stmt = node.stmt
        if stmt is None:
            return self.state
        self.stmt_span = span_of(stmt, self.columns)
        self.state = self.state.copy()
        kind = node.kind
        if kind in ("if", "while"):
            assert isinstance(stmt, ast.If | ast.While)
            tests[node.id] = self.ev(stmt.test)
        elif kind == "for":
            assert isinstance(stmt, ast.For | ast.AsyncFor)
            iterated = self.ev(stmt.iter)
            self.bind(stmt.target, _element(iterated, self.scope.site(stmt)), "for")
        elif kind == "with":
            assert isinstance(stmt, ast.With | ast.AsyncWith)
            for item in stmt.items:
                value = self.ev(item.context_expr, how="with")
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, value, "with")
        elif kind == "handler":
            assert isinstance(stmt, ast.ExceptHandler)
            if stmt.type is not None:
                self.ev(stmt.type)
            if stmt.name:
                self.state.env[stmt.name] = Unknown("exception")
        elif kind == "match":
            assert isinstance(stmt, ast.Match)
            self.ev(stmt.subject)
        elif kind == "case":
            assert isinstance(stmt, ast.match_case)
            for inner in ast.walk(stmt.pattern):
                for attr in ("name", "rest"):
                    name = getattr(inner, attr, None)
                    if isinstance(name, str):
                        self.state.env[name] = Unknown("pattern")
            if stmt.guard is not None:
                self.ev(stmt.guard)
        elif kind == "stmt":
            self.statement(stmt)
        return self.state

    def statement(self, stmt: ast.AST) -> None:
        if isinstance(stmt, ast.Expr):
            self.ev(stmt.value)
        elif isinstance(stmt, ast.Assign):
            value = self.ev(stmt.value)
            self.vspan = span_of(stmt.value, self.columns)
            for target in stmt.targets:
                self.bind(target, value, "assign")
            self.vspan = None
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                value = self.ev(stmt.value)
                self.vspan = span_of(stmt.value, self.columns)
                self.bind(stmt.target, value, "annassign")
                self.vspan = None
        elif isinstance(stmt, ast.AugAssign):
            self.augassign(stmt)
        elif isinstance(stmt, ast.Return):
            value = self.ev(stmt.value) if stmt.value is not None else Const(None)
            self.emit(RETURN, stmt, value=value)
            self.returned.append((self.state.guard, value))
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                self.emit(DELETE, target, target=self.target_term(target))
        elif isinstance(stmt, ast.Assert):
            test = self.ev(stmt.test)
            self.emit(ASSERT, stmt, value=test)
            self.state.guard = self.state.guard | literals(test, True)
        elif isinstance(stmt, ast.Raise):
            if stmt.exc is not None:
                self.ev(stmt.exc)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            for alias in stmt.names:
                local = (alias.asname or alias.name).split(".", 1)[0]
                if isinstance(stmt, ast.ImportFrom):
                    qual = f"{stmt.module or ''}.{alias.name}".lstrip(".")
                else:
                    qual = alias.name if alias.asname else local
                self.state.env[local] = Global(qual)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in stmt.decorator_list:
                self.ev(decorator)
            key = f"{self.key}.<locals>.{stmt.name}"
            self.nested.append(Nested(stmt, key, dict(self.state.env), dict(self.state.fields)))
            self.state.env[stmt.name] = Global(self._qualified(key))
        elif isinstance(stmt, ast.ClassDef):
            self.state.env[stmt.name] = Unknown("class")

    def _qualified(self, key: str) -> str:
        return f"{self.scope.module}.{key}" if self.scope.module else key

    def augassign(self, stmt: ast.AugAssign) -> None:
        operand = self.ev(stmt.value)
        op = _BINARY.get(type(stmt.op), "?")
        target = stmt.target
        if isinstance(target, ast.Subscript):
            base, region = self.strip(target)
            current = self.ev(target)
            self.fill(base, region, Op(op, (current, operand)), target, "augassign")
            return
        current = self.ev(target)
        self.bind(target, Op(op, (current, operand)), "augassign")

    # -- bindings -------------------------------------------------------------------------

    def bind(self, target: ast.expr, value: Term, how: str) -> None:
        if isinstance(target, ast.Name):
            name = target.id
            self._forget(name)
            self.state.env[name] = value
            self.emit(
                BIND, target, target=Local(name), value=value, how=how, text=name, vspan=self.vspan
            )
        elif isinstance(target, ast.Attribute):
            base = self.ev(target.value)
            term = Attr(base, target.attr)
            self.emit(
                BIND,
                target,
                target=term,
                value=value,
                how=how,
                text=dotted(target) or "",
                vspan=self.vspan,
            )
            path = self.path(target)
            if path is not None:
                self._forget(path)
                self.state.fields[path] = value
            self.state.guard = frozenset(lit for lit in self.state.guard if not reads(lit[0], term))
        elif isinstance(target, ast.Subscript):
            base, region = self.strip(target)
            self.fill(base, region, value, target, "setitem")
        elif isinstance(target, ast.Tuple | ast.List):
            items = target.elts
            starred = any(isinstance(item, ast.Starred) for item in items)
            for i, item in enumerate(items):
                if isinstance(item, ast.Starred):
                    self.bind(item.value, Unknown("starred"), "unpack")
                    continue
                part = None if starred else _unpacked(value, i, len(items))
                self.bind(item, part if part is not None else Index(value, Const(i)), "unpack")
        elif isinstance(target, ast.Starred):
            self.bind(target.value, Unknown("starred"), how)

    def _forget(self, path: str) -> None:
        """Drop what was known of ``path``'s fields: it now holds another value."""
        fields = self.state.fields
        if fields:
            prefix = path + "."
            for key in [k for k in fields if k.startswith(prefix)]:
                del fields[key]

    def path(self, node: ast.expr) -> str | None:
        """``x.a.b`` for an attribute chain rooted at a local or parameter."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.state.env:
            parts.append(node.id)
            return ".".join(reversed(parts))
        return None

    def target_term(self, node: ast.expr) -> Term:
        if isinstance(node, ast.Name):
            return Local(node.id)
        if isinstance(node, ast.Attribute):
            return Attr(self.ev(node.value), node.attr)
        if isinstance(node, ast.Subscript):
            return Index(self.ev(node.value), self.ev_index(node.slice))
        return UNKNOWN

    def strip(self, node: ast.expr) -> tuple[ast.expr, Term | str]:
        """The tensor a subscript or view chain writes into, and which rows."""
        region: Term | str = "all"
        while True:
            if isinstance(node, ast.Subscript):
                inner = self.ev_index(node.slice)
                region = inner if region == "all" else Seq((_as_term(region), inner), "chain")
                node = node.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _VIEWS
            ):
                for arg in node.args:
                    self.ev(arg)
                node = node.func.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "narrow"
                and len(node.args) == 3
            ):
                dim, start, length = (self.ev(a) for a in node.args)
                if dim == Const(0):
                    region = Slice(start, Op("+", (start, length)))
                node = node.func.value
            else:
                return node, region

    def fill(
        self, base: ast.expr, region: Term | str, value: Term, where: ast.AST, how: str
    ) -> Term:
        """Record an in-place write of ``value`` into ``base``'s ``region``; the tensor
        after it (a local's or a field path's binding follows it)."""
        before = self.ev(base)
        after = self.intern(Filled(before, region, value))
        if isinstance(base, ast.Name):
            target: Term = Local(base.id)
        elif isinstance(base, ast.Attribute):
            target = Attr(self.ev(base.value), base.attr)
        else:
            target = before
        self.emit(
            FILL,
            where,
            target=target,
            value=value,
            region=region,
            how=how,
            before=before,
            text=dotted(base) or "",
        )
        if isinstance(base, ast.Name):
            self.state.env[base.id] = after
        else:
            path = self.path(base)
            if path is not None:
                self.state.fields[path] = after
        return after

    # -- expressions ----------------------------------------------------------------------

    def emit(self, kind: str, node: ast.AST, **fields: object) -> None:
        self.events.append(
            Event(
                kind,
                self.node_id,
                span_of(node, self.columns),
                self.stmt_span,
                self.state.guard,
                conditional=self.conditional > 0,
                **fields,  # type: ignore[arg-type]
            )
        )

    def ev(self, node: ast.expr | None, how: str = "") -> Term:
        if node is None:
            return Const(None)
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            return Unknown(type(node).__name__)
        if how and isinstance(node, ast.Call):
            return self.intern(method(node, how))
        return self.intern(method(node))

    def ev_index(self, node: ast.expr) -> Term:
        if isinstance(node, ast.Slice):
            return Slice(
                self.ev(node.lower) if node.lower is not None else None,
                self.ev(node.upper) if node.upper is not None else None,
                self.ev(node.step) if node.step is not None else None,
            )
        if isinstance(node, ast.Tuple):
            return Seq(tuple(self.ev_index(e) for e in node.elts))
        return self.ev(node)

    def _Constant(self, node: ast.Constant) -> Term:
        return Const(node.value)

    def _Name(self, node: ast.Name) -> Term:
        name = node.id
        env = self.state.env
        if name in env and name not in self.globals:
            return env[name]
        if name in self.locals:
            return Unknown("unbound")
        return Global(self.scope.global_name(name))

    def _Attribute(self, node: ast.Attribute) -> Term:
        fields = self.state.fields
        if fields:
            path = self.path(node)
            if path is not None and path in fields:
                return fields[path]
        base = self.ev(node.value)
        if isinstance(base, Global) and (
            base.name in self.scope.foldable or (base.name[:1].isupper() and "." not in base.name)
        ):
            name = f"{base.name}.{node.attr}"
            self.scope.foldable.add(name)
            return Global(name)
        return Attr(base, node.attr)

    def _Subscript(self, node: ast.Subscript) -> Term:
        return Index(self.ev(node.value), self.ev_index(node.slice))

    def _Slice(self, node: ast.Slice) -> Term:
        return self.ev_index(node)

    def _Starred(self, node: ast.Starred) -> Term:
        self.ev(node.value)
        return Unknown("starred")

    def _Tuple(self, node: ast.Tuple) -> Term:
        return Seq(tuple(self.ev(e) for e in node.elts), "tuple")

    def _List(self, node: ast.List) -> Term:
        return Seq(tuple(self.ev(e) for e in node.elts), "list")

    def _Set(self, node: ast.Set) -> Term:
        return Seq(tuple(self.ev(e) for e in node.elts), "set")

    def _Dict(self, node: ast.Dict) -> Term:
        items = []
        for key, value in zip(node.keys, node.values, strict=True):
            term = self.ev(value)
            if key is None:
                items.append((Unknown("**"), term))
            else:
                items.append((self.ev(key), term))
        return Mapping(tuple(items))

    def _BinOp(self, node: ast.BinOp) -> Term:
        return Op(_BINARY.get(type(node.op), "?"), (self.ev(node.left), self.ev(node.right)))

    def _UnaryOp(self, node: ast.UnaryOp) -> Term:
        return Op(_UNARY.get(type(node.op), "?"), (self.ev(node.operand),))

    def _BoolOp(self, node: ast.BoolOp) -> Term:
        op = "and" if isinstance(node.op, ast.And) else "or"
        values = [self.ev(node.values[0])]
        self.conditional += 1
        saved = self.state.guard
        try:
            for value in node.values[1:]:
                self.state.guard = self.state.guard | literals(values[-1], op == "and")
                values.append(self.ev(value))
        finally:
            self.conditional -= 1
            self.state.guard = saved
        return Op(op, tuple(values))

    def _Compare(self, node: ast.Compare) -> Term:
        left = self.ev(node.left)
        pairs: list[Term] = []
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.ev(comparator)
            pairs.append(Op(_COMPARE[type(op)], (left, right)))
            left = right
        return pairs[0] if len(pairs) == 1 else Op("and", tuple(pairs))

    def _IfExp(self, node: ast.IfExp) -> Term:
        test = self.ev(node.test)
        yes, no = literals(test, True), literals(test, False)
        saved = self.state.guard
        self.conditional += 1
        try:
            self.state.guard = saved | yes
            body = self.ev(node.body)
            self.state.guard = saved | no
            orelse = self.ev(node.orelse)
        finally:
            self.conditional -= 1
            self.state.guard = saved
        return phi([(yes, body), (no, orelse)])

    def _NamedExpr(self, node: ast.NamedExpr) -> Term:
        value = self.ev(node.value)
        self.bind(node.target, value, "walrus")
        return value

    def _Lambda(self, node: ast.Lambda) -> Term:
        # its body runs later, if ever: its events are conditional
        params = tuple(a.arg for a in [*node.args.posonlyargs, *node.args.args])
        saved_env = self.state.env
        self.state.env = {**saved_env, **{p: Param(p) for p in params}}
        self.conditional += 1
        try:
            body = self.ev(node.body)
        finally:
            self.state.env = saved_env
            self.conditional -= 1
        return Lambda(params, body)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        saved_env = self.state.env
        self.state.env = dict(saved_env)
        self.conditional += 1
        try:
            for i, generator in enumerate(node.generators):
                if i == 0:
                    self.conditional -= 1
                    iterated = self.ev(generator.iter)
                    self.conditional += 1
                else:
                    iterated = self.ev(generator.iter)
                self._bind_quiet(
                    generator.target, _element(iterated, self.scope.site(generator.iter))
                )
                for condition in generator.ifs:
                    self.ev(condition)
            if isinstance(node, ast.DictComp):
                element: Term = Seq((self.ev(node.key), self.ev(node.value)))
            else:
                element = self.ev(node.elt)
        finally:
            self.conditional -= 1
            self.state.env = saved_env
        return Seq((element,), "comprehension")

    _ListComp = _SetComp = _GeneratorExp = _DictComp = _comprehension

    def _bind_quiet(self, target: ast.expr, value: Term) -> None:
        if isinstance(target, ast.Name):
            self.state.env[target.id] = value
        elif isinstance(target, ast.Tuple | ast.List):
            known = value.items if isinstance(value, Seq) else None
            for i, item in enumerate(target.elts):
                part = known[i] if known is not None and len(known) == len(target.elts) else None
                self._bind_quiet(item, part if part is not None else Index(value, Const(i)))

    def _Await(self, node: ast.Await) -> Term:
        return self.ev(node.value)

    def _Yield(self, node: ast.Yield) -> Term:
        self.ev(node.value)
        return Unknown("yield")

    _YieldFrom = _Yield

    def _JoinedStr(self, node: ast.JoinedStr) -> Term:
        for value in node.values:
            self.ev(value)
        return Unknown("str")

    def _FormattedValue(self, node: ast.FormattedValue) -> Term:
        self.ev(node.value)
        return Unknown("str")

    # -- calls ----------------------------------------------------------------------------

    def _Call(self, node: ast.Call, how: str = "") -> Term:
        func_node = node.func
        if isinstance(func_node, ast.Attribute) and _inplace(func_node.attr):
            return self._inplace_method(node, func_node)
        func = self.ev(func_node)
        args: list[Term] = []
        star = False
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                self.ev(arg.value)
                star = True
                continue
            args.append(self.ev(arg))
        kwargs: list[tuple[str, Term]] = []
        out_node: ast.expr | None = None
        for keyword in node.keywords:
            value = self.ev(keyword.value)
            if keyword.arg is None:
                star = True
                continue
            if keyword.arg == "out":
                out_node = keyword.value
            kwargs.append((keyword.arg, value))
        decides = self._decides(node)
        site = 0
        if decides is not None or (
            isinstance(func, Global) and func.name.rsplit(".", 1)[-1] in _FACTORIES
        ):
            site = self.scope.site(node)  # a new tensor: one per place
        call = Call(func, tuple(args), tuple(kwargs), star, site)
        special = self._builtin(call, node)
        if special is not None:
            return special
        kind_how = how or ("launch" if isinstance(func_node, ast.Subscript) else "")
        names = tuple(
            (name, span_of(a, self.columns)) if (name := dotted(a)) else None
            for a in node.args
            if not isinstance(a, ast.Starred)
        )
        self.emit(CALL, node, value=call, how=kind_how, names=names, decides=decides)
        if (
            isinstance(func, Global)
            and func.name.split(".", 1)[0] in _TORCH_MODULES
            and _inplace(func.name.rsplit(".", 1)[-1])
            and node.args
            and not isinstance(node.args[0], ast.Starred)
        ):
            base, region = self.strip(node.args[0])
            return self.fill(base, region, call, node, func.name.rsplit(".", 1)[-1])
        if out_node is not None:
            base, region = self.strip(out_node)
            self.fill(base, region, call, node, "out=")
        return call

    def _decides(self, node: ast.Call) -> Span | None:
        """Where a call decides a dtype: its ``dtype=`` value, a cast's dtype argument,
        the method name of ``.long()``/``.int()``."""
        for keyword in node.keywords:
            if keyword.arg == "dtype":
                return span_of(keyword.value, self.columns)
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in _CAST_METHODS and not node.args:
                end = span_of(func, self.columns)
                return Span(end.end_line, end.end_col - len(func.attr), end.end_line, end.end_col)
            if func.attr in ("to", "type") and node.args:
                for arg in node.args:
                    name = dotted(arg)
                    if name is not None and name.startswith("torch."):
                        return span_of(arg, self.columns)
        return None

    def _builtin(self, call: Call, node: ast.Call) -> Term | None:
        func = call.func
        if not isinstance(func, Global) or call.star:
            return None
        name = func.name
        args = call.args
        if name == "getattr" and len(args) >= 2 and isinstance(args[1], Const):
            attribute = args[1].value
            if isinstance(attribute, str):
                return Attr(args[0], attribute)
        if name == "setattr" and len(args) == 3 and isinstance(args[1], Const):
            attribute = args[1].value
            if isinstance(attribute, str):
                self.emit(BIND, node, target=Attr(args[0], attribute), value=args[2], how="setattr")
                return Const(None)
        return None

    def _inplace_method(self, node: ast.Call, func: ast.Attribute) -> Term:
        base, region = self.strip(func.value)
        args = [
            self.ev(a) if not isinstance(a, ast.Starred) else Unknown("starred") for a in node.args
        ]
        kwargs = tuple((k.arg or "**", self.ev(k.value)) for k in node.keywords)
        method = func.attr
        if method in ("zero_",):
            value: Term = Const(0)
        elif (method == "fill_" and args) or (method == "copy_" and args):
            value = args[0]
        else:
            value = Call(Attr(UNKNOWN, method), tuple(args), kwargs)
        return self.fill(base, region, value, node, method)


def _inplace(name: str) -> bool:
    return (
        len(name) > 1
        and name.endswith("_")
        and not name.startswith("_")
        and (name not in _NOT_WRITES)
    )


def _as_term(region: Term | str) -> Term:
    return Const(region) if isinstance(region, str) else region


def _unpacked(value: Term, i: int, length: int) -> Term | None:
    """Item ``i`` of ``value`` unpacked into ``length`` names, where it is known: of a
    literal sequence, or of each sequence a join may be (``for pool, cpu in ((full,
    a), (swa, b)):`` binds ``pool`` to either pool)."""
    if isinstance(value, Seq):
        return value.items[i] if len(value.items) == length else None
    if isinstance(value, Phi):
        parts = [(g, _unpacked(alt, i, length)) for g, alt in value.alternatives]
        if all(part is not None for _, part in parts):
            return phi([(g, part) for g, part in parts if part is not None])
    return None


def _element(iterated: Term, loop: int) -> Term:
    """An element of what a ``for`` iterates: each item of a literal sequence, the
    pairs of a ``zip`` of literal sequences, else an unknown row of it. Each item is
    guarded by its iteration (``loop``: the loop's number in its module), so that the
    parts of one item unpacked apart stay together (in ``for pool, loc in ((full, a),
    (swa, b)):``, ``pool`` is the SWA pool only where ``loc`` is ``b``)."""
    if isinstance(iterated, Seq) and iterated.kind in ("tuple", "list") and iterated.items:
        return _iterations(iterated.items, loop)
    if (
        isinstance(iterated, Call)
        and iterated.func == Global("zip")
        and all(isinstance(a, Seq) and a.kind in ("tuple", "list") for a in iterated.args)
        and iterated.args
    ):
        rows = zip(*(a.items for a in iterated.args), strict=False)  # type: ignore[union-attr]
        return _iterations([Seq(tuple(row)) for row in rows], loop)
    if isinstance(iterated, Call) and iterated.func == Global("enumerate") and iterated.args:
        return Seq((Unknown("index"), _element(iterated.args[0], loop)))
    return Index(iterated, Unknown("element"))


def _iterations(items: Sequence[Term], loop: int) -> Term:
    """The join of ``items``, item ``k`` guarded by "iteration ``k`` of ``loop``"."""
    if len(items) == 1:
        return items[0]
    keys = [f"<iteration {k} of loop {loop}>" for k in range(len(items))]
    return phi(
        [
            (frozenset((key, j == k) for j, key in enumerate(keys)), item)
            for k, item in enumerate(items)
        ]
    )


def _merge(states: list[_State], intern: Callable[[Term], Term]) -> _State:
    if len(states) == 1:
        return states[0]
    common = states[0].guard
    for state in states[1:]:
        common = common & state.guard
    env = _join([s.env for s in states], states, common, intern, partial=False)
    fields = _join([s.fields for s in states], states, common, intern, partial=True)
    return _State(env, common, fields)


def _join(
    maps: list[dict[str, Term]],
    states: list[_State],
    common: Guard,
    intern: Callable[[Term], Term],
    partial: bool,
) -> dict[str, Term]:
    """Each name's value after a merge: the one value all paths agree on, or a join
    whose alternatives carry what tells the paths apart. A field path known on some
    paths only (``partial``) is dropped: it is read from its object."""
    first_map = maps[0]
    if all(m is first_map for m in maps[1:]):
        return dict(first_map)
    names: dict[str, None] = {}
    for m in maps:
        names.update(dict.fromkeys(m))
    out: dict[str, Term] = {}
    for name in names:
        values = [m.get(name) for m in maps]
        first = values[0]
        if all(v is first for v in values[1:]):
            if first is not None:
                out[name] = first
            continue
        if partial and any(v is None for v in values):
            continue
        out[name] = intern(
            phi(
                [
                    (state.guard - common, value if value is not None else Unknown("unbound"))
                    for state, value in zip(states, values, strict=True)
                ]
            )
        )
    return out


def analyse(
    node: ast.FunctionDef | ast.AsyncFunctionDef,
    key: str,
    cls: str | None,
    scope: Scope,
    columns: Columns,
    walrus: bool = True,
) -> list[FunctionFacts]:
    """The facts of ``node`` and of every function nested in it (the nested ones see
    the values their enclosing function holds where they are defined)."""
    out: list[FunctionFacts] = []
    pending: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str, dict[str, Term] | None]] = [
        (node, key, None)
    ]
    interner: dict[Term, Term] = {}
    while pending:
        fn, fn_key, outer = pending.pop()
        analysis = Analysis(
            fn, fn_key, cls if outer is None else None, scope, columns, outer, interner, walrus
        )
        out.append(analysis.run())
        pending.extend(
            (nested.node, nested.key, {**nested.env, **nested.fields}) for nested in analysis.nested
        )
    return out


__all__ = [
    "ASSERT",
    "BIND",
    "CALL",
    "DELETE",
    "FILL",
    "RETURN",
    "Analysis",
    "Columns",
    "Event",
    "FunctionFacts",
    "Literal",
    "Scope",
    "Span",
    "analyse",
    "dotted",
    "signature",
]
