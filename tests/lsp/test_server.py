"""``swacheck server`` end to end: the real server as a subprocess, driven over stdio by
pygls' client, on a small SGLang-like project written to disk (:mod:`sglang_like`).

Each test waits for the notifications it needs (diagnostics of a document version, a
log message), never for a fixed time.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
from lspkit import Session, apply_edit, apply_text_edits, capabilities, lsp_lines
from lsprotocol import types
from sglang_like import PYPROJECT, make_project

from swacheck import cli

T = TypeVar("T")


def run(scenario: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(scenario)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "minisglang")


POOL = Path("minisglang/mem_cache/pool.py")
GRAPH_RUNNER = Path("minisglang/runner/graph_runner.py")
MODEL_RUNNER = Path("minisglang/runner/model_runner.py")


def cli_findings(root: Path, *files: Path) -> list[dict[str, Any]]:
    """What ``swacheck audit`` reports for ``files`` (JSON output), run in ``root``."""
    proc = subprocess.run(
        [sys.executable, "-m", "swacheck", "audit", "--no-cache", "--output-format", "json"]
        + [str(f) for f in files],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def units(text: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-32":
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def lsp_position(text: str, row: int, column: int, encoding: str = "utf-16") -> tuple[int, int]:
    """A finding's position (row 1-based, column 0-based characters) in LSP terms."""
    line = text.splitlines()[row - 1]
    return (row - 1, units(line[:column], encoding))


def start_of(where: types.Range) -> tuple[int, int]:
    return (where.start.line, where.start.character)


