"""SWA008 per-batch-state-on-long-lived-object."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import libcst as cst

from swacheck.analysis.buffers import local_bindings
from swacheck.analysis.names import dotted_name
from swacheck.analysis.skeletons import annotation_class, params_of
from swacheck.analysis.walk import walk
from swacheck.config import DEFAULT_SWA_LOC_PATTERN, Config
from swacheck.places import cite, position
from swacheck.rule import Invalid, Rule, Valid
from swacheck.semantics.function import BIND, CALL, DELETE, FILL, RETURN, Event
from swacheck.semantics.guards import is_none_test
from swacheck.semantics.model import FULL, SWA, all_models, location_triggers, words
from swacheck.semantics.project import Class, Function, Project
from swacheck.semantics.terms import (
    Attr,
    Call,
    Const,
    Global,
    Mapping,
    Param,
    Seq,
    Slice,
    Term,
    contains,
)
from swacheck.semantics.unit import FileUnit
from swacheck.semantics.values import EITHER, Ctx
from swacheck.triggers import Trigger

if TYPE_CHECKING:
    from swacheck.analysis.index import ClassInfo, ProjectIndex
    from swacheck.analysis.names import Names
    from swacheck.context import FileContext

# Every default ``swa-loc-pattern`` match has the word ``swa`` next to another word.
_DEFAULT_TRIGGERS = frozenset({"swa_", "_swa"})
_CONSTRUCTORS = {"__init__", "__post_init__", "__new__", "__setstate__"}
# Words that name an object made per batch (or per request): state stored there travels
# with the batch (``forward_batch``, ``metadata``, ``spec_info``, ``req``).
_PER_BATCH_WORDS = frozenset({"batch", "metadata", "meta", "info", "req", "request", "reqs"})
_DICT_TYPES = frozenset({"dict", "defaultdict", "OrderedDict"})
# Tensor methods that allocate a new tensor like another (``loc.new_zeros(n)``).
_ALLOCATIONS = frozenset({"new_zeros", "new_empty", "new_full", "new_ones", "new_tensor"})


@dataclass(frozen=True)
class Setter:
    method: str
    attr: str
    line: int = position()


@dataclass(frozen=True)
class Read:
    """A read of a per-batch attribute, in ``function`` (its name; ``None`` outside
    one): of ``self`` in a method, or of another object."""

    attr: str
    function: str | None
    line: int = position()


@dataclass
class ClassFacts:
    setters: list[Setter] = field(default_factory=list)
    # each ``self.<attr>`` read, with its method
    reads: list[Read] = field(default_factory=list)
    # attributes set to ``None`` (or deleted) on ``self`` outside a constructor
    resets: set[str] = field(default_factory=set)


@dataclass
class FileFacts:
    classes: dict[str, ClassFacts] = field(default_factory=dict)
    # each ``<expr>.<attr>`` / ``getattr(x, "<attr>")`` read not on self
    other_reads: list[Read] = field(default_factory=list)
    # attributes set to ``None`` on some other object (``pool.swa_loc = None``)
    other_resets: set[str] = field(default_factory=set)
    # methods called with a lone ``None`` (``pool.set_swa_loc(None)``)
    none_calls: set[str] = field(default_factory=set)


def _unset(event: Event, receiver: str, field: str) -> bool:
    """Whether ``event`` runs only while ``self.<field>`` is unset (``is None`` or
    falsy): a memo of the first value."""
    own = Attr(Param(receiver), field)
    return any(
        (key == own and not holds) or (holds and is_none_test(key) == own)
        for key, holds in event.guard
    )


def _is_self(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "self"


def _is_none(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _decorators(func: cst.FunctionDef) -> list[str]:
    out = []
    for dec in func.decorators:
        expr = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        out.append(cst.Module([]).code_for_node(expr))
    return out


def setter_of(func: cst.FunctionDef) -> tuple[str, cst.Assign | cst.AnnAssign] | None:
    """``(attr, assignment)`` when ``func``'s only effect is ``self.<attr> = <parameter>``."""
    if func.name.value.startswith("__") or _decorators(func):
        return None
    if not isinstance(func.body, cst.IndentedBlock):
        body: list[cst.BaseStatement | cst.BaseSmallStatement] = list(func.body.body)
    else:
        body = list(func.body.body)
    statements: list[cst.BaseSmallStatement] = []
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            statements.extend(stmt.body)
        elif isinstance(stmt, cst.BaseSmallStatement):
            statements.append(stmt)
        else:
            return None
    # a docstring first is not an effect
    if (
        statements
        and isinstance(statements[0], cst.Expr)
        and isinstance(statements[0].value, cst.SimpleString | cst.ConcatenatedString)
    ):
        statements = statements[1:]
    if len(statements) != 1:
        return None
    stmt = statements[0]
    if isinstance(stmt, cst.Assign):
        if len(stmt.targets) != 1:
            return None
        target, value = stmt.targets[0].target, stmt.value
    elif isinstance(stmt, cst.AnnAssign) and stmt.value is not None:
        target, value = stmt.target, stmt.value
    else:
        return None
    params = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
    params += [p.name.value for p in func.params.kwonly_params]
    if not params or params[0] != "self":
        return None
    if not (
        isinstance(target, cst.Attribute)
        and _is_self(target.value)
        and isinstance(value, cst.Name)
        and value.value in params[1:]
    ):
        return None
    return target.attr.value, stmt


