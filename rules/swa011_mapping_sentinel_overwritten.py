"""SWA011 mapping-sentinel-overwritten."""

from __future__ import annotations

import operator
from dataclasses import dataclass

import libcst as cst

from swacheck.analysis.names import call_name
from swacheck.analysis.sentinel import (
    Design,
    Region,
    binding_attr,
    construction,
    design_of,
    fill_value,
    int_constant,
    region_of,
)
from swacheck.analysis.walk import walk
from swacheck.config import Config
from swacheck.context import FileContext
from swacheck.finding import Fix
from swacheck.fix_safety import safe_fix
from swacheck.places import cite
from swacheck.rule import Invalid, Rule, Valid
from swacheck.semantics.function import CALL
from swacheck.semantics.model import Model, words
from swacheck.semantics.terms import Attr, Call, Const, Index, Op, Term, alternatives, render
from swacheck.semantics.unit import FileUnit
from swacheck.triggers import Trigger

# The allocator of the examples: its table built with a trailing -1 sentinel row.
_ALLOCATOR = """
import torch

class SWATokenToKVPoolAllocator:
    def __init__(self, size, page_size, device):
        self.full_to_swa_index_mapping = torch.cat(
            [
                torch.zeros(size + page_size, dtype=torch.int64, device=device),
                torch.tensor([-1], dtype=torch.int64, device=device),
            ]
        )
"""


@dataclass(frozen=True)
class _Write:
    """A write over the table: which rows, the constant it writes (``None``: unknown),
    how it reads, and the expression naming the rows (for the fix)."""

    node: cst.CSTNode
    region: Region
    value: int | None
    how: str
    rows: cst.BaseExpression | None = None


