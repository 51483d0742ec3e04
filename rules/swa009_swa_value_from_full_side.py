"""SWA009 swa-value-from-full-side."""

from __future__ import annotations

import libcst as cst

from swacheck.analysis.aliases import strip_views
from swacheck.analysis.modes import guard_key, swa_guard_polarity
from swacheck.analysis.names import Names, call_name, dotted_name, target_name
from swacheck.analysis.provenance import (
    full_side,
    is_swa_side,
    mentions,
    swa_bound_slots,
    translates,
)
from swacheck.analysis.roles import ROLE_NAME_TRIGGERS, WRITE, role_of, words
from swacheck.analysis.walk import walk
from swacheck.config import DEFAULT_SWA_LOC_PATTERN, Config
from swacheck.context import FileContext
from swacheck.rule import Invalid, Rule, Valid
from swacheck.triggers import Trigger

# A backend of the same project that takes each SWA value from the SWA side: the
# names the INVALID examples bind from the full pool are SWA-space names in the project.
_TRANSLATING_BACKEND = """
class TRTLLMHABackend:
    def init_forward_metadata(self, forward_batch, metadata):
        pool = self.token_to_kv_pool
        metadata.swa_out_cache_loc = pool.translate_loc_from_full_to_swa(
            forward_batch.out_cache_loc
        )
        metadata.swa_page_table = pool.translate_loc_from_full_to_swa(metadata.page_table)
        self.buffers = {"swa_out_cache_loc": metadata.swa_out_cache_loc}

    def forward_extend(self, layer, forward_batch, k, v):
        swa_loc = self.forward_metadata.swa_out_cache_loc
        self.token_to_kv_pool.set_kv_buffer(
            layer, KVWriteLoc(forward_batch.out_cache_loc, swa_loc=swa_loc), k, v
        )


def update_sliding_window_buffer(window_kv_indptr, window_kv_indices, allocator):
    n = window_kv_indptr[-1]
    window_kv_indices[:n] = allocator.translate_loc_from_full_to_swa(window_kv_indices[:n])
    swa_page_table = allocator.translate_loc_from_full_to_swa(window_kv_indices)
    return swa_page_table
"""


