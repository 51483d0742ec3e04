"""A file's units of work (``engine.units``): the trees kept between the passes."""

from __future__ import annotations

from pathlib import Path

import pytest

import swacheck.analysis.walk as walk_module
from swacheck.analysis.index import ModuleFacts, ProjectIndex
from swacheck.catalogue import catalogue
from swacheck.config import Config
from swacheck.engine import units
from swacheck.engine.parse import Parsed

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_kept_trees_keep_their_layouts_up_to_the_bound_with_the_same_findings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first trees kept for the check keep the layout their first pass built (the
    check lays out nothing again); past :data:`units.KEPT_LAYOUTS` a kept tree drops
    it, and its check, which lays it out anew, finds the same."""
    config = Config()
    rules = [spec.load() for spec in catalogue(config)]
    data = (EXAMPLES / "swa_memory_pool.py").read_bytes()
    trees: dict[int, Parsed] = {}
    facts = []
    for number in range(units.KEPT_LAYOUTS + 1):
        tree, first = units.first_pass("pool.py", data, rules, config, None)
        assert isinstance(tree, Parsed) and isinstance(first, ModuleFacts)
        assert tree.maps.layout.built is not None  # laid out by the first pass
        units.keep_for_check(trees, number, tree)
        facts.append(first)
    kept = [n for n, tree in trees.items() if tree.maps.layout.built is not None]
    assert kept == list(range(units.KEPT_LAYOUTS))
    project = ProjectIndex(facts[:1])
    laid_out: list[object] = []

    class Counted(walk_module._Preorder):
        def __init__(self, root: object) -> None:
            laid_out.append(root)
            super().__init__(root)

    monkeypatch.setattr(walk_module, "_Preorder", Counted)
    with_layout = units.check("pool.py", "pool.py", trees[0], rules, config, project, None, None)
    assert laid_out == []
    last = trees[units.KEPT_LAYOUTS]
    without = units.check("pool.py", "pool.py", last, rules, config, project, None, None)
    assert laid_out == [last.wrapper.module]
    assert with_layout.findings  # the example holds findings
    assert with_layout.findings == without.findings
    assert not with_layout.errors and not without.errors


def _facts(path: str, data: bytes) -> ModuleFacts:
    config = Config()
    rules = [spec.load() for spec in catalogue(config)]
    _, facts = units.first_pass(path, data, rules, config, None)
    assert isinstance(facts, ModuleFacts)
    return facts


def _lookups(index: ProjectIndex) -> tuple[object, ...]:
    names = sorted({info.name for m in index.modules.values() for info in m.classes} | {"Nope"})
    functions = sorted({f for m in index.modules.values() for f in m.defined_functions})
    return (
        list(index.modules),
        [(name, near, index.resolve_class(name, near)) for name in names for near in index.modules],
        [index.defines_function([f]) for f in [*functions, "nope"]],
        # Each name's classes by file (a file's own in its order; files' order is not read).
        {
            name: sorted(((i.path, i.name) for i in index._classes[name]), key=lambda c: c[0])
            for name in index._classes
        },
    )


def test_an_updated_index_answers_as_one_built_anew() -> None:
    """An edit's index, made from the last one with the changed files' facts in place,
    answers every lookup as an index built anew from the same facts would: a class
    added, one renamed to a name another file's class has, a function added."""
    files = {path.name: path.read_bytes() for path in sorted(EXAMPLES.glob("*.py"))}
    old = [_facts(name, data) for name, data in files.items()]
    last = ProjectIndex(old)
    last.memo("k", lambda: 1)
    pool = files["swa_memory_pool.py"].decode()
    edited = pool + "\n\nclass Added:\n    pass\n"
    runner = (
        files["cuda_graph_runner.py"]
        .decode()
        .replace("class DecodeInputBuffers", "class SWAKVPool")
    )
    runner += "\n\ndef helper_added():\n    return 1\n"
    new = [
        _facts(f.path, edited.encode())
        if f.path == "swa_memory_pool.py"
        else _facts(f.path, runner.encode())
        if f.path == "cuda_graph_runner.py"
        else f
        for f in old
    ]
    updated = last.updated_to(new)
    assert updated is not None and updated is not last
    assert _lookups(updated) == _lookups(ProjectIndex(new))
    assert updated.memo("k", lambda: 2) == 2  # its own memo
    assert _lookups(last) == _lookups(ProjectIndex(old))  # the last index is untouched
    # Another set or order of files, or too many changed: built anew by the caller.
    assert last.updated_to(new[1:]) is None
    assert last.updated_to([*new[1:], new[0]]) is None


