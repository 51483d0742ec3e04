"""Issue 28 in the editor: the real ``swacheck server`` over stdio (tests/lsp/lspkit.py).

A document that crashes libcst's parser (the server used to die of SIGSEGV), that holds
text no encoding can write (a lone surrogate) or an integer CPython refuses (each made
"the audit failed" and left every other document's diagnostics stale), or that libcst
parses for many seconds in native code (the server used to answer nothing, not even
``shutdown``): each gets its own ``SWA999``, every other open document keeps getting
current diagnostics, and ``shutdown`` is answered at once.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
from hostile import BOUNDED, GUARDED
from test_workers import SLOW, _alive, _children

LSP = Path(__file__).resolve().parents[1] / "lsp"
sys.path.insert(0, str(LSP))

from lspkit import Session  # noqa: E402
from sglang_like import PYPROJECT, make_project  # noqa: E402

POOL = Path("minisglang/mem_cache/pool.py")
GRAPH_RUNNER = Path("minisglang/runner/graph_runner.py")


def _codes(diagnostics: list) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


def test_hostile_documents_cost_only_themselves(tmp_path: Path) -> None:
    project = make_project(tmp_path / "minisglang")
    hostile = {
        "crash.py": BOUNDED["elif_chain"][0].decode(),
        "surrogate.py": "swa_loc = None\nname = '\ud800'\n",
        "integer.py": GUARDED["huge_integer"][0](500_000).decode(),
        "chain.py": GUARDED["attribute_chain_space"][0](6000).decode(),
    }
    words = {
        "crash.py": "parser crashed (SIGSEGV)",
        "surrogate.py": "decode",
        "integer.py": "Exceeds the limit",
        "chain.py": "chain",
    }

    async def scenario() -> None:
        session = Session()
        await session.start(project)
        runner = session.open(project / GRAPH_RUNNER)
        expected = _codes(await session.diagnostics(runner))
        assert expected == ["SWA002", "SWA003", "SWA004"]
        for name, text in hostile.items():
            uri = session.open(project / "minisglang" / name, text)
            (swa999,) = await session.diagnostics(uri)
            assert swa999.code == "SWA999" and words[name] in swa999.message, swa999.message
            # The other document is audited again in the same round, and still current.
            edited = session.texts[runner] + f"\n# edited after {name}\n"
            assert _codes(await session.diagnostics(runner, session.change(runner, edited))) == (
                expected
            )
        assert await session.stop() == 0

    asyncio.run(scenario())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_shutdown_is_answered_while_libcst_parses_and_no_worker_is_left(tmp_path: Path) -> None:
    project = make_project(tmp_path / "minisglang")
    # Long enough a bound that the parse is still running when shutdown comes.
    configured = PYPROJECT.replace("[tool.swacheck]\n", "[tool.swacheck]\nmax-file-time = 120\n")
    (project / "pyproject.toml").write_text(configured)

    async def scenario() -> None:
        session = Session()
        await session.start(project)
        server = session.client._server
        assert server is not None
        session.open(project / "minisglang" / "slow.py", SLOW.decode())
        workers: list[int] = []
        deadline = time.monotonic() + 60
        while not workers and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            workers = _children(server.pid)
        assert workers, "no worker started"
        await asyncio.sleep(1.0)  # into libcst's parse
        started = time.monotonic()
        assert await session.stop() == 0
        assert time.monotonic() - started < 10
        deadline = time.monotonic() + 5
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not any(_alive(pid) for pid in workers)

    asyncio.run(scenario())