def codes(diagnostics: list[types.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


def by_code(diagnostics: list[types.Diagnostic], code: str) -> types.Diagnostic:
    (found,) = [d for d in diagnostics if d.code == code]
    return found


# -- diagnostics ------------------------------------------------------------------------


def test_open_reports_what_the_command_line_reports_in_the_project_context(
    project: Path,
) -> None:
    """Open documents get the CLI's findings, at the same places; SWA004/SWA005 exist
    only because pool.py (not open) defines the invalidation: the project context."""
    expected = {str(f): cli_findings(project, f) for f in (GRAPH_RUNNER, MODEL_RUNNER, POOL)}

    async def scenario() -> None:
        session = Session()
        await session.start(project)
        for relative in (GRAPH_RUNNER, MODEL_RUNNER):
            uri = session.open(project / relative)
            diagnostics = await session.diagnostics(uri)
            text = (project / relative).read_text(encoding="utf-8")
            want = sorted(
                (f["code"], lsp_position(text, f["location"]["row"], f["location"]["column"] - 1))
                for f in expected[str(relative)]
            )
            assert sorted((str(d.code), start_of(d.range)) for d in diagnostics) == want
            for diagnostic in diagnostics:
                assert diagnostic.source == "swacheck"
                assert diagnostic.severity == types.DiagnosticSeverity.Warning
                assert diagnostic.code_description is not None
                assert diagnostic.code_description.href.endswith(f"/{diagnostic.code}.md")
        assert codes(await session.diagnostics(session.open(project / MODEL_RUNNER))) == ["SWA005"]
        assert await session.stop() == 0

    run(scenario())
    assert {f["code"] for f in expected[str(GRAPH_RUNNER)]} == {"SWA002", "SWA003", "SWA004"}


def test_changes_are_audited_unsaved_and_debounced(project: Path) -> None:
    async def scenario() -> None:
        session = Session()
        await session.start(project, options={"debounceMs": 1000})
        uri = session.open(project / GRAPH_RUNNER)
        first = await session.diagnostics(uri)
        assert codes(first) == ["SWA002", "SWA003", "SWA004"]
        text = session.texts[uri]
        fixed = text.replace(
            '"out_cache_loc_swa": torch.zeros((n,), dtype=torch.int64)',
            '"out_cache_loc_swa": torch.zeros((n,), dtype=torch.int32)',
        )
        assert fixed != text
        # A burst of edits (the last one drops the int64): audited at most at its first
        # edit (after a quiet spell) and once after the last.
        burst = [session.change(uri, text + "\n" * n) for n in range(1, 6)]
        last = session.change(uri, fixed)
        assert codes(await session.diagnostics(uri, last)) == ["SWA003", "SWA004"]
        audited = {p.version for p in session.published if p.uri == uri}
        assert len(audited & {*burst, last}) <= 2
        # Nothing was saved: the file on disk still has the bug.
        assert (project / GRAPH_RUNNER).read_text(encoding="utf-8") == text
        assert await session.stop() == 0

    run(scenario())


def test_save_republishes_and_close_clears(project: Path) -> None:
    async def scenario() -> None:
        session = Session()
        await session.start(project)
        uri = session.open(project / MODEL_RUNNER)
        assert codes(await session.diagnostics(uri)) == ["SWA005"]
        before = len(session.published)
        session.save(uri)
        again = await session.published_after(uri, before)
        assert codes(list(again.diagnostics)) == ["SWA005"]
        before = len(session.published)
        session.close(uri)
        cleared = await session.published_after(uri, before)
        assert list(cleared.diagnostics) == []
        assert await session.stop() == 0

    run(scenario())


def test_watched_file_changes_update_the_project_index(project: Path) -> None:
    """A file changed on disk (not open) changes an open document's findings once the
    client says so: without pool.py's invalidation method no order rule applies."""

    async def scenario() -> None:
        session = Session()
        await session.start(project)
        await session.until(lambda: session.registrations or None)
        (registration,) = session.registrations
        assert registration.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
        globs = [w["globPattern"] for w in registration.register_options["watchers"]]
        assert {"**/*.py", "**/pyproject.toml"} <= set(globs)
        uri = session.open(project / MODEL_RUNNER)
        assert codes(await session.diagnostics(uri)) == ["SWA005"]
        pool = project / POOL
        pool.write_text(
            pool.read_text(encoding="utf-8").replace("invalidate_loc_cache", "drop_memo"),
            encoding="utf-8",
        )
        before = len(session.published)
        session.files_changed((pool, types.FileChangeType.Changed))
        after = await session.published_after(uri, before)
        assert codes(list(after.diagnostics)) == []
        # A new file that defines it again brings the rule back.
        helper = project / "minisglang" / "mem_cache" / "memo.py"
        helper.write_text(
            "class Memo:\n    def invalidate_loc_cache(self):\n        self.key = None\n",
            encoding="utf-8",
        )
        before = len(session.published)
        session.files_changed((helper, types.FileChangeType.Created))
        back = await session.published_after(uri, before)
        assert codes(list(back.diagnostics)) == ["SWA005"]
        assert await session.stop() == 0

    run(scenario())


def test_without_file_watching_each_audit_looks_at_the_disk(project: Path) -> None:
    """A client that cannot watch files for the server reports no change on disk: each
    audit looks at every file of the project instead of trusting the last one."""

    async def scenario() -> None:
        session = Session()
        await session.start(project, caps=capabilities(watch=False))
        uri = session.open(project / MODEL_RUNNER)
        assert codes(await session.diagnostics(uri)) == ["SWA005"]
        assert session.registrations == []
        pool = project / POOL
        pool.write_text(
            pool.read_text(encoding="utf-8").replace("invalidate_loc_cache", "drop_memo"),
            encoding="utf-8",
        )
        before = len(session.published)
        session.save(uri)
        after = await session.published_after(uri, before)
        assert codes(list(after.diagnostics)) == []
        assert await session.stop() == 0

    run(scenario())


def test_configuration_excludes_ignores_and_its_changes(project: Path) -> None:
    """Excluded files and per-file ignores as the CLI applies them; an edited
    pyproject.toml is read again; a broken one is reported and the server goes on."""

    async def scenario() -> None:
        session = Session()
        await session.start(project)
        excluded = session.open(project / "generated" / "buffers.py")
        legacy = session.open(project / "legacy" / "old_buffers.py")
        assert await session.diagnostics(excluded) == []
        assert await session.diagnostics(legacy) == []
        pyproject = project / "pyproject.toml"

        async def after_config(text: str) -> dict[str, list[str]]:
            pyproject.write_text(text, encoding="utf-8")
            before = len(session.published)
            session.files_changed((pyproject, types.FileChangeType.Changed))

            def both() -> dict[str, list[str]] | None:
                seen = {p.uri: codes(list(p.diagnostics)) for p in session.published[before:]}
                return seen if {excluded, legacy} <= set(seen) else None

            return await session.until(both)

        plain = PYPROJECT.split("[tool.swacheck]")[0] + "[tool.swacheck]\n"
        assert await after_config(plain) == {excluded: ["SWA002"], legacy: ["SWA002"]}
        shown = len(session.shown)
        assert await after_config(plain + 'unknown-key = "x"\n') == {excluded: [], legacy: []}
        # Other messages may come first (the project indexed again after the last change).
        message = await session.until(
            lambda: [m for m in session.shown[shown:] if "unknown-key" in m.message] or None
        )
        assert message[0].type == types.MessageType.Error
        assert await after_config(PYPROJECT) == {excluded: [], legacy: []}
        assert await session.stop() == 0

    run(scenario())


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
def test_positions_in_the_negotiated_encoding(project: Path, encoding: str) -> None:
    """The SWA002 on the line with a non-BMP character (🦙: one character, two UTF-16
    units, four UTF-8 bytes): its range and its fix land in the right place."""
    text = (project / GRAPH_RUNNER).read_text(encoding="utf-8")
    row = next(n for n, line in enumerate(text.splitlines(), 1) if "🦙" in line)
    line = text.splitlines()[row - 1]
    column = line.index("torch.int64")

    async def scenario() -> None:
        session = Session()
        result = await session.start(project, caps=capabilities(encodings=[encoding]))
        assert session.encoding == encoding == str(result.capabilities.position_encoding)
        uri = session.open(project / GRAPH_RUNNER)
        swa002 = by_code(await session.diagnostics(uri), "SWA002")
        assert start_of(swa002.range) == lsp_position(text, row, column, encoding)
        assert start_of(swa002.range) != (row - 1, column) or encoding == "utf-32"
        actions = await session.code_actions(uri, swa002.range, [types.CodeActionKind.QuickFix])
        fix = next(a for a in actions if a.is_preferred)
        fixed = apply_edit(session, fix.edit)
        assert fixed.splitlines()[row - 1] == line.replace("torch.int64", "torch.int32")
        assert await session.stop() == 0

    run(scenario())


def test_lines_are_counted_as_lsp_counts_them(project: Path) -> None:
    """CRLF line ends, a form feed and a U+2028 in a comment (line breaks to
    str.splitlines, not to LSP or Python) before the finding: its line is still right,
    and its fix lands there and keeps the CRLF."""
    text = (project / GRAPH_RUNNER).read_text(encoding="utf-8")
    text = text.replace('"""CUDA-graph', '\x0c\n# a line\u2028separator\n"""CUDA-graph')
    text = text.replace("\n", "\r\n")
    lines = lsp_lines(text)
    row = next(n for n, line in enumerate(lines) if "🦙" in line)

    async def scenario() -> None:
        session = Session()
        await session.start(project)
        uri = session.open(project / GRAPH_RUNNER, text)
        swa002 = by_code(await session.diagnostics(uri), "SWA002")
        assert swa002.range.start.line == row
        actions = await session.code_actions(uri, swa002.range, [types.CodeActionKind.QuickFix])
        fixed = apply_edit(session, next(a for a in actions if a.is_preferred).edit)
        assert lsp_lines(fixed)[row] == lines[row].replace("torch.int64", "torch.int32")
        assert fixed.count("\r\n") == text.count("\r\n")
        assert await session.stop() == 0

    run(scenario())


def test_a_document_that_does_not_parse_gets_swa999_and_the_server_goes_on(
    project: Path,
) -> None:
    async def scenario() -> None:
        session = Session()
        await session.start(project)
        uri = session.open(project / GRAPH_RUNNER)
        assert codes(await session.diagnostics(uri)) == ["SWA002", "SWA003", "SWA004"]
        good = session.texts[uri]
        broken = good.replace("        if bs != raw_bs:\n", "        if bs != raw_bs\n")
        with pytest.raises(SyntaxError) as error:
            compile(broken, "graph_runner.py", "exec")
        diagnostics = await session.diagnostics(uri, session.change(uri, broken))
        (swa999,) = diagnostics
        assert swa999.code == "SWA999"
        assert swa999.severity == types.DiagnosticSeverity.Error
        assert swa999.code_description is None  # the engine's codes have no page
        assert error.value.lineno is not None and error.value.offset is not None
        assert swa999.range.start.line == error.value.lineno - 1
        assert swa999.range.start.character == error.value.offset - 1
        repaired = await session.diagnostics(uri, session.change(uri, good))
        assert codes(repaired) == ["SWA002", "SWA003", "SWA004"]
        assert await session.stop() == 0

    run(scenario())


def test_a_rule_that_raises_is_logged_and_the_others_still_report(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault injected into SWA003 in the server process (``sitecustomize``)."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(
        "from swacheck.rules import rule_by_code\n\n\n"
        "def _boom(self, node):\n"
        "    raise RuntimeError('injected fault')\n\n\n"
        "rule_by_code('SWA003').visit_Module = _boom\n",
        encoding="utf-8",
    )
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(inject), os.environ.get("PYTHONPATH", "")])
    )

    async def scenario() -> None:
        session = Session()
        await session.start(project)
        uri = session.open(project / GRAPH_RUNNER)
        assert codes(await session.diagnostics(uri)) == ["SWA002", "SWA004"]
        logged = await session.until(
            lambda: [m for m in session.logs if "injected fault" in m.message] or None
        )
        assert logged[0].type == types.MessageType.Error
        assert "SWA003" in logged[0].message and "graph_runner.py" in logged[0].message
        assert await session.stop() == 0

    run(scenario())