class MappingSentinelOverwritten(Rule):
    """
    ## What it does
    Flags a write that overwrites a sentinel row of the full->SWA mapping table
    (`mapping-attributes`) on a reset path (`clear()`, a reset, any method): filling,
    zeroing or assigning the whole table (`mapping.fill_(0)`, `mapping.zero_()`,
    `mapping[:] = 0`, `mapping[1:] = 0`, `mapping[: len(mapping)] = 0`,
    `mapping.copy_(torch.zeros_like(mapping))`, also
    through a local name or a view), writing the last row itself, or re-creating the table
    without its trailing row (`self.mapping = torch.zeros(size + page_size, ...)` in a
    reset). The sentinel rows are learnt from how the project builds each table: a
    trailing row appended to it (`torch.cat([torch.zeros(n), torch.tensor([-1])])`, or
    `mapping[-1] = -1` after allocating it), and row 0 where the table's body starts at 0
    (zeros, `arange`). A write is fine when the same function restores the row afterwards
    (`mapping.zero_(); mapping[-1] = -1`). A table built without a trailing row has none to
    keep; a write whose indices or value cannot be read off the text is not judged.

    It also flags a free of SWA slots read through the table that does not drop the
    slots reading 0 (`self.swa_attn_allocator.free(swa_indices[swa_indices >= 0])`, or
    no mask at all): a full slot the table does not map reads 0, the reserved SWA slot,
    which the free then hands back to the allocator. A mask that leaves 0 out
    (`swa_indices > 0`, `!= 0`, `>= 1`) is what SGLang's `free_swa` uses.

    ## Why is this bad?
    The trailing `-1` row is what a `last_loc` of `-1` (a request without a prefix, in
    `alloc_extend`/`alloc_decode`) indexes: it must translate to `-1` on the SWA side as
    well. Overwritten with 0 by a reset, every such request's SWA `last_loc` becomes SWA
    slot 0, and the SWA allocator extends the wrong page. Row 0 maps full slot 0, the
    padding slot, to SWA slot 0, the reserved one that padded CUDA-graph tokens write:
    overwritten, padded tokens write a live request's SWA KV. SGLang's `clear()` keeps
    both (`full_to_swa_index_mapping[:-1].fill_(0)`, "the last item is -1, we don't clear
    it") in every release; the order of a reset is easy to get wrong when it is
    rewritten, and nothing fails until a request without a prefix arrives.

    ## Fix safety
    Narrowing a fill, zeroing or assignment of the whole table to all rows but the last
    (`mapping[:-1].fill_(0)`) is safe: every other row is reset as before, and the last
    keeps the value it was built with. A re-created table is reported without a fix.
    """

    code = "SWA011"
    name = "mapping-sentinel-overwritten"
    summary = "Reset of the full->SWA mapping that overwrites its sentinel row (-1 tail, slot 0)"
    fixes = (safe_fix(),)
    config_keys = ("mapping-attributes",)
    invariant = "I11"
    origin = "SGLang's SWA allocator: `clear()` keeps the trailing -1 row"

    VALID = [
        # SGLang's clear(): every row but the trailing -1
        Valid(
            """
import torch

class SWATokenToKVPoolAllocator:
    def __init__(self, size, page_size, device):
        self.full_to_swa_index_mapping = torch.cat(
            [
                torch.zeros(size + page_size, dtype=torch.int64, device=device),
                torch.tensor([-1], dtype=torch.int64, device=device),
            ]
        )
        self.clear()

    def clear(self):
        self.full_attn_allocator.clear()
        # the last item is -1, we don't clear it
        self.full_to_swa_index_mapping[:-1].fill_(0)

    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
"""
        ),
        # zeroed, then the sentinel put back in the same reset
        Valid(
            """
class Allocator:
    def __init__(self, size):
        self.full_to_swa_index_mapping = torch.zeros(size + 1, dtype=torch.int64)
        self.full_to_swa_index_mapping[-1] = -1

    def reset(self):
        self.full_to_swa_index_mapping.zero_()
        self.full_to_swa_index_mapping[-1] = -1
"""
        ),
        # a table built without a trailing row has none to keep
        Valid(
            """
class IdentityAllocator:
    def __init__(self, size):
        self.full_to_swa_index_mapping = torch.zeros(size, dtype=torch.int64)

    def clear(self):
        self.full_to_swa_index_mapping.fill_(0)
"""
        ),
        # the pool shares the allocator's table: no new table
        Valid(
            """
class SWAKVPool:
    def register_mapping(self, full_to_swa_index_mapping):
        self.full_to_swa_index_mapping = full_to_swa_index_mapping
""",
            files={
                "allocator.py": """
class Allocator:
    def __init__(self, n):
        self.full_to_swa_index_mapping = torch.cat([torch.arange(n), torch.tensor([-1])])
"""
            },
        ),
        # a slice that ends before the last row, written through a local view
        Valid(
            """
class Allocator:
    def __init__(self, n):
        self.full_to_swa_index_mapping = torch.cat([torch.zeros(n), torch.tensor([-1])])

    def clear(self):
        body = self.full_to_swa_index_mapping[1:-1]
        body.fill_(0)
"""
        ),
        # the mapped SWA slots freed, the unmapped ones (0) and the -1 row left out
        Valid(
            _ALLOCATOR
            + """
    def free_swa(self, free_index):
        swa_indices = self.full_to_swa_index_mapping[free_index]
        swa_indices = swa_indices[swa_indices > 0]
        self.swa_attn_allocator.free(swa_indices)
        self.full_to_swa_index_mapping[free_index] = 0
"""
        ),
    ]
    INVALID = [
        # a free that keeps the slots reading 0: the reserved slot goes back to the pool
        Invalid(
            _ALLOCATOR
            + """
    def free_swa(self, free_index):
        swa_indices = self.full_to_swa_index_mapping[free_index]
        swa_indices = swa_indices[swa_indices >= 0]  # drop the -1 sentinel
        self.swa_attn_allocator.free(swa_indices)
        self.full_to_swa_index_mapping[free_index] = 0
""",
            line=16,
        ),
        Invalid(
            _ALLOCATOR
            + """
    def clear(self):
        self.full_attn_allocator.clear()
        self.full_to_swa_index_mapping.fill_(0)
""",
            line=15,
            fixed=_ALLOCATOR
            + """
    def clear(self):
        self.full_attn_allocator.clear()
        self.full_to_swa_index_mapping[:-1].fill_(0)
""",
        ),
        # a range up to the table's own length is the whole table
        Invalid(
            _ALLOCATOR
            + """
    def clear(self):
        mapping = self.full_to_swa_index_mapping
        mapping[1 : mapping.shape[0]] = 0
""",
            line=15,
        ),
        # zero_() through a local alias, in a subclass of another file
        Invalid(
            """
from allocator import SWAAllocator

class PagedSWAAllocator(SWAAllocator):
    def clear(self):
        super().clear()
        mapping = self.full_to_swa_index_mapping
        mapping.zero_()
""",
            line=8,
            files={
                "allocator.py": """
import torch

class SWAAllocator:
    def __init__(self, size):
        self.full_to_swa_index_mapping = torch.cat(
            (torch.arange(size + 1), torch.tensor([-1]))
        )
"""
            },
        ),
        # slice assignment over every row
        Invalid(
            """
class Allocator:
    def __init__(self, n):
        self.full_to_swa_index_mapping = torch.cat([torch.zeros(n), torch.full((1,), -1)])

    def reset(self):
        self.full_to_swa_index_mapping[:] = 0
""",
            line=7,
            fixed="""
class Allocator:
    def __init__(self, n):
        self.full_to_swa_index_mapping = torch.cat([torch.zeros(n), torch.full((1,), -1)])

    def reset(self):
        self.full_to_swa_index_mapping[:-1] = 0
""",
        ),
        # a reset that re-creates the table without the trailing row
        Invalid(
            """
class Allocator:
    def __init__(self, size, page_size, device):
        self.size, self.page_size, self.device = size, page_size, device
        self.full_to_swa_index_mapping = torch.cat(
            [torch.zeros(size + page_size, device=device), torch.tensor([-1], device=device)]
        )

    def clear(self):
        self.full_to_swa_index_mapping = torch.zeros(
            self.size + self.page_size, dtype=torch.int64, device=self.device
        )
""",
            line=10,
        ),
        # marking every row unmapped with -1 loses the reserved slot 0
        Invalid(
            """
class Allocator:
    def __init__(self, n):
        self.full_to_swa_index_mapping = torch.cat([torch.zeros(n), torch.tensor([-1])])

    def clear(self):
        self.full_to_swa_index_mapping[:-1].fill_(-1)
""",
            line=7,
        ),
        # copying zeros over the whole table
        Invalid(
            """
class Allocator:
    def __init__(self, n):
        self.full_to_swa_index_mapping = torch.zeros(n + 1, dtype=torch.int64)
        self.full_to_swa_index_mapping[-1] = -1

    def clear(self):
        table = self.full_to_swa_index_mapping
        table.copy_(torch.zeros_like(table))
""",
            line=9,
        ),
    ]

    # A finding is a write naming a mapping attribute (directly or through a local bound
    # to it in the same function); the constructions it is judged by name it too.
    region_safe = True

    # -- the reserved slot freed (the semantic core) -----------------------------------

    def check(self, unit: FileUnit) -> None:
        """A free of SWA slots read through the mapping that keeps slot 0: a full slot the
        mapping does not map reads 0, so a free that does not drop 0 (`x[x >= 0]`, no
        filter) hands the reserved slot to the allocator."""
        model = unit.model
        for function in unit.functions():
            for event in function.facts.events:
                call = event.value
                if (
                    event.kind != CALL
                    or not isinstance(call, Call)
                    or not isinstance(call.func, Attr)
                    or "free" not in words(call.func.name)
                ):
                    continue
                for arg in call.args:
                    found = next(
                        (f for _, t in alternatives(arg) if (f := _freed_gather(t, model))),
                        None,
                    )
                    if found is None:
                        continue
                    table, how = found
                    self.report_span(
                        event.span,
                        f"`{render(call.func)}` frees SWA slots read through `{table}` "
                        f"{how}: a full slot the table does not map reads 0, the reserved "
                        "SWA slot padded CUDA-graph tokens write, and the allocator hands "
                        "it to a live request, whose SWA KV they then overwrite; free only "
                        "the mapped slots (`swa_indices[swa_indices > 0]`) (I11)",
                    )
                    break

    @classmethod
    def triggers(cls, config: Config) -> frozenset[Trigger] | None:
        """The configured mapping attributes: a write and a construction name one."""
        return frozenset(config.mapping_attributes)

    @classmethod
    def collect_facts(cls, context: FileContext) -> dict[str, Design] | None:
        return design_of(context) or None

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._designs: dict[str, tuple[str, Design]] | None = None

    @property
    def designs(self) -> dict[str, tuple[str, Design]]:
        """Each mapping attribute's sentinel design, with the file that builds it."""
        if self._designs is None:

            def merge() -> dict[str, tuple[str, Design]]:
                found: dict[str, tuple[str, Design]] = {}
                for path, designs in self.context.project.rule_facts(self.code):
                    for attr, design in designs.items():
                        found.setdefault(attr, (path, design))
                return found

            self._designs = self.context.project.memo(("swa011-designs",), merge)
        return self._designs

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        writes = _writes(node, self.context)
        for index, write in enumerate(writes):
            known = self.designs.get(write.region.attr)
            if known is None:
                continue
            path, design = known
            later = writes[index + 1 :]
            built = cite(path, design.row, self.context.path)
            self._judge(node, write, design, built, later)

    def _judge(
        self,
        function: cst.FunctionDef,
        write: _Write,
        design: Design,
        built: str,
        later: list[_Write],
    ) -> None:
        region, value = write.region, write.value
        where = f"`{function.name.value}()`"
        if write.how == "builds":  # a new table with its sentinel rows
            return
        if write.how == "rebinding":
            if design.trailing is None or _restored(
                later, region.attr, last=True, value=design.trailing
            ):
                return
            self.report(
                write.node,
                f"{where} re-creates `{region.attr}` without its trailing {design.trailing} "
                f"sentinel row (the table is built with one at {built}): a `last_loc` of -1 "
                "(a request with no prefix) then indexes a real row instead of the sentinel "
                "(I11)",
            )
            return
        if value is None:
            return
        trailing = (
            design.trailing is not None
            and region.last
            and value != design.trailing
            and not _restored(later, region.attr, last=True, value=design.trailing)
        )
        head = (
            design.head is not None
            and region.first
            and value != design.head
            and not _restored(later, region.attr, last=False, value=design.head)
        )
        if trailing:
            self.report(
                write.node,
                f"{where} {write.how} {value} into the last row of `{region.attr}`, its "
                f"trailing {design.trailing} sentinel (built at {built}): a `last_loc` of -1 "
                f"(a request with no prefix) then translates to SWA slot {value} instead of "
                f"{design.trailing}; reset every row but the last (I11)",
                fix=None if head else self._fix(write),
            )
        elif head:
            self.report(
                write.node,
                f"{where} {write.how} {value} into row 0 of `{region.attr}` (built to hold "
                f"{design.head} at {built}): full slot 0 is the padding slot, and padded "
                f"tokens then translate to SWA slot {value} instead of the reserved slot "
                f"{design.head} (I11)",
            )

    def _fix(self, write: _Write) -> Fix | None:
        rows = write.rows
        if rows is None:
            return None
        ctx = self.context
        if isinstance(rows, cst.Subscript):
            index = rows.slice[0].slice
            if not isinstance(index, cst.Slice) or index.upper is not None:
                return None
            lower = ctx.module.code_for_node(index.lower) if index.lower is not None else ""
            base = ctx.module.code_for_node(rows.value)
            new = f"{base}[{lower}:-1]"
        else:
            new = f"{ctx.module.code_for_node(rows)}[:-1]"
        return ctx.replace(rows, new, "Reset every row but the trailing sentinel")


