"""Buffers a captured CUDA graph reads, and how a function fills, resets and rebinds them.

A CUDA graph replays the kernels it captured on the addresses it captured, so a buffer it
reads is allocated once, before capture, and refilled *in place* before every replay (I10);
its rows past the live batch must hold the sentinel, or padded tokens write through the
previous replay's slots (I4). The syntax both invariants are checked on:

* **Graph code** is recognised by its names, as words: the graph itself (``cuda_graph_*``,
  ``full_cg_*``, ``init_cuda_graph_state``) or a role in capturing and replaying it
  (``capture``, ``replay``, ``populate_from_forward_batch``, ``fill_from``, ``load_batch``).
* An **allocation** is a tensor constructor (``torch.zeros``, ``torch.empty``,
  ``x.new_zeros``, ...), a call named for allocating (``self._alloc_swa_page_table(...)``),
  either arm of ``torch.zeros(n) if swa else None``, or a local bound to one of these.
* A **live-row fill** writes a batch's rows into a prefix of a buffer: ``buf[:n].copy_(src)``,
  ``buf[:n] = src``, ``out=buf[:n]``, an entry of a copy-destination list
  (``dsts.append(buf[:n])``, ``torch._foreach_copy_([buf[:n]], srcs)``). Two-dimensional
  prefixes count by their first dimension (``tbl[:n, :pages]``).
* A **reset** writes the sentinel 0: of the tail (``buf[n:].zero_()``, ``buf[n:] = 0``,
  ``buf[n:m].fill_(0)``) or of the whole buffer (``buf.zero_()``, ``buf[:] = 0``).
* A **rebinding** assigns a buffer's attribute or dict entry (``self.buf = t``,
  ``metadata.page_table = t``, ``self.buffers["x"] = t``).

Locals bound once to a buffer (``loc = self.decode_cuda_graph_metadata["swa_loc"]``) stand
for it. Everything here is syntax; which attributes *are* captured, across classes and
files, is :mod:`swacheck.analysis.buffers`' question.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from swacheck.analysis.names import Names, call_name, dotted_name
from swacheck.analysis.padding import is_location_name, is_zero, single_assignments
from swacheck.analysis.skeletons import CONSTRUCTORS
from swacheck.analysis.walk import walk

_MODULE = cst.Module([])

# -- names ---------------------------------------------------------------------------


def name_words(name: str) -> list[str]:
    """``init_cuda_graph_state`` -> init, cuda, graph, state (``_``-separated words only,
    so that each word is text a prefilter trigger can hold)."""
    return [w for w in name.lower().split("_") if w]


# Words that name the graph itself.
_GRAPH_WORDS = frozenset({"graph", "graphs", "cudagraph", "cudagraphs", "cg"})
# Words that name a role in capturing or replaying it.
_ROLE_WORDS = frozenset({"capture", "captured", "replay", "populate"})
_ROLE_PAIRS = frozenset({("fill", "from"), ("load", "batch")})
# Text every graph name (and replay path, below) holds, for a prefilter: ``cg`` as a
# word, the others as substrings.
GRAPH_TEXT = frozenset(
    {"graph", "capture", "replay", "populate", "refill", "fill_from", "load_batch"}
)
CG_WORD = "cg"
# Text a file of tensor code holds: a CUDA graph reads tensors, and a file that never
# names torch, a tensor or CUDA allocates, fills or rebinds none of its buffers.
TENSOR_TEXT = frozenset({"torch", "tensor", "cuda"})


def is_graph_name(name: str) -> bool:
    """A name of graph code: ``cuda_graph_swa_out_cache_loc``, ``full_cg_prefill_loc``,
    ``init_forward_metadata_capture_cuda_graph``, ``populate_from_forward_batch``."""
    return bool(_GRAPH_WORDS.intersection(name_words(name))) or is_graph_role_method(name)


def is_graph_role_method(name: str) -> bool:
    """A method that captures, replays or fills a graph's inputs (a class holding one is
    graph code): ``capture``, ``replay_prepare``, ``populate_from_forward_batch``,
    ``fill_from``, ``load_batch``."""
    words = name_words(name)
    if _ROLE_WORDS.intersection(words):
        return True
    return any(pair in _ROLE_PAIRS for pair in itertools.pairwise(words))


# A replay path runs before every replay: named for replaying, populating or refilling,
# or the code that runs out of the graph around it (``init_forward_metadata_out_graph``).
_REPLAY_WORDS = frozenset({"replay", "populate", "refill"})
_REPLAY_PAIRS = frozenset({("fill", "from"), ("load", "batch"), ("out", "graph")})


def is_replay_name(name: str) -> bool:
    """``init_forward_metadata_replay_cuda_graph``, ``replay_prepare``,
    ``populate_from_forward_batch``, ``fill_from``, ``load_batch``, ``*_out_graph``."""
    words = name_words(name)
    if _REPLAY_WORDS.intersection(words):
        return True
    return any(pair in _REPLAY_PAIRS for pair in itertools.pairwise(words))


# Setup code runs before or during capture: allocating, capturing, warming up.
_SETUP_WORDS = frozenset(
    {"init", "capture", "captured", "alloc", "allocate", "setup", "register", "create", "build"}
)


def is_setup_name(name: str) -> bool:
    """A constructor, or a method named for setting up or capturing a graph
    (``init_cuda_graph_state``, ``capture_one_batch_size``, ``_build_cuda_graph_metadata``);
    a replay path's name wins (``init_forward_metadata_replay_cuda_graph``)."""
    if name in CONSTRUCTORS:
        return True
    words = set(name_words(name))
    return bool(words & _SETUP_WORDS) and not is_replay_name(name)