# -- code actions and hover -------------------------------------------------------------


def test_quick_fixes_safe_preferred_unsafe_labelled(project: Path) -> None:
    async def scenario() -> None:
        session = Session()
        await session.start(project)
        uri = session.open(project / POOL)
        diagnostics = await session.diagnostics(uri)
        assert codes(diagnostics) == ["SWA001", "SWA002", "SWA006"]
        safe = await session.code_actions(uri, by_code(diagnostics, "SWA006").range)
        (fix,) = [a for a in safe if a.is_preferred]
        assert fix.kind == types.CodeActionKind.QuickFix and "unsafe" not in fix.title
        fixed = apply_edit(session, fix.edit)
        assert "untyped_storage" not in fixed and "full_loc.data_ptr()" in fixed
        after = await session.diagnostics(uri, session.change(uri, fixed))
        assert codes(after) == ["SWA001", "SWA002"]
        unsafe = await session.code_actions(uri, by_code(after, "SWA002").range)
        (cast,) = [a for a in unsafe if a.title.startswith("Cast")]
        assert "unsafe fix" in cast.title and not cast.is_preferred
        casted = apply_edit(session, cast.edit)
        assert "self.full_to_swa_index_mapping[full_loc].to(torch.int32)" in casted
        assert codes(await session.diagnostics(uri, session.change(uri, casted))) == ["SWA001"]
        assert await session.stop() == 0

    run(scenario())


