"""SWA003 padding-branch-misses-swa-buffer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from swacheck.analysis.buffers import (
    BufferFactsCollector,
    BufferOwners,
    FileFacts,
    local_bindings,
    top_statement,
)
from swacheck.analysis.padding import (
    LOCATION_WORDS,
    BufferWrite,
    block_writes,
    is_location_name,
    padding_block,
    padding_trigger_strings,
)
from swacheck.analysis.walk import walk
from swacheck.config import DEFAULT_SWA_LOC_PATTERN, Config
from swacheck.finding import Applicability, Fix
from swacheck.rule import FixSafety, Invalid, Rule, Valid
from swacheck.triggers import Trigger, TriggerSet, all_of

if TYPE_CHECKING:
    from swacheck.context import FileContext


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
        collector = BufferFactsCollector(context.names)
        walk(context.module, collector)
        return collector.facts

    # -- checking ---------------------------------------------------------------------

    def visit_If(self, node: cst.If) -> None:
        ctx = self.context
        func = ctx.enclosing(node, cst.FunctionDef)
        flags = local_bindings(ctx, func) if func else {}
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
        owners = BufferOwners(ctx, self.code)
        info = owners.owner_class(group.owner, func)
        if info is None:
            return
        project = ctx.project
        owned = project.owned_attributes(info)
        swa = sorted(a for a in owned if ctx.names.is_swa_loc(a))
        if not swa:
            return
        covered = owners.covered(group.code, func, writes, calls, info)
        # A buffer nothing in the tree fills keeps its zeros: its tail is the sentinel.
        missing = [a for a in swa if a not in covered and owners.filled(info, a)]
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
            fix=self._fix(block, group, missing, writes, owners.optional(info)),
        )

    # -- the fix ----------------------------------------------------------------------

    def _fix(
        self,
        block: cst.BaseSuite,
        group: _OwnerGroup,
        missing: list[str],
        writes: tuple[BufferWrite, ...],
        optional: set[str],
    ) -> Fix | None:
        ctx = self.context
        if not isinstance(block, cst.IndentedBlock):
            return None
        anchor = top_statement(ctx, group.resets[-1].node, block)
        if anchor is None:
            return None
        branch_guards = any(w.guard is not None for w in writes)
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