# -- allocations ---------------------------------------------------------------------

_CONSTRUCTORS = frozenset(
    {
        "zeros",
        "empty",
        "ones",
        "full",
        "arange",
        "zeros_like",
        "empty_like",
        "ones_like",
        "full_like",
        "tensor",
        "new_zeros",
        "new_empty",
        "new_ones",
        "new_full",
        "new_tensor",
        "empty_strided",
    }
)
# Methods that keep an allocation an allocation (``torch.arange(n).to(device)``).
_KEEPS = frozenset({"to", "cuda", "contiguous", "view", "reshape", "pin_memory", "int", "long"})


def is_allocation(
    expr: cst.BaseExpression | None,
    local_values: Mapping[str, cst.BaseExpression] | None = None,
    _depth: int = 0,
) -> bool:
    """Whether ``expr`` allocates a tensor (see the module docstring)."""
    if expr is None or _depth > 6:
        return False
    if isinstance(expr, cst.IfExp):
        return is_allocation(expr.body, local_values, _depth + 1) or is_allocation(
            expr.orelse, local_values, _depth + 1
        )
    if isinstance(expr, cst.Name) and local_values and expr.value in local_values:
        return is_allocation(local_values[expr.value], None, _depth + 1)
    if not isinstance(expr, cst.Call):
        return False
    name = call_name(expr) or ""
    if name in _CONSTRUCTORS:
        return True
    if any(w in ("alloc", "allocate") for w in name_words(name)):
        return True
    func = expr.func
    return (
        name in _KEEPS
        and isinstance(func, cst.Attribute)
        and is_allocation(func.value, local_values, _depth + 1)
    )


def is_container(expr: cst.BaseExpression | None) -> bool:
    """A dict made to hold buffers: ``{...}``, ``dict(...)``."""
    if isinstance(expr, cst.Dict):
        return True
    return isinstance(expr, cst.Call) and dotted_name(expr.func) == "dict"


def allocated_entries(expr: cst.BaseExpression | None) -> bool:
    """A dict literal with at least one allocated entry (or an empty one, filled later)."""
    if isinstance(expr, cst.Dict):
        return not expr.elements or any(
            isinstance(e, cst.DictElement) and is_allocation(e.value) for e in expr.elements
        )
    return is_container(expr)


_HOST_CALLS = frozenset(
    {"int", "float", "bool", "len", "list", "tuple", "dict", "str", "max", "min", "sum", "partial"}
)
_HOST_METHODS = frozenset({"tolist", "item", "numel", "size", "dim", "cpu_list"})


