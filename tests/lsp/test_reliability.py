"""Issue 29, item 5: the language server answers every request and does not grow.

The real server over stdio (:mod:`lspkit`): requests whose parameters do not read as
the protocol says get a JSON-RPC error, not silence (a client would wait forever), and
the server's resident memory stays flat over 10,000 audited edits (it grew by about
117 KB per edit: every audit's trees stayed reachable).
"""

from __future__ import annotations

import asyncio
import sys
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from lspkit import Session
from pygls.exceptions import JsonRpcException
from sglang_like import make_project

MODEL_RUNNER = Path("minisglang/runner/model_runner.py")
INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND = -32602, -32600, -32601


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "minisglang")


async def raw_request(session: Session, method: str, params: Any, msg_id: str) -> Any:
    """Send a request as raw JSON (so its parameters may break the protocol's types);
    its result, or the error it was answered with (raised)."""
    protocol = session.client.protocol
    future: Future[Any] = Future()
    protocol._request_futures[msg_id] = future
    protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await asyncio.wait_for(asyncio.wrap_future(future), 60)


async def error_code(session: Session, method: str, params: Any, msg_id: str) -> int:
    with pytest.raises(JsonRpcException) as raised:
        await raw_request(session, method, params, msg_id)
    return raised.value.code


def test_every_request_is_answered(project: Path) -> None:
    async def scenario() -> None:
        session = Session()
        await session.start(project)
        uri = session.open(project / MODEL_RUNNER)
        assert await session.diagnostics(uri)
        document = {"uri": uri}
        negative = {"start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 0}}
        action = {"textDocument": document, "range": negative, "context": {"diagnostics": []}}
        assert await error_code(session, "textDocument/codeAction", action, "a") == INVALID_PARAMS
        bogus = [
            {"textDocument": document, "position": "x"},
            {"textDocument": document},
            {"textDocument": document, "position": {"line": "one", "character": 0}},
            {"textDocument": "x", "position": {"line": 0, "character": 0}},
            None,
            [],
        ]
        for number, params in enumerate(bogus):
            code = await error_code(session, "textDocument/hover", params, f"h{number}")
            assert code == INVALID_PARAMS, params
        assert await error_code(session, "swacheck/nothing", {}, "m") == METHOD_NOT_FOUND
        # Still serving: a good request and an edit.
        hover = {"textDocument": document, "position": {"line": 0, "character": 0}}
        assert await raw_request(session, "textDocument/hover", hover, "ok") is None
        version = session.change(uri, session.texts[uri] + "\n")
        assert await session.diagnostics(uri, version)
        await session.client.shutdown_async(None)
        code = await error_code(session, "textDocument/hover", hover, "late")
        assert code == INVALID_REQUEST
        session.client.exit(None)
        await asyncio.wait_for(session.client.stop(), 60)
        assert session.client.exit_code == 0

    asyncio.run(scenario())


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


EDITS = 10_000
WARM_UP = 500
# What the server may still gain after its warm-up (allocator noise, pygls' own
# bookkeeping): growth as it was, 117 KB per edit, would be over 1 GiB here.
BOUND_MIB = 8.0


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_memory_is_flat_over_10000_edits(project: Path) -> None:
    """Every edit audited (debounce 0, each version's diagnostics awaited), the server's
    RSS sampled every 500 edits after a warm-up of 500."""

    async def scenario() -> list[float]:
        session = Session()
        await session.start(project, options={"debounceMs": 0})
        uri = session.open(project / MODEL_RUNNER)
        await session.diagnostics(uri)
        text = session.texts[uri]
        pid = session.client._server.pid  # type: ignore[union-attr]
        samples = []
        for edit in range(1, EDITS + 1):
            version = session.change(uri, f"{text}# edit {edit}\n")
            assert await session.diagnostics(uri, version)
            if edit >= WARM_UP and edit % 500 == 0:
                samples.append(_rss_mib(pid))
        assert await session.stop() == 0
        return samples

    samples = asyncio.run(scenario())
    assert len(samples) == (EDITS - WARM_UP) // 500 + 1
    growth = max(samples) - samples[0]
    assert growth < BOUND_MIB, [round(s, 1) for s in samples]