def test_noqa_suppression_added_or_appended(project: Path) -> None:
    async def scenario() -> None:
        session = Session()
        await session.start(project)
        uri = session.open(project / POOL)
        diagnostics = await session.diagnostics(uri)
        swa006 = by_code(diagnostics, "SWA006")
        row = swa006.range.start.line
        actions = await session.code_actions(uri, swa006.range)
        (noqa,) = [a for a in actions if "noqa" in a.title]
        assert noqa.title.startswith("Suppress SWA006")
        suppressed = apply_edit(session, noqa.edit)
        assert suppressed.splitlines()[row].endswith("full_loc.numel())  # noqa: SWA006")
        after = await session.diagnostics(uri, session.change(uri, suppressed))
        assert codes(after) == ["SWA001", "SWA002"]
        # A row with another tool's noqa gets the code appended to that comment.
        swa001 = by_code(after, "SWA001")
        row = swa001.range.start.line
        lines = suppressed.splitlines(keepends=True)
        lines[row] = lines[row].rstrip("\n") + "  # noqa: E501\n"
        other = "".join(lines)
        swa001 = by_code(await session.diagnostics(uri, session.change(uri, other)), "SWA001")
        actions = await session.code_actions(uri, swa001.range)
        (noqa,) = [a for a in actions if "noqa" in a.title]
        assert noqa.title.startswith("Add SWA001 to the `# noqa` comment")
        appended = apply_edit(session, noqa.edit)
        assert appended.splitlines()[row].endswith("= 0  # noqa: E501, SWA001")
        final = await session.diagnostics(uri, session.change(uri, appended))
        assert codes(final) == ["SWA002"]
        assert await session.stop() == 0

    run(scenario())