def _per_batch(names: Names, attr: str) -> bool:
    return names.is_swa_loc(attr)


def _names_a_batch(name: str) -> bool:
    """``forward_batch``, ``forward_metadata``, ``spec_info``: an object made per batch."""
    return any(word in _PER_BATCH_WORDS for word in name.lower().split("_"))


def _root(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The object an expression reads from: ``forward_batch`` for
    ``forward_batch.out_cache_loc_swa[:n].to(device)``."""
    while True:
        if isinstance(expr, cst.Attribute | cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        else:
            return expr


class _FactsCollector(cst.CSTVisitor):
    def __init__(self, context: FileContext, triggers: frozenset[str] | None) -> None:
        self.names = context.names
        self.positions = context.positions
        self.triggers = triggers
        self.facts = FileFacts()
        # innermost last: (class facts, method name) or None outside a method
        self._scopes: list[tuple[ClassFacts | None, str | None]] = []
        self._functions: list[str] = []
        self._stores: set[int] = set()

    def _line(self, node: cst.CSTNode) -> int:
        return int(self.positions[node].start.line)

    @property
    def _method(self) -> tuple[ClassFacts, str] | None:
        if not self._scopes:
            return None
        cls, method = self._scopes[-1]
        return (cls, method) if cls is not None and method is not None else None

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        facts = self.facts.classes.setdefault(node.name.value, ClassFacts())
        self._scopes.append((facts, None))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(node.name.value)
        cls, method = self._scopes[-1] if self._scopes else (None, None)
        if cls is not None and method is None:
            self._scopes.append((cls, node.name.value))
            setter = setter_of(node)
            if setter is not None and _per_batch(self.names, setter[0]):
                cls.setters.append(Setter(node.name.value, setter[0], self._line(setter[1])))
        else:
            self._scopes.append((None, None) if cls is None else (cls, method))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions.pop()
        self._scopes.pop()

    # -- stores -----------------------------------------------------------------------

    def _store(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        self._stores.add(id(target))
        if isinstance(target, cst.Tuple | cst.List):
            for element in target.elements:
                self._store(element.value, None)
            return
        if not isinstance(target, cst.Attribute) or not _is_none(value):
            return
        attr = target.attr.value
        if not _per_batch(self.names, attr):
            return
        method = self._method
        if _is_self(target.value):
            if method is not None and method[1] not in _CONSTRUCTORS:
                method[0].resets.add(attr)
        else:
            self.facts.other_resets.add(attr)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._store(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._store(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._stores.add(id(node.target))

    def visit_Del(self, node: cst.Del) -> None:
        self._stores.add(id(node.target))
        target = node.target
        method = self._method
        if isinstance(target, cst.Attribute) and _is_self(target.value) and method is not None:
            method[0].resets.add(target.attr.value)

    # -- reads ------------------------------------------------------------------------

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if id(node) in self._stores:
            return
        attr = node.attr.value
        if not _per_batch(self.names, attr):
            return
        method = self._method
        if _is_self(node.value):
            if method is not None:
                method[0].reads.append(Read(attr, method[1], self._line(node)))
        else:
            self._read_elsewhere(attr, node)

    def _read_elsewhere(self, attr: str, node: cst.CSTNode) -> None:
        function = self._functions[-1] if self._functions else None
        self.facts.other_reads.append(Read(attr, function, self._line(node)))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name) and func.value == "getattr" and len(node.args) >= 2:
            name = node.args[1].value
            if isinstance(name, cst.SimpleString):
                attr = name.evaluated_value
                if isinstance(attr, str) and _per_batch(self.names, attr):
                    self._read_elsewhere(attr, node)
        if isinstance(func, cst.Attribute) and len(node.args) == 1 and _is_none(node.args[0].value):
            method = func.attr.value
            lowered = method.lower()
            # Only names the prefilter keeps, so that --no-prefilter finds the same.
            if self.triggers is None or any(t in lowered for t in self.triggers):
                self.facts.none_calls.add(method)


class _Facts:
    """SWA008's facts of the whole audit."""

    def __init__(self, project: ProjectIndex) -> None:
        self.project = project
        self.by_class: dict[tuple[str, str], ClassFacts] = {}
        self.other_reads: dict[str, list[tuple[str, Read]]] = {}
        self.other_resets: set[str] = set()
        self.none_calls: set[str] = set()
        for path, facts in project.rule_facts(PerBatchStateOnLongLivedObject.code):
            for name, cls in facts.classes.items():
                self.by_class[(path, name)] = cls
            for read in facts.other_reads:
                self.other_reads.setdefault(read.attr, []).append((path, read))
            self.other_resets |= facts.other_resets
            self.none_calls |= facts.none_calls
        self.all_classes: list[ClassInfo] = [
            info for module in project.modules.values() for info in module.classes
        ]

    def of(self, info: ClassInfo) -> ClassFacts:
        return self.by_class.get((info.path, info.name), ClassFacts())

    def family(self, info: ClassInfo) -> list[ClassInfo]:
        """``info``, its bases and its subclasses known to the audit."""
        key = (info.path, info.name)
        found = {(c.path, c.name): c for c in self.project.mro(info)}
        for other in self.all_classes:
            if any((c.path, c.name) == key for c in self.project.mro(other)):
                found[(other.path, other.name)] = other
        return list(found.values())


_FACTS_CACHE: weakref.WeakKeyDictionary[Any, _Facts] = weakref.WeakKeyDictionary()


def _project_facts(project: ProjectIndex) -> _Facts:
    facts = _FACTS_CACHE.get(project)
    if facts is None:
        facts = _FACTS_CACHE[project] = _Facts(project)
    return facts


class PerBatchStateOnLongLivedObject(Rule):
    """
    ## What it does
    Flags per-batch SWA location state parked on a long-lived object: an attribute
    whose name matches `swa-loc-pattern` (`swa_loc`, `out_cache_loc_swa`) that is set
    from a batch's value — by a setter method, whose only effect is
    `self.<attr> = <argument>` (`SWAKVPool.set_swa_loc(self, loc): self.swa_loc = loc`),
    or by a direct assignment outside a constructor whose value comes from a parameter
    of the assigning function (`pool.swa_loc = forward_batch.out_cache_loc_swa`,
    `self.token_to_kv_pool.swa_loc = out_cache_loc_swa[:n]` in the model runner,
    `self.swa_loc = loc` among other statements) — and that other code reads
    (`if self.swa_loc is not None:` in `set_kv_buffer`, `pool.swa_loc`,
    `getattr(pool, "swa_loc", None)`), when nothing in the audited tree ever resets it:
    no `self.<attr> = None` or `del self.<attr>` outside a constructor, no
    `<obj>.<attr> = None`, no `<obj>.<setter>(None)` call.

    An object is long-lived unless it is made per batch: a dataclass (`ForwardBatch`,
    attention metadata), or, where its class is not known, an object named for a batch,
    its metadata or a request (`forward_batch`, `metadata`, `self.forward_metadata`,
    `spec_info`, `req`) or built in the assigning function. Storing the batch's value
    on the batch is where it belongs.

    Reads count in the setter's class, its bases and its subclasses (`self.<attr>`),
    and on other objects (`pool.<attr>`) when no class outside that family owns an
    attribute of that name. Both the setter and a read must be in the audited tree;
    setters and readers in different files are matched through the project index.

    The finding is reported at the setter's (or the direct) assignment, not at the
    reads: that is where the state is written, where a reset (or moving the state onto
    the batch) belongs, and a single `# noqa` there covers every reader. The reads are
    listed in the finding's notes. A read in the assigning function itself does not
    count.

    A translation of the batch's locations is the batch's value
    (`self.swa_out_cache_loc = pool.translate_loc_from_full_to_swa(forward_batch.
    out_cache_loc)`). A store made on a condition (`if forward_batch.out_cache_loc is not
    None:`) also counts the assigning function's own reads after that branch: on a batch
    that skips the branch they read the previous batch's value.

    A batch's locations (a value of one pool's space computed from what the call is
    handed) stored into a field only while the field is unset (`if self.x is None:
    self.x = translate(forward_batch.out_cache_loc)`) is flagged under any name: the
    first batch's locations serve every later one. So are locations kept in a dict field
    by `self.<field>.setdefault(key, <locations>)`: the first batch with a key serves every
    later one with the same key.

    ## Why is this bad?
    Per-batch state must travel with the batch (invariant I8). A setter called only
    when the current batch has a value (`if forward_batch.out_cache_loc_swa is not
    None: pool.set_swa_loc(...)`) leaves the previous batch's tensor in place for the
    next batch that has none, and the reader then writes K/V through stale slots or
    fails on a shape mismatch. In the review of SGLang PR #24138 the bot flagged
    `self._swa_kv_pool.swa_loc` for exactly this; the PR read
    `forward_batch.out_cache_loc_swa` instead, and PR #25824 later removed
    `set_swa_loc` and the `swa_loc` attribute altogether.

    ## Fix safety
    No autofix: whether to move the state onto the batch or to reset it at a batch
    boundary (and which boundary) is a design decision.
    """

    code = "SWA008"
    name = "per-batch-state-on-long-lived-object"
    summary = "Per-batch SWA location set on a long-lived object, never reset"
    config_keys = ("swa-loc-pattern",)
    invariant = "I8"
    origin = "SGLang PR #24138 review (and PR #25824, which removed set_swa_loc)"

    VALID = [
        # a buffer allocated like the batch's locations at capture, read back at replay
        Valid(
            """
class Backend:
    def _init_full_cg_metadata(self, forward_batch, in_capture):
        if in_capture:
            self.cg_swa_out_cache_loc = forward_batch.out_cache_loc.new_zeros(
                (forward_batch.out_cache_loc.shape[0],)
            )
        n = forward_batch.out_cache_loc.shape[0]
        self.cg_swa_out_cache_loc[:n].copy_(forward_batch.out_cache_loc_swa)
"""
        ),
        # stored on a condition and read only inside the branch that stores it
        Valid(
            """
class Backend:
    def init_forward_metadata(self, forward_batch):
        if forward_batch.out_cache_loc is not None:
            self._swa_out_cache_loc = self.pool.translate_loc_from_full_to_swa(
                forward_batch.out_cache_loc
            )
            self.forward_metadata = Metadata(self._swa_out_cache_loc)
""",
        ),
        # a buffer allocated on first use, sized from the batch: no locations kept
        Valid(
            """
class Backend:
    def init_forward_metadata(self, forward_batch):
        if self.scratch is None:
            self.scratch = torch.zeros(forward_batch.batch_size, dtype=torch.int32)
        self.scratch.fill_(0)
"""
        ),
        # The state travels with the batch.
        Valid(
            """
class TRTLLMBackend:
    def _get_layer_cache_loc(self, layer, forward_batch):
        if forward_batch.out_cache_loc_swa is not None:
            return forward_batch.out_cache_loc_swa
        return self._swa_kv_pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)
"""
        ),
        # Reset at the batch boundary.
        Valid(
            """
class SWAKVPool:
    def __init__(self):
        self.swa_loc = None

    def set_swa_loc(self, loc):
        self.swa_loc = loc

    def end_batch(self):
        self.swa_loc = None

    def set_kv_buffer(self, layer, loc, k, v):
        if self.swa_loc is not None:
            loc = self.swa_loc
        self.write(loc, k, v)
"""
        ),
        # Reset by the caller through the setter, in another file.
        Valid(
            """
class SWAKVPool:
    def __init__(self):
        self.swa_loc = None

    def set_swa_loc(self, loc):
        self.swa_loc = loc

    def set_kv_buffer(self, layer, loc, k, v):
        self.write(self.swa_loc if self.swa_loc is not None else loc, k, v)
""",
            files={
                "model_runner.py": (
                    "class ModelRunner:\n"
                    "    def forward(self, forward_batch):\n"
                    "        self.pool.set_swa_loc(forward_batch.out_cache_loc_swa)\n"
                    "        out = self.model(forward_batch)\n"
                    "        self.pool.set_swa_loc(None)\n"
                    "        return out\n"
                )
            },
        ),
        # Set but never read in the audited tree: nothing stale can be used.
        Valid(
            """
class SWAKVPool:
    def set_swa_loc(self, loc):
        self.swa_loc = loc
"""
        ),
        # Not a location: long-lived configuration set once.
        Valid(
            """
class Scheduler:
    def set_logger(self, logger):
        self.logger = logger

    def step(self):
        self.logger.info("step")
"""
        ),
        # Stored on the backend for one batch and reset when the batch is done.
        Valid(
            """
class TorchNativeAttnBackend:
    def init_forward_metadata(self, forward_batch):
        self.swa_out_cache_loc = forward_batch.out_cache_loc_swa

    def forward_extend(self, q, k, v, layer, forward_batch):
        return self.write(self.swa_out_cache_loc, k, v)

    def on_forward_end(self):
        self.swa_out_cache_loc = None
"""
        ),
        # Stored on the batch's own metadata, built for this batch.
        Valid(
            """
from dataclasses import dataclass

@dataclass
class SWAMetadata:
    swa_page_indices: object = None

class Backend:
    def init_forward_metadata(self, forward_batch):
        metadata = SWAMetadata()
        metadata.swa_page_indices = forward_batch.swa_page_indices
        self.forward_metadata = metadata

    def forward_decode(self, q, layer, forward_batch):
        return self.forward_metadata.swa_page_indices
"""
        ),
        # A view of the runner's own static buffer is not a batch's value.
        Valid(
            """
class GraphRunner:
    def replay_prepare(self, forward_batch, bs):
        self.swa_loc_view = self.swa_loc_buffer[:bs]

    def replay(self, forward_batch):
        return self.graphs[self.bs].replay(self.swa_loc_view)
"""
        ),
        # A batch's locations kept in a field, but the field is reset when the batch ends.
        Valid(
            """
class KVIndexTranslator:
    def __init__(self, allocator):
        self.allocator = allocator
        self._last_ids = {}

    def write_ids(self, forward_batch, kind):
        if forward_batch.out_cache_loc is None:
            return self._last_ids.get(kind)
        ids = self.allocator.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)
        self._last_ids[kind] = ids
        return ids

    def end_batch(self):
        self._last_ids.clear()
"""
        ),
        # Rows of a persistent graph buffer refilled per batch: the buffer is the state.
        Valid(
            """
import torch

class Backend:
    def __init__(self, pool, max_tokens):
        self.pool = pool
        self.graph_loc = torch.zeros(max_tokens, dtype=torch.int64)

    def init_forward_metadata(self, forward_batch):
        n = forward_batch.out_cache_loc.shape[0]
        self.graph_loc[:n].copy_(self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc))
        self.graph_loc[n:].zero_()

    def forward(self, q, k, v):
        return self.pool.write(self.graph_loc, k, v)
"""
        ),
    ]
    INVALID = [
        # the batch's translated write locations kept on the backend for other methods;
        # a batch without locations (and every graph path) leaves the last batch's
        Invalid(
            """
class Backend:
    def init_forward_metadata(self, forward_batch):
        if forward_batch.out_cache_loc is not None:
            self.swa_out_cache_loc = self.pool.translate_loc_from_full_to_swa(
                forward_batch.out_cache_loc
            )

    def cache_loc(self, layer, forward_batch):
        if self.swa_out_cache_loc is not None:
            return self.swa_out_cache_loc
        return forward_batch.out_cache_loc
""",
            line=5,
        ),
        # stored on a condition, read back after the branch by the same function
        Invalid(
            """
class Backend:
    def init_forward_metadata(self, forward_batch):
        if forward_batch.out_cache_loc is not None:
            self._swa_out_cache_loc = self.pool.translate_loc_from_full_to_swa(
                forward_batch.out_cache_loc
            )
        swa_out_cache_loc = getattr(self, "_swa_out_cache_loc", None)
        self.forward_metadata = Metadata(swa_out_cache_loc)
""",
            line=5,
        ),
        # a memo of translated page tables keyed by their shape
        Invalid(
            """
class Backend:
    def __init__(self, pool):
        self.pool = pool
        self._swa_page_tables = {}

    def forward_decode(self, q, layer, forward_batch):
        metadata = self.forward_metadata
        page_table = self._swa_page_tables.setdefault(
            tuple(metadata.page_table.shape),
            self.pool.translate_loc_from_full_to_swa(metadata.page_table),
        )
        return decode(q, page_table)
""",
            line=9,
        ),
        # the batch's SWA write locations translated only while the field is unset
        Invalid(
            """
class Backend:
    def init_forward_metadata(self, forward_batch):
        if self.use_sliding_window_kv_pool:
            if self.write_targets is None:
                self.write_targets = self.pool.translate_loc_from_full_to_swa(
                    forward_batch.out_cache_loc
                )
""",
            line=6,
        ),
        # The #24138 shape: pool in one file, the per-batch caller in another.
        Invalid(
            """
import torch


class SWAKVPool:
    def __init__(self, size):
        self.swa_loc = None

    def set_swa_loc(self, loc: torch.Tensor):
        self.swa_loc = loc

    def set_kv_buffer(self, layer, loc, cache_k, cache_v):
        if self.swa_loc is not None:
            loc = self.swa_loc
        else:
            loc = self.translate_loc_from_full_to_swa(loc)
        self.swa_kv_pool.set_kv_buffer(None, loc, cache_k, cache_v)
""",
            line=10,
            files={
                "model_runner.py": (
                    "class ModelRunner:\n"
                    "    def _forward_raw(self, forward_batch):\n"
                    "        if forward_batch.out_cache_loc_swa is not None:\n"
                    "            pool = self.token_to_kv_pool\n"
                    "            pool.set_swa_loc(forward_batch.out_cache_loc_swa)\n"
                    "        return self.model.forward(forward_batch)\n"
                )
            },
        ),
        # The reader is a subclass in another file.
        Invalid(
            """
class BaseSWAPool:
    def set_swa_loc(self, loc):
        '''Use these SWA slots for the next writes.'''
        self.swa_loc = loc
""",
            line=5,
            files={
                "pool.py": (
                    "from example import BaseSWAPool\n"
                    "\n"
                    "class SWAKVPool(BaseSWAPool):\n"
                    "    def set_kv_buffer(self, layer, loc, k, v):\n"
                    "        self.write(self.swa_loc if self.swa_loc is not None else loc, k, v)\n"
                )
            },
        ),
        # Stored by direct assignment from the model runner: no setter, same bug.
        Invalid(
            """
class ModelRunner:
    def _forward_raw(self, forward_batch):
        if forward_batch.out_cache_loc_swa is not None:
            self.token_to_kv_pool.swa_loc = forward_batch.out_cache_loc_swa
        return self.model.forward(forward_batch)
""",
            line=5,
            files={
                "pool.py": (
                    "class SWAKVPool:\n"
                    "    def set_kv_buffer(self, layer, loc, k, v):\n"
                    "        if self.swa_loc is not None:\n"
                    "            loc = self.swa_loc\n"
                    "        self.write(loc, k, v)\n"
                )
            },
        ),
        # Through a local and a parameter, on a pool passed in.
        Invalid(
            """
def prepare_swa(pool, forward_batch, num_tokens):
    swa_slots = forward_batch.out_cache_loc_swa[:num_tokens]
    pool.swa_slots = swa_slots

def write_swa(pool, k, v):
    pool.swa_kv.write(pool.swa_slots, k, v)
""",
            line=4,
        ),
        # A method that stores the batch's value among other work, on its own object.
        Invalid(
            """
class SWAKVPool:
    def begin_batch(self, forward_batch):
        self.batch_size = forward_batch.batch_size
        self.swa_loc = forward_batch.out_cache_loc_swa
        self.version += 1

    def set_kv_buffer(self, layer, loc, k, v):
        if self.swa_loc is not None:
            loc = self.swa_loc
        self.write(loc, k, v)
""",
            line=5,
        ),
        # Read through another object by a backend that owns no such attribute.
        Invalid(
            """
class SWAKVPool:
    def set_out_cache_loc_swa(self, out_cache_loc_swa):
        self.out_cache_loc_swa = out_cache_loc_swa


class Backend:
    def _get_layer_cache_loc(self, layer, forward_batch):
        return self._swa_kv_pool.out_cache_loc_swa
""",
            line=4,
        ),
        # Any field name, as an entry of a dict: a batch without a plan gets the last one's.
        Invalid(
            """
class KVIndexTranslator:
    def __init__(self, allocator):
        self.allocator = allocator
        self._last_write_ids = {}

    def write_ids(self, forward_batch, kind):
        plan = forward_batch.kv_loc_plan
        if plan is None:
            return self._last_write_ids.get(kind)
        ids = plan.write_ids(self, kind=kind)
        self._last_write_ids[kind] = ids
        return ids
""",
            line=12,
        ),
        # Any field name, read by another method of the object.
        Invalid(
            """
class HybridBackend:
    def init_forward_metadata(self, forward_batch):
        self.prev_targets = self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)

    def forward_extend(self, q, k, v, layer, forward_batch):
        self.pool.set_kv_buffer(layer, self.prev_targets, k, v)
""",
            line=4,
        ),
    ]

    # Setters, reads and resets all name the attribute, so each is in a trigger block.
    region_safe = True

    # -- a batch's locations kept in any field (the semantic core) ---------------------

    def check(self, unit: FileUnit) -> None:
        """A batch's locations (a value of one pool's space computed from what the call
        is handed) stored in a field of the object itself, under any name or as an entry
        of a dict field (``self._last_write_ids[kind] = ids``), read back by another
        call, never cleared: the next batch that does not store reads the previous
        one's. Fields named for SWA locations are the walk's (above)."""
        values = unit.values
        model = unit.model
        for function in unit.functions():
            receiver = function.self_param
            cls = unit.project.class_of_function(function)
            if receiver is None or cls is None or cls.facts.is_dataclass:
                continue
            if function.facts.name in _CONSTRUCTORS or words(cls.facts.name) & _PER_BATCH_WORDS:
                continue
            params = {p.lstrip("*") for p in function.facts.params} - {receiver}
            ctx = Ctx(function)
            for event in function.facts.events:
                memo = _memo_entry(event, receiver)
                if memo is not None:
                    field, value = memo
                    if any(
                        f.space in (FULL, SWA, EITHER) and not f.weak
                        for f in values.space(value, ctx)
                    ):
                        self.report_span(
                            event.span,
                            f"`self.{field}.setdefault(...)` keeps the first batch's KV "
                            f"locations for its key on the long-lived `{cls.facts.name}`: "
                            "every later batch with the same key gets them; compute them for "
                            "each batch (I8)",
                        )
                    continue
                field = _own_field(event, receiver)
                if field is None or event.value is None:
                    continue
                if event.kind == BIND and _unset(event, receiver, field):
                    if _reads(event.value, params) and any(
                        f.space in (FULL, SWA, EITHER) and not f.weak
                        for f in values.space(event.value, ctx)
                    ):
                        self.report_span(
                            event.stmt,
                            f"`{event.text or field}` is computed from the batch only while "
                            f"it is unset: the first batch's KV locations stay on the "
                            f"long-lived `{cls.facts.name}` and every later batch uses "
                            "them; compute them for each batch (I8)",
                        )
                    continue
                if model.swa_role(field) is not None:
                    continue
                if event.kind == FILL and not _is_dict(unit.project, cls, field):
                    continue
                if words(field) & _PER_BATCH_WORDS or not _reads(event.value, params):
                    continue
                if not any(
                    f.space in (FULL, SWA, EITHER) and not f.weak
                    for f in values.space(event.value, ctx)
                ):
                    continue
                methods = _family_methods(unit.project, cls)
                if _cleared(methods, field) or not _read_elsewhere(methods, function, field):
                    continue
                self.report_span(
                    event.span,
                    f"`{event.text or field}` keeps a batch's KV locations on a long-lived "
                    f"`{cls.facts.name}`, read back by a later call and never cleared: a batch "
                    "that does not store its own gets the previous batch's slots; pass them "
                    "with the batch (I8)",
                )

    @classmethod
    def triggers(cls, config: Config) -> frozenset[Trigger] | None:
        """``swa_`` and ``_swa`` (default names), else nothing.

        A finding sits on a setter's ``self.<attr> = <argument>`` whose attribute matches
        ``swa-loc-pattern``; under the default pattern such a name has the word ``swa``
        next to another word (it must also hold ``loc``, ``slot``, ``indices`` or
        ``index``), so the reported file holds ``swa_`` or ``_swa``. The reads and
        ``= None`` resets in other files name the attribute too (a ``getattr`` string
        included), and a ``<setter>(None)`` reset counts only when the setter's name
        holds one of these strings, so the prefilter never drops a file whose facts
        could change a finding. The semantic part's findings sit on a value in a
        pool's space, named as :func:`location_triggers` says. A custom pattern gives
        no trigger set.
        """
        if config.swa_loc_pattern != DEFAULT_SWA_LOC_PATTERN:
            return None
        return _DEFAULT_TRIGGERS | location_triggers(all_models(config))

    @classmethod
    def collect_facts(cls, context: FileContext) -> FileFacts:
        default = cls.triggers(context.config) is not None
        collector = _FactsCollector(context, _DEFAULT_TRIGGERS if default else None)
        walk(context.module, collector)
        return collector.facts

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        ctx = self.context
        setter = setter_of(node)
        if setter is None:
            return
        attr, assignment = setter
        info = self._class_of(node)
        if _per_batch(ctx.names, attr) and info is not None:
            self._check(assignment, attr, node, info, [info], setter=node.name.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1:
            self._direct(node, node.targets[0].target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._direct(node, node.target)

    def _class_of(self, func: cst.FunctionDef) -> ClassInfo | None:
        """The class ``func`` is a method of (``None``: a function)."""
        ctx = self.context
        cls_node = ctx.parent(ctx.parent(func) or func)
        if not isinstance(cls_node, cst.ClassDef):
            return None
        return ctx.project.resolve_class(cls_node.name.value, near=ctx.path)

    # -- direct assignments -------------------------------------------------------------

    def _direct(self, assignment: cst.Assign | cst.AnnAssign, target: cst.BaseExpression) -> None:
        """``x.<attr> = <the batch's value>`` outside a constructor and a plain setter."""
        ctx = self.context
        if not isinstance(target, cst.Attribute) or _is_none(assignment.value):
            return
        attr = target.attr.value
        if not _per_batch(ctx.names, attr):
            return
        func = ctx.enclosing(assignment, cst.FunctionDef)
        if func is None or func.name.value in _CONSTRUCTORS or setter_of(func) is not None:
            return
        if not self._from_the_batch(assignment, func):
            return
        info = self._class_of(func)
        long_lived, holders = self._holder(target.value, func, info)
        if long_lived:
            self._check(assignment, attr, func, info, holders)

    def _from_the_batch(
        self, assignment: cst.Assign | cst.AnnAssign, func: cst.FunctionDef
    ) -> bool:
        """The value comes from a parameter of ``func`` (other than ``self``), directly or
        through a local assigned once from one."""
        params = {p.name.value for p in params_of(func)} - {"self", "cls"}
        value = assignment.value
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in _ALLOCATIONS
        ):
            return False  # a buffer sized or typed like the batch's value, not the value
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and self.context.names.is_translate(value.func.attr.value)
            and value.args
        ):
            value = value.args[0].value  # a translation of the batch's locations
        root = _root(value) if value is not None else None
        if isinstance(root, cst.Name) and root.value not in params:
            value = self._locals(func).get(root.value)
            root = _root(value) if value is not None else None
        return isinstance(root, cst.Name) and root.value in params

    def _locals(self, func: cst.FunctionDef) -> dict[str, cst.BaseExpression]:
        return local_bindings(self.context, func)

    def _holder(
        self, receiver: cst.BaseExpression, func: cst.FunctionDef, cls: ClassInfo | None
    ) -> tuple[bool, list[ClassInfo] | None]:
        """Whether ``receiver`` is a long-lived object, and its class when known."""
        project = self.context.project
        if isinstance(receiver, cst.Name) and receiver.value != "self":
            param = next((p for p in params_of(func) if p.name.value == receiver.value), None)
            if param is not None:
                annotated = (
                    annotation_class(param.annotation.annotation) if param.annotation else None
                )
                if annotated is None:
                    return not _names_a_batch(receiver.value), None
                return self._long_lived(
                    project.resolve_class(annotated, near=self.context.path), annotated
                )
            value = self._locals(func).get(receiver.value)
            if value is None or isinstance(value, cst.Call):
                return False, None  # built here, or of unknown origin
            receiver = value
        name = dotted_name(receiver)
        if name is None:
            return False, None
        parts = name.split(".")
        if parts[0] != "self" or cls is None:
            return not any(_names_a_batch(part) for part in parts), None
        current: ClassInfo | None = cls
        for attr in parts[1:]:
            if current is None:
                break
            current = _attribute_class(project, current, attr)
        if current is None:
            return not any(_names_a_batch(part) for part in parts[1:]), None
        return self._long_lived(current, current.name)

    @staticmethod
    def _long_lived(info: ClassInfo | None, name: str) -> tuple[bool, list[ClassInfo] | None]:
        if info is None:
            return not _names_a_batch(name), None
        return not info.is_dataclass and not _names_a_batch(info.name), [info]

    # -- the finding ---------------------------------------------------------------------

    def _check(
        self,
        assignment: cst.CSTNode,
        attr: str,
        func: cst.FunctionDef,
        cls: ClassInfo | None,
        holders: list[ClassInfo] | None,
        setter: str | None = None,
    ) -> None:
        """Report ``assignment`` when ``attr`` is read elsewhere and never reset.

        ``holders``: the class of the object it is stored on (``None``: unknown, so any
        class's reads and resets of ``attr`` count)."""
        ctx = self.context
        facts = _project_facts(ctx.project)
        here = (ctx.path, cls.name if cls else None, func.name.value)
        span = ctx.start(func).row, ctx.end(func).row
        # a store on a condition (``if forward_batch.out_cache_loc is not None:``) leaves
        # the previous batch's value for the function's own reads after the branch
        branch = ctx.enclosing(assignment, cst.If)
        after = ctx.end(branch).row if branch is not None and _within(ctx, branch, func) else None
        if holders is None:
            family = [c for c in facts.all_classes if facts.of(c).reads or facts.of(c).resets]
        else:
            family = [c for holder in holders for c in facts.family(holder)]
        family_keys = {(c.path, c.name) for c in family}
        setters = {setter} if setter else set()
        reads: list[str] = []
        reset = False
        for info in family:
            cls_facts = facts.of(info)
            setters |= {s.method for s in cls_facts.setters if s.attr == attr}
            reset = reset or attr in cls_facts.resets
            for read in cls_facts.reads:
                if (
                    read.attr == attr
                    and read.function not in _CONSTRUCTORS
                    and (
                        (info.path, info.name, read.function) != here
                        or _later(read.line, after, span)
                    )
                ):
                    within = f"{info.name}.{read.function}()"
                    reads.append(cite(info.path, read.line, ctx.path, within))
        owners = [
            c
            for c in facts.all_classes
            if attr in c.owned_attributes and (c.path, c.name) not in family_keys
        ]
        if holders is None or not owners:
            reads += [
                cite(path, read.line, ctx.path, f"{read.function}()" if read.function else "")
                for path, read in facts.other_reads.get(attr, [])
                if not (path == ctx.path and span[0] <= read.line <= span[1])
                or (path == ctx.path and _later(read.line, after, span))
            ]
        reset = reset or attr in facts.other_resets or bool(setters & facts.none_calls)
        if reset or not reads:
            return
        where = f"{reads[0]}{' and more' if len(reads) > 1 else ''}"
        if setter is not None:
            owner = cls.name if cls else "?"
            message = (
                f"`{owner}.{attr}` is per-batch state set by `{setter}()` and read "
                f"elsewhere ({where}) but never reset to None: a batch that does not call "
                f"`{setter}()` reads the previous batch's value; pass it with the batch "
                "instead (I8)"
            )
        else:
            target = ctx.module.code_for_node(
                assignment.targets[0].target
                if isinstance(assignment, cst.Assign)
                else assignment.target  # type: ignore[attr-defined]
            )
            message = (
                f"`{target}` stores per-batch state on a long-lived object in "
                f"`{func.name.value}()`, read elsewhere ({where}) but never reset to None: "
                f"a batch that does not pass through `{func.name.value}()` reads the previous "
                "batch's value; pass it with the batch instead (I8)"
            )
        self.report(assignment, message, notes=tuple(f"read at {r}" for r in dict.fromkeys(reads)))


def _within(ctx: FileContext, node: cst.CSTNode, func: cst.FunctionDef) -> bool:
    """``node`` is inside ``func`` itself (not a function nested in it)."""
    return ctx.enclosing(node, cst.FunctionDef) is func


def _later(line: int, after: int | None, span: tuple[int, int]) -> bool:
    """A read of the storing function's own past the end of the branch that stores."""
    return after is not None and after < line <= span[1]


def _attribute_class(project: ProjectIndex, info: ClassInfo, attr: str) -> ClassInfo | None:
    for cls in project.mro(info):
        type_name = cls.attribute_types.get(attr)
        if type_name:
            return project.resolve_class(type_name, near=cls.path)
    return None


def _memo_entry(event: Event, receiver: str) -> tuple[str, Term] | None:
    """``self.<field>.setdefault(key, value)``: the field and the value it keeps for a
    key it does not hold yet (a memo of the first value)."""
    call = event.value
    if event.kind != CALL or not isinstance(call, Call) or len(call.args) < 2:
        return None
    func = call.func
    if (
        isinstance(func, Attr)
        and func.name == "setdefault"
        and isinstance(func.base, Attr)
        and func.base.base == Param(receiver)
    ):
        return func.base.name, call.args[1]
    return None


def _own_field(event: Event, receiver: str) -> str | None:
    """The field of the object itself an event stores into: ``self.x = v`` or
    ``self.x[k] = v``."""
    target = event.target
    if event.kind == BIND and isinstance(target, Attr) and target.base == Param(receiver):
        return target.name
    if (
        event.kind == FILL
        and isinstance(target, Attr)
        and target.base == Param(receiver)
        and not isinstance(event.region, str | Slice)
    ):
        return target.name
    return None


def _is_dict(project: Project, cls: Class, field: str) -> bool:
    """Whether the field holds a dict (bound to a dict display or a dict's constructor):
    an entry stored there is kept as a whole value, where a store into a tensor field
    fills rows of a buffer."""
    for _, event in project.field_stores(cls, field):
        value = event.value
        if isinstance(value, Mapping):
            return True
        if (
            isinstance(value, Call)
            and isinstance(value.func, Global)
            and value.func.name.rsplit(".", 1)[-1] in _DICT_TYPES
        ):
            return True
    return False


def _reads(term: Term, params: set[str]) -> bool:
    """Whether ``term`` is computed from one of ``params`` (what the call is handed)."""
    return contains(term, lambda node: isinstance(node, Param) and node.name in params)


def _cleared(methods: list[Function], field: str) -> bool:
    """Whether some method other than a constructor resets the field: binds it to
    ``None`` or an empty container, deletes it, or clears it (``self.x.clear()``,
    ``self.x.pop(...)``)."""
    for method in methods:
        receiver = method.self_param
        if method.facts.name in _CONSTRUCTORS:
            continue
        for event in method.facts.events:
            target = event.target
            own = isinstance(target, Attr) and target.name == field
            if event.kind == BIND and own and _empty(event.value):
                return True
            if event.kind == DELETE and own:
                return True
            if event.kind == CALL and isinstance(event.value, Call):
                func = event.value.func
                if (
                    isinstance(func, Attr)
                    and func.name in ("clear", "pop", "popitem")
                    and isinstance(func.base, Attr)
                    and func.base.name == field
                    and func.base.base == Param(receiver or "self")
                ):
                    return True
    return False


def _empty(value: Term | None) -> bool:
    return value == Const(None) or (
        isinstance(value, Seq | Mapping) and not getattr(value, "items", ())
    )


def _family_methods(project: Project, cls: Class) -> list[Function]:
    """The methods of ``cls``, its bases and subclasses (an object of ``cls`` may run
    any of them)."""
    family = [*project.mro(cls), *project.subclasses(cls)]
    return [method for member in family for method in project.methods_of(member)]


def _read_elsewhere(methods: list[Function], writer: Function, field: str) -> bool:
    """Whether a method other than the writer, or the writer on another call (it reads
    the field too, before storing), reads the field."""
    for method in methods:
        receiver = method.self_param
        if receiver is None:
            continue
        own = Attr(Param(receiver), field)
        for event in method.facts.events:
            if (
                event.kind in (CALL, RETURN, BIND)
                and event.value is not None
                and contains(event.value, own.__eq__)
                and not (method is writer and event.kind == BIND and event.target == own)
            ):
                return True
    return False
