"""SWA002 swa-loc-int64."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from swacheck.analysis.dtypes import DtypeResolver, dtype_literal
from swacheck.analysis.escapes import escape_of
from swacheck.analysis.names import target_name
from swacheck.config import DEFAULT_SWA_LOC_PATTERN, Config
from swacheck.finding import Applicability, Fix
from swacheck.fix_safety import safe_fix, unsafe_fix
from swacheck.rule import Invalid, Rule, Valid
from swacheck.triggers import word

# Factories whose result is int64 when no dtype is given (for integer data).
_INT64_BY_DEFAULT = {"arange", "randint", "randperm", "tensor", "as_tensor", "asarray", "full"}
_FACTORIES = _INT64_BY_DEFAULT | {
    "zeros",
    "ones",
    "empty",
    "empty_strided",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
}
# Methods that keep their receiver's dtype.
_DTYPE_PRESERVING = {
    "clone",
    "contiguous",
    "cpu",
    "cuda",
    "detach",
    "flatten",
    "pin_memory",
    "reshape",
    "squeeze",
    "unsqueeze",
    "view",
    "narrow",
    "expand",
    "repeat",
}
_CAST_METHODS = {"long": "int64", "int": "int32"}


@dataclass(frozen=True)
class _Hit:
    """Where an SWA location gets the wrong integer dtype, and how to fix it there."""

    node: cst.CSTNode
    how: str
    fix: Fix | None = None
    # An explicit conversion (``.long()``, ``.to(...)``, ``.type(...)``), not an allocation.
    cast: bool = False


class SwaLocInt64(Rule):
    """
    ## What it does
    Flags an SWA-space location tensor (`out_cache_loc_swa`, `swa_loc`, a translated
    index buffer, ...) that is created or cast with the wrong integer dtype: int64 by
    default (`dtype=torch.int64`/`torch.long`, `.long()`, `.to(torch.int64)`,
    `.type(torch.LongTensor)`, factories that are int64 by default such as
    `torch.arange(n)`, a dtype held in a variable or default argument, a gather from the
    int64 mapping table with no cast). Targets are names, attributes, dict keys,
    keyword arguments and dataclass fields whose name matches `swa-loc-pattern`; the
    return value of a `translate-methods` method is checked too. A value bound to a
    local of a function is a location where it is used as one. A gather or an explicit
    cast into a local is an intermediate (host-side bookkeeping, a value converted
    again before use) unless the value leaves the function before the local is bound
    again: returned, stored into an attribute or container, or passed to a Triton
    launch (through views and dtype-keeping copies such as `.contiguous()`). An
    allocation into a local also counts when handed to a call (a buffer holder's
    constructor), except an allocator's (`self.swa_allocator.alloc_extend(...,
    swa_last_loc, ...)`): that is the allocator's own input, in its index space and
    dtype, not a KV location. Mapping tables
    (`full_to_swa_index_mapping`) may be int64 and are never flagged.

    ## Why is this bad?
    The SWA pool's kernels and `set_kv_buffer` index with int32 SWA locations (I3).
    An int64 buffer costs twice the memory in every CUDA-graph bucket and forces an
    implicit conversion (or a kernel-signature mismatch) on the hot path. SGLang PR
    #23552 allocated `out_cache_loc_swa` as int64; review asked for int32 and the
    padding fix finally changed it.

    ## Fix safety
    Rewriting a literal dtype (`torch.int64` -> `torch.int32`, `.long()` -> `.int()`,
    a missing `dtype=` on an int64-by-default factory) is safe: slot numbers fit in
    int32. Adding a cast to a gather from the mapping table is unsafe (it changes the
    returned tensor's identity) and needs `--unsafe-fixes`. A dtype held in a variable
    is reported at its use without a fix: the variable may serve other tensors.
    """

    code = "SWA002"
    name = "swa-loc-int64"
    summary = "SWA-space location tensor created or cast with the wrong integer dtype"
    fixes = (
        safe_fix("it rewrites a literal dtype or adds a missing `dtype=`"),
        unsafe_fix("it casts a gather from the mapping table"),
    )
    config_keys = ("swa-loc-pattern", "swa-loc-dtype", "mapping-attributes", "translate-methods")
    invariant = "I3"
    origin = "SGLang PR #23552 review and the padding fix"

    VALID = [
        Valid(
            """
import torch

out_cache_loc_swa = torch.zeros((max_num_token,), dtype=torch.int32)
"""
        ),
        Valid(
            """
import torch

class Pool:
    def __init__(self, size):
        # the mapping table itself may be int64
        self.full_to_swa_index_mapping = torch.empty(size + 1, dtype=torch.int64)
        self.out_cache_loc = torch.zeros(size, dtype=torch.int64)
"""
        ),
        Valid(
            """
def translate_loc_from_full_to_swa(self, kv_indices):
    return self.full_to_swa_index_mapping[kv_indices].to(torch.int32)
"""
        ),
        Valid(
            """
def free_swa(self, free_index):
    # a local gather for host-side bookkeeping is not a location buffer
    swa_indices = self.full_to_swa_index_mapping[free_index]
    self.swa_attn_allocator.free(swa_indices[swa_indices > 0])
"""
        ),
        Valid(
            """
def transfer_indices(self, full_indices):
    swa_indices = self.translate_loc_from_full_to_swa(full_indices)
    # an explicit conversion into a local, for an API that takes int64
    live_swa_indices = swa_indices[swa_indices > 0].to(torch.int64)
    return live_swa_indices.cpu().tolist()
"""
        ),
        Valid(
            """
# `block` holds the letters of `loc`, but block offsets are not locations
_swa_block_offsets = torch.arange(block_size)
"""
        ),
        Valid(
            """
swa_loc = torch.arange(n, dtype=torch.int32)
swa_window = torch.arange(n)
"""
        ),
        Valid(
            """
swa_loc = torch.arange(n).long()
""",
            config={"swa-loc-dtype": "int64"},
        ),
        # the allocator's own input (its index space is int64 by design), not a KV location
        Valid(
            """
def alloc_tail(self, seq_lens, tail_len):
    swa_prev_loc = torch.tensor([-1], dtype=torch.int64, device=self.device)
    return self.swa_allocator.alloc_extend(seq_lens, swa_prev_loc, tail_len)
"""
        ),
        # cast again before it leaves the function: still an intermediate
        Valid(
            """
def slots_for_kernel(self, loc):
    swa_loc = loc.long()
    swa_loc = swa_loc.clamp(min=0).int()
    return swa_loc
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch

out_cache_loc_swa = torch.zeros((max_num_token,), dtype=torch.int64)
""",
            line=4,
            fixed="""
import torch

out_cache_loc_swa = torch.zeros((max_num_token,), dtype=torch.int32)
""",
        ),
        Invalid(
            """
import torch

def create(max_num_token, is_hybrid_swa):
    out_cache_loc_swa = (
        torch.zeros((max_num_token,), dtype=torch.int64)
        if is_hybrid_swa
        else None
    )
    return out_cache_loc_swa
""",
            line=6,
        ),
        Invalid(
            """
self.swa_loc = loc.long()
""",
            line=2,
            fixed="""
self.swa_loc = loc.int()
""",
        ),
        Invalid(
            """
bufs["swa_out_cache_loc"] = loc.to(torch.long)
""",
            line=2,
            fixed="""
bufs["swa_out_cache_loc"] = loc.to(torch.int32)
""",
        ),
        Invalid(
            """
swa_indices = torch.arange(num_tokens, device=device)
""",
            line=2,
            fixed="""
swa_indices = torch.arange(num_tokens, device=device, dtype=torch.int32)
""",
        ),
        Invalid(
            """
def alloc(n, dtype=torch.int64):
    swa_slots = torch.empty(n, dtype=dtype)
    return swa_slots
""",
            line=3,
        ),
        Invalid(
            """
from dataclasses import dataclass, field

@dataclass
class DecodeInputBuffers:
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: torch.Tensor = field(
        default_factory=lambda: torch.zeros(16, dtype=torch.long)
    )
""",
            line=8,
        ),
        Invalid(
            """
def translate_loc_from_full_to_swa(self, kv_indices):
    return self.full_to_swa_index_mapping[kv_indices]
""",
            line=3,
        ),
        Invalid(
            """
buffers = DecodeInputBuffers(out_cache_loc_swa=torch.full((bs,), 0))
""",
            line=2,
        ),
        Invalid(
            """
metadata.swa_loc = loc.to(device, dtype=torch.int64, non_blocking=True)
""",
            line=2,
        ),
        # allocated into a local and handed to the object that keeps it
        Invalid(
            """
def make_buffers(max_tokens, is_hybrid_swa):
    out_cache_loc_swa = torch.zeros((max_tokens,), dtype=torch.int64)
    return GraphInputBuffers(out_cache_loc_swa=out_cache_loc_swa)
""",
            line=3,
        ),
        # a local gather that escapes: returned, stored on the object, handed to a kernel
        Invalid(
            """
def swa_slots(self, loc):
    swa_slots = self.full_to_swa_index_mapping[loc]
    return swa_slots[: loc.numel()]
""",
            line=3,
        ),
        Invalid(
            """
def prepare(self, loc):
    swa_loc = loc.long()
    self.cached_swa_loc = swa_loc
""",
            line=3,
            fixed="""
def prepare(self, loc):
    swa_loc = loc.int()
    self.cached_swa_loc = swa_loc
""",
        ),
        Invalid(
            """
def store(self, k, loc, grid):
    swa_indices = loc.to(torch.int64)
    store_kv_kernel[grid](k, swa_indices.contiguous(), self.k_buffer)
""",
            line=3,
        ),
        Invalid(
            """
self.swa_loc = loc.int()
""",
            line=2,
            config={"swa-loc-dtype": "int64"},
            fixed="""
self.swa_loc = loc.long()
""",
        ),
    ]

    # A finding and the dtype it follows lie in one function (or module-level code).
    region_safe = True

    @classmethod
    def triggers(cls, config: Config) -> frozenset[str] | None:
        """The default pattern needs the word ``swa`` bounded by ``_`` or a non-identifier
        character (so ``swap`` does not count); a translate method's name for its result.
        A custom pattern has no known fixed part: no prefilter."""
        if config.swa_loc_pattern != DEFAULT_SWA_LOC_PATTERN:
            return None
        return frozenset({word("swa"), *config.translate_methods})

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self.expected = context.config.swa_loc_dtype
        self.dtypes = DtypeResolver(context)

    # -- binding sites --------------------------------------------------------------

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._check_binding(target.target, node.value, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._check_binding(node.target, node.value, node)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and self.context.names.is_swa_loc(node.keyword.value):
            self._check_value(node.keyword.value, node.value)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        if isinstance(node.key, cst.SimpleString):
            key = node.key.evaluated_value
            if isinstance(key, str) and self.context.names.is_swa_loc(key):
                self._check_value(key, node.value)

    def visit_Return(self, node: cst.Return) -> None:
        func = self.context.enclosing(node, cst.FunctionDef)
        if node.value is not None and func and self.context.names.is_translate(func.name.value):
            self._check_value(f"{func.name.value}()'s result", node.value)

    def _check_binding(
        self, target: cst.BaseExpression, value: cst.BaseExpression, statement: cst.CSTNode
    ) -> None:
        name = target_name(target)
        if name is None or not self.context.names.is_swa_loc(name):
            return
        hits = list(self._wrong_dtype(value))
        function = self.context.enclosing(statement, cst.FunctionDef)
        if not hits or not isinstance(target, cst.Name) or function is None:
            self._report_hits(name, hits)  # an attribute, a key, a module global: kept
            return
        # A value bound to a local of a function is a location where it is used as one.
        # A gather or an explicit cast is an intermediate (host-side bookkeeping such as
        # freeing slots, indices converted for a transfer API) unless it leaves the
        # function: returned, stored on an object, handed to a kernel. An allocation
        # also counts when handed to a call, but not to an allocator's (its own input,
        # in its index space and dtype: SGLang's `swa_last_loc` for the paged
        # sub-allocator).
        leaves = escape_of(function, statement, name)
        if leaves is None:
            hits = [h for h in self._wrong_dtype(value, gathers=False) if not h.cast]
            leaves = escape_of(function, statement, name, calls=True) if hits else None
        if leaves is not None:
            row = self.context.start(leaves.node).row
            self._report_hits(name, hits, leaves=f" and is {leaves.how} at line {row}")

    def _check_value(self, name: str, value: cst.BaseExpression) -> None:
        self._report_hits(name, list(self._wrong_dtype(value)))

    def _report_hits(self, name: str, hits: list[_Hit], leaves: str = "") -> None:
        for hit in hits:
            self.report(
                hit.node,
                f"SWA location `{name}` {hit.how}{leaves}; SWA-space locations must be "
                f"torch.{self.expected} (I3)",
                fix=hit.fix,
            )

    # -- value analysis -------------------------------------------------------------

    @property
    def wrong(self) -> str:
        return "int64" if self.expected == "int32" else "int32"

    def _wrong_dtype(self, expr: cst.BaseExpression, gathers: bool = True) -> Iterator[_Hit]:
        if isinstance(expr, cst.IfExp):
            yield from self._wrong_dtype(expr.body, gathers)
            yield from self._wrong_dtype(expr.orelse, gathers)
        elif isinstance(expr, cst.Lambda):
            yield from self._wrong_dtype(expr.body, gathers)
        elif isinstance(expr, cst.Subscript):
            if gathers:
                yield from self._gather(expr)
        elif isinstance(expr, cst.Call):
            yield from self._call(expr)

    def _gather(self, expr: cst.Subscript) -> Iterator[_Hit]:
        base = expr.value
        if isinstance(base, cst.Attribute | cst.Name) and self.context.names.is_mapping(
            target_name(base) or ""
        ):
            if self.expected == "int32":
                cast = f"{self.context.module.code_for_node(expr)}.to(torch.int32)"
                yield _Hit(
                    expr,
                    "is a gather from the int64 mapping table with no cast",
                    self.context.replace(
                        expr,
                        cast,
                        "Cast the gathered locations to torch.int32",
                        Applicability.UNSAFE,
                    ),
                )
        else:
            yield from self._wrong_dtype(base)

    def _call(self, call: cst.Call) -> Iterator[_Hit]:
        func = call.func
        if isinstance(func, cst.Name) and func.value == "field":
            for arg in call.args:
                if arg.keyword and arg.keyword.value in ("default", "default_factory"):
                    yield from self._wrong_dtype(arg.value)
            return
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        receiver = func.value
        module_call = isinstance(receiver, cst.Name) and receiver.value == "torch"
        if module_call and method in _FACTORIES:
            yield from self._factory(call, method, receiver)
        elif method in _CAST_METHODS and not call.args:
            if _CAST_METHODS[method] == self.wrong:
                replacement = "int" if self.expected == "int32" else "long"
                yield _Hit(
                    func.attr,
                    f"is cast with .{method}()",
                    self.context.replace(func.attr, replacement, f"Use .{replacement}()"),
                    cast=True,
                )
        elif method in ("to", "type"):
            dtype_hit = False
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value != "dtype":
                    continue
                yield from self._dtype_argument(arg.value, f".{method}(...)", cast=True)
                if self.dtypes.dtypes_of(arg.value):
                    dtype_hit = True
            if not dtype_hit:
                yield from self._wrong_dtype(receiver)
        elif method in _DTYPE_PRESERVING:
            yield from self._wrong_dtype(receiver)

    def _factory(self, call: cst.Call, method: str, torch_name: cst.Name) -> Iterator[_Hit]:
        dtype_args = [a for a in call.args if a.keyword and a.keyword.value == "dtype"]
        if dtype_args:
            yield from self._dtype_argument(dtype_args[0].value, f"torch.{method}(...)")
            return
        if method not in _INT64_BY_DEFAULT or self.wrong != "int64":
            return
        if not self._integer_data(call, method):
            return
        new_arg = cst.Arg(
            keyword=cst.Name("dtype"),
            value=cst.Attribute(cst.Name(torch_name.value), cst.Name(self.expected)),
            equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""),
                whitespace_after=cst.SimpleWhitespace(""),
            ),
        )
        args = list(call.args)
        if args and args[-1].comma is not cst.MaybeSentinel.DEFAULT:
            # keep a trailing comma's formatting: add ours after it
            args[-1] = args[-1].with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
        fixed = call.with_changes(args=[*args, new_arg])
        yield _Hit(
            call,
            f"is created by torch.{method}(...) with no dtype, which is int64",
            self.context.replace(call, fixed, f"Pass dtype=torch.{self.expected}"),
        )

    def _integer_data(self, call: cst.Call, method: str) -> bool:
        """Whether an int64-by-default factory gets integer (not float) data here."""
        positional = [a.value for a in call.args if a.keyword is None]
        if method in ("randint", "randperm"):
            return True
        if method == "full":
            return len(positional) >= 2 and _is_int_literal(positional[1])
        if method == "arange":
            return bool(positional) and not any(isinstance(a, cst.Float) for a in positional)
        # tensor / as_tensor / asarray: a literal list or tuple of ints
        return bool(positional) and _is_int_sequence(positional[0])

    def _dtype_argument(
        self, value: cst.BaseExpression, where: str, cast: bool = False
    ) -> Iterator[_Hit]:
        dtypes = self.dtypes.dtypes_of(value)
        if self.wrong not in dtypes:
            return
        literal = dtype_literal(value)
        if literal is not None:
            prefix = literal.rsplit(".", 1)[0]
            if literal.endswith("Tensor"):
                new = f"{prefix}.{'IntTensor' if self.expected == 'int32' else 'LongTensor'}"
            else:
                new = f"{prefix}.{self.expected}"
            yield _Hit(
                value,
                f"gets {literal} in {where}",
                self.context.replace(value, new, f"Use {new}"),
                cast=cast,
            )
        else:
            origin = self.dtypes.origin_of(value)
            yield _Hit(
                value, f"gets torch.{self.wrong} in {where} (dtype from {origin})", cast=cast
            )


def _is_int_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, cst.Integer)


def _is_int_sequence(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return _is_int_sequence(node.left) or _is_int_sequence(node.right)
    if isinstance(node, cst.List | cst.Tuple):
        return bool(node.elements) and all(_is_int_literal(e.value) for e in node.elements)
    return False