@pytest.mark.parametrize("resolve", [False, True], ids=["eager", "resolved"])
def test_fix_all_is_what_audit_fix_writes(project: Path, tmp_path: Path, resolve: bool) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    subprocess.run(
        [sys.executable, "-m", "swacheck", "audit", "--no-cache", "--fix", str(GRAPH_RUNNER)],
        cwd=copy,
        capture_output=True,
        check=False,
    )
    expected = (copy / GRAPH_RUNNER).read_text(encoding="utf-8")
    assert expected != (project / GRAPH_RUNNER).read_text(encoding="utf-8")

    async def scenario() -> None:
        session = Session()
        await session.start(project, caps=capabilities(resolve=resolve))
        uri = session.open(project / GRAPH_RUNNER)
        await session.diagnostics(uri)
        anywhere = types.Range(
            start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)
        )
        (action,) = await session.code_actions(uri, anywhere, [types.CodeActionKind.SourceFixAll])
        assert action.kind == "source.fixAll.swacheck"
        if resolve:
            assert action.edit is None
            action = await session.client.code_action_resolve_async(action)
        fixed = apply_edit(session, action.edit)
        assert fixed == expected
        # Unsafe fixes are not in "fix all" unless asked for: SWA004's stays.
        assert codes(await session.diagnostics(uri, session.change(uri, fixed))) == ["SWA004"]
        assert await session.stop() == 0

    run(scenario())


def test_hover_shows_the_rule_page(project: Path) -> None:
    async def scenario() -> None:
        session = Session()
        await session.start(project)
        uri = session.open(project / GRAPH_RUNNER)
        swa002 = by_code(await session.diagnostics(uri), "SWA002")
        shown = await session.client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=uri), position=swa002.range.start
            )
        )
        assert shown is not None and isinstance(shown.contents, types.MarkupContent)
        page = shown.contents.value
        assert page.startswith("# SWA002 (swa-loc-int64)")
        assert "Invariant: I3" in page and "## Why is this bad?" in page
        assert swa002.code_description is not None and swa002.code_description.href in page
        # The code in a noqa comment gets its page too.
        text = session.texts[uri] + "x = 1  # noqa: SWA005\n"
        version = session.change(uri, text)
        await session.diagnostics(uri, version)
        row = len(text.splitlines()) - 1
        where = types.Position(line=row, character=text.splitlines()[row].index("SWA005") + 2)
        shown = await session.client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=where)
        )
        assert shown is not None and isinstance(shown.contents, types.MarkupContent)
        assert shown.contents.value.startswith("# SWA005 (dispatch-before-invalidation)")
        assert await session.stop() == 0

    run(scenario())


# -- what the server leaves alone ---------------------------------------------------------


