"""The cache as a property (issue 39): whatever ran before, a warm answer is the answer
of an audit without a cache.

:class:`CacheMachine` is a Hypothesis state machine over a real tree in a git repository
of its own (the bundled examples, and where given a few files of a real SGLang release).
Between runs it edits files (rows shifted, dtypes swapped, the invalidation renamed,
snippets appended that change other files' findings, syntax errors, suppressions), adds,
deletes and renames them (into excluded folders too), rewrites or removes
``[tool.swacheck]`` (``select``, ``ignore``, ``extend-exclude``, ``exclude``,
``per-file-ignores``, ``swa-loc-dtype``, ``max-file-size``, ``respect-gitignore``) and
the ``.gitignore``, and opens, types in, saves and closes an editor's buffers. The front
ends run one after another on the one cache at the project's root:

- the command line on the whole tree, from the root or a sub-folder, with ``--config``
  overrides, ``--select``/``--ignore``/``--extend-select``, ``--no-prefilter`` and
  ``--diff`` (its exit status and output against ``--no-cache``'s);
- the pre-commit call: files given, ``--force-exclude``; and ``--stdin-filename`` on a
  buffer (the same);
- the language server's :class:`~swacheck.server.projects.Projects`, one warm workspace
  kept across steps, told of every change on disk or (a client that watches nothing)
  of none, auditing the open buffers, after a cold start's partial round or not, and
  their fix-all (against a workspace without a cache given the same buffers).

Invariants after every step: one cache folder (the root's); no cache entry holds what
only an unsaved buffer held (its edits name ``unsaved``). ``tests/linter/
test_cache_differential.py`` runs it with a bounded budget; ``benchmarks/
cache_differential.py`` for long.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from swacheck.catalogue import catalogue
from swacheck.cli import main
from swacheck.config import resolve_config
from swacheck.engine import project as project_module
from swacheck.engine.codes import ENGINE_CODES
from swacheck.engine.project import find_root
from swacheck.engine.selection import select
from swacheck.engine.workspace import Workspace
from swacheck.finding import Finding
from swacheck.rules import all_rules
from swacheck.server.documents import Snapshot
from swacheck.server.projects import Projects

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
CACHE = ".swacheck_cache"
# A file edited in a buffer names this in what it adds: no cache entry may hold it.
UNSAVED = "unsaved"
# How long after its last change a file's recorded state is trusted (``RACY_NS``):
# shortened so that a test's quick succession of edits and audits exercises trusted
# entries too. Safe while writes are more than a clock tick of the file system apart,
# which every audit between them is.
RACY_NS = 50_000_000

CODES = [rule.code for rule in all_rules()] + [code.code for code in ENGINE_CODES]
DTYPES: list[Any] = ["auto", "int32", "int64", {"write": "int64", "page-table": "int32"}]
EXCLUDES = ["vendored", "sglang/srt/speculative", "swa_*.py", "added"]
IGNORE_GLOBS = ["sglang/**", "*_runner.py", "vendored/*", "added/*.py", "triton_backend.py"]
# A file over this is answered with SWA999 (SGLang's files are; the examples are not).
SMALL_FILE = 12_000

# What edits add: an SWA location allocated as int64 (SWA002), a translation returning
# int64 (changes the convention other files' SWA002 is judged by), a memoising pool
# (opens the order rules' scope), an unused suppression (SWA100), a syntax error.
SNIPPETS = [
    "\n\nimport torch\n\n{name}_swa_loc = torch.zeros((8,), dtype=torch.int64)\n",
    "\n\nclass {Name}Pool:\n    def translate_loc_from_full_to_swa(self, kv_indices):\n"
    "        return self.full_to_swa_index_mapping[kv_indices].to(torch.int64)\n",
    "\n\nclass {Name}Cache:\n    def invalidate_loc_cache(self):\n        self.cached = None\n\n"
    "    def translate_loc_from_full_to_swa(self, kv_indices):\n"
    "        if self.cached is None:\n"
    "            self.cached = self.full_to_swa_index_mapping[kv_indices]\n"
    "        return self.cached\n",
    "\n\n{name}_value = 1  # noqa: SWA002\n",
    "\n\ndef {name}(:\n    pass\n",
]


def _toml(value: Any) -> str:
    if isinstance(value, str | int | bool):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return "[" + ", ".join(_toml(v) for v in value) + "]"


@st.composite
def settings(draw: st.DrawFn) -> dict[str, Any]:
    """Some ``[tool.swacheck]`` keys, each drawn or left out."""
    chosen: dict[str, Any] = {}
    codes = st.lists(st.sampled_from(CODES), min_size=1, max_size=4, unique=True)
    if draw(st.booleans()):
        chosen["select"] = draw(codes)
    if draw(st.booleans()):
        chosen["ignore"] = draw(codes)
    if draw(st.booleans()):
        chosen["extend-exclude"] = draw(st.lists(st.sampled_from(EXCLUDES), max_size=2))
    if draw(st.booleans()):
        globs = st.dictionaries(st.sampled_from(IGNORE_GLOBS), codes, min_size=1, max_size=2)
        chosen["per-file-ignores"] = draw(globs)
    if draw(st.booleans()):
        chosen["swa-loc-dtype"] = draw(st.sampled_from(DTYPES))
    if draw(st.integers(0, 4)) == 0:
        chosen["max-file-size"] = SMALL_FILE
    if draw(st.integers(0, 4)) == 0:
        chosen["exclude"] = draw(st.lists(st.sampled_from(EXCLUDES), max_size=2))
    if draw(st.integers(0, 4)) == 0:
        chosen["respect-gitignore"] = False
    return chosen


def _mutate(text: str, how: int, where: int, name: str) -> str:
    """``text`` edited one way (``how``) at one place (``where``): a comment line (rows
    shift), an int32/int64 swapped, the invalidation renamed, or a snippet appended."""
    lines = text.splitlines(keepends=True)
    if how == 0:
        at = where % (len(lines) + 1)
        return "".join([*lines[:at], f"# {name}\n", *lines[at:]])
    if how == 1:
        spots = [i for i, line in enumerate(lines) if "int32" in line or "int64" in line]
        if spots:
            i = spots[where % len(spots)]
            swapped = lines[i].replace("int32", "\0").replace("int64", "int32")
            lines[i] = swapped.replace("\0", "int64")
            return "".join(lines)
    if how == 2 and "invalidate_loc_cache" in text:
        return text.replace("invalidate_loc_cache", f"invalidate_{name}")
    snippet = SNIPPETS[where % len(SNIPPETS)]
    return text + snippet.format(name=name, Name=name.title().replace("_", ""))


class CacheMachine(RuleBasedStateMachine):
    """See the module docstring. ``sglang``: a release's ``sglang/`` folder whose
    ``SGLANG_FILES`` join the tree (``None``: the examples alone)."""

    SGLANG_FILES = (
        "srt/mem_cache/swa_memory_pool.py",
        "srt/model_executor/breakable_cuda_graph_runner.py",
        "srt/speculative/multi_layer_eagle_draft_extend_cuda_graph_runner.py",
    )

    def __init__(self, sglang: Path | None = None) -> None:
        super().__init__()
        self.base = Path(tempfile.mkdtemp(prefix="swacheck-differential-"))
        self.root = self.base / "project"
        self.root.mkdir()
        for source in EXAMPLES.glob("*.py"):
            shutil.copy(source, self.root / source.name)
        (self.root / "vendored").mkdir()
        shutil.copy(EXAMPLES / "cuda_graph_runner.py", self.root / "vendored" / "runner.py")
        for relative in self.SGLANG_FILES if sglang is not None else ():
            target = self.root / "sglang" / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(sglang / relative, target)
        subprocess.run(["git", "init", "-q"], cwd=self.root, check=True)
        self.counter = 0
        self.projects = Projects([self.root])
        # Open documents: path -> buffer text (may differ from the disk).
        self.documents: dict[Path, str] = {}
        self.versions: dict[Path, int] = {}
        self.saved_names: set[str] = set()
        self.steps = 0
        # Comparisons made, by front end.
        self.compared: collections.Counter[str] = collections.Counter()
        self._racy = project_module.RACY_NS
        project_module.RACY_NS = RACY_NS

    def teardown(self) -> None:
        project_module.RACY_NS = self._racy
        self.projects.close()
        shutil.rmtree(self.base, ignore_errors=True)

    # -- the tree -------------------------------------------------------------------------

    def files(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("*.py") if CACHE not in p.parts)

    def name(self) -> str:
        self.counter += 1
        return f"edit{self.counter}"

    def changed(self, *paths: Path) -> None:
        """What a watching client reports to the server (one that does not watch, nothing)."""
        if self.projects.watched:
            self.projects.files_changed(list(paths))

    def pick(self, index: int) -> Path | None:
        files = self.files()
        return files[index % len(files)] if files else None

    @initialize(chosen=settings(), watched=st.booleans(), opened=st.lists(st.integers(0, 99)))
    def configure_first(self, chosen: dict[str, Any], watched: bool, opened: list[int]) -> None:
        # A client that reports changes on disk (the server trusts it), or one that does
        # not (every audit looks at every file); the files open in the editor.
        self.projects.watched = watched
        self.configure(chosen)
        for index in opened:
            self.open_document(index)

    @rule(chosen=settings() | st.none())
    def configure(self, chosen: dict[str, Any] | None) -> None:
        """``[tool.swacheck]`` with ``chosen`` (``None``: no configuration file; the git
        repository is the project)."""
        pyproject = self.root / "pyproject.toml"
        if chosen is None:
            pyproject.unlink(missing_ok=True)
        else:
            lines = ["[tool.swacheck]", *(f"{k} = {_toml(v)}" for k, v in chosen.items())]
            pyproject.write_text("\n".join(lines) + "\n")
        self.changed(pyproject)

    @rule(index=st.integers(0, 99), how=st.integers(0, 3), where=st.integers(0, 999))
    def edit(self, index: int, how: int, where: int) -> None:
        path = self.pick(index)
        if path is not None:
            path.write_text(_mutate(path.read_text(), how, where, self.name()))
            self.changed(path)

    @rule(
        index=st.integers(0, 99),
        folder=st.sampled_from(["", "added", "vendored", "sglang/srt/speculative"]),
    )
    def add(self, index: int, folder: str) -> None:
        source = self.pick(index)
        text = source.read_text() if source is not None else ""
        target = self.root / folder / f"{self.name()}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        self.changed(target)

    @rule(index=st.integers(0, 99))
    def delete(self, index: int) -> None:
        path = self.pick(index)
        if path is not None:
            path.unlink()
            self.changed(path)

    @rule(index=st.integers(0, 99), folder=st.sampled_from(["", "added", "vendored"]))
    def rename(self, index: int, folder: str) -> None:
        path = self.pick(index)
        if path is not None:
            target = self.root / folder / f"{self.name()}_{path.name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
            self.changed(path, target)

    @rule(ignored=st.sampled_from(["", "edit1*.py\n", "added/\n", "vendored/\n"]))
    def gitignore(self, ignored: str) -> None:
        (self.root / ".gitignore").write_text(ignored)
        self.changed(self.root / ".gitignore")

    # -- an editor's buffers ----------------------------------------------------------------

    @rule(index=st.integers(0, 99))
    def open_document(self, index: int) -> None:
        path = self.pick(index)
        if path is not None and path not in self.documents:
            self.documents[path] = path.read_text()
            self.versions[path] = 0

    @precondition(lambda self: self.documents)
    @rule(index=st.integers(0, 99), how=st.integers(0, 3), where=st.integers(0, 999))
    def type_in_document(self, index: int, how: int, where: int) -> None:
        path = sorted(self.documents)[index % len(self.documents)]
        name = f"{UNSAVED}{self.counter}"
        self.counter += 1
        self.documents[path] = _mutate(self.documents[path], how, where, name)
        self.versions[path] += 1

    @precondition(lambda self: self.documents)
    @rule(index=st.integers(0, 99))
    def save_document(self, index: int) -> None:
        path = sorted(self.documents)[index % len(self.documents)]
        if path.parent.is_dir():
            path.write_text(self.documents[path])
            self.saved_names.update(
                word for word in self.documents[path].split() if UNSAVED in word
            )
            self.changed(path)

    @precondition(lambda self: self.documents)
    @rule(index=st.integers(0, 99))
    def close_document(self, index: int) -> None:
        path = sorted(self.documents)[index % len(self.documents)]
        del self.documents[path]

    # -- the front ends -------------------------------------------------------------------

    @rule(
        folder=st.sampled_from(["", "vendored", "sglang"]),
        overrides=settings(),
        flags=st.lists(
            st.tuples(
                st.sampled_from(["--select", "--ignore", "--extend-select"]),
                st.sampled_from(CODES),
            ),
            max_size=2,
        ),
        prefilter=st.booleans(),
        diff=st.booleans(),
    )
    def command_line(
        self,
        folder: str,
        overrides: dict[str, Any],
        flags: list[tuple[str, str]],
        diff: bool,
        prefilter: bool,
    ) -> None:
        where = self.root / folder
        if not where.is_dir():
            where = self.root
        args = [f"--config={k} = {_toml(v)}" for k, v in overrides.items()]
        args += [f"{flag}={code}" for flag, code in flags]
        args += [] if prefilter else ["--no-prefilter"]
        kind = "command line --diff" if diff else "command line"
        self.compare_cli(where, [*args, "--diff"] if diff else args, b"", kind)

    @rule(indices=st.lists(st.integers(0, 99), min_size=1, max_size=3), overrides=settings())
    def pre_commit(self, indices: list[int], overrides: dict[str, Any]) -> None:
        files = self.files()
        if not files:
            return
        given = sorted({str(files[i % len(files)].relative_to(self.root)) for i in indices})
        args = [f"--config={k} = {_toml(v)}" for k, v in overrides.items()]
        self.compare_cli(self.root, ["--force-exclude", *args, *given], b"", "pre-commit")

    @precondition(lambda self: self.documents)
    @rule(first_partial=st.booleans())
    def language_server(self, first_partial: bool) -> None:
        """An audit round of the open documents; ``first_partial``: after one in the
        context of what is known of the project (a cold start's first round: not
        compared, it may leave files out, but it must leave nothing wrong behind)."""
        snapshots = self.snapshots()
        if first_partial:
            self.projects.audit(snapshots, complete=False)
        audited = self.projects.audit(snapshots)
        assert not audited.errors, audited.errors
        found = {s.path: audited.findings.get(s.uri) for s in snapshots}
        expected = self.uncached_documents()
        assert found == expected, _difference(found, expected)
        self.compared["language server"] += 1

    @precondition(lambda self: self.documents)
    @rule(index=st.integers(0, 99))
    def fix_all(self, index: int) -> None:
        """The editor's "fix all" on one open document: its fixed text."""
        snapshots = self.snapshots()
        target = snapshots[index % len(snapshots)]
        context = [s for s in snapshots if s is not target]
        try:
            fixed = self.projects.fix(target, context, unsafe=True)
        except Exception as exc:  # a broken configuration: the same without a cache
            fixed = type(exc).__name__
        assert fixed == self.uncached_fix(target.path), target.path
        self.compared["language server fix-all"] += 1

    @precondition(lambda self: self.documents)
    @rule(index=st.integers(0, 99))
    def stdin(self, index: int) -> None:
        """An editor's ``swacheck audit --stdin-filename PATH -`` on a buffer."""
        path = sorted(self.documents)[index % len(self.documents)]
        data = self.documents[path].encode()
        self.compare_cli(self.root, ["--stdin-filename", str(path), "-"], data, "stdin")

    def snapshots(self) -> list[Snapshot]:
        return [
            Snapshot(path.as_uri(), path, self.versions[path], text)
            for path, text in sorted(self.documents.items())
        ]

    def compare_cli(self, where: Path, args: Sequence[str], stdin: bytes, kind: str) -> None:
        """The command run with ``args`` (and ``stdin``), warm and with ``--no-cache``."""
        warm = _cli(where, ["--output-format=json", "--jobs=1", *args], stdin)
        cold = _cli(where, ["--output-format=json", "--jobs=1", "--no-cache", *args], stdin)
        assert warm == cold, _difference(warm, cold)
        self.compared[kind] += 1

    def uncached(self) -> Workspace:
        """A workspace without a cache, made as the server makes the open documents'."""
        path = next(iter(self.documents))
        config = resolve_config(None, [path])
        specs = catalogue(config)
        chosen = select(specs, config)
        return Workspace(
            config,
            chosen.rules,
            root=find_root(path),
            engine_codes=chosen.engine_codes,
            known_codes=[spec.code for spec in specs],
            cache=False,
        )

    def uncached_documents(self) -> dict[Path, list[Finding] | None]:
        """What a workspace without a cache finds in the open documents (as the server
        would: excluded ones have none, a broken configuration none)."""
        try:
            workspace = self.uncached()
        except Exception:
            return dict.fromkeys(self.documents)
        try:
            kept = {p: t for p, t in self.documents.items() if not workspace.excluded(p)}
            result = workspace.audit(documents=kept)
        finally:
            workspace.close()
        return {p: result.findings_for(p) if p in kept else [] for p in self.documents}

    def uncached_fix(self, target: Path) -> str | None:
        """``target``'s text with every fix applied by a workspace without a cache."""
        try:
            workspace = self.uncached()
        except Exception as exc:
            return type(exc).__name__
        documents = {p: t for p, t in self.documents.items() if not workspace.excluded(p)}
        documents[target] = self.documents[target]
        try:
            result = workspace.audit(documents=documents, fix=True, unsafe_fixes=True)
        finally:
            workspace.close()
        shown = {path: name for name, path in result.files.items()}.get(target)
        data = result.fixed_documents.get(shown) if shown is not None else None
        return None if data is None else data.decode()

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def count(self) -> None:
        self.steps += 1

    @invariant()
    def one_cache_at_the_root(self) -> None:
        folders = [p for p in self.base.rglob(CACHE) if p.is_dir()]
        assert folders in ([], [self.root / CACHE]), folders

    @invariant()
    def no_entry_holds_an_unsaved_buffer(self) -> None:
        folder = self.root / CACHE
        if not folder.is_dir():
            return
        for entry in folder.rglob("*"):
            if entry.is_file() and UNSAVED.encode() in entry.read_bytes():
                held = {
                    word.decode() for word in _words(entry.read_bytes()) if UNSAVED.encode() in word
                }
                assert held <= self.saved_names, (entry, held - self.saved_names)


def _words(data: bytes) -> list[bytes]:
    """The identifier-like runs of ``data``."""
    return re.findall(rb"[A-Za-z0-9_]+", data)


def _cli(where: Path, args: list[str], stdin: bytes = b"") -> tuple[int, Any]:
    """The command's exit status and its JSON, run in this process from ``where``."""
    out, err = io.StringIO(), io.StringIO()
    cwd, given = os.getcwd(), sys.stdin
    os.chdir(where)
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(["audit", *args])
    finally:
        os.chdir(cwd)
        sys.stdin = given
    if status == 2:
        return status, err.getvalue().splitlines()[-1:]
    if "--diff" in args:
        return status, out.getvalue()
    return status, json.loads(out.getvalue())


def _difference(warm: Any, cold: Any) -> str:
    return f"warm:\n{warm!r}\n--no-cache:\n{cold!r}"