def holds_no_tensor(expr: cst.BaseExpression) -> bool:
    """A value that is no tensor: a literal, a container display, ``int(...)``,
    ``x.tolist()``, ``x.item()``, arithmetic on such."""
    if isinstance(
        expr,
        cst.Integer
        | cst.Float
        | cst.SimpleString
        | cst.FormattedString
        | cst.ConcatenatedString
        | cst.List
        | cst.Tuple
        | cst.Dict
        | cst.Set
        | cst.ListComp
        | cst.DictComp
        | cst.SetComp,
    ):
        return True
    if isinstance(expr, cst.Name):
        return expr.value in ("True", "False")
    if isinstance(expr, cst.BinaryOperation):
        return holds_no_tensor(expr.left) and holds_no_tensor(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return holds_no_tensor(expr.expression)
    if isinstance(expr, cst.Call):
        name = call_name(expr) or ""
        if isinstance(expr.func, cst.Name):
            return name in _HOST_CALLS
        return name in _HOST_METHODS or dotted_name(expr.func) == "functools.partial"
    return False


# -- buffers named in a function -------------------------------------------------------


@dataclass(frozen=True)
class BufferName:
    """A buffer as a function names it: ``<owner>.<attr>`` or ``<owner>.<container>["<attr>"]``."""

    owner: cst.BaseExpression  # ``self``, ``self.buffers``, ``metadata``, ...
    attr: str  # the attribute, or the dict key for an entry
    container: str | None  # the dict attribute holding the entry, if any
    key: str  # the buffer's text, locals resolved (what fills and resets are matched on)

    @property
    def owner_code(self) -> str:
        return _MODULE.code_for_node(self.owner)


def buffer_name(
    expr: cst.BaseExpression, local_values: Mapping[str, cst.BaseExpression]
) -> BufferName | None:
    """The buffer ``expr`` names (subscripts stripped, locals bound once resolved)."""
    expr = _resolve(_strip(expr), local_values)
    if isinstance(expr, cst.Attribute):
        return BufferName(expr.value, expr.attr.value, None, _MODULE.code_for_node(expr))
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute):
        key = _string_key(expr)
        if key is not None:
            holder = expr.value
            return BufferName(holder.value, key, holder.attr.value, _MODULE.code_for_node(expr))
    return None


def _string_key(expr: cst.Subscript) -> str | None:
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    value = expr.slice[0].slice.value
    if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
        return value.evaluated_value
    return None