def _tree_state(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and every file's and folder's modification time (a folder's
    changes when something is created or removed in it, even for a moment)."""
    return {
        str(path.relative_to(root)): (
            path.read_bytes() if path.is_file() else b"",
            path.stat().st_mtime_ns,
        )
        for path in sorted(root.rglob("*"))
    }


# What an edit of a buffer adds (never saved to disk): no cache entry may hold it.
UNSAVED = "unsaved_marker_swa_loc"


@pytest.mark.parametrize("cached", [False, True], ids=["no-cache", "after-swacheck-audit"])
def test_a_session_writes_nothing_but_the_cache_and_nothing_of_its_buffers(
    project: Path, cached: bool
) -> None:
    """Edits, every kind of code action, hovers, close and shutdown: the tree's bytes
    and modification times are as before but for the project's cache, which the server
    shares with ``swacheck audit`` (it reads it: the same diagnostics; and it keeps what
    it learnt of the files on disk), and no entry holds what only a buffer held."""
    files = (POOL, GRAPH_RUNNER, MODEL_RUNNER)
    expected = {f: sorted(d["code"] for d in cli_findings(project, f)) for f in files}
    if cached:
        proc = subprocess.run(
            [sys.executable, "-m", "swacheck", "audit"], cwd=project, capture_output=True
        )
        assert proc.returncode == 1, proc.stderr
        assert (project / ".swacheck_cache").is_dir()
    before = _tree_state(project)

    async def scenario() -> None:
        session = Session()
        await session.start(project, caps=capabilities(resolve=True))
        for relative in files:
            uri = session.open(project / relative)
            diagnostics = await session.diagnostics(uri)
            assert codes(diagnostics) == expected[relative]
            for diagnostic in diagnostics:
                for action in await session.code_actions(uri, diagnostic.range):
                    if action.edit is None:
                        action = await session.client.code_action_resolve_async(action)
                    apply_edit(session, action.edit)
                await session.client.text_document_hover_async(
                    types.HoverParams(
                        text_document=types.TextDocumentIdentifier(uri=uri),
                        position=diagnostic.range.start,
                    )
                )
            everything = types.Range(
                start=types.Position(line=0, character=0), end=types.Position(line=999, character=0)
            )
            for action in await session.code_actions(uri, everything, ["source"]):
                await session.client.code_action_resolve_async(action)
            edited = session.texts[uri].replace("torch.int64", "torch.long")
            edited += f"\n{UNSAVED} = torch.zeros(4, dtype=torch.int64)\n"
            diagnostics = await session.diagnostics(uri, session.change(uri, edited))
            assert any(UNSAVED in d.message for d in diagnostics)
            session.save(uri)
            session.close(uri)
        assert await session.stop() == 0

    run(scenario())
    after = _tree_state(project)
    cache = ".swacheck_cache"
    assert {k: v for k, v in after.items() if not k.startswith(cache)} == {
        k: v for k, v in before.items() if not k.startswith(cache)
    }
    entries = [project / k for k, (data, _) in after.items() if k.startswith(cache) and data]
    assert entries, "the server keeps the project's facts"
    assert not [path for path in entries if UNSAVED.encode() in path.read_bytes()]


def test_exit_without_shutdown_is_status_1(project: Path) -> None:
    async def scenario() -> int | None:
        session = Session()
        await session.start(project)
        session.client.exit(None)
        await asyncio.wait_for(session.client.stop(), 60)
        return session.client.exit_code

    assert run(scenario()) == 1


def test_start_up_imports_neither_libcst_nor_torch() -> None:
    """libcst comes with the first audit that parses a file; torch never."""
    code = (
        "import sys, swacheck.cli, swacheck.server.app\n"
        "print(sorted(m for m in ('libcst', 'torch') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_server_without_the_lsp_extra_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pygls", None)
    monkeypatch.delitem(sys.modules, "swacheck.server.app", raising=False)
    assert cli.main(["server"]) == 2
    message = capsys.readouterr().err
    assert "`lsp` extra" in message and "install '.[lsp]'" in message
    assert "not installed: pygls" in message


def test_apply_text_edits_counts_code_units() -> None:
    """The harness's own edit application (what the assertions above rely on): the
    ``1`` after a llama is at 14 in UTF-16, 16 in UTF-8 and 13 in UTF-32."""
    text = "a = '🦙'; b = 1\n"
    for encoding, column in (("utf-16", 14), ("utf-8", 16), ("utf-32", 13)):
        where = types.Range(
            start=types.Position(line=0, character=column),
            end=types.Position(line=0, character=column + 1),
        )
        edit = types.TextEdit(range=where, new_text="2")
        assert apply_text_edits(text, [edit], encoding) == "a = '🦙'; b = 2\n"
