"""The semantic core (``swacheck.semantics``): symbolic values, paths, spaces and dtypes.

Each test runs the real first pass (CPython's parse, the symbolic execution of every
function) over small programs and asks the same queries the rules ask.
"""

from __future__ import annotations

import ast
import pickle
import sys
import textwrap
from pathlib import Path

import pytest

from swacheck.config import Config
from swacheck.semantics.dtypes import Dtypes
from swacheck.semantics.function import BIND, CALL, FILL
from swacheck.semantics.model import FULL, SWA
from swacheck.semantics.module import module_facts
from swacheck.semantics.roles import project_roles
from swacheck.semantics.terms import (
    Attr,
    Call,
    Const,
    Filled,
    Global,
    Local,
    Param,
    Phi,
    alternatives,
    consistent,
    phi,
)
from swacheck.semantics.unit import Analysis
from swacheck.semantics.uses import LOCATION, Use, uses
from swacheck.semantics.values import Ctx


def analysis(**files: str) -> Analysis:
    modules = []
    for name, code in files.items():
        code = textwrap.dedent(code)
        modules.append(module_facts(ast.parse(code), code, f"{name}.py"))
    return Analysis(modules, Config())


def bound(result: Analysis, function: str, name: str) -> tuple:
    """The value the last binding of ``name`` in ``function`` gives, and its context."""
    fn = result.project.functions[function]
    events = [e for e in fn.facts.events if e.kind == BIND and e.text == name]
    assert events, f"{name} is never bound in {function}"
    return events[-1].value, Ctx(fn)


def spaces(result: Analysis, function: str, name: str) -> set[str]:
    value, ctx = bound(result, function, name)
    return {f.space for f in result.values.space(value, ctx)}


# -- terms ------------------------------------------------------------------------------


def test_terms_are_values_hashed_once_and_pickled_whole() -> None:
    a = Attr(Param("forward_batch"), "out_cache_loc")
    b = Attr(Param("forward_batch"), "out_cache_loc")
    assert a == b and hash(a) == hash(b) and a is not b
    assert Param("x") != Local("x") != Global("x")
    assert pickle.loads(pickle.dumps(Call(a, (Const(1),)))) == Call(b, (Const(1),))


def test_a_join_keeps_each_value_with_what_chooses_it() -> None:
    yes = frozenset({(Param("flag"), True)})
    no = frozenset({(Param("flag"), False)})
    joined = phi([(yes, Param("a")), (no, Param("b")), (yes, Param("a"))])
    assert isinstance(joined, Phi)
    assert dict((t, g) for g, t in alternatives(joined)) == {Param("a"): yes, Param("b"): no}
    assert not consistent(yes, no) and consistent(yes, yes)
    # one value, whatever the paths, is that value
    assert phi([(yes, Param("a")), (no, Param("a"))]) == Param("a")


# -- paths ------------------------------------------------------------------------------


def test_a_binding_on_one_branch_never_reaches_a_use_on_the_other() -> None:
    result = analysis(
        m="""
        def f(self, draft):
            if draft:
                dt = torch.int64
                x = torch.zeros(4, dtype=dt)
            else:
                dt = torch.int32
                y = torch.zeros(4, dtype=dt)
        """
    )
    value, _ = bound(result, "m.f", "y")
    assert isinstance(value, Call) and value.keyword("dtype") == Global("torch.int32")


def test_two_tests_of_one_value_line_up_across_statements() -> None:
    result = analysis(
        m="""
        class Pool:
            def store(self, layer, loc, swa_loc):
                is_swa = self.layers_mapping[layer][1]
                pool = self.swa_kv_pool if is_swa else self.full_kv_pool
                if is_swa:
                    loc = swa_loc
                pool.set_kv_buffer(None, loc)
        """
    )
    fn = result.project.functions["m.Pool.store"]
    call = next(e.value for e in fn.facts.events if e.kind == CALL)
    receivers = alternatives(call.func.base)
    locations = alternatives(call.args[1])
    pairs = {
        (r.name, getattr(loc, "name", None))
        for rg, r in receivers
        for lg, loc in locations
        if consistent(rg, lg)
    }
    assert pairs == {("swa_kv_pool", "swa_loc"), ("full_kv_pool", "loc")}


def test_a_loop_carries_its_values_round_once_more() -> None:
    result = analysis(
        m="""
        def f(xs):
            last = None
            for x in xs:
                prev = last
                last = x
            return prev
        """
    )
    fn = result.project.functions["m.f"]
    assert any(isinstance(t, Const) for _, t in alternatives(fn.facts.returns))
    assert any(not isinstance(t, Const) for _, t in alternatives(fn.facts.returns))


