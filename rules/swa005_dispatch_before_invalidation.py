"""SWA005 dispatch-before-invalidation."""

from __future__ import annotations

import libcst as cst

from swacheck.analysis.dataflow import INV
from swacheck.analysis.order import FunctionFlow, function_flow
from swacheck.analysis.scope import config_terms
from swacheck.analysis.writes import CALL, Event
from swacheck.config import Config
from swacheck.order_rule import (
    BACKEND_POOL,
    DICT_POOL,
    HELPER_POOL,
    LRU_POOL,
    MEMOISING_POOL,
    OrderRule,
)
from swacheck.rule import Invalid, Valid

_POOL = MEMOISING_POOL
_POOL_FILE = {"pool.py": _POOL}


def is_replay(event: Event) -> bool:
    return event.kind == CALL and event.name.startswith("replay")


def is_eager_forward(event: Event, own_name: str) -> bool:
    """``self.forward_decode(...)``, ``self.model.forward(...)``, ``init_forward_metadata``."""
    if event.kind != CALL or event.name == own_name:
        return False
    return event.name.startswith("forward") or event.name == "init_forward_metadata"


class DispatchBeforeInvalidation(OrderRule):
    """
    ## What it does
    In a function that dispatches a forward to CUDA-graph replay (a `replay*` call) and
    invalidates the translation cache on some path, flags every dispatch that some path
    reaches without passing an invalidation first: the replay, and eager forwards
    (`forward*` calls, `init_forward_metadata`). The invalidation must dominate all
    dispatches. It counts however it is made: a call of an invalidation method, of a
    helper that invalidates (the runner's own `maybe_invalidate_swa_loc_cache()`, a
    base class's, another file's), or an inline reset of what the invalidation resets.
    The eager path may be named anything (`self._eager(batch)`, `self.run_model(batch)`):
    a replay reached before the invalidation the function's other path performs is
    flagged whatever that path calls. A callee that invalidates before it dispatches
    (`replay_prepare` starting with the invalidation) counts from after its
    invalidation. A mode guard (`if self.is_hybrid_swa:`) is taken as true.

    A helper that invalidates on a condition counts per path: a condition on its
    object's state that the dispatcher's path leaves open (`if not self.capturing:` in
    the runner's `maybe_invalidate_swa_loc_cache()`) is taken as the helper's judgement;
    one the dispatcher's path decides (a test of it, an assignment of `True`/`False`, a
    literal argument) as decided; one on what the dispatcher passes
    (`if forward_batch.forward_mode.is_decode():`) as a branch, so a dispatch after it is
    reached without an invalidation on the other branch.

    The rule applies where the audit holds a translation cache or one cannot be ruled
    out (DESIGN.md's scope rules; see SWA001 for the shapes: a memoising translate, a
    dict, a helper object, a `functools` cache, a cache of another object that the
    invalidation drops) and defines an invalidation method: a dispatch runs the model,
    which may be served from any such cache.

    ## Why is this bad?
    Every forward path (eager, graph replay, piecewise, breakable) must start from an
    invalidated translation cache (I6), or the attention metadata built for the batch
    translates a previous batch's locations from a stale cache entry. SGLang PR
    #26152 moved `self.token_to_kv_pool.invalidate_loc_cache()` in `_forward_raw` from
    the eager path, after the `if can_run_graph: return replay(...)` early return, to
    before it: graph replays had been running on the previous batch's cache (and
    logging a warning on every step).
    """

    code = "SWA005"
    name = "dispatch-before-invalidation"
    summary = "Forward dispatch reachable without invalidating the translation cache"
    config_keys = ("invalidate-methods", "translate-methods", "mapping-attributes")
    invariant = "I6"
    origin = "SGLang PR #26152"

    VALID = [
        # #26152's fix: invalidate before choosing replay or eager
        Valid(
            """
class ModelRunner:
    def _forward_raw(self, forward_batch, can_run_graph):
        if self.is_hybrid_swa:
            self.token_to_kv_pool.invalidate_loc_cache()
        if can_run_graph:
            ret = self.graph_runner.replay(forward_batch)
            return ret
        if forward_batch.forward_mode.is_decode():
            return self.forward_decode(forward_batch)
        return self.forward_extend(forward_batch)
""",
            files=_POOL_FILE,
        ),
        # an early return that dispatches nothing needs no invalidation
        Valid(
            """
class ModelRunner:
    def invalidate_loc_cache(self):
        pass

    def forward(self, batch):
        if batch is None:
            return None
        self.invalidate_loc_cache()
        if self.can_run(batch):
            return self.graph_runner.replay(batch)
        return self.forward_decode(batch)
""",
            files=_POOL_FILE,
        ),
        # the invalidation through a helper of the same class, in a try/finally
        Valid(
            """
class ModelRunner:
    def invalidate_loc_cache(self):
        pass

    def _reset_swa(self):
        self.token_to_kv_pool.invalidate_loc_cache()

    def forward(self, batch):
        try:
            self._reset_swa()
            if self.can_run(batch):
                return self.graph_runner.replay(batch)
            return self.forward_extend(batch)
        finally:
            self.invalidate_loc_cache()
""",
            files=_POOL_FILE,
        ),
        # a dispatcher that never invalidates is left to its caller
        Valid(
            """
class ModelRunner:
    def invalidate_loc_cache(self):
        pass

    def _forward_raw(self, batch, can_run_graph):
        if can_run_graph:
            return self.graph_runner.replay(batch)
        return self.forward_decode(batch)
""",
            files=_POOL_FILE,
        ),
        # loops: each iteration invalidates before its dispatch
        Valid(
            """
class ModelRunner:
    def invalidate_loc_cache(self):
        pass

    def forward_split(self, batches):
        for batch in batches:
            self.invalidate_loc_cache()
            if self.can_run(batch):
                self.graph_runner.replay(batch)
            else:
                self.forward_extend(batch)
""",
            files=_POOL_FILE,
        ),
        # the callee invalidates before it dispatches
        Valid(
            """
class GraphRunner:
    def replay_prepare(self, batch):
        self.model_runner.token_to_kv_pool.invalidate_loc_cache()
        self.buffers.populate(batch)

    def replay(self, batch):
        self.replay_prepare(batch)
        return self.graphs[batch.batch_size].replay()
""",
            files=_POOL_FILE,
        ),
        # the #26152 fix through the runner's own helper
        Valid(
            """
class ModelRunner:
    def reset_swa_translations(self):
        if self.is_hybrid_swa:
            self.token_to_kv_pool.invalidate_loc_cache()

    def run_batch(self, batch):
        self.reset_swa_translations()
        if self.graph_runner.can_run(batch):
            return self.graph_runner.replay(batch)
        return self._eager(batch)
""",
            files=_POOL_FILE,
        ),
        # the #26152 fix through a helper that skips the invalidation while capturing:
        # the dispatcher leaves `self.capturing` open, so the helper's judgement stands
        Valid(
            """
class ModelRunner:
    def maybe_invalidate_swa_loc_cache(self):
        if not self.capturing:
            self.token_to_kv_pool.invalidate_loc_cache()

    def _forward_raw(self, forward_batch, can_run_graph):
        self.maybe_invalidate_swa_loc_cache()
        if can_run_graph:
            return self.graph_runner.replay(forward_batch)
        return self.forward_decode(forward_batch)
""",
            files={"pool.py": DICT_POOL},
        ),
        # a cache held by the backend, dropped by the pool's invalidation before both
        Valid(
            """
class ModelRunner:
    def forward(self, batch):
        self.token_to_kv_pool.invalidate_loc_cache()
        if self.graph_runner.can_run(batch):
            return self.graph_runner.replay(batch)
        return self.forward_extend(batch)
""",
            files={"pool.py": BACKEND_POOL},
        ),
    ]
    INVALID = [
        # #26152: the replay branch returns before the invalidation
        Invalid(
            """
class ModelRunner:
    def _forward_raw(self, forward_batch, can_run_graph):
        if can_run_graph:
            ret = self.graph_runner.replay(forward_batch)
            return ret
        forward_batch.prepare_attn_tp_scatter_input(self)
        if self.is_hybrid_swa:
            self.token_to_kv_pool.invalidate_loc_cache()
        if forward_batch.forward_mode.is_decode():
            return self.forward_decode(forward_batch)
        return self.forward_extend(forward_batch)
""",
            line=5,
            files=_POOL_FILE,
        ),
        # #26152 through a helper: the invalidation is the runner's own method, and the
        # replay returns before it
        Invalid(
            """
class ModelRunner:
    def reset_swa_translations(self):
        if self.is_hybrid_swa:
            self.token_to_kv_pool.invalidate_loc_cache()

    def run_batch(self, batch):
        if self.graph_runner.can_run(batch):
            return self.graph_runner.replay(batch)
        self.reset_swa_translations()
        return self.forward_decode(batch)
""",
            line=9,
            files=_POOL_FILE,
        ),
        # whatever the eager path is called, the replay skips the invalidation
        Invalid(
            """
class Runner:
    def step(self, batch):
        if self.use_graph:
            out = self.graph.replay()
            return out
        self.pool.invalidate_loc_cache()
        return self.run_model(batch)
""",
            line=5,
            files=_POOL_FILE,
        ),
        # the invalidation sits in one branch only
        Invalid(
            """
class ModelRunner:
    def invalidate_loc_cache(self):
        pass

    def forward(self, batch):
        if batch.forward_mode.is_decode():
            self.invalidate_loc_cache()
        if self.can_run(batch):
            return self.piecewise_cuda_graph_runner.replay(batch)
        return self.forward_extend(batch)
""",
            line=10,
            files=_POOL_FILE,
        ),
        # the invalidation comes after the dispatch
        Invalid(
            """
class ModelRunner:
    def invalidate_loc_cache(self):
        pass

    def forward(self, batch):
        if self.can_run(batch):
            out = self.graph_runner.replay(batch)
        else:
            out = self.forward_decode(batch)
        self.invalidate_loc_cache()
        return out
""",
            line=8,
            files=_POOL_FILE,
        ),
        # inherited helper (another file) invalidates, but only on the eager path
        Invalid(
            """
from base import BaseRunner

class ModelRunner(BaseRunner):
    def forward(self, batch):
        if self.can_run(batch):
            return self.graph_runner.replay(batch)
        self._reset_swa()
        self.token_to_kv_pool.invalidate_loc_cache()
        return self.forward_extend(batch)
""",
            line=7,
            files={
                **_POOL_FILE,
                "base.py": """
class BaseRunner:
    def invalidate_loc_cache(self):
        pass

    def _reset_swa(self):
        self.invalidate_loc_cache()
""",
            },
        ),
        # #26152 through a helper that skips the invalidation while capturing: the
        # replay returns before the helper is called at all
        Invalid(
            """
class ModelRunner:
    def maybe_invalidate_swa_loc_cache(self):
        if not self.capturing:
            self.token_to_kv_pool.invalidate_loc_cache()

    def _forward_raw(self, forward_batch, can_run_graph):
        if can_run_graph:
            return self.graph_runner.replay(forward_batch)
        self.maybe_invalidate_swa_loc_cache()
        return self.forward_decode(forward_batch)
""",
            line=9,
            files={"pool.py": HELPER_POOL},
        ),
        # the helper invalidates for decode batches only: a condition on what its caller
        # passes, which the dispatcher leaves open
        Invalid(
            """
class ModelRunner:
    def reset_swa(self, forward_batch):
        if forward_batch.forward_mode.is_decode():
            self.token_to_kv_pool.invalidate_loc_cache()

    def forward(self, forward_batch):
        self.reset_swa(forward_batch)
        if self.graph_runner.can_run(forward_batch):
            return self.graph_runner.replay(forward_batch)
        return self.forward_extend(forward_batch)
""",
            line=10,
            files={"pool.py": LRU_POOL},
        ),
        # custom names from [tool.swacheck]
        Invalid(
            """
class ModelRunner:
    def flush_translations(self):
        pass

    def forward(self, batch):
        if self.can_run(batch):
            return self.graph_runner.replay(batch)
        self.pool.flush_translations()
        return self.forward_decode(batch)
""",
            line=8,
            config={"invalidate-methods": ["flush_translations"]},
            files={"pool.py": _POOL.replace("invalidate_loc_cache", "flush_translations")},
        ),
    ]

    @classmethod
    def triggers(cls, config: Config) -> frozenset[str] | None:
        """``replay`` and the mapping, invalidation and translation names.

        A finding needs a dispatcher that calls a ``replay*`` method, so its file holds
        ``replay``; its invalidation may come through a helper of another file. The
        configured names are added so that every file that takes part in summaries is
        parsed, whichever order rules are selected (see ``scope.relevant_text``), and
        the file defining the invalidation method (the scope rule) always is.
        """
        return frozenset({*config_terms(config), "replay"})

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        flow = function_flow(self.context, node)
        if not flow.any_step(INV):
            return  # a dispatcher that never invalidates is left to its caller
        dispatches: list[tuple[int, int, Event]] = []
        reach = flow.data.reach
        for cfg_node, steps in enumerate(flow.analysis.events):
            if cfg_node not in reach:
                continue
            for event in steps:
                if is_replay(event) or is_eager_forward(event, flow.name):
                    dispatches.append((cfg_node, self._position(flow, cfg_node, event), event))
        if not any(is_replay(e) for _, _, e in dispatches):
            return
        for cfg_node, position, event in dispatches:
            if flow.invalidated_before(cfg_node, position):
                continue
            self._report(flow, cfg_node, event)

    @staticmethod
    def _position(flow: FunctionFlow, cfg_node: int, event: Event) -> int:
        """The effect position where an event dispatches: after the invalidation its
        callee makes first (``replay_prepare`` invalidating before it populates), else
        where its effects start."""
        steps = flow.steps[cfg_node]
        for position, step in enumerate(steps):
            if step.event is event:
                while (
                    position < len(steps)
                    and steps[position].event is event
                    and steps[position].kind == INV
                ):
                    position += 1
                return position
        # Events with no effect of their own: count the effects of earlier events.
        count = 0
        for other in flow.analysis.events[cfg_node]:
            if other is event:
                return count
            count += sum(1 for s in flow.steps[cfg_node] if s.event is other)
        return count

    def _report(self, flow: FunctionFlow, cfg_node: int, event: Event) -> None:
        method = self.context.config.invalidate_methods[0]
        kind = "graph replay" if is_replay(event) else "eager forward"
        callee = f"{event.receiver}.{event.name}" if event.receiver else event.name
        how = flow.describe_entry_path(cfg_node)
        where = f" {how}," if how else ""
        invalidations = sorted(
            {
                step.event.line
                for steps in flow.steps
                for step in steps
                if step.kind == INV and step.event.line
            }
        )
        at = (
            f" (the invalidation at line {invalidations[0]} does not precede it on every path)"
            if invalidations
            else ""
        )
        self.report(
            event.node,
            f"{kind.capitalize()} `{callee}()` is reached{where} without "
            f"`{method}()` first{at}; invalidate before dispatching (I6)",
        )