def _restored(later: list[_Write], attr: str, last: bool, value: int) -> bool:
    """Whether a later write of the function puts the sentinel row back."""
    for write in later:
        if write.region.attr != attr:
            continue
        if write.how == "builds":
            return True
        if write.value == value and (write.region.last if last else write.region.first):
            return True
    return False


def _writes(function: cst.FunctionDef, context: FileContext) -> list[_Write]:
    """The writes over mapping rows in ``function`` (not its nested functions), in
    source order."""
    names = context.names
    found: list[_Write] = []

    class Visitor(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def leave_Call(self, original_node: cst.Call) -> None:
            func = original_node.func
            method = call_name(original_node)
            if not isinstance(func, cst.Attribute) or method not in ("fill_", "zero_", "copy_"):
                return
            region = region_of(func.value, names, function)
            if region is None:
                return
            args = [a.value for a in original_node.args if a.keyword is None]
            if method == "zero_":
                value: int | None = 0
            else:
                value = fill_value(args[0]) if args else None
            how = {"fill_": "writes", "zero_": "writes", "copy_": "copies"}[method]
            # a narrower copy_ would need a narrower source: no fix there
            rows = func.value if method != "copy_" else None
            found.append(_Write(original_node, region, value, how, rows))

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                attr = binding_attr(target.target, names)
                if attr is not None:
                    built = construction(node.value)
                    if built is not None:
                        region = Region(attr, first=True, last=True, whole=True)
                        how = "rebinding" if built[0] is None else "builds"
                        value = None if built[0] is None else built[0]
                        found.append(_Write(node, region, value, how))
                    continue
                if isinstance(target.target, cst.Subscript):
                    region = region_of(target.target, names, function)
                    if region is not None:
                        value = int_constant(node.value)
                        found.append(_Write(node, region, value, "writes", target.target))

    walk(function, Visitor())
    return found


# Comparisons a mask may make with a constant; ``c <op> x`` is read as ``x <mirror> c``.
_TESTS = {
    ">": operator.gt,
    "<": operator.lt,
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}
_MIRRORED = {">": "<", "<": ">", ">=": "<=", "<=": ">=", "==": "==", "!=": "!="}


def _freed_gather(term: Term, model: Model) -> tuple[str, str] | None:
    """Where ``term`` is a gather through a mapping table kept whole or filtered by
    masks none of which drops 0: the table's name and how it is filtered."""
    filters = []
    while isinstance(term, Index) and isinstance(term.index, Op):
        test = _comparison(term.index, term.base)
        if test is None:
            return None  # another mask: not judged
        filters.append(test)
        term = term.base
    if not (
        isinstance(term, Index)
        and isinstance(term.base, Attr)
        and model.is_mapping_name(term.base.name)
    ):
        return None
    if any(_drops_zero(op, value) for op, value in filters):
        return None
    how = (
        f"filtered by `{' and '.join(f'{op} {value}' for op, value in filters)}`, which keeps 0"
        if filters
        else "without dropping the unmapped ones"
    )
    return term.base.name, how


def _comparison(test: Op, subject: Term) -> tuple[str, int] | None:
    """``test`` as ``subject <op> c`` with ``c`` an integer, else ``None``."""
    if len(test.operands) != 2 or test.op not in _MIRRORED:
        return None
    left, right = test.operands
    if left == subject and isinstance(right, Const) and isinstance(right.value, int):
        return test.op, right.value
    if right == subject and isinstance(left, Const) and isinstance(left.value, int):
        return _MIRRORED[test.op], left.value
    return None


def _drops_zero(op: str, value: int) -> bool:
    """Whether the mask ``x <op> value`` leaves out the slots that read 0."""
    return not _TESTS[op](0, value)
