"""Aliases, the write classifier, method summaries and the order queries."""

from __future__ import annotations

import pickle
import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from swacheck.analysis.aliases import local_aliases
from swacheck.analysis.cfg import build_cfg
from swacheck.analysis.index import ProjectIndex, index_module
from swacheck.analysis.names import Names
from swacheck.analysis.resolve import Target
from swacheck.analysis.scope import ScopeFacts
from swacheck.analysis.summaries import SummaryResolver
from swacheck.analysis.writes import WRITE, node_events
from swacheck.config import Config


def _function(source: str) -> cst.FunctionDef:
    function = cst.parse_module(textwrap.dedent(source)).body[0]
    assert isinstance(function, cst.FunctionDef)
    return function


def _writes(source: str) -> list[tuple[str, str, str | None]]:
    function = _function(source)
    cfg = build_cfg(function)
    aliases = local_aliases([n.stmt for n in cfg.nodes if n.stmt is not None])
    out = []
    for node in cfg.nodes:
        for event in node_events(node.exprs, aliases):
            if event.kind == WRITE:
                out.append((event.name, event.how, event.via))
    return out


def test_write_classifier() -> None:
    writes = _writes(
        """
        def f(self, idx, src):
            self.m = torch.empty(3)
            self.m[idx] = 0
            self.m += 1
            self.m.fill_(0)
            self.m[:-1].index_put_((idx,), src)
            torch.index_put_(self.m, (idx,), src)
            torch.index_select(src, 0, idx, out=self.m)
            kernel[(1,)](self.m, idx)
            self.m.requires_grad_(False)
            x = self.m[idx]
            x.zero_()
            y = self.m.clone()
            y.zero_()
        """
    )
    hows = [h for name, h, _ in writes if name == "m"]
    assert hows == [
        "assignment",
        "subscript store",
        "augmented assignment",
        "in-place `fill_()`",
        "in-place `index_put_()`",
        "`torch.index_put_()`",
        "`out=` argument",
        "kernel launch",
    ]


def test_aliases_views_and_unpacking() -> None:
    writes = _writes(
        """
        def f(self, flag):
            t = self.m
            t[:-1].fill_(0)
            a, b = self.m[1:], self.other
            a.zero_()
            u = t.view(-1)
            u[0] = 1
            if flag:
                z = self.m
            else:
                z = torch.zeros(3)
            z.zero_()
        """
    )
    assert ("m", "in-place `fill_()`", "t") in writes
    assert ("m", "in-place `zero_()`", "a") in writes
    assert ("m", "subscript store", "u") in writes
    # ``z`` is the mapping on one branch only: not an alias
    assert not [w for w in writes if w[2] == "z"]


def test_conditional_events() -> None:
    function = _function(
        """
        def f(self):
            ok and self.pool.invalidate_loc_cache()
        """
    )
    cfg = build_cfg(function)
    events = [e for n in cfg.nodes for e in node_events(n.exprs, {})]
    (call,) = [e for e in events if e.name == "invalidate_loc_cache"]
    assert call.conditional and call.receiver == "self.pool"


def _project(files: dict[str, str]) -> ProjectIndex:
    modules = []
    for path, text in files.items():
        wrapper = MetadataWrapper(cst.parse_module(textwrap.dedent(text)))
        facts = index_module(wrapper.module, path, positions=wrapper.resolve(PositionProvider))
        for code in ("SWA001",):
            facts.rule_facts[code] = ScopeFacts(True, True)
        modules.append(facts)
    return ProjectIndex(modules)


FILES = {
    "pool.py": """
        class BasePool:
            def invalidate_loc_cache(self):
                pass

            def translate_loc_from_full_to_swa(self, loc):
                if self._cached is None:
                    self._cached = self.full_to_swa_index_mapping[loc]
                return self._cached

        class SWAKVPool(BasePool):
            def invalidate_loc_cache(self):
                self._cached = None

            def reset(self, flag):
                if flag:
                    self.invalidate_loc_cache()
                    return
                self._helper()

            def _helper(self):
                self.invalidate_loc_cache()

            def warm(self, loc):
                self.invalidate_loc_cache()
                self.translate_loc_from_full_to_swa(loc)

            def _set(self, idx):
                self.full_to_swa_index_mapping[idx] = 0

            def free(self, idx):
                self._set(idx)
                self.invalidate_loc_cache()
    """,
    "alloc.py": """
        from pool import SWAKVPool

        class Allocator:
            def __init__(self, kvcache: SWAKVPool):
                self._kvcache = kvcache

            def flush(self):
                self._kvcache.reset(False)

            def maybe(self, x):
                if x:
                    self._kvcache.invalidate_loc_cache()
    """,
}


