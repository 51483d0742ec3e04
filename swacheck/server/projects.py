"""The projects open documents belong to, each one warm :class:`Workspace`.

A document's project is what the command line would use for it: the configuration
found upward from it (``[tool.swacheck]``, or the ``configuration`` setting as
``--config``) and the project root found upward (that configuration's folder, else
the version-control root); a document outside both belongs to the innermost workspace
folder holding it. Each project keeps one :class:`Workspace` for the server's life, so
libcst is imported once and the project index is built once, then updated from the
file-change notifications the server forwards (``rescan=False``: only the files named
are looked at again) or, where the client sends none, from a look at every file of the
project per audit.

Everything here runs on the audit thread (:mod:`swacheck.server.worker`): a
:class:`Workspace` serves one audit at a time. The project's result cache is the
command line's (at the project's root): a server started after ``swacheck audit`` or a
pre-commit run starts warm, and what the server learns of files as they are on disk
(the project's facts after a cold start, a saved document's findings) serves the next
command and the next server. An unsaved buffer leaves nothing there (see
:mod:`swacheck.engine.workspace`); fixes come back as text.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from swacheck.catalogue import catalogue
from swacheck.config import Config, ConfigError, resolve_config
from swacheck.discovery import below
from swacheck.engine.cache import result_cache
from swacheck.engine.decoding import decode_source
from swacheck.engine.limits import beyond_limits
from swacheck.engine.project import find_root
from swacheck.engine.selection import select
from swacheck.engine.workspace import Progress, Workspace
from swacheck.finding import Finding
from swacheck.server.documents import Snapshot

# Files whose change changes a project's configuration or its set of files.
CONFIG_FILES = ("pyproject.toml",)
IGNORE_FILES = (".gitignore",)


@dataclass
class Project:
    config: Config
    workspace: Workspace
    # Whether an audit has read every file of the project (its facts are in memory).
    indexed: bool = False


@dataclass
class Audited:
    """One audit round: findings per document, and what to tell the user."""

    findings: dict[str, list[Finding]] = field(default_factory=dict)
    # Per document uri: the configuration problem that kept it from being audited.
    problems: dict[str, str] = field(default_factory=dict)
    # Internal errors (a rule that raised) and warnings, for the log.
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Projects this round read in full for the first time: (root, files read for facts).
    indexed: list[tuple[str, int]] = field(default_factory=list)
    # Project files left out of the context (``complete=False``): their facts unknown.
    left_out: int = 0
    # The documents audited with some of their project's files left out: a finding of
    # theirs may need those files' facts, so no finding yet does not mean none.
    unsettled: set[str] = field(default_factory=set)

    @property
    def partial(self) -> bool:
        return self.left_out > 0


class Projects:
    def __init__(self, folders: Sequence[Path], configuration: Path | None = None) -> None:
        self.folders = [folder.resolve() for folder in folders]
        self.configuration = configuration
        self._projects: dict[tuple[Path | None, Path | None], Project] = {}
        self._of_path: dict[Path, Project] = {}
        # The client reports changes on disk (``workspace/didChangeWatchedFiles``, as the
        # server registered): audits trust what they last read but for those files.
        self.watched = False
        # A project was made since the heap was last settled (see _settle_heap).
        self._cold = False

    # -- which project --------------------------------------------------------------------

    def project_of(self, path: Path) -> Project:
        """``path``'s project (made on first use); :class:`ConfigError` for a bad config."""
        project = self._of_path.get(path)
        if project is None:
            config = resolve_config(self.configuration, [path])
            root = find_root(path) or self._folder_of(path)
            key = (root, config.source)
            project = self._projects.get(key)
            if project is None or project.config != config:
                project = self._projects[key] = _project(root, config)
                self._cold = True
            self._of_path[path] = project
        return project

    def _folder_of(self, path: Path) -> Path | None:
        holding = [folder for folder in self.folders if below(path, folder) is not None]
        return max(holding, key=lambda folder: len(folder.parts), default=None)

    # -- changes --------------------------------------------------------------------------

    def files_changed(self, paths: Iterable[Path]) -> None:
        """Files created, changed or deleted on disk (``workspace/didChangeWatchedFiles``)."""
        paths = list(paths)
        configured = self.configuration.resolve() if self.configuration else None
        if any(p.name in CONFIG_FILES or p.resolve() == configured for p in paths):
            # Configurations and roots are found again; a project whose configuration
            # is unchanged keeps its warm workspace (see project_of).
            self._of_path.clear()
        # A changed .gitignore: the files of each project are found again.
        rewalk = any(p.name in IGNORE_FILES for p in paths)
        for project in self._projects.values():
            project.workspace.files_changed(None if rewalk else paths)

    def _look_again(self) -> None:
        """Where the client reports no change on disk, each audit finds configurations,
        roots and exclusions again (a project whose configuration is unchanged keeps its
        warm workspace): an edited ``pyproject.toml`` or ``.gitignore`` was never seen."""
        if not self.watched:
            self._of_path.clear()
            for project in self._projects.values():
                project.workspace.files_changed(None)

    def set_folders(self, folders: Sequence[Path]) -> None:
        """The workspace folders changed: documents outside every project are found again."""
        self.folders = [folder.resolve() for folder in folders]
        self._of_path.clear()

    def reconfigure(self, configuration: Path | None) -> None:
        """The ``configuration`` setting changed: every document's project is found again."""
        if configuration != self.configuration:
            self.configuration = configuration
            self._of_path.clear()

    # -- audits ---------------------------------------------------------------------------

    def cold(self, snapshots: Sequence[Snapshot]) -> bool:
        """Whether some snapshot's project has not been read in full yet (or its
        configuration cannot be read: that is said at once, without the project)."""
        for snapshot in snapshots:
            try:
                project = self.project_of(snapshot.path)
            except ConfigError:
                continue
            if not project.indexed:
                return True
        return False

    def audit(
        self,
        snapshots: Sequence[Snapshot],
        complete: bool = True,
        progress: Progress | None = None,
    ) -> Audited:
        """Findings for each snapshot, each in the context of its whole project.

        ``complete=False``: in the context of what is known of each project (its files'
        facts in memory or in the cache), each document analysed on its own: an editor's
        first diagnostics after a cold start, before every file of the project is read.
        ``progress``: told ``(done, total)`` files as the analysis goes."""
        self._look_again()
        audited = Audited()
        groups: dict[int, tuple[Project, list[Snapshot]]] = {}
        for snapshot in snapshots:
            try:
                project = self.project_of(snapshot.path)
            except ConfigError as exc:
                audited.problems[snapshot.uri] = str(exc)
                continue
            if project.workspace.excluded(snapshot.path):
                # Left alone, as ruff's server leaves excluded documents.
                audited.findings[snapshot.uri] = []
                continue
            groups.setdefault(id(project), (project, []))[1].append(snapshot)
        for project, members in groups.values():
            self._audit_project(project, members, audited, complete, progress)
        # A project no document maps to any more (its configuration moved) is let go.
        kept = {id(project) for project in self._of_path.values()}
        for project in self._projects.values():
            if id(project) not in kept:
                project.workspace.close()
        self._projects = {k: p for k, p in self._projects.items() if id(p) in kept}
        return audited

    def settle(self) -> None:
        """After a round that made a project, once its diagnostics are out: the heap
        settled (:func:`_settle_heap`), which costs a full collection."""
        if self._cold:
            _settle_heap()
            self._cold = False

    def _audit_project(
        self,
        project: Project,
        members: list[Snapshot],
        audited: Audited,
        complete: bool,
        progress: Progress | None,
    ) -> None:
        """The project's documents audited together; should that raise, each on its
        own, so one document the engine fails on keeps no other's diagnostics stale (it
        gets an SWA999 naming the failure, and the failure is logged)."""
        for group in (members, *([s] for s in members if len(members) > 1)):
            try:
                result = project.workspace.audit(
                    documents={s.path: s.text for s in group},
                    rescan=not self.watched,
                    complete=complete or project.indexed,
                    progress=progress,
                )
            except Exception as exc:
                if len(group) > 1:
                    continue  # audit them one by one
                failure = f"{type(exc).__name__}: {exc}"
                audited.errors.append(f"{group[0].path}: internal error: {failure}")
                message = f"File could not be analysed (the audit failed: {failure})"
                audited.findings[group[0].uri] = [beyond_limits(str(group[0].path), message)]
                continue
            audited.left_out += result.left_out
            if result.partial:
                audited.unsettled.update(snapshot.uri for snapshot in group)
            if group is members and not project.indexed and not result.partial:
                project.indexed = True
                root = project.workspace.root
                audited.indexed.append((str(root) if root else "", result.facts_parsed))
            for snapshot in group:
                audited.findings[snapshot.uri] = result.findings_for(snapshot.path)
            audited.errors.extend(result.errors)
            audited.warnings.extend(result.warnings)
            if group is members:
                return

    def close(self) -> None:
        """Stop every project's worker processes."""
        for project in self._projects.values():
            project.workspace.close()

    def fix(self, target: Snapshot, context: Sequence[Snapshot], unsafe: bool) -> str | None:
        """``target``'s text with every fix applied (``None``: nothing to fix), in the
        context the diagnostics were computed in (``context``: the other open documents:
        those of its project that its audits do not leave out)."""
        self._look_again()
        project = self.project_of(target.path)
        documents = {}
        for snapshot in context:
            with contextlib.suppress(ConfigError):
                same = self.project_of(snapshot.path) is project
                if same and not project.workspace.excluded(snapshot.path):
                    documents[snapshot.path] = snapshot.text
        documents[target.path] = target.text
        result = project.workspace.audit(
            documents=documents, fix=True, unsafe_fixes=unsafe, rescan=not self.watched
        )
        shown = {path: name for name, path in result.files.items()}.get(target.path)
        data = result.fixed_documents.get(shown) if shown is not None else None
        return None if data is None else _decode(data)