def test_each_unit_leaves_no_reference_cycles_behind() -> None:
    """With the collector paused for the audit, every file's cycles (the visitor classes
    its analyses define per call, the ``abc`` cache entries they add, its context) piled
    up until the audit's end: half a worker's memory on 5,000 small files. Each unit's are
    collected when it is done, so what is left after 120 files' passes is what one unit
    leaves, not 120 times that."""
    import gc

    from swacheck.engine.gc_pause import gc_paused
    from swacheck.engine.workers import InProcess

    config = Config()
    rules = [spec.load() for spec in catalogue(config)]
    data = (EXAMPLES / "swa_memory_pool.py").read_bytes()
    files = 120
    jobs = [
        (n, f"pkg/m{n}.py", data.replace(b"SWAKVPool", b"Pool%d" % n), True) for n in range(files)
    ]
    gc.collect()
    with gc_paused():
        pool = InProcess(rules, config, None)
        facts = pool.first_pass(jobs, {})
        project = ProjectIndex([f for f in facts.values() if isinstance(f, ModuleFacts)])
        checked = pool.check([(n, key, key, b"") for n, key, _, _ in jobs], rules, project, None)
        assert all(outcome.findings for outcome in checked.values())
        left = gc.collect()
    assert left < files, f"{left} objects in reference cycles left by {files} files' units"


def test_checking_n_flagged_files_resolves_values_in_linear_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SWA002 asked, for each flagged file, whether any other file binds the same slot
    deliberately, searching every file each time: N flagged files cost N² resolutions
    (20,000 one-line files took hours). The project's deliberate bindings are indexed
    once: four times the files, about four times the work."""
    from swacheck.engine.gc_pause import gc_paused
    from swacheck.engine.workers import InProcess
    from swacheck.semantics.conventions import Conventions

    config = Config()
    rules = [spec.load() for spec in catalogue(config)]
    source = b"import torch\nout_cache_loc_swa = torch.zeros((8,), dtype=torch.int64)\n"
    calls = [0]
    decisions = Conventions.decisions

    def counted(self: Conventions, *args: object, **kwargs: object) -> object:
        calls[0] += 1
        return decisions(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Conventions, "decisions", counted)

    def resolutions(files: int) -> int:
        calls[0] = 0
        jobs = [(n, f"m{n}.py", source, True) for n in range(files)]
        with gc_paused():
            pool = InProcess(rules, config, None)
            facts = [f for f in pool.first_pass(jobs, {}).values() if isinstance(f, ModuleFacts)]
            checked = pool.check(
                [(n, k, k, b"") for n, k, _, _ in jobs], rules, ProjectIndex(facts), None
            )
        assert all(len(outcome.findings) == 1 for outcome in checked.values())
        return calls[0]

    small, large = resolutions(30), resolutions(120)
    assert large < 5 * small, (small, large)


def test_a_facts_digest_reads_each_shared_term_once() -> None:
    """The semantic core's terms share their parts (a value and each view of it): a
    digest that spelled them out as a tree grew with the paths through them (minutes
    and gigabytes on SGLang 0.5.23's ``srt``). Sixty levels, each using the one below
    twice, are 2^60 paths but 61 terms; equal graphs built apart digest alike."""
    from swacheck.engine.cache import facts_digest
    from swacheck.semantics.terms import Local, Op

    def chain(levels: int, last: str = "x") -> Op | Local:
        term: Op | Local = Local(last)
        for _ in range(levels):
            term = Op("+", (term, term))
        return term

    assert facts_digest(chain(60)) == facts_digest(chain(60))
    assert facts_digest(chain(60)) != facts_digest(chain(60, last="y"))
    assert facts_digest({"a": {1, 2, 3}}) == facts_digest({"a": {3, 2, 1}})


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_a_facts_digest_leaves_positions_out_and_keeps_the_rest(path: Path) -> None:
    """A file's facts digest keys other files' findings (issue 39): rows shifted by a
    comment above a definition or a blank line or comment inside one leave it; a dtype
    changed or a function added does not."""
    from swacheck.engine.cache import facts_digest

    text = path.read_text()
    digest = facts_digest(_facts(path.name, text.encode()))
    lines = text.splitlines(keepends=True)
    body = next(i for i, line in enumerate(lines) if line.startswith("        "))
    moved = [
        "# moved\n\n" + text,
        "".join([*lines[:body], "\n", *lines[body:]]),
        "".join([*lines[:body], "        # a comment\n", *lines[body:]]),
    ]
    for edited in moved:
        assert edited != text and facts_digest(_facts(path.name, edited.encode())) == digest
    changed = [text + "\n\ndef added(pool):\n    return pool.translate(pool.loc)\n"]
    casts = (("torch.int32", "torch.int64"), ("torch.int64", "torch.int32"), (".int()", ".long()"))
    changed += [text.replace(a, b) for a, b in casts if a in text]
    for edited in changed:
        assert edited != text and facts_digest(_facts(path.name, edited.encode())) != digest
