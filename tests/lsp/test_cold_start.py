"""A cold start of ``swacheck server`` (the real server over stdio, :mod:`lspkit`): the open
document's diagnostics first, then the project read in full behind them with work-done
progress (``$/progress``), and a message once the project is indexed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from lspkit import Session, capabilities
from lsprotocol import types
from sglang_like import make_project

from swacheck.server.app import EARLY_ROUND_FILES

POOL = Path("minisglang/mem_cache/pool.py")
GRAPH_RUNNER = Path("minisglang/runner/graph_runner.py")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "minisglang")


@pytest.fixture
def large_project(project: Path) -> Path:
    """The project with more files to read for their facts than a cold start reads
    before it shows the open documents' first diagnostics (``EARLY_ROUND_FILES``)."""
    layers = project / "minisglang" / "layers"
    layers.mkdir(exist_ok=True)
    for number in range(EARLY_ROUND_FILES + 6):
        (layers / f"layer_{number}.py").write_text(
            f"class SWALayer{number}:\n"
            f"    def __init__(self, window):\n"
            f"        self.swa_window = window + {number}\n",
            encoding="utf-8",
        )
    return project


def _cli_rows(root: Path, path: Path) -> list[tuple[int, str]]:
    proc = subprocess.run(
        [sys.executable, "-m", "swacheck", "audit", "--no-cache", "--output-format", "json", path],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return sorted((f["location"]["row"], f["code"]) for f in json.loads(proc.stdout))


def _rows(diagnostics: list[types.Diagnostic]) -> list[tuple[int, str]]:
    return sorted((d.range.start.line + 1, str(d.code)) for d in diagnostics)


def _indexed(session: Session) -> types.ShowMessageParams | None:
    return next((m for m in session.shown if "indexed" in m.message), None)


def test_first_diagnostics_then_the_project_with_progress(large_project: Path) -> None:
    project = large_project

    async def scenario() -> None:
        session = Session()
        await session.start(project)
        uri = session.open(project / GRAPH_RUNNER)
        message = await session.until(lambda: _indexed(session))
        assert str(project) in message.message and "files read" in message.message
        # The open document's diagnostics came first, before the project was read.
        first_publish = session.received.index(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        created = session.received.index(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        assert first_publish < created
        # One progress: created, begun, reported, ended; percentages never go back.
        (token,) = session.progress_tokens
        # (The client reads the values as plain JSON objects.)
        values = [dict(p.value) for p in session.progress if str(p.token) == token]
        assert values[0]["kind"] == "begin" and values[-1]["kind"] == "end"
        reports = [v for v in values[1:-1] if v["kind"] == "report"]
        assert reports and reports[-1]["percentage"] == 100
        done, total = reports[-1]["message"].removesuffix(" files").split("/")
        assert done == total and int(total) > 0
        percentages = [r["percentage"] for r in reports]
        assert percentages == sorted(percentages)
        # What stands in the end is what the command line finds.
        assert _rows(await session.diagnostics(uri)) == _cli_rows(project, GRAPH_RUNNER)
        # Warm now: an edit gets its diagnostics with no more progress.
        shown = len(session.progress)
        version = session.change(uri, session.texts[uri] + "\n# edited\n")
        await session.diagnostics(uri, version)
        await asyncio.sleep(0.3)
        assert len(session.progress) == shown
        assert await session.stop() == 0

    asyncio.run(scenario())


def test_a_client_without_progress_gets_the_message_and_the_diagnostics(project: Path) -> None:
    async def scenario() -> None:
        session = Session()
        await session.start(project, caps=capabilities(progress=False))
        uri = session.open(project / POOL)
        await session.until(lambda: _indexed(session))
        assert session.progress_tokens == [] and session.progress == []
        assert _rows(await session.diagnostics(uri)) == _cli_rows(project, POOL)
        assert await session.stop() == 0

    asyncio.run(scenario())


def test_after_the_command_filled_the_cache_one_audit_indexes_the_project(project: Path) -> None:
    subprocess.run([sys.executable, "-m", "swacheck", "audit", "."], cwd=project, check=False)

    async def scenario() -> None:
        session = Session()
        await session.start(project)
        uri = session.open(project / POOL)
        await session.until(lambda: _indexed(session))
        # Every file's facts came from the cache: no second round, no progress.
        assert session.progress_tokens == []
        assert _rows(await session.diagnostics(uri)) == _cli_rows(project, POOL)
        assert await session.stop() == 0

    asyncio.run(scenario())


MODEL_RUNNER = Path("minisglang/runner/model_runner.py")


def test_no_clean_list_before_the_project_is_read(large_project: Path) -> None:
    """Issue 39: the model runner's SWA005 needs the pool's facts, which a cold start has
    not read when it shows the first diagnostics: it published an empty list (which reads
    as "clean") and the finding only once the project was indexed. Now the document gets
    nothing until its findings are known, and the reading shows as progress."""
    project = large_project
    expected = _cli_rows(project, MODEL_RUNNER)
    assert [code for _, code in expected] == ["SWA005"]

    async def scenario() -> None:
        session = Session()
        await session.start(project)
        uri = session.open(project / MODEL_RUNNER)
        await session.until(lambda: _indexed(session))
        published = [p for p in session.published if p.uri == uri]
        assert [_rows(p.diagnostics) for p in published] == [expected]
        assert session.progress_tokens, "the reading is shown"
        assert await session.stop() == 0

    asyncio.run(scenario())


def test_a_client_without_progress_is_told_the_project_is_being_read(
    large_project: Path,
) -> None:
    async def scenario() -> None:
        session = Session()
        await session.start(large_project, caps=capabilities(progress=False))
        session.open(large_project / MODEL_RUNNER)
        await session.until(lambda: _indexed(session))
        said = [m.message for m in session.shown]
        (reading,) = [n for n, message in enumerate(said) if "reading the project" in message]
        assert said.index(_indexed(session).message) > reading
        assert await session.stop() == 0

    asyncio.run(scenario())