def _resolver() -> SummaryResolver:
    project = _project(FILES)
    return SummaryResolver(project, Names(Config()), frozenset(FILES))


def test_summaries_follow_helpers_across_files() -> None:
    resolver = _resolver()
    reset = resolver.summary(Target("pool.py", "SWAKVPool.reset", "SWAKVPool", "reset"))
    assert reset.must_invalidate and reset.leaves_clean and not reset.may_fill
    warm = resolver.summary(Target("pool.py", "SWAKVPool.warm", "SWAKVPool", "warm"))
    assert warm.must_invalidate and warm.may_fill and not warm.leaves_clean
    # the allocator (another file) calls the pool through a typed attribute
    flush = resolver.summary(Target("alloc.py", "Allocator.flush", "Allocator", "flush"))
    assert flush.must_invalidate
    maybe = resolver.summary(Target("alloc.py", "Allocator.maybe", "Allocator", "maybe"))
    assert not maybe.must_invalidate


def test_private_helper_delegates_to_same_file_callers() -> None:
    resolver = _resolver()
    target = Target("pool.py", "SWAKVPool._set", "SWAKVPool", "_set")
    summary = resolver.summary(target)
    assert summary.writes_mapping and summary.uncovered_write is not None
    assert resolver.delegates(target)
    free = resolver.summary(Target("pool.py", "SWAKVPool.free", "SWAKVPool", "free"))
    assert free.writes_mapping and free.uncovered_write is None


def test_inherited_method_resolution() -> None:
    resolver = _resolver()
    info = resolver.resolve_class("SWAKVPool")
    assert info is not None
    target = resolver.find_method(info, "translate_loc_from_full_to_swa")
    assert target is not None and target.cls == "BasePool"
    assert resolver.find_method(info, "invalidate_loc_cache").cls == "SWAKVPool"  # type: ignore[union-attr]


def test_index_is_picklable() -> None:
    project = _project(FILES)
    again = pickle.loads(pickle.dumps(project))
    assert again.function("pool.py", "SWAKVPool.reset") == project.function(
        "pool.py", "SWAKVPool.reset"
    )
    # the index API other rules use still works
    info = again.resolve_class("SWAKVPool")
    assert info is not None and [c.name for c in again.mro(info)] == ["SWAKVPool", "BasePool"]
    assert again.find_method(info, "translate_loc_from_full_to_swa") is not None
    assert "full_to_swa_index_mapping" not in again.owned_attributes(info)
    alloc = again.resolve_class("Allocator")
    assert alloc is not None and alloc.attribute_types == {"_kvcache": "SWAKVPool"}


def test_device_extension_inplace_functions_write_their_first_argument() -> None:
    # ``torch_npu.npu_scatter_nd_update_(table, idx, src)`` updates ``table`` like
    # ``torch.index_put_``; a tensor method's first argument is only read.
    writes = _writes(
        """
        def f(self, idx, src, buf):
            torch_npu.npu_scatter_nd_update_(self.m, idx, src)
            buf.copy_(self.m)
            torch.ops.my_ext.fill_rows_(self.m, idx)
        """
    )
    assert [(name, how) for name, how, _ in writes] == [
        ("m", "`torch_npu.npu_scatter_nd_update_()`"),
        ("m", "`torch.ops.my_ext.fill_rows_()`"),
    ]


def test_swa_mode_flags_are_predicates_about_swa_itself() -> None:
    from swacheck.analysis.modes import is_swa_mode_flag

    for name in ("is_hybrid_swa", "has_swa", "HAS_SWA", "use_swa", "is_swa_enabled"):
        assert is_swa_mode_flag(name), name
    # sub-modes and layer kinds go either way in SWA mode
    for name in ("_swa_req_ring", "is_swa_layer", "is_hybrid_swa_compress", "_skip_swa"):
        assert not is_swa_mode_flag(name), name


