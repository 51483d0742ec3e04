"""SWA004 capture-without-invalidation."""

from __future__ import annotations

import libcst as cst

from swacheck.analysis.capture import (
    ForwardRuns,
    capture_regions,
    closures_passed_to_capture,
    invalidation_snippet,
    is_capture_routine,
    is_warmup_routine,
    loop_nodes,
    swa_related,
)
from swacheck.analysis.order import FunctionFlow, function_flow
from swacheck.analysis.scope import config_terms
from swacheck.analysis.writes import CALL, Event
from swacheck.config import Config
from swacheck.finding import Applicability, Fix
from swacheck.fix_safety import unsafe_fix
from swacheck.order_rule import BACKEND_POOL, DICT_POOL, LRU_POOL, MEMOISING_POOL, OrderRule
from swacheck.rule import Invalid, Valid
from swacheck.triggers import exact, word

_RUNNER = """
class CudaGraphRunner:
    def replay_prepare(self, forward_batch):
        if self.is_hybrid_swa:
            self.model_runner.token_to_kv_pool.invalidate_loc_cache()
        self.buffers.populate_from_forward_batch(forward_batch)

    def _capture_graph(self, graph, pool, stream, run_once_fn):
        with self.device_module.graph(graph, pool=pool, stream=stream):
            out = run_once_fn()
        return out
"""

_POOL = MEMOISING_POOL
_POOL_FILE = {"pool.py": _POOL}


