"""The cache changes nothing but speed (issue 39): random sequences of edits,
configurations and front ends, each warm answer against an audit without a cache
(``cache_differential.py``), on the examples and on files of SGLang 0.5.11; and the
cross-file property on its own: an edit of one file that changes another file's finding
reaches that file's warm answer, through each front end."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "engines"))

from cache_differential import EXAMPLES, CacheMachine, _cli
from sglang_wheels import PyPIUnreachable, extracted

from swacheck.server.documents import Snapshot
from swacheck.server.projects import Projects

# About half a minute of CPU each on the project's 2-core machine.
BUDGET = settings(
    max_examples=8,
    stateful_step_count=15,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
POOL_INVALIDATION = "invalidate_loc_cache"
SGLANG_POOL = "sglang/srt/mem_cache/swa_memory_pool.py"
SGLANG_RUNNER = "sglang/srt/model_executor/breakable_cuda_graph_runner.py"


def _release() -> Path:
    try:
        return extracted("0.5.11") / "sglang"
    except PyPIUnreachable as exc:
        pytest.skip(f"PyPI cannot be reached for sglang==0.5.11: {exc}")


def test_examples() -> None:
    run_state_machine_as_test(CacheMachine, settings=BUDGET)


def test_sglang_release() -> None:
    sglang = _release()
    run_state_machine_as_test(lambda: CacheMachine(sglang), settings=BUDGET)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(EXAMPLES, root, ignore=shutil.ignore_patterns("*.md", "*.yml"))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def _codes(answer: tuple[int, list[dict]], name: str) -> list[str]:
    return [f["code"] for f in answer[1] if Path(f["filename"]).name == name]


def test_a_pool_edit_reaches_the_runners_warm_answer(project: Path) -> None:
    """SWA005 in the model runner needs the pool's invalidation method: renamed away, the
    finding goes from the pre-commit call's, the whole tree's and the server's warm
    answers, and comes back with it."""
    pool = project / "swa_memory_pool.py"
    text = pool.read_text()
    runner = project / "model_runner.py"
    projects = Projects([project])
    projects.watched = True
    snapshot = Snapshot(runner.as_uri(), runner, 0, runner.read_text())
    try:
        for edited, expected in ((text, ["SWA005"]), (text.replace(POOL_INVALIDATION, "x"), [])):
            pool.write_text(edited)
            projects.files_changed([pool])
            given = _cli(project, ["--output-format=json", "model_runner.py"])
            assert _codes(given, runner.name) == expected
            tree = _cli(project, ["--output-format=json"])
            assert _codes(tree, runner.name) == expected
            server = projects.audit([snapshot]).findings[snapshot.uri]
            assert [f.code for f in server] == expected
            assert given == _cli(project, ["--output-format=json", "--no-cache", "model_runner.py"])
            assert tree == _cli(project, ["--output-format=json", "--no-cache"])
    finally:
        projects.close()


def test_a_translation_dtype_reaches_another_files_warm_answer(project: Path) -> None:
    """SGLang 0.5.11's SWA002 in the breakable runner cites the convention its pool's
    translation sets (int32); a translation returning int64 takes the finding away. (The
    examples' pool, of the translation-cache era whose write locations are int32 whatever
    a translation returns, is left out: this project is of 0.5.11's design.)"""
    sglang = _release()
    (project / "swa_memory_pool.py").unlink()
    for relative in (SGLANG_POOL, SGLANG_RUNNER):
        target = project / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(sglang / relative.removeprefix("sglang/"), target)
    pool = project / SGLANG_POOL
    text = pool.read_text()
    int32 = "return self.full_to_swa_index_mapping[kv_indices].to(torch.int32)"
    assert int32 in text
    first = _cli(project, ["--output-format=json", SGLANG_RUNNER])
    assert "SWA002" in _codes(first, "breakable_cuda_graph_runner.py")
    pool.write_text(text.replace(int32, int32.replace("int32", "int64")))
    warm = _cli(project, ["--output-format=json", SGLANG_RUNNER])
    assert warm == _cli(project, ["--output-format=json", "--no-cache", SGLANG_RUNNER])
    assert warm != first