CONDITIONAL = {
    "pool.py": FILES["pool.py"],
    "runner.py": """
        from pool import SWAKVPool

        class ModelRunner:
            def __init__(self, pool: SWAKVPool):
                self.token_to_kv_pool = pool

            def maybe_invalidate(self):
                if not self.capturing:
                    self.token_to_kv_pool.invalidate_loc_cache()

            def invalidate_if(self, force):
                if force:
                    self.token_to_kv_pool.invalidate_loc_cache()

            def eager(self):
                self.maybe_invalidate()

            def while_capturing(self):
                if self.capturing:
                    self.maybe_invalidate()

            def after_setting(self):
                self.capturing = True
                self.maybe_invalidate()

            def forced(self):
                self.invalidate_if(True)

            def unforced(self):
                self.invalidate_if(force=False)

            def left_open(self, flag):
                self.invalidate_if(flag)

        class GraphRunner:
            def __init__(self, model_runner: ModelRunner):
                self.model_runner = model_runner

            def run_once(self):
                if self.model_runner.capturing:
                    self.model_runner.maybe_invalidate()
    """,
}


def _summary(resolver: SummaryResolver, path: str, cls: str, name: str):  # type: ignore[no-untyped-def]
    return resolver.summary(Target(path, f"{cls}.{name}", cls, name))


def test_a_helper_invalidating_on_a_condition_of_state_counts_where_the_caller_leaves_it_open() -> (
    None
):
    project = _project(CONDITIONAL)
    resolver = SummaryResolver(project, Names(Config()), frozenset(CONDITIONAL))
    helper = _summary(resolver, "runner.py", "ModelRunner", "maybe_invalidate")
    assert helper.must_invalidate and helper.leaves_clean
    assert _summary(resolver, "runner.py", "ModelRunner", "eager").must_invalidate
    # the caller's own path decides the helper's condition: on the path where
    # `self.capturing` holds the helper does nothing
    capturing = _summary(resolver, "runner.py", "ModelRunner", "while_capturing")
    assert not capturing.must_invalidate and not capturing.may_invalidate
    assert not _summary(resolver, "runner.py", "ModelRunner", "after_setting").must_invalidate
    # the caller's facts about `self.model_runner.capturing` are the helper's `self.capturing`
    run_once = _summary(resolver, "runner.py", "GraphRunner", "run_once")
    assert not run_once.must_invalidate and not run_once.may_invalidate


def test_a_helper_invalidating_on_a_parameter_invalidates_when_its_caller_says_so() -> None:
    project = _project(CONDITIONAL)
    resolver = SummaryResolver(project, Names(Config()), frozenset(CONDITIONAL))
    helper = _summary(resolver, "runner.py", "ModelRunner", "invalidate_if")
    assert not helper.must_invalidate and helper.may_invalidate
    assert helper.effects == (("inv", True),)
    assert _summary(resolver, "runner.py", "ModelRunner", "forced").must_invalidate
    unforced = _summary(resolver, "runner.py", "ModelRunner", "unforced")
    assert not unforced.must_invalidate and not unforced.may_invalidate
    left_open = _summary(resolver, "runner.py", "ModelRunner", "left_open")
    assert not left_open.must_invalidate and left_open.may_invalidate


def test_conditions_say_what_holds_on_each_edge() -> None:
    from swacheck.analysis.cfg import FALSE, TRUE
    from swacheck.analysis.conditions import carry_facts, condition_of
    from swacheck.analysis.writes import CALL, Event

    test = cst.parse_expression("self.ready and not (force or self.capturing)")
    condition = condition_of(3, test, {4: TRUE, 5: FALSE}, ("self", "force"))
    # a compound operand is kept for its parameter, but no caller can decide it
    assert [(o.text, o.negated, o.param) for o in condition.operands] == [
        ("self.ready", False, False),
        ("", True, True),
    ]
    assert condition.implied(TRUE) == (("self.ready", True),)
    assert condition.implied(FALSE) == ()  # one of them failed, which one is unknown
    assert condition.value({"self.ready": False}) is False
    assert condition.value({"self.ready": True}) is None
    assert not condition.state_only({})
    state = condition_of(3, cst.parse_expression("not self.is_capturing()"), {4: TRUE}, ())
    assert [(o.text, o.negated, o.param) for o in state.operands] == [
        ("self.is_capturing()", True, False)
    ]
    assert state.state_only({}) and state.value({"self.is_capturing()": True}) is False
    call = Event(CALL, "helper", "self.runner", literals=(("0", "True"), ("flag", "None")))
    carried = carry_facts(
        call, {"self.runner.capturing": True, "self.other": False}, ("self", "force", "flag"), True
    )
    assert carried == frozenset({("self.capturing", True), ("force", True), ("flag", False)})