def test_an_in_place_write_changes_what_the_local_holds() -> None:
    result = analysis(
        m="""
        def f(pool, n, req_to_token, rows):
            idx = req_to_token[rows]
            idx[:n] = pool.translate_loc_from_full_to_swa(idx[:n])
            return idx
        """
    )
    returned = result.project.functions["m.f"].facts.returns
    assert isinstance(returned, Filled)
    fills = [e for e in result.project.functions["m.f"].facts.events if e.kind == FILL]
    assert fills and fills[0].target == Local("idx")


def test_a_nested_function_reads_its_enclosing_values() -> None:
    result = analysis(
        m="""
        class Runner:
            def capture(self):
                def run_once():
                    self.model_runner.forward(self.batch)
                run_once()
        """
    )
    inner = result.project.functions["m.Runner.capture.<locals>.run_once"]
    call = next(e.value for e in inner.facts.events if e.kind == CALL)
    assert call.func == Attr(Attr(Param("self"), "model_runner"), "forward")


# -- spaces -----------------------------------------------------------------------------


def test_spaces_follow_sources_translations_and_helpers_across_files() -> None:
    result = analysis(
        pool="""
        class SWAKVPool:
            def translate_loc_from_full_to_swa(self, kv_indices):
                return self.full_to_swa_index_mapping[kv_indices]
        """,
        backend="""
        from pool import SWAKVPool

        class Backend:
            def __init__(self, pool: SWAKVPool):
                self.pool = pool

            def _full(self, forward_batch):
                return forward_batch.out_cache_loc[: forward_batch.n]

            def init(self, forward_batch):
                full = self._full(forward_batch)
                swa = self.pool.translate_loc_from_full_to_swa(full)
                gathered = self.pool.full_to_swa_index_mapping[full]
        """,
    )
    assert spaces(result, "backend.Backend.init", "full") == {FULL}
    assert spaces(result, "backend.Backend.init", "swa") == {SWA}
    assert spaces(result, "backend.Backend.init", "gathered") == {SWA}


@pytest.mark.parametrize("above", ["python/", "../../checkout/", "/abs/checkout/python/"])
def test_imports_resolve_in_a_tree_audited_from_above_its_import_root(above: str) -> None:
    """``python/sglang/...`` of a checkout, or a folder given from elsewhere, spells its
    imports from below the path its files are keyed by."""
    files = {
        "sglang/srt/pool.py": """
        SINK = 0

        class SWAKVPool:
            def translate_loc_from_full_to_swa(self, kv_indices):
                return self.full_to_swa_index_mapping[kv_indices]
        """,
        "sglang/srt/backend.py": """
        from sglang.srt.pool import SINK, SWAKVPool

        class Backend:
            def __init__(self, pool: SWAKVPool):
                self.pool = pool

            def init(self, forward_batch):
                swa = self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)
        """,
    }
    modules = []
    for path, code in files.items():
        code = textwrap.dedent(code)
        modules.append(module_facts(ast.parse(code), code, above + path))
    result = Analysis(modules, Config())
    pool = result.project.class_named("sglang.srt.pool.SWAKVPool")
    assert pool is not None and pool.qual.endswith(".sglang.srt.pool.SWAKVPool")
    assert result.project.global_value("sglang.srt.pool.SINK") is not None
    backend = next(q for q in result.project.functions if q.endswith("Backend.init"))
    assert spaces(result, backend, "swa") == {SWA}


def test_a_parameter_the_function_translates_is_a_full_location() -> None:
    result = analysis(
        m="""
        def alloc_decode(self, seq_lens, last_loc):
            swa_last_loc = self.translate_loc_from_full_to_swa(last_loc)
            return swa_last_loc
        """
    )
    fn = result.project.functions["m.alloc_decode"]
    assert {f.space for f in result.values.space(Param("last_loc"), Ctx(fn))} == {FULL}


def test_a_per_kind_call_is_in_the_space_its_kind_names() -> None:
    result = analysis(
        m="""
        def f(translator, forward_batch, plan):
            window = translator.write_ids(forward_batch, IdSpaceKind.SLIDING_WINDOW)
            default = translator.write_ids(forward_batch)
            table = translator.read_table(plan, kind=IdSpaceKind.SLIDING_WINDOW).ids
        """
    )
    assert spaces(result, "m.f", "window") == {SWA}
    assert spaces(result, "m.f", "default") == {FULL}
    assert spaces(result, "m.f", "table") == {SWA}