def _strip(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``buf`` for ``buf[:n]`` / ``buf[:n, :m]`` (a dict entry ``d["k"]`` is kept)."""
    while isinstance(expr, cst.Subscript) and _string_key(expr) is None:
        expr = expr.value
    return expr


def _resolve(
    expr: cst.BaseExpression, local_values: Mapping[str, cst.BaseExpression]
) -> cst.BaseExpression:
    seen: set[str] = set()
    while isinstance(expr, cst.Name) and expr.value in local_values and expr.value not in seen:
        seen.add(expr.value)
        value = local_values[expr.value]
        if not isinstance(value, cst.Name | cst.Attribute | cst.Subscript):
            break
        expr = _strip(value)
    return expr


# Methods whose result is a view of their receiver's storage.
_VIEWS = frozenset(
    {
        "view",
        "reshape",
        "narrow",
        "flatten",
        "unflatten",
        "unsqueeze",
        "squeeze",
        "select",
        "transpose",
        "permute",
        "t",
        "as_strided",
        "expand",
        "view_as",
        "unbind",
        "split",
        "chunk",
        "contiguous",
    }
)


def viewed(expr: cst.BaseExpression) -> cst.BaseExpression:
    """What ``expr`` is a view of: ``buf`` for ``buf[:n]``, ``buf[:n].view(-1)``,
    ``buf.flatten()`` (a dict entry ``d["k"]`` is kept)."""
    while True:
        if isinstance(expr, cst.Subscript) and _string_key(expr) is None:
            expr = expr.value
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in _VIEWS
        ):
            expr = expr.func.value
        else:
            return expr


def first_dimension(expr: cst.BaseExpression) -> cst.Slice | None:
    """The slice of the first dimension of ``buf[...]``, if it is a slice."""
    if not isinstance(expr, cst.Subscript) or _string_key(expr) is not None:
        return None
    element = expr.slice[0].slice
    return element if isinstance(element, cst.Slice) else None


def _zero_bound(expr: cst.BaseExpression | None) -> bool:
    return expr is None or is_zero(expr)


def prefix_bound(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``n`` for ``buf[:n]``, ``buf[0:n]``, ``buf[:n, :m]``."""
    dim = first_dimension(expr)
    if dim is None or dim.step is not None or dim.upper is None:
        return None
    return dim.upper if _zero_bound(dim.lower) else None


def is_tail(expr: cst.BaseExpression) -> bool:
    """``buf[n:]``, ``buf[n:m]``: a slice of the first dimension starting past 0."""
    dim = first_dimension(expr)
    return dim is not None and not _zero_bound(dim.lower)


def is_whole(expr: cst.BaseExpression) -> bool:
    """``buf`` itself or ``buf[:]``."""
    if not isinstance(expr, cst.Subscript) or _string_key(expr) is not None:
        return True
    dim = first_dimension(expr)
    return (
        dim is not None
        and _zero_bound(dim.lower)
        and dim.upper is None
        and len(expr.slice) == 1
        and dim.step is None
    )


# -- what a function does to buffers ---------------------------------------------------


@dataclass(frozen=True)
class Fill:
    """A live-row fill ``buf[:bound] <- src`` (see the module docstring)."""

    buffer: BufferName
    bound: cst.BaseExpression
    node: cst.CSTNode  # the call, assignment or list entry
    view: cst.Subscript  # ``buf[:n]`` (a local bound once to it resolved)

    @property
    def base(self) -> cst.BaseExpression:
        """The sliced expression, as the function spells it (``buf`` of ``buf[:n, :m]``)."""
        return self.view.value


@dataclass(frozen=True)
class Reset:
    buffer: BufferName
    extent: Literal["tail", "whole"]
    node: cst.CSTNode


@dataclass(frozen=True)
class Rebinding:
    target: BufferName
    expr: cst.BaseExpression  # the assignment's target (``self.buf``, ``d["k"]``)
    value: cst.BaseExpression
    node: cst.Assign | cst.AnnAssign
    # Under a test that says the code runs at capture (``if in_capture:``) or allocates
    # lazily (``if self.buf is None:``).
    setup_guarded: bool


@dataclass(frozen=True)
class FunctionBuffers:
    fills: tuple[Fill, ...]
    resets: tuple[Reset, ...]
    rebindings: tuple[Rebinding, ...]
    # Calls that may reset a buffer for the function: method calls and calls given a buffer.
    calls: tuple[cst.Call, ...]
    local_values: Mapping[str, cst.BaseExpression]
    # The function tests whether it runs at capture: it also runs at replay.
    tests_capture: bool = False


_DESTINATION_WORDS = ("dst", "dest", "out", "target")


def is_destination_list(expr: cst.BaseExpression) -> bool:
    """A list named like a copy destination (``dsts``, ``out_tensors``, ``gpu_dsts``)."""
    if not isinstance(expr, cst.Name | cst.Attribute):
        return False
    name = (expr.value if isinstance(expr, cst.Name) else expr.attr.value).lower()
    return any(word in name for word in _DESTINATION_WORDS)


def _is_capture_test(test: cst.BaseExpression) -> bool | None:
    """``True`` for a test that holds at capture (``in_capture``, ``self.is_capturing``,
    ``is_current_stream_capturing()``), ``False`` for its negation, else ``None``."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _is_capture_test(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        sides = (_is_capture_test(test.left), _is_capture_test(test.right))
        return True if True in sides else None
    if isinstance(test, cst.Call):
        test = test.func
    if isinstance(test, cst.Name | cst.Attribute):
        name = test.value if isinstance(test, cst.Name) else test.attr.value
        if any(w.startswith("captur") for w in name_words(name)):
            return True
    return None


def _is_absence_test(test: cst.BaseExpression) -> bool:
    """``x is None``, ``"k" not in d``, ``not hasattr(self, "x")`` (also in an ``or``): a
    lazy allocation's test."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _is_absence_test(test.left) or _is_absence_test(test.right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = test.expression
        return (
            isinstance(inner, cst.Call)
            and isinstance(inner.func, cst.Name)
            and inner.func.value == "hasattr"
        )
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        op = test.comparisons[0].operator
        comparator = test.comparisons[0].comparator
        if isinstance(op, cst.Is) and isinstance(comparator, cst.Name):
            return comparator.value == "None"
        return isinstance(op, cst.NotIn)
    return False


class _Collector(cst.CSTVisitor):
    def __init__(self, func: cst.FunctionDef, local_values: Mapping[str, cst.BaseExpression]):
        self.func = func
        self.local_values = local_values
        self.fills: list[Fill] = []
        self.resets: list[Reset] = []
        self.rebindings: list[Rebinding] = []
        self.calls: list[cst.Call] = []
        self.tests_capture = False
        # per enclosing ``if``: whether its body, and its ``else``, are setup code
        self._guards: list[tuple[bool, bool]] = []
        self._in_else: list[bool] = []
        self._orelse: list[cst.If | cst.Else | None] = []

    @property
    def _setup_guarded(self) -> bool:
        return any(
            orelse if in_else else body
            for (body, orelse), in_else in zip(self._guards, self._in_else, strict=True)
        )

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.func

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_If(self, node: cst.If) -> None:
        if self._orelse and self._orelse[-1] is node:
            self._in_else[-1] = True  # an ``elif`` runs where its ``if`` does not
        capture = _is_capture_test(node.test)
        self.tests_capture = self.tests_capture or capture is not None
        self._guards.append((capture is True or _is_absence_test(node.test), capture is False))
        self._in_else.append(False)
        self._orelse.append(node.orelse)

    def leave_If(self, original_node: cst.If) -> None:
        self._guards.pop()
        self._in_else.pop()
        self._orelse.pop()

    def visit_Else(self, node: cst.Else) -> None:
        # only an ``if``'s own ``else`` (a loop or ``try`` has one too)
        if self._orelse and self._orelse[-1] is node:
            self._in_else[-1] = True

    def _buffer(self, expr: cst.BaseExpression) -> BufferName | None:
        return buffer_name(expr, self.local_values)

    def _fill(self, target: cst.BaseExpression, node: cst.CSTNode) -> None:
        view = _resolve_view(target, self.local_values)
        buffer = self._buffer(target)
        if buffer is None or not isinstance(view, cst.Subscript):
            return
        bound = prefix_bound(view)
        if bound is not None:
            self.fills.append(Fill(buffer, bound, node, view))
        elif is_tail(view):
            # the tail written on purpose (``buf[n:m].copy_(pad)``) is no stale tail
            self.resets.append(Reset(buffer, "tail", node))

    def _fill_all(self, expr: cst.BaseExpression, node: cst.CSTNode) -> None:
        if isinstance(expr, cst.List | cst.Tuple):
            for element in expr.elements:
                self._fill(element.value, node)
        else:
            self._fill(expr, node)

    def _reset(self, target: cst.BaseExpression, node: cst.CSTNode) -> None:
        view = _resolve_view(target, self.local_values)
        buffer = self._buffer(target)
        if buffer is None:
            return
        if is_tail(view):
            self.resets.append(Reset(buffer, "tail", node))
        elif is_whole(view):
            self.resets.append(Reset(buffer, "whole", node))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = call_name(node) or ""
        if isinstance(func, cst.Attribute):
            if name == "zero_" or (
                name == "fill_" and len(node.args) == 1 and is_zero(node.args[0].value)
            ):
                self._reset(func.value, node)
            elif name == "copy_":
                self._fill(func.value, node)
            elif name in ("append", "insert") and is_destination_list(func.value):
                for arg in node.args[-1:]:
                    self._fill_all(arg.value, node)
            elif name == "extend" and is_destination_list(func.value) and node.args:
                self._fill_all(node.args[0].value, node)
            else:
                self.calls.append(node)
        else:
            self.calls.append(node)
        positional = [a for a in node.args if a.keyword is None]
        if positional and any(w in ("copy", "scatter") for w in name_words(name)):
            # ``torch._foreach_copy_(dsts, srcs)``, ``copy_into(dst, src)``: the first is written
            self._fill_all(positional[0].value, node)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "out":
                self._fill_all(arg.value, node)

    def _store(self, target: cst.BaseExpression, value: cst.BaseExpression, node: cst.CSTNode):
        if isinstance(target, cst.Subscript) and _string_key(target) is None:
            if is_zero(value):
                self._reset(target, node)
            else:
                self._fill(target, node)
            return
        if isinstance(target, cst.Name) and is_destination_list(target):
            # ``dsts = [buf[:n], ...]``
            if isinstance(value, cst.List | cst.Tuple):
                self._fill_all(value, node)
            return
        if isinstance(target, cst.Attribute | cst.Subscript) and isinstance(
            node, cst.Assign | cst.AnnAssign
        ):
            bound = buffer_name(target, {})
            if bound is not None:
                self.rebindings.append(Rebinding(bound, target, value, node, self._setup_guarded))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Tuple | cst.List):
                for element in target.target.elements:
                    if isinstance(element.value, cst.Subscript):
                        self._fill(element.value, node)
                continue
            self._store(target.target, node.value, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._store(node.target, node.value, node)


def _resolve_view(
    expr: cst.BaseExpression, local_values: Mapping[str, cst.BaseExpression]
) -> cst.BaseExpression:
    """``buf[:n]`` for a local bound once to it (``dst = buf[:n]; dst.copy_(src)``)."""
    if isinstance(expr, cst.Name) and expr.value in local_values:
        value = local_values[expr.value]
        if isinstance(value, cst.Subscript):
            return value
    return expr


def function_buffers(
    func: cst.FunctionDef, local_values: Mapping[str, cst.BaseExpression] | None = None
) -> FunctionBuffers:
    """The fills, resets, rebindings and calls of ``func`` (nested scopes excluded);
    ``local_values``: its locals bound once (``single_assignments``), if known."""
    local_values = single_assignments(func) if local_values is None else local_values
    collector = _Collector(func, local_values)
    walk(func, collector)
    return FunctionBuffers(
        tuple(collector.fills),
        tuple(collector.resets),
        tuple(collector.rebindings),
        tuple(collector.calls),
        local_values,
        collector.tests_capture,
    )


def hands_over(call: cst.Call, fill: Fill, local_values: Mapping[str, cst.BaseExpression]) -> bool:
    """Whether ``call`` is handed ``fill``'s buffer to reset: its tail (``zero_tail(buf[n:])``)
    or the whole buffer together with the live count (``zero_tail(buf, n)``). The helper's
    body is not read (it may lie in a block the prefilter skips); a kernel launch
    (``kernel[grid](buf, n)``) is not a reset."""
    if isinstance(call.func, cst.Subscript):
        return False
    bound = _MODULE.code_for_node(fill.bound)
    given_bound = any(_MODULE.code_for_node(arg.value) == bound for arg in call.args)
    for arg in call.args:
        name = buffer_name(arg.value, local_values)
        if name is None or name.key != fill.buffer.key:
            continue
        view = _resolve_view(arg.value, local_values)
        if is_tail(view) or (is_whole(view) and given_bound):
            return True
    return False


# -- roles of SWA buffers --------------------------------------------------------------


def swa_buffer_role(name: str, names: Names) -> Literal["write", "table"] | None:
    """``write`` for an SWA write location (``swa_out_cache_loc``, ``out_cache_loc_swa``:
    padded tokens store K/V through it), ``table`` for what attention reads SWA KV through
    (``swa_page_table``, ``swa_kv_indices``), ``None`` for anything else."""
    if names.is_swa_loc(name):
        words = name.lower().split("_")
        return "write" if is_location_name(name) or {"slot", "slots"} & set(words) else "table"
    words = name.lower().split("_")
    if "swa" in words and ("table" in words or "tables" in words):
        return "table"
    return None
