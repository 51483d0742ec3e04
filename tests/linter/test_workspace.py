"""The engine's entry point (``swacheck.engine.workspace.Workspace``) on real files: the
bundled examples as a project (a git repository), audited whole, by a few files, and as
in-memory documents, as pre-commit and an editor do."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from swacheck.catalogue import catalogue
from swacheck.config import Config
from swacheck.engine.workspace import Workspace
from swacheck.rules import all_rules

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# The two files of the examples whose order findings need the other files' facts.
PAIR = ("model_runner.py", "cuda_graph_runner.py")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The examples in a git repository of their own (its root is the project root)."""
    root = tmp_path / "project"
    shutil.copytree(EXAMPLES, root, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def _rows(findings) -> list[tuple[str, int, str]]:  # type: ignore[no-untyped-def]
    return sorted((Path(f.path).name, f.start.row, f.code) for f in findings)


def _workspace(root: Path, **kw: object) -> Workspace:
    return Workspace(Config(), all_rules(), root=root, **kw)  # type: ignore[arg-type]


def test_a_few_files_are_audited_in_the_context_of_their_project(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    whole = _workspace(project, cache=False).audit([Path(".")])
    pair = _workspace(project, cache=False).audit([Path(name) for name in PAIR])
    expected = [row for row in _rows(whole.findings) if row[0] in PAIR]
    assert _rows(pair.findings) == expected
    # The cross-file findings are what a project-less audit of the pair would lose.
    assert {"SWA004", "SWA005"} <= {code for _, _, code in expected}
    assert pair.files_seen == 2
    assert set(pair.files) == set(PAIR)


def test_documents_override_the_disk_and_only_they_are_reported(project: Path) -> None:
    workspace = _workspace(project, cache=False)
    runner = project / "model_runner.py"
    on_disk = runner.read_text()
    # The editor's buffer invalidates before dispatching: SWA005 is gone from it.
    fixed = on_disk.replace(
        "        if can_run_graph:\n",
        "        if self.is_hybrid_swa:\n"
        "            self.token_to_kv_pool.invalidate_loc_cache()\n"
        "        if can_run_graph:\n",
    )
    assert fixed != on_disk
    before = workspace.audit(documents={runner: on_disk})
    after = workspace.audit(documents={runner: fixed})
    assert [f.code for f in before.findings] == ["SWA005"]
    assert after.findings == []
    assert runner.read_text() == on_disk
    assert before.findings_for(runner) == before.findings


def test_fixes_of_a_document_are_returned_not_written(project: Path) -> None:
    workspace = _workspace(project, cache=False)
    target = project / "cuda_graph_runner.py"
    text = target.read_text()
    result = workspace.audit(documents={target: text}, fix=True)
    [(name, data)] = result.fixed_documents.items()
    assert Path(name).name == "cuda_graph_runner.py"
    assert "torch.zeros((max_num_token,), dtype=torch.int32)\n" in data.decode()
    assert target.read_text() == text  # nothing written
    assert {f.code for f in result.fixed} >= {"SWA002"}
    assert "SWA002" not in {f.code for f in result.findings}


def test_a_warm_workspace_follows_edits_on_disk(project: Path) -> None:
    workspace = _workspace(project, cache=False)
    runner = project / "model_runner.py"
    assert [f.code for f in workspace.audit([runner]).findings] == ["SWA005"]
    # Another file changes: the pool no longer defines the invalidation, so the order
    # rules have no cache to keep consistent (their scope) and SWA005 goes away.
    pool = project / "swa_memory_pool.py"
    pool.write_text(pool.read_text().replace("invalidate_loc_cache", "drop_translations"))
    workspace.files_changed([pool])
    assert workspace.audit([runner], rescan=False).findings == []
    pool.write_text((EXAMPLES / "swa_memory_pool.py").read_text())
    workspace.files_changed([pool])
    assert [f.code for f in workspace.audit([runner], rescan=False).findings] == ["SWA005"]


def test_rescan_false_trusts_the_last_scan_but_for_files_named_changed(project: Path) -> None:
    """A language server's audits (``rescan=False``) stat only the files named by
    ``files_changed``: a change on disk nobody names is not seen (``rescan=True`` sees
    it), a named one is, and either way the findings are a fresh workspace's."""
    workspace = _workspace(project, cache=False)
    runner = project / "model_runner.py"
    document = {runner: runner.read_text()}
    flagged = _rows(workspace.audit(documents=document, rescan=False).findings)
    assert [code for _, _, code in flagged] == ["SWA005"]
    pool = project / "swa_memory_pool.py"
    pool.write_text(pool.read_text().replace("invalidate_loc_cache", "drop_translations"))
    fresh = _workspace(project, cache=False).audit(documents=document)
    assert fresh.findings == []
    # Not named: the scan of the first audit stands.
    assert _rows(workspace.audit(documents=document, rescan=False).findings) == flagged
    assert workspace.audit(documents=document, rescan=True).findings == fresh.findings
    # Back on disk, unnamed, then named.
    pool.write_text((EXAMPLES / "swa_memory_pool.py").read_text())
    assert workspace.audit(documents=document, rescan=False).findings == []
    workspace.files_changed([pool])
    again = workspace.audit(documents=document, rescan=False)
    assert again.findings == _workspace(project, cache=False).audit(documents=document).findings
    assert _rows(again.findings) == flagged
    # A new file named: the project is walked again and only it is read.
    renamed = (EXAMPLES / "swa_memory_pool.py").read_text().replace("invalidate_loc_cache", "x")
    pool.write_text(renamed)
    (project / "other_pool.py").write_text((EXAMPLES / "swa_memory_pool.py").read_text())
    workspace.files_changed([project / "other_pool.py"])
    assert _rows(workspace.audit(documents=document, rescan=False).findings) == flagged
    workspace.files_changed([pool])
    assert (
        workspace.audit(documents=document, rescan=False).findings
        == _workspace(project, cache=False).audit(documents=document).findings
    )


def test_the_cache_gives_the_same_findings_per_file_as_a_whole_audit(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold call on two files builds the project's facts; later calls use them."""
    monkeypatch.chdir(project)
    specs = catalogue(Config())
    cold = Workspace.for_paths([Path(PAIR[0])], Config(), specs).audit([Path(PAIR[0])])
    warm = Workspace.for_paths([Path(PAIR[0])], Config(), specs).audit([Path(PAIR[0])])
    whole = Workspace.for_paths([Path(".")], Config(), specs).audit([Path(".")])
    assert _rows(cold.findings) == _rows(warm.findings)
    assert _rows(cold.findings) == [r for r in _rows(whole.findings) if r[0] == PAIR[0]]


def test_a_document_no_longer_passed_counts_from_disk_again(project: Path) -> None:
    """An editor's unsaved buffer is project context while open; once closed (no longer
    passed), the file on disk is, with ``rescan=False`` too."""
    workspace = _workspace(project, cache=False)
    runner, pool = project / "model_runner.py", project / "swa_memory_pool.py"
    document = {runner: runner.read_text()}
    assert [f.code for f in workspace.audit(documents=document, rescan=False).findings] == [
        "SWA005"
    ]
    unsaved = pool.read_text().replace("invalidate_loc_cache", "drop_translations")
    both = workspace.audit(documents={**document, pool: unsaved}, rescan=False)
    assert both.findings_for(runner) == []
    closed = workspace.audit(documents=document, rescan=False)
    assert [f.code for f in closed.findings] == ["SWA005"]


def test_excluded_documents_as_the_project_excludes_them(project: Path) -> None:
    """``Workspace.excluded``: ``extend-exclude`` and ``.gitignore`` as an audit of the
    project applies them (with ``force_exclude``, documents too); a ``.gitignore``
    edited is read again once named changed."""
    pool = (EXAMPLES / "swa_memory_pool.py").read_text()
    generated = project / "generated" / "pool.py"
    vendored = project / "vendored" / "pool.py"
    for path in (generated, vendored):
        path.parent.mkdir()
        path.write_text(pool)
    config = Config(extend_exclude=("generated",))
    workspace = Workspace(config, all_rules(), root=project, cache=False)
    assert workspace.excluded(generated)
    assert not workspace.excluded(vendored)
    assert not workspace.excluded(project / "model_runner.py")
    documents = {generated: pool, vendored: pool}
    audited = workspace.audit(documents=documents, force_exclude=True)
    assert set(audited.files.values()) == {vendored}
    (project / ".gitignore").write_text("vendored/\n")
    assert not workspace.excluded(vendored)  # not named changed: the last answer stands
    workspace.files_changed([project / ".gitignore"])
    assert workspace.excluded(vendored)
    assert workspace.audit(documents=documents, force_exclude=True).files == {}


def _listing(folder: Path) -> dict[str, int]:
    """Every file and folder under ``folder`` with its modification time."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*"))}


def test_the_server_starts_warm_from_the_commands_cache_and_keeps_no_unsaved_buffer(
    project: Path, swacheck_at
) -> None:
    """The language server's workspace reads the inventory, facts and catalogue
    ``swacheck audit`` wrote, so its first audit parses nothing; an edited buffer leaves
    no entry (its facts and findings describe bytes that are not on disk)."""
    from swacheck.server.projects import Projects

    runner = project / "model_runner.py"
    text = runner.read_text()
    cold = _workspace(project, cache=False).audit(documents={runner: text})
    assert cold.facts_parsed > 1
    swacheck_at(project)("audit", check_rc=1)
    folder = project / ".swacheck_cache"
    workspace = Projects([project]).project_of(runner).workspace
    warm = workspace.audit(documents={runner: text}, rescan=False)
    assert warm.findings == cold.findings
    assert warm.facts_parsed == 0  # the document's bytes are the file's: its facts are cached
    before = _entries(folder)
    edited = text.replace("        if can_run_graph:\n", "        if can_run_graph:  # edited\n")
    assert edited != text
    again = workspace.audit(documents={runner: edited}, rescan=False)
    assert again.facts_parsed == 1
    assert _rows(again.findings) == _rows(cold.findings)
    after = _entries(folder)
    written = {path for path, data in after.items() if before.get(path) != data}
    assert written <= {_inventory_entry(folder)}


def test_the_servers_first_diagnostics_after_the_command_read_back_no_facts(
    project: Path, swacheck_at, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After ``swacheck audit``, the open document's findings and the rules' activation
    are in the cache under the project's facts digests: the server's first round reads
    no file's facts back and builds no project index (what made an editor's first
    diagnostics on SGLang 0.5.23 take seconds); an edit then reads them."""
    from swacheck.analysis.index import ProjectIndex
    from swacheck.engine.facts_store import FactsRecord
    from swacheck.server.documents import Snapshot
    from swacheck.server.projects import Projects

    runner = project / "model_runner.py"
    text = runner.read_text()
    edited = text.replace("        if can_run_graph:\n", "        if can_run_graph:  # edited\n")
    expected = [
        _workspace(project, cache=False).audit(documents={runner: version}).findings
        for version in (text, edited)
    ]
    swacheck_at(project)("audit", check_rc=1)
    read: list[str] = []
    facts = FactsRecord.facts.fget
    monkeypatch.setattr(FactsRecord, "facts", property(lambda r: read.append(r.digest) or facts(r)))
    built: list[int] = []
    init = ProjectIndex.__init__
    monkeypatch.setattr(
        ProjectIndex, "__init__", lambda index, *a: built.append(1) or init(index, *a)
    )
    projects = Projects([project])
    try:
        first = projects.audit([Snapshot(runner.as_uri(), runner, 1, text)], complete=False)
        assert first.findings[runner.as_uri()] == expected[0]
        assert not first.partial and not read and not built
        then = projects.audit([Snapshot(runner.as_uri(), runner, 2, edited)])
        assert then.findings[runner.as_uri()] == expected[1]
        assert read and built
    finally:
        projects.close()


def test_the_commands_start_warm_from_the_servers_cache(project: Path) -> None:
    """A server's first complete audit reads every file of the project: it keeps their
    facts, so the command after it parses no file for them."""
    from swacheck.server.projects import Projects

    runner = project / "model_runner.py"
    projects = Projects([project])
    try:
        workspace = projects.project_of(runner).workspace
        indexed = workspace.audit(documents={runner: runner.read_text()}, rescan=False)
    finally:
        projects.close()
    assert indexed.facts_parsed > 1
    command = Workspace(Config(), catalogue(Config()), root=project).audit([project])
    assert command.facts_parsed == 0
    assert command.findings_for(runner) == indexed.findings


def test_a_server_told_of_no_change_sees_an_edited_configuration(project: Path) -> None:
    """A client that watches no file reports no change: the server kept the
    configuration and exclusions it first read, and its findings were those of a
    ``select`` and a ``.gitignore`` edited away since."""
    from swacheck.server.documents import Snapshot
    from swacheck.server.projects import Projects

    runner = project / "cuda_graph_runner.py"
    snapshot = Snapshot(runner.as_uri(), runner, 0, runner.read_text())
    projects = Projects([project])  # not ``watched``
    try:
        first = projects.audit([snapshot]).findings[snapshot.uri]
        assert {f.code for f in first} >= {"SWA002", "SWA003"}
        (project / "pyproject.toml").write_text("[tool.swacheck]\nselect = ['SWA003']\n")
        assert {f.code for f in projects.audit([snapshot]).findings[snapshot.uri]} == {"SWA003"}
        (project / ".gitignore").write_text("cuda_graph_runner.py\n")
        (project / "pyproject.toml").write_text("[tool.swacheck]\n")
        assert projects.audit([snapshot]).findings[snapshot.uri] == []  # excluded now
    finally:
        projects.close()


def test_fix_all_sees_the_open_buffers_its_diagnostics_saw(project: Path) -> None:
    """The editor's fix-all on the graph runner, with the pool's buffer open and holding
    no translation cache (the project is then of the int64 design, its translation's
    dtype is the convention: no SWA002, whose fix would make the runner's buffer int32):
    the fix is made in the context of that buffer, as the diagnostics were, also where
    the client reports no change on disk (each audit finds the projects again, and the
    buffer was left out of the fix)."""
    from swacheck.server.documents import Snapshot
    from swacheck.server.projects import Projects

    runner, pool = project / "cuda_graph_runner.py", project / "swa_memory_pool.py"
    edited = pool.read_text().replace("invalidate_loc_cache(", "drop_loc_cache(")
    buffers = [
        Snapshot(runner.as_uri(), runner, 0, runner.read_text()),
        Snapshot(pool.as_uri(), pool, 1, edited),
    ]
    projects = Projects([project])  # not ``watched``
    try:
        audited = projects.audit(buffers)
        assert "SWA002" not in {f.code for f in audited.findings[buffers[0].uri]}
        fixed = projects.fix(buffers[0], buffers[1:], unsafe=True)
    finally:
        projects.close()
    assert fixed is not None and "self.out_cache_loc_swa.zero_()" in fixed  # SWA003's fix
    assert "torch.zeros((max_num_token,), dtype=torch.int32)\n" not in fixed  # no SWA002 fix


def _entries(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _inventory_entry(folder: Path) -> Path | None:
    """The inventory's entry (rewritten as files are read again), if there is one."""
    import pickle

    for path, data in _entries(folder).items():
        if path.name not in (".gitignore", "CACHEDIR.TAG"):
            value = pickle.loads(data[32:])  # after the signature: the test trusts its cache
            if isinstance(value, dict) and "listings" in value:
                return path
    return None


def test_a_partial_audit_reads_no_file_the_cache_holds_no_state_of(
    project: Path, swacheck_at
) -> None:
    """``complete=False`` (an editor's first diagnostics after a cold start): project files
    the inventory holds no state of are left out unread, files it knows stand in with their
    cached facts, and the complete audit after it reads the rest."""
    from swacheck.server.projects import Projects

    plain = "def add(a, b):\n    return a + b\n"  # no rule's trigger: never parsed
    (project / "util.py").write_text(plain)
    runner = project / "model_runner.py"
    text = runner.read_text()
    others = sum(1 for path in project.rglob("*.py") if path != runner)
    workspace = _workspace(project, cache=False)
    partial = workspace.audit(documents={runner: text}, complete=False, rescan=False)
    # Every other file is left out, the plain one too: nothing but the document was read.
    assert (partial.left_out, partial.facts_parsed) == (others, 1)
    # SWA005 needs the pool's facts (its invalidation method), which nothing read yet.
    assert partial.findings == []
    full = workspace.audit(documents={runner: text}, rescan=False)
    assert full.left_out == 0 and full.facts_parsed == others  # all but util.py
    assert [f.code for f in full.findings] == ["SWA005"]
    # After the command filled the cache, only a file it never saw is left out (the others
    # are read where they were racy when recorded: their facts are cached).
    swacheck_at(project)("audit", check_rc=1)
    (project / "other_util.py").write_text(plain)
    warm = Projects([project]).project_of(runner).workspace
    warm.files_changed([project / "other_util.py"])  # as the editor names a new file
    again = warm.audit(documents={runner: text}, complete=False, rescan=False)
    assert (again.left_out, again.facts_parsed) == (1, 0)
    assert again.findings == full.findings
    assert warm.audit(documents={runner: text}, rescan=False).left_out == 0


def test_the_command_audits_given_files_in_their_project(project: Path, swacheck_at) -> None:
    run = swacheck_at(project)
    whole = json.loads(run("audit", "--output-format", "json", check_rc=1).stdout)
    pair = json.loads(run("audit", *PAIR, "--output-format", "json", check_rc=1).stdout)
    assert pair == [f for f in whole if Path(f["filename"]).name in PAIR]
    # Outside any project (no git, no [tool.swacheck]) only the given files count.
    shutil.rmtree(project / ".git")
    alone = json.loads(run("audit", *PAIR, "--output-format", "json", check_rc=1).stdout)
    assert {f["code"] for f in alone} == {"SWA002", "SWA003"}


def test_a_project_is_found_by_its_configuration(tmp_path: Path, swacheck_at) -> None:
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLES, root / "python" / "engine")
    (root / "python" / "pyproject.toml").write_text("[tool.swacheck]\n")
    run = swacheck_at(root / "python" / "engine")
    pair = json.loads(run("audit", *PAIR, "--output-format", "json", check_rc=1).stdout)
    assert {"SWA004", "SWA005"} <= {f["code"] for f in pair}