def test_a_hybrid_pools_halves_are_its_two_spaces() -> None:
    result = analysis(
        m="""
        class Hybrid:
            def __init__(self, full, swa):
                self.full_kv_pool = full
                self.swa_kv_pool = swa
                self.other_pool = swa
        """
    )
    fn = result.project.functions["m.Hybrid.__init__"]
    ctx = Ctx(fn)
    values = result.values
    assert values.container_space(Attr(Param("self"), "swa_kv_pool"), ctx) == SWA
    assert values.container_space(Attr(Param("self"), "full_kv_pool"), ctx) == FULL
    assert values.container_space(Attr(Param("self"), "other_pool"), ctx) is None


# -- dtypes -----------------------------------------------------------------------------


def dtypes_of(result: Analysis, function: str, name: str) -> set[str]:
    value, ctx = bound(result, function, name)
    return {d.dtype for d in Dtypes(result.values).of(value, ctx)}


def test_dtypes_of_factories_casts_and_other_tensors() -> None:
    result = analysis(
        m="""
        def f(n, forward_batch):
            a = torch.arange(n)
            b = torch.zeros(n)
            c = torch.empty(n, dtype=forward_batch.out_cache_loc.dtype)
            d = a.int()
            e = torch.full((n,), 0)
            g = torch.empty_like(forward_batch.out_cache_loc)
        """
    )
    assert dtypes_of(result, "m.f", "a") == {"int64"}
    assert dtypes_of(result, "m.f", "b") == {"float32"}
    assert dtypes_of(result, "m.f", "c") == {"int64"}  # the model: out_cache_loc is int64
    assert dtypes_of(result, "m.f", "d") == {"int32"}
    assert dtypes_of(result, "m.f", "e") == {"int64"}
    assert dtypes_of(result, "m.f", "g") == {"int64"}


def test_a_helpers_dtype_parameter_takes_what_its_caller_passes() -> None:
    result = analysis(
        m="""
        def alloc(n, dtype=torch.int64):
            return torch.zeros(n, dtype=dtype)

        def f(n):
            kept = alloc(n)
            passed = alloc(n, dtype=torch.int32)
        """
    )
    assert dtypes_of(result, "m.f", "kept") == {"int64"}
    assert dtypes_of(result, "m.f", "passed") == {"int32"}


# -- robustness -------------------------------------------------------------------------

_REAL_FILES = [
    path
    for path in [
        Path(ast.__file__),
        Path(textwrap.__file__),
        Path(pickle.__file__),
        *sorted((Path(__file__).parents[2] / "reference_impl").glob("*.py")),
        *sorted((Path(__file__).parents[2] / "swacheck" / "semantics").glob("*.py")),
    ]
    if "def " in path.read_text(encoding="utf-8")
]


