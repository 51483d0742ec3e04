"""Issue #9: programs generated from Python's grammar never crash the analyzer.

hypothesmith writes the programs; the seed bugs of examples/ are injected at random
lines so the rules have something to walk. Same properties as test_fuzz_mutants.py.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from fuzzkit import STYLES, check, encode, mutate
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

hypothesmith = pytest.importorskip("hypothesmith")


INJECTIONS = st.lists(
    st.tuples(st.just("inject"), st.integers(0, 999), st.just(0), st.integers(0, 99)),
    max_size=3,
)


@settings(
    max_examples=100,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(program=hypothesmith.from_grammar(), injections=INJECTIONS, style=st.sampled_from(STYLES))
def test_generated_programs(program: str, injections: list, style: str) -> None:
    files = {"generated.py": encode(mutate(program, injections), style)}
    with tempfile.TemporaryDirectory() as tmp:
        problems = list(check(files, Path(tmp)))
    assert problems == []