class SwaValueFromFullSide(Rule):
    """
    ## What it does
    Flags an SWA-space value taken straight from the full pool: an SWA write location,
    page table or window index (a name of either role of SWA002: `swa_out_cache_loc`,
    `out_cache_loc_swa`, `swa_loc=`, `swa_page_table`, `window_kv_indices`) bound to, or
    filled from, full-pool values with no translation: the batch's `out_cache_loc`,
    `req_to_token` pages, the full `page_table`, or a name with `full` and a location word.
    The shapes: an assignment, a keyword argument (`KVWriteLoc(loc, swa_loc=loc)`: the
    same value as the full location next to it), a dict entry, an in-place fill
    (`swa_page_table[:, :n].copy_(req_to_token[...])`, slice assignment), and a Triton
    kernel handed `req_to_token` and an SWA window/page-table buffer but not the mapping
    (the kernel fills the buffer with full-pool indices). Views, slices, casts and
    `// page_size` keep a value full-pool side; a local is full-pool side when every
    binding of it is.

    The names are those the project takes from the SWA side somewhere (bound to a
    translation or an SWA value, handed to a translating call): a name never translated
    anywhere lives in the full pool's index space in this design (a prefill-aware
    window's page table over the full pool), whatever it is called. It stays silent
    where the value is translated after all, in the same function (the
    buffer is written or rebound from a translation, a gather through the mapping, a call
    handed the mapping or a translator: `window_kv_indices[:n] =
    translate(window_kv_indices[:n])`), where the other branch of the same `if` binds it
    from the SWA side, and in a branch that runs only outside hybrid-SWA mode (`if not
    self.is_hybrid_swa:`), where SWA and full slots coincide.

    ## Why is this bad?
    SWA values live in the SWA pool's index space; full-pool slot numbers go through
    the full->SWA mapping first (`translate_loc_from_full_to_swa`, from 0.5.13 each
    backend's metadata, from 0.5.21 a `KVIndexTranslator`). A write location taken from
    `out_cache_loc` stores the SWA layers' K/V at full-pool slot numbers, over other
    requests' SWA KV or past the end of the smaller SWA pool; a page table or window
    index built from `req_to_token` makes the SWA layers read the wrong tokens. Nothing
    fails: the model quietly loses accuracy, as the seed reports' AIME regression did.

    ## Fix safety
    No autofix: which translation applies (the pool's, the backend's translator, a
    translation already made for the batch) is the author's choice.
    """

    code = "SWA009"
    name = "swa-value-from-full-side"
    summary = "SWA location, page table or window index taken straight from full-pool values"
    config_keys = ("swa-loc-pattern", "translate-methods", "mapping-attributes")
    invariant = "I9"
    origin = "the current design: translation in the attention backends (#27617)"

    VALID = [
        # 0.5.13+: the backend translates in its metadata
        Valid(
            """
class TRTLLMHABackend:
    def init_forward_metadata(self, forward_batch):
        metadata = self.forward_metadata
        metadata.page_table = self.req_to_token[forward_batch.req_pool_indices, : self.max_len]
        metadata.swa_page_table = self._swa_kv_pool.translate_loc_from_full_to_swa(
            metadata.page_table
        ).to(torch.int32)
        metadata.swa_out_cache_loc = self.token_to_kv_pool.translate_loc_from_full_to_swa(
            forward_batch.out_cache_loc
        )
"""
        ),
        # window indices filled with full-pool indices, then translated in place
        Valid(
            """
def update_sliding_window_buffer(window_kv_indptr, req_to_token, seq_lens, req_pool_indices,
                                 bs, device, token_to_kv_pool_allocator=None):
    window_kv_indices = torch.empty(window_kv_indptr[-1], dtype=torch.int64, device=device)
    create_flashinfer_kv_indices_triton[(bs,)](
        req_to_token, req_pool_indices, seq_lens, window_kv_indptr, None, window_kv_indices,
        req_to_token.stride(0),
    )
    if hasattr(token_to_kv_pool_allocator, "translate_loc_from_full_to_swa"):
        n = window_kv_indptr[-1]
        window_kv_indices[:n] = token_to_kv_pool_allocator.translate_loc_from_full_to_swa(
            window_kv_indices[:n]
        )
    return window_kv_indices
"""
        ),
        # outside hybrid-SWA mode the two index spaces coincide
        Valid(
            """
def write_loc(self, forward_batch):
    if not self.is_hybrid_swa:
        swa_loc = forward_batch.out_cache_loc
    else:
        swa_loc = self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)
    return KVWriteLoc(forward_batch.out_cache_loc, swa_loc=swa_loc)
"""
        ),
        # a full-pool name, translated into its SWA twin
        Valid(
            """
def transfer(self, req_to_token, req, window):
    window_kv_indices_full = req_to_token[req.req_pool_idx, window]
    window_kv_indices_swa = self.allocator.translate_loc_from_full_to_swa(window_kv_indices_full)
    return window_kv_indices_swa.cpu().numpy()
"""
        ),
        # a name the project never takes from the SWA side lives in the full pool's index
        # space (prefill-aware SWA reads the full pool through its own page table)
        Valid(
            """
def init_forward_metadata_capture(self, metadata):
    metadata.page_table = self.decode_cuda_graph_metadata["page_table"][:bs, :]
    if self.is_prefill_aware_swa:
        metadata.pa_swa_page_table = metadata.page_table
""",
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # a kernel handed the mapping (here through a local cast of it) translates as it
        # fills
        Valid(
            """
def fill(self, metadata, req_pool_indices, cache_seqlens):
    swa_slot_mapping = self.swa_kv_pool.full_to_swa_index_mapping.long()
    swa_page_table = torch.zeros(bs, max_blocks, dtype=torch.int32, device=self.device)
    scatter_page_table_kernel[(bs,)](
        self.req_to_token, req_pool_indices, cache_seqlens, swa_page_table, swa_slot_mapping
    )
    return swa_page_table
""",
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # a kernel handed the mapping translates while it fills
        Valid(
            """
def fill(self, metadata, req_pool_indices, cache_seqlens):
    build_page_table_kernel[(bs,)](
        self.req_to_token, req_pool_indices, cache_seqlens, metadata.page_table,
        metadata.swa_page_table, self.pool.full_to_swa_index_mapping,
    )
"""
        ),
        # the table under a kernel wrapper's own name (SGLang 0.5.23's trtllm page table
        # and DSpark layouts: `full_to_swa`, `swa_mapping`, `full_to_swa_mapping`)
        Valid(
            """
def build_page_table(req_to_token, page_table, swa_page_table, full_to_swa):
    create_kv_indices_triton[(bs,)](req_to_token, page_table, full_to_swa, swa_page_table)
"""
        ),
        Valid(
            """
def commit_layout(req_to_token, swa_mapping, n):
    swa_loc = torch.empty(n, dtype=torch.int32)
    _commit_kernel[(n,)](req_to_token, swa_mapping, swa_loc)
    return swa_loc
"""
        ),
        # two constructions written alike are two values (vLLM 0.33's warm-up inputs)
        Valid(
            """
def warmup_inputs(self):
    return dict(
        swa_indices=TritonWarmupTensor(torch.int32, shape=(1, 1)),
        block_table=TritonWarmupTensor(torch.int32, shape=(1, 1)),
    )
"""
        ),
    ]
    INVALID = [
        # SWA KV stored at full slot numbers
        Invalid(
            """
class FlashAttentionBackend:
    def init_forward_metadata(self, forward_batch):
        metadata = FlashAttentionMetadata()
        if self.use_sliding_window_kv_pool:
            metadata.swa_out_cache_loc = forward_batch.out_cache_loc
        self.forward_metadata = metadata
""",
            line=6,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # the page table of SWA layers copied from full-pool pages
        Invalid(
            """
def init_forward_metadata_replay_cuda_graph(self, bs, req_pool_indices, seq_lens):
    metadata = self.decode_cuda_graph_metadata[bs]
    max_len = int(seq_lens.max())
    page_indices = self.req_to_token[req_pool_indices, :max_len]
    metadata.page_table[:, :max_len].copy_(page_indices // self.page_size)
    metadata.swa_page_table[:, :max_len].copy_(page_indices // self.page_size)
""",
            line=7,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        Invalid(
            """
def init_forward_metadata(self, forward_batch):
    metadata = self.forward_metadata
    metadata.swa_page_table = self.req_to_token[forward_batch.req_pool_indices, : self.max_len]
""",
            line=4,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # the SWA location is the full one
        Invalid(
            """
def forward_extend(self, q, k, v, layer, forward_batch):
    loc = forward_batch.out_cache_loc
    forward_batch.token_to_kv_pool.set_kv_buffer(layer, KVWriteLoc(loc, swa_loc=loc), k, v)
""",
            line=4,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # window indices computed from req_to_token and never translated
        Invalid(
            """
def update_sliding_window_buffer_cuda_graph(window_kv_indptr, window_kv_indices, req_to_token,
                                            seq_lens, req_pool_indices, bs):
    window_kv_lens = torch.minimum(seq_lens, torch.tensor(4096))
    window_kv_indptr[1 : bs + 1] = torch.cumsum(window_kv_lens, dim=0)
    create_flashinfer_kv_indices_triton[(bs,)](
        req_to_token, req_pool_indices, window_kv_lens, window_kv_indptr, None,
        window_kv_indices, req_to_token.stride(0),
    )
    return window_kv_indptr, window_kv_indices
""",
            line=8,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # a local SWA buffer filled by slice assignment from full-pool pages
        Invalid(
            """
def build(self, req_pool_indices, bs, max_pages):
    swa_page_table = torch.zeros(bs, max_pages, dtype=torch.int32, device=self.device)
    swa_page_table[:, :max_pages] = self.req_to_token[req_pool_indices, :max_pages]
    return swa_page_table
""",
            line=4,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # through a dict of graph buffers
        Invalid(
            """
def load(self, forward_batch, n):
    buffers = {"swa_out_cache_loc": forward_batch.out_cache_loc[:n]}
    self.registry.fill_from(buffers)
""",
            line=3,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
    ]

    # A finding sits on a binding of an SWA role's name (its text is the trigger), and
    # the exemptions read the same function.
    region_safe = True

    @classmethod
    def triggers(cls, config: Config) -> frozenset[Trigger] | None:
        """An SWA role's name has the word ``swa``, or ``window`` with an index or table
        word (``roles.ROLE_NAME_TRIGGERS``; default pattern); a custom pattern has no
        known fixed part: no prefilter."""
        if config.swa_loc_pattern != DEFAULT_SWA_LOC_PATTERN:
            return None
        return ROLE_NAME_TRIGGERS

    @classmethod
    def collect_facts(cls, context: FileContext) -> frozenset[str] | None:
        """The SWA names this file binds or fills from the SWA side."""
        return swa_bound_slots(context) or None

    @property
    def swa_slots(self) -> frozenset[str]:
        """The SWA names some file of the project binds from the SWA side: names of the
        SWA index space in this design (a name never translated anywhere, such as a
        prefill-aware page table over the full pool, is not one)."""
        project = self.context.project

        def union() -> frozenset[str]:
            return frozenset(name for _, names in project.rule_facts(self.code) for name in names)

        return project.memo(("swa009-slots",), union)

    # -- bindings ----------------------------------------------------------------------------

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bound(target.target, node.value, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bound(node.target, node.value, node)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        if isinstance(node.key, cst.SimpleString):
            key = node.key.evaluated_value
            if isinstance(key, str):
                self._candidate(key, None, node.value, node)

    def _bound(
        self, target: cst.BaseExpression, value: cst.BaseExpression, statement: cst.CSTNode
    ) -> None:
        if isinstance(target, cst.Subscript):  # a slice store into an SWA buffer
            base, _ = strip_views(target)
            if base is not target:
                name = target_name(base)
                if name is not None:
                    self._candidate(name, base, value, statement, filled=True)
                return
        name = target_name(target)
        if name is not None:
            self._candidate(name, target, value, statement)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Subscript):
            self._kernel(node)
            return
        if call_name(node) == "copy_" and isinstance(func, cst.Attribute) and node.args:
            base, _ = strip_views(func.value)
            name = target_name(base)
            if name is not None:
                self._candidate(name, base, node.args[0].value, node, filled=True)
        texts = {
            self.context.module.code_for_node(a.value)
            for a in node.args
            if a.keyword is None or role_of(a.keyword.value, self.context.names) is None
        }
        for arg in node.args:
            if arg.keyword is None:
                continue
            keyword = arg.keyword.value
            if role_of(keyword, self.context.names) is None:
                continue
            if self._candidate(keyword, None, arg.value, arg):
                continue
            text = self.context.module.code_for_node(arg.value)
            # Two calls written alike build two values (`TritonWarmupTensor(...)` stubs
            # of a kernel's warm-up): only a reference is the same value twice.
            if text in texts and not _is_none(arg.value) and not isinstance(arg.value, cst.Call):
                self._report(
                    keyword,
                    arg,
                    f"the same value as the full-pool location `{text}` beside it",
                )

    # -- the shapes --------------------------------------------------------------------------

    def _candidate(
        self,
        name: str,
        target: cst.BaseExpression | None,
        value: cst.BaseExpression,
        node: cst.CSTNode,
        filled: bool = False,
    ) -> bool:
        """Report ``value`` bound to (or filled into) the SWA name ``name`` when it is
        full-pool side and no exemption holds; whether it was reported."""
        if role_of(name, self.context.names) is None or name not in self.swa_slots:
            return False
        function = self.context.enclosing(node, cst.FunctionDef)
        origin = full_side(value, function)
        if origin is None:
            return False
        text = (dotted_name(target) if target is not None else None) or name
        if self._exempt(node, function, text):
            return False
        self._report(name, node, f"{'filled from' if filled else ''} {origin}".strip())
        return True

    def _kernel(self, launch: cst.Call) -> None:
        """``kernel[grid](req_to_token, ..., window_kv_indices, ...)`` without the mapping."""
        function = self.context.enclosing(launch, cst.FunctionDef)
        full = [full_side(a.value, function) for a in launch.args]
        pages = [f for f in full if f and "req_to_token" in f]
        if not pages or translates(launch, self.context.names, function):
            return
        for arg in launch.args:
            value = arg.value
            if (
                isinstance(value, cst.Name)
                and role_of(value.value, self.context.names)
                and not self._exempt(launch, function, value.value)
            ):
                self._report(value.value, value, f"filled from {pages[0]} by this kernel")

    # -- exemptions --------------------------------------------------------------------------

    def _exempt(self, node: cst.CSTNode, function: cst.FunctionDef | None, text: str) -> bool:
        if function is None:
            return False
        ctx = self.context
        statement = _statement(node, ctx)
        # a branch that runs only outside hybrid-SWA mode, or whose sibling translates
        child: cst.CSTNode = statement
        for ancestor in ctx.ancestors(statement):
            if ancestor is function:
                break
            if isinstance(ancestor, cst.If):
                in_body = child is ancestor.body
                key = guard_key(ancestor.test)
                polarity = swa_guard_polarity(key, ctx.names) if key else None
                if polarity is not None and polarity != in_body:
                    return True
                other = ancestor.orelse if in_body else ancestor.body
                if other is not None and _binds_from_swa(other, text, ctx.names, function):
                    return True
            child = ancestor
        # translated after all, later in the function
        start = ctx.start(statement)
        for later in _statements(function):
            if later is statement or ctx.start(later) <= start:
                continue
            if _translates_target(later, text, ctx.names, function):
                return True
        return False

    def _report(self, name: str, node: cst.CSTNode, origin: str) -> None:
        role = role_of(name, self.context.names)
        if role == WRITE:
            noun, effect = (
                "SWA write location",
                "its SWA layers' K/V are stored at full-pool slot numbers, over other "
                "requests' SWA KV or past the end of the smaller SWA pool",
            )
        else:
            noun = "SWA page table" if "table" in words(name) else "SWA window index"
            effect = "SWA layers read SWA KV at full-pool slot numbers: the wrong tokens"
        self.report(
            node,
            f"{noun} `{name}` is {origin} with no translation to the SWA side: {effect}; "
            "translate it (`translate_loc_from_full_to_swa`, the backend's translator) "
            "(I9)",
        )


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _statement(node: cst.CSTNode, context: FileContext) -> cst.CSTNode:
    """The small statement (or compound statement) ``node`` is in."""
    for ancestor in [node, *context.ancestors(node)]:
        if isinstance(ancestor, cst.BaseSmallStatement | cst.BaseCompoundStatement):
            return ancestor
    return node


def _statements(function: cst.FunctionDef) -> list[cst.CSTNode]:
    """The small statements of ``function`` (not of nested functions)."""
    found: list[cst.CSTNode] = []

    class Visitor(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
            found.extend(node.body)
            return False

    walk(function, Visitor())
    return found


def _translates_target(
    statement: cst.CSTNode, text: str, names: Names, scope: cst.FunctionDef
) -> bool:
    """``text`` is rebound or written from the SWA side, or handed to a translation."""
    if isinstance(statement, cst.Assign | cst.AnnAssign | cst.AugAssign):
        targets = (
            [t.target for t in statement.targets]
            if isinstance(statement, cst.Assign)
            else [statement.target]
        )
        for target in targets:
            base, _ = strip_views(target)
            value = statement.value
            if dotted_name(base) == text and value is not None and is_swa_side(value, names, scope):
                return True
    found = False

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            if not found and translates(node, names, scope):
                found = any(mentions(a.value, text) for a in node.args)

    walk(statement, Visitor())
    return found


def _binds_from_swa(block: cst.CSTNode, text: str, names: Names, scope: cst.FunctionDef) -> bool:
    found = False

    class Visitor(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal found
            for target in node.targets:
                base, _ = strip_views(target.target)
                if dotted_name(base) == text and is_swa_side(node.value, names, scope):
                    found = True

    walk(block, Visitor())
    return found