@pytest.mark.parametrize("path", _REAL_FILES, ids=lambda p: p.name)
def test_every_function_of_real_files_is_analysed_into_picklable_facts(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    facts = module_facts(ast.parse(text), text, path.name)
    assert facts.functions and all(f.analysed for f in facts.functions.values())
    assert pickle.loads(pickle.dumps(facts)).functions.keys() == facts.functions.keys()
    events = sum(len(f.events) for f in facts.functions.values())
    assert events > 0 and sys.getrecursionlimit() >= 1000


def test_a_functions_body_is_read_back_when_first_read_and_equals_the_original() -> None:
    text = Path(pickle.__file__).read_text(encoding="utf-8")
    facts = module_facts(ast.parse(text), text, "pickle.py")
    stored = pickle.loads(pickle.dumps(facts))
    back = stored.functions["_Pickler.save"]
    assert "_body" in back.__dict__ and "events" not in back.__dict__
    # the index answers without the body; written again, the body goes unread
    assert back.index == facts.functions["_Pickler.save"].index
    assert "save_reduce" in back.index.calls and "dump" not in back.index.calls
    again = pickle.loads(pickle.dumps(stored))
    assert "_body" in back.__dict__
    for function in (back, again.functions["_Pickler.save"]):
        assert function == facts.functions["_Pickler.save"]  # every field, the body's too
        assert "_body" not in function.__dict__ and function.events


def test_callers_and_field_stores_are_found_through_the_index_as_by_reading_every_body() -> None:
    texts = [Path(m.__file__).read_text(encoding="utf-8") for m in (pickle, textwrap, ast)]
    modules = [module_facts(ast.parse(text), text, f"m{i}.py") for i, text in enumerate(texts)]
    result = Analysis(pickle.loads(pickle.dumps(modules)), Config())
    project, values = result.project, result.values
    read = [f for f in project.functions.values() if "_body" not in f.facts.__dict__]
    assert len(read) < len(project.functions) / 10  # the index alone was read
    for function in project.functions.values():
        by_reading = [
            (caller.qual, inner)
            for caller in project.functions.values()
            for event in caller.facts.events
            if event.kind == CALL and isinstance(event.value, Call)
            for callee, inner in values.callees(event.value, Ctx(caller))
            if callee == function
        ]
        assert [(c.qual, inner) for c, inner in values.callers(function)] == by_reading
    wrapper = project.classes["m1.TextWrapper"]
    stores = {e.target.name for _, e in project.field_stores(wrapper, "width")}
    assert stores == {"width"} and project.owns(wrapper, "width")
    assert not project.owns(wrapper, "no_such_field")


def _kept(use: Use) -> bool:
    """A use :func:`role_uses` keeps (before it looks where a local's value goes)."""
    in_place = use.event.kind == FILL and not isinstance(use.event.region, Const)
    return (
        use.space == SWA
        and use.role is not None
        and use.checks == LOCATION
        and not in_place
        and use.event.how != "launch"
    )


def test_the_functions_that_may_hand_a_role_on_are_found_through_the_index() -> None:
    """:mod:`swacheck.semantics.roles` reads the indexes only; every function with a
    role use found by resolving every call is among those it finds, with the same uses
    when calls spelled as no carrier are left unresolved."""
    root = Path(__file__).parents[2]
    paths = sorted((root / "reference_impl").glob("*.py")) + sorted(root.glob("examples/*.py"))
    texts = [path.read_text(encoding="utf-8") for path in paths]
    modules = [
        module_facts(ast.parse(text), text, f"{path.parent.name}/{path.name}")
        for path, text in zip(paths, texts, strict=True)
    ]
    # a parameter handed on twice before it reaches a location of a role
    chain = textwrap.dedent(
        """
        import torch

        def write(pool, swa_out_cache_loc):
            pool.store(swa_out_cache_loc)

        def hand_on(pool, loc):
            write(pool, loc.view(-1))

        def forward(pool, batch):
            hand_on(pool, batch.swa_locs.to(torch.int64))
        """
    )
    modules.append(module_facts(ast.parse(chain), chain, "chain.py"))
    result = Analysis(pickle.loads(pickle.dumps(modules)), Config())
    project, values = result.project, result.values
    roles = project_roles(values)
    assert "chain.forward" in roles.functions and "chain.hand_on" in roles.carriers
    read = [f for f in project.functions.values() if "_body" not in f.facts.__dict__]
    assert not read  # found from the indexes alone
    with_uses = 0
    for function in project.functions.values():
        everywhere = [use for use in uses(function, values) if _kept(use)]
        if function.qual not in roles.functions:
            assert everywhere == [], function.qual
            continue
        assert [use for use in uses(function, values, roles) if _kept(use)] == everywhere
        with_uses += bool(everywhere)
    assert with_uses >= 5 and len(roles.functions) < len(project.functions) / 2
    assert roles.carriers and roles.called


@pytest.mark.parametrize(
    ("value", "space"),
    [
        ("forward_batch.out_cache_loc", {FULL}),
        ("self.req_to_token[rows, :n] // self.page_size", {FULL}),
        ("metadata.page_table.to(torch.int32)", {FULL}),
        ("out_cache_loc if bs else None", {FULL}),
        ("local", {FULL}),
        ("out_cache_loc if bs else translated", {FULL}),  # full on one path
        ("self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)", {SWA}),
        ("self.full_to_swa_index_mapping[forward_batch.out_cache_loc]", {SWA}),
        ("mixed", {SWA}),  # translated after the full value was bound
        ("self.kv_index_translator.write_ids(batch, IdSpaceKind.SLIDING_WINDOW)", {SWA}),
        ("torch.zeros(n)", set()),
    ],
)
def test_the_space_of_a_value_by_where_it_comes_from(value: str, space: set[str]) -> None:
    result = analysis(
        m=f"""
        def f(self, forward_batch, out_cache_loc, bs, translated, metadata, rows, n, batch):
            local = forward_batch.out_cache_loc[:bs]
            mixed = forward_batch.out_cache_loc
            mixed = self.pool.translate_loc_from_full_to_swa(mixed)
            x = {value}
        """
    )
    assert spaces(result, "m.f", "x") == space