class CaptureWithoutInvalidation(OrderRule):
    """
    ## What it does
    Flags a CUDA-graph warm-up or capture run that runs a forward (a call named
    `forward*` or `*_forward`, such as `self.eagle_worker.draft_forward(...)`, or of a
    method of the audit that runs one, such as a runner's own `self._run_forward(...)`;
    never a `with` context manager) without invalidating the translation cache first.
    Capture runs are: the body of `with torch.cuda.graph(...)` (any `*.graph(...)`
    context, or a graph-capture context such as `BreakableCUDAGraphCapture(...)`), the
    code between `capture_begin()` and `capture_end()`, forwards in a loop of a function
    that captures or is named as a capture routine (`capture_one_batch_size`: the
    warm-up loop, also where the capture itself is implicit, as with piecewise graphs),
    and a local function (commonly `run_once`) called in any of those places or passed
    to a `*capture*` call. Each forward counts as a cache fill, so a warm-up iteration
    leaves the cache dirty for the next one. A function named as a warm-up
    (`warmup_compile`, `_warmup`) runs forwards before the capture: each must be
    preceded by an invalidation too.

    Only SWA code is checked: the enclosing class (or module) mentions SWA
    (`is_hybrid_swa`, `SWAKVPool`, ...) or a configured name, or the class holds an
    object that is SWA code (the runner is SWA code through what it owns): an input
    holder with SWA location buffers (`self.buffers = DecodeInputBuffers(...)` owning
    `out_cache_loc_swa`), or a model runner whose methods name SWA or the invalidation.
    The held object's class is the one the source gives (an annotation, a constructor)
    or, where it gives none, the class of the audit named like the attribute
    (`self.model_runner`: `ModelRunner`).

    A helper that invalidates on a condition counts per path (see SWA005): the runner's
    `maybe_invalidate_swa_loc_cache()` that skips while `self.capturing` counts in a
    capture body that leaves `capturing` open, and not in one that sets it first.

    The rule applies where the audit holds a translation cache or one cannot be ruled
    out (DESIGN.md's scope rules; see SWA001 for the shapes: a memoising translate, a
    dict, a helper object, a `functools` cache, a cache of another object that the
    invalidation drops; an attribute refilled on the caller's schedule is none) and
    defines an invalidation method. A capture runs the model, which may fill any such
    cache, so there every SWA capture run needs the invalidation.

    ## Why is this bad?
    A warm-up run that fills the translation cache makes the capture run hit the
    cache: the captured graph then holds no gather kernel, and every replay reuses
    the warm-up's SWA locations (I5). SGLang PR #25824 found exactly this
    "warmup-1 cache pollution" and made every `run_once()` start with
    `invalidate_loc_cache()`.

    ## Fix safety
    The fix inserts the invalidation at the top of the capture body, copied (with its
    `if self.is_hybrid_swa:` guard, if it has one) from an invalidation the file
    already makes. It is unsafe: check that the receiver is the right pool in that
    scope.
    """

    code = "SWA004"
    name = "capture-without-invalidation"
    summary = "Graph warm-up/capture run that runs a forward without invalidating first"
    fixes = (unsafe_fix(),)
    config_keys = ("invalidate-methods", "translate-methods", "mapping-attributes")
    invariant = "I5"
    origin = "SGLang PR #25824 item 4"

    VALID = [
        # #25824's fix: run_once starts with the (guarded) invalidation
        Valid(
            _RUNNER
            + """
    def capture_one_batch_size(self, bs, forward):
        def run_once():
            if self.is_hybrid_swa:
                self.model_runner.token_to_kv_pool.invalidate_loc_cache()
            return forward(self.input_ids[:bs], self.positions[:bs])

        for _ in range(2):
            self.device_module.synchronize()
            run_once()
        return self._capture_graph(self.graph, None, self.stream, run_once)
""",
            files=_POOL_FILE,
        ),
        # the invalidation through a helper of the same class
        Valid(
            _RUNNER
            + """
    def _reset_swa(self):
        self.model_runner.token_to_kv_pool.invalidate_loc_cache()

    def capture_one_batch_size(self, bs, forward):
        def run_once():
            self._reset_swa()
            return forward(self.input_ids[:bs])

        for _ in range(2):
            run_once()
        return self._capture_graph(self.graph, None, self.stream, run_once)
""",
            files=_POOL_FILE,
        ),
        # the pool's helper in another file (attribute of known class)
        Valid(
            """
import torch
from pool import SWAKVPool

class Runner:
    def __init__(self, pool: SWAKVPool):
        self.pool = pool

    def capture(self, batch):
        for _ in range(3):
            self.pool.reset_for_forward()
            self.model.forward(batch)
        with torch.cuda.graph(self.graph):
            self.pool.reset_for_forward()
            self.model.forward(batch)
""",
            files={
                "pool.py": """
class SWAKVPool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def reset_for_forward(self):
        self.invalidate_loc_cache()
"""
            },
        ),
        # capture_begin/capture_end with an invalidation just before the capture
        Valid(
            """
class Runner:
    def capture(self, graph, batch):
        self.model.forward(batch)
        self.token_to_kv_pool.invalidate_loc_cache()
        graph.capture_begin()
        out = self.model.forward(batch)
        graph.capture_end()
        return out

    def invalidate_loc_cache(self):
        pass
""",
            files=_POOL_FILE,
        ),
        # a context manager named `forward_*` runs no forward
        Valid(
            _RUNNER
            + """
    def capture_one_batch_size(self, num_tokens, forward_batch):
        def run_once():
            self.model_runner.token_to_kv_pool.invalidate_loc_cache()
            with self.forward_context(forward_batch):
                return self.model_runner.model.forward(forward_batch.input_ids, forward_batch)

        for _ in range(2):
            run_once()
        with self.device_module.graph(self.graph):
            run_once()
""",
            files=_POOL_FILE,
        ),
        # a warm-up loop outside any capture routine (a benchmark) is not a capture run
        Valid(
            _RUNNER
            + """
    def benchmark(self, forward_batch, steps):
        for _ in range(steps):
            self.model_runner.model.forward(forward_batch.input_ids, forward_batch)
""",
            files=_POOL_FILE,
        ),
        # a warm-up that invalidates before its forward
        Valid(
            _RUNNER
            + """
    def warmup_compile(self, forward_batch):
        self.model_runner.token_to_kv_pool.invalidate_loc_cache()
        self.model_runner.model.forward(forward_batch.input_ids, forward_batch)
""",
            files=_POOL_FILE,
        ),
        # not SWA code: a plain runner in its own module
        Valid(
            """
import torch

class Runner:
    def capture(self, batch):
        for _ in range(2):
            self.model.forward(batch)
        with torch.cuda.graph(self.graph):
            self.model.forward(batch)
""",
            files=_POOL_FILE,
        ),
        # the runner's helper skips the invalidation while capturing; the capture body
        # leaves that open, so the helper's judgement stands (a cache held by the backend)
        Valid(
            """
import torch

class ModelRunner:
    def maybe_invalidate_swa_loc_cache(self):
        if not self.capturing:
            self.token_to_kv_pool.invalidate_loc_cache()

class CudaGraphRunner:
    def __init__(self, model_runner: ModelRunner):
        self.model_runner = model_runner

    def capture_one_batch_size(self, bs, forward):
        def run_once():
            self.model_runner.maybe_invalidate_swa_loc_cache()
            return forward(self.input_ids[:bs])

        for _ in range(2):
            run_once()
        with torch.cuda.graph(self.graph):
            run_once()
""",
            files={"pool.py": BACKEND_POOL},
        ),
    ]
    INVALID = [
        # #25824 item 4: run_once has no invalidation; warm-up pollutes the capture
        Invalid(
            _RUNNER
            + """
    def capture_one_batch_size(self, bs, forward):
        def run_once():
            return forward(self.input_ids[:bs], self.positions[:bs])

        for _ in range(2):
            self.device_module.synchronize()
            run_once()
        return self._capture_graph(self.graph, None, self.stream, run_once)
""",
            line=15,
            files=_POOL_FILE,
            fixed=_RUNNER
            + """
    def capture_one_batch_size(self, bs, forward):
        def run_once():
            if self.is_hybrid_swa:
                self.model_runner.token_to_kv_pool.invalidate_loc_cache()
            return forward(self.input_ids[:bs], self.positions[:bs])

        for _ in range(2):
            self.device_module.synchronize()
            run_once()
        return self._capture_graph(self.graph, None, self.stream, run_once)
""",
        ),
        # the invalidation comes after the forward, or on one branch only
        Invalid(
            _RUNNER
            + """
    def capture_one_batch_size(self, bs, forward, dp):
        def run_once():
            if dp:
                self.model_runner.token_to_kv_pool.invalidate_loc_cache()
            out = forward(self.input_ids[:bs])
            self.model_runner.token_to_kv_pool.invalidate_loc_cache()
            return out

        for _ in range(2):
            run_once()
        return self._capture_graph(self.graph, None, self.stream, run_once)
""",
            line=17,
            files=_POOL_FILE,
        ),
        # inline capture after a warm-up loop; the invalidation before the loop runs once
        Invalid(
            """
import torch

class Runner:
    def capture(self, batch):
        self.token_to_kv_pool.invalidate_loc_cache()
        for _ in range(2):
            self.model.forward(batch)
        with torch.cuda.graph(self.graph):
            out = self.model.forward(batch)
        return out

    def invalidate_loc_cache(self):
        pass
""",
            line=10,
            files=_POOL_FILE,
        ),
        # capture_begin/capture_end right after a warm-up forward
        Invalid(
            """
class Runner:
    def capture(self, graph, batch):
        self.token_to_kv_pool.invalidate_loc_cache()
        self.model.forward(batch)
        graph.capture_begin()
        out = self.model.forward(batch)
        graph.capture_end()
        return out

    def invalidate_loc_cache(self):
        pass
""",
            line=7,
            files=_POOL_FILE,
        ),
        # an inherited helper (another file) that only fills, no invalidation
        Invalid(
            """
from base import BaseRunner

class HybridSWARunner(BaseRunner):
    def capture_one_batch_size(self, bs, forward):
        def run_once():
            self.prepare_swa(bs)
            return forward(self.input_ids[:bs])

        for _ in range(2):
            run_once()
        return self._capture_graph(self.graph, None, self.stream, run_once)
""",
            line=8,
            files={
                "base.py": """
class BaseRunner:
    def invalidate_loc_cache(self):
        pass

    def prepare_swa(self, bs):
        self.pool.translate_loc_from_full_to_swa(self.out_cache_loc[:bs])
""",
                **_POOL_FILE,
            },
        ),
        # an implicit capture (a compiler backend captures on the second call): the
        # warm-up loop of a capture routine runs the capture body
        Invalid(
            _RUNNER
            + """
    def capture_one_batch_size(self, num_tokens, forward_batch):
        def run_once():
            with self.forward_context(forward_batch):
                self.model_runner.model.forward(forward_batch.input_ids, forward_batch)

        for _ in range(2):
            self.device_module.synchronize()
            run_once()
""",
            line=16,
            files=_POOL_FILE,
        ),
        # a graph-capture context manager other than `*.graph(...)`
        Invalid(
            _RUNNER
            + """
    def _record(self, num_tokens, pool, stream):
        forward_batch = self._build_batch(num_tokens)

        def step():
            return self._run_forward(forward_batch, num_tokens)

        graph = SplitCUDAGraph()
        with SplitCUDAGraphCapture(cuda_graph=graph, pool=pool, stream=stream):
            output = step()
        return graph, output

    def _run_forward(self, forward_batch, num_tokens):
        return self.model_runner.model.forward(forward_batch.input_ids, forward_batch)
""",
            line=17,
            files=_POOL_FILE,
        ),
        # a warm-up before the capture runs a forward on an uncleared cache
        Invalid(
            _RUNNER
            + """
    def warmup_compile(self, forward_batch):
        self.model_runner.attn_backend.init_forward_metadata(forward_batch)
        self.model_runner.model.forward(forward_batch.input_ids, forward_batch)
""",
            line=15,
            files=_POOL_FILE,
        ),
        # a runner that never names SWA is SWA code through the input holder it owns
        Invalid(
            """
import torch
from buffers import DecodeBuffers

class PlainGraphRunner:
    def __init__(self, model, max_bs):
        self.model = model
        self.buffers = DecodeBuffers(max_bs)

    def capture(self, batch):
        for _ in range(2):
            self.model.forward(batch)
        with torch.cuda.graph(self.graph):
            self.model.forward(batch)
""",
            line=14,
            files={
                **_POOL_FILE,
                "buffers.py": """
import torch

class DecodeBuffers:
    def __init__(self, max_bs):
        self.out_cache_loc = torch.zeros(max_bs, dtype=torch.int64)
        self.out_cache_loc_swa = torch.zeros(max_bs, dtype=torch.int32)
""",
            },
        ),
        # ... or through the model runner it holds (no annotation: the class named like
        # the attribute), whose capture body runs the draft model's forward
        Invalid(
            """
class DraftGraphRunner:
    def capture_one_batch_size(self, batch):
        def run_once():
            return self.draft_worker.draft_forward(batch)

        self._capture_init(run_once)
        return self._capture_graph(run_once)

    def _capture_init(self, run_once_fn):
        for _ in range(2):
            self.model_runner.tp_group.barrier()
            run_once_fn()
""",
            line=5,
            files={
                **_POOL_FILE,
                "model_runner.py": """
class ModelRunner:
    def reset_swa_translations(self):
        if self.is_hybrid_swa:
            self.token_to_kv_pool.invalidate_loc_cache()
""",
            },
        ),
        # the capture body marks the runner as capturing and then calls the helper that
        # skips the invalidation while capturing: on this path it invalidates nothing
        Invalid(
            """
import torch

class ModelRunner:
    def maybe_invalidate_swa_loc_cache(self):
        if not self.capturing:
            self.token_to_kv_pool.invalidate_loc_cache()

class CudaGraphRunner:
    def __init__(self, model_runner: ModelRunner):
        self.model_runner = model_runner

    def capture_one_batch_size(self, bs, forward):
        def run_once():
            self.model_runner.capturing = True
            self.model_runner.maybe_invalidate_swa_loc_cache()
            return forward(self.input_ids[:bs])

        for _ in range(2):
            run_once()
        with torch.cuda.graph(self.graph):
            run_once()
""",
            line=17,
            files={"pool.py": DICT_POOL},
        ),
        # a warm-up loop with a functools-cached translate in the pool
        Invalid(
            """
import torch

class Runner:
    def capture(self, batch):
        for _ in range(2):
            self.model.forward(batch)
        self.token_to_kv_pool.invalidate_loc_cache()
        with torch.cuda.graph(self.graph):
            self.model.forward(batch)
""",
            line=7,
            files={"pool.py": LRU_POOL},
        ),
        # custom names from [tool.swacheck]
        Invalid(
            """
import torch

class Runner:
    def flush_translations(self):
        pass

    def capture(self, batch):
        for _ in range(2):
            self.model.forward(batch)
        with torch.cuda.graph(self.graph):
            out = self.model.forward(batch)
        return out
""",
            line=12,
            config={"invalidate-methods": ["flush_translations"]},
            files={"pool.py": _POOL.replace("invalidate_loc_cache", "flush_translations")},
        ),
    ]

    @classmethod
    def triggers(cls, config: Config) -> frozenset[str] | None:
        """An SWA word, the configured names, and the words of a capture or warm-up.

        A finding sits in a capture or warm-up structure: a ``*.graph(...)`` context
        (``graph``), ``capture_begin()``, a function or call named with ``capture``, or a
        function named as a warm-up (``warm``). Whether it is SWA code is decided by its
        own text (an SWA word: ``is_swa_word``, ``SWA`` or ``swa`` as a whole word, or a
        configured name) or by the classes it holds, which are looked up only among the
        files holding an SWA word or a configured name (``swa_class_resolver``), all of
        them triggers here. The configured names also make every file that takes part in
        summaries a candidate, and the file defining the invalidation method (the scope
        rule) too.
        """
        return frozenset(
            {word("swa"), exact("SWA"), *config_terms(config), "capture", "graph", "warm"}
        )

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        flow = function_flow(self.context, node)
        regions = capture_regions(flow)
        capture_args = closures_passed_to_capture(flow)
        warming = is_warmup_routine(node)
        capturing = bool(regions) or bool(capture_args) or is_capture_routine(node)
        if not (capturing or warming) or not swa_related(self.context, node):
            return
        in_loop = loop_nodes(flow)
        # Forward runs directly in this function.
        runs = ForwardRuns(self.context, node)
        checked = FunctionFlow(self.context, node, extra=runs)
        for cfg_node, position, step in runs.forwards(checked):
            if cfg_node in regions:
                where = "graph capture"
            elif cfg_node in in_loop:
                where = "graph warm-up loop"
            elif warming:
                where = f"warm-up `{node.name.value}()`"
            else:
                continue
            if not checked.data.clean_before(cfg_node, position):
                self._report(step.event, None, where, warm_up=warming and cfg_node not in regions)
        # Local functions run as capture bodies.
        bodies = set(capture_args)
        for name in flow.closures:
            for cfg_node, steps in enumerate(flow.analysis.events):
                if (cfg_node in regions or cfg_node in in_loop) and any(
                    e.kind == CALL and e.receiver is None and e.name == name for e in steps
                ):
                    bodies.add(name)
        for name in sorted(bodies):
            closure = flow.closures.get(name)
            if closure is not None:
                self._check_body(closure)

    def _check_body(self, closure: cst.FunctionDef) -> None:
        runs = ForwardRuns(self.context, closure)
        checked = FunctionFlow(self.context, closure, extra=runs)
        for cfg_node, position, step in runs.forwards(checked):
            if not checked.data.clean_before(cfg_node, position):
                self._report(step.event, closure, f"capture body `{closure.name.value}()`")
                return

    # -- reporting ----------------------------------------------------------------------

    def _report(
        self, event: Event, closure: cst.FunctionDef | None, where: str, warm_up: bool = False
    ) -> None:
        method = self.context.config.invalidate_methods[0]
        callee = f"{event.receiver}.{event.name}" if event.receiver else event.name
        harm = (
            "it may be served a translation an earlier run left in the cache"
            if warm_up
            else "a warm-up run's cached translation would be captured into the graph"
        )
        self.report(
            event.node,
            f"The {where} runs `{callee}()` without `{method}()` first: {harm} (I5)",
            fix=self._fix(closure) if closure is not None else None,
        )

    def _fix(self, closure: cst.FunctionDef) -> Fix | None:
        snippet = invalidation_snippet(self.context)
        if snippet is None:
            return None
        lines, root = snippet
        if root != "self":
            return None
        outer = self.context.enclosing(closure, cst.FunctionDef)
        if outer is None or not outer.params.params or outer.params.params[0].name.value != "self":
            return None
        body = closure.body
        if not isinstance(body, cst.IndentedBlock) or not body.body:
            return None
        anchor = body.body[0]
        if (
            isinstance(anchor, cst.SimpleStatementLine)
            and isinstance(anchor.body[0], cst.Expr)
            and isinstance(anchor.body[0].value, cst.SimpleString | cst.ConcatenatedString)
        ):
            if len(body.body) < 2:
                return None
            anchor = body.body[1]
        return self.context.insert_statements(
            anchor,
            lines,
            "Invalidate the translation cache at the top of the capture body",
            after=False,
            applicability=Applicability.UNSAFE,
        )
