"""Issue #9: the analyzer never crashes, and what it reports does not depend on how it runs.

Real files (examples/ and every rule's VALID/INVALID sources) with lines deleted,
duplicated and reordered and the seed bugs injected, written with every newline style,
a BOM or a declared legacy encoding, through the real engine and the real command.
The larger run is benchmarks/fuzz_linter.py; its figures are in docs/reliability.md.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

from fuzzkit import (
    OPERATIONS,
    STYLES,
    Cli,
    check,
    corpus,
    encode,
    mutate,
    source_lines,
    write,
    write_tree,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

CORPUS = corpus()
MUTATION_OPS = OPERATIONS

# No shrinking: an example costs a dozen audits, and shrinking one failure took minutes.
FUZZ = settings(
    max_examples=60,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MUTATIONS = st.lists(
    st.tuples(
        st.sampled_from(MUTATION_OPS),
        st.integers(0, 10_000),
        st.integers(0, 10_000),
        st.integers(0, 99),
    ),
    max_size=5,
)
MUTANT = st.tuples(st.sampled_from(sorted(CORPUS)), MUTATIONS, st.sampled_from(STYLES))


@FUZZ
@given(mutants=st.lists(MUTANT, min_size=1, max_size=3))
def test_mutated_real_files(mutants: list[tuple[str, list, str]]) -> None:
    files = {
        f"m{i}.py": encode(mutate(CORPUS[name], ops), style)
        for i, (name, ops, style) in enumerate(mutants)
    }
    with tempfile.TemporaryDirectory() as tmp:
        problems = list(check(files, Path(tmp)))
    assert problems == []


@FUZZ
@given(
    name=st.sampled_from(sorted(CORPUS)),
    mutations=st.lists(
        st.tuples(st.just("separator"), st.integers(0, 999), st.just(0), st.integers(0, 99)),
        min_size=1,
        max_size=3,
    ),
    style=st.sampled_from(STYLES),
)
def test_line_end_characters_python_does_not_split_at(
    name: str, mutations: list, style: str
) -> None:
    """Every property but ``--fix`` (pinned separately) with form feeds, ``\\x85``, ..."""
    files = {"m.py": encode(mutate(CORPUS[name], mutations), style)}
    with tempfile.TemporaryDirectory() as tmp:
        problems = list(check(files, Path(tmp), fix=False))
    assert problems == []


def test_the_command_gives_the_same_json_however_it_runs(cli: Cli, tmp_path: Path) -> None:
    """Hash seed, --jobs, cache cold and warm, prefilter off: one answer, byte for byte."""
    rng = random.Random(9)
    names = sorted(CORPUS)
    files = {}
    for i in range(40):  # over the engine's threshold for a process pool
        ops = [(rng.choice(MUTATION_OPS), rng.randrange(999), rng.randrange(999), i) for _ in "ab"]
        files[f"pkg{i % 3}/m{i:02}.py"] = encode(mutate(CORPUS[rng.choice(names)], ops), "lf")
    write_tree(tmp_path, files)
    write(tmp_path / "pyproject.toml", f"[tool.swacheck]\ncache-dir = '{tmp_path / 'cache'}'\n")

    def run(*args: str, seed: str) -> str:
        proc = cli("audit", "--output-format", "json", *args, env={"PYTHONHASHSEED": seed})
        assert proc.returncode in (0, 1), proc.stderr
        return proc.stdout

    reference = run("--jobs", "1", "--no-cache", seed="0")
    assert len(json.loads(reference)) > 10
    assert run("--jobs", "2", "--no-cache", seed="1") == reference
    assert run("--jobs", "2", seed="2") == reference  # cold cache
    assert run("--jobs", "1", seed="3") == reference  # warm cache
    assert run("--jobs", "2", "--no-cache", "--no-prefilter", seed="4") == reference


def test_parse_error_position_lies_inside_the_file(cli: Cli, tmp_path: Path) -> None:
    source = b"swa_loc = 1\n    y\n\n"
    write(tmp_path / "bad.py", source)
    [finding] = cli.json("--no-cache")
    lines = source_lines(source)
    row, column = finding["location"]["row"], finding["location"]["column"] - 1
    assert finding["code"] == "SWA999"
    assert 1 <= row <= len(lines) and column <= len(lines[row - 1])