def _project(root: Path | None, config: Config) -> Project:
    # The command line's cache: a relative ``cache-dir`` is taken from the
    # configuration's folder, else from the root, not from the server's working directory.
    specs = catalogue(config, result_cache(config, base=root))
    chosen = select(specs, config)
    workspace = Workspace(
        config,
        chosen.rules,
        root=root,
        engine_codes=chosen.engine_codes,
        known_codes=[spec.code for spec in specs],
        jobs=1,
        # One worker process kept for the server's life: an edit forks nothing, and the
        # worker is sent only the facts it lacks (engine/workers.py).
        keep_workers=True,
    )
    return Project(config, workspace)


def _settle_heap() -> None:
    """Take what a cold start built (every file's facts, the project index) out of the
    cyclic garbage collector's view.

    A warm audit allocates enough to trigger collections, and each full collection
    would walk the whole project's facts again: freezing them took the CPU time of a
    keystroke's audit on SGLang 0.5.23 from 102 to 79 ms in a probe. Objects freed later by
    reference counting still go; only cyclic garbage among them would stay, and none
    was found after 50 edits, so the heap is settled again only when a project is made.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def _decode(data: bytes) -> str:
    """A fixed document's bytes as text: as CPython decodes it, without a BOM."""
    return decode_source(data).text
