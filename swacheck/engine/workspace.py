"""The engine's entry point: audit files and in-memory documents in their project's context.

A :class:`Workspace` is one project (root, configuration, rule set) kept warm across
audits: the command line makes one per call, an editor's language server one per
workspace folder. Each :meth:`Workspace.audit` reports findings for the files and
documents it is given only, but rule activation, the class index and method summaries
come from every file of the project (:mod:`swacheck.engine.project`), so a pre-commit
call on two changed files finds what an audit of the whole tree finds in them.

Cheap stages first; each can end the audit without parsing anything:

1. discovery and a stat of every project file; only files whose stat signature changed
   since the last scan (the :class:`~swacheck.engine.project.Inventory`) are read. A
   warm workspace told of every change (``audit(rescan=False)`` and
   :meth:`Workspace.files_changed`, as a language server does) stats only those files;
2. the *run cache*: the findings of an earlier audit of exactly these files, with the
   project in exactly this state;
3. the scope check (``RuleSpec.activation``) and the prefilter (``RuleSpec.triggers``),
   both remembered per file version: only files some enabled rule could fire in count.

Then, only if some file asked about can hold a finding, the facts of every candidate
file of the project (from memory, the cache, or the first pass) and the rules over the
files asked about (:mod:`swacheck.engine.passes`, which imports libcst). A warm call,
or a call on files no rule can fire in, never imports libcst or the rules.

Persistence (``cache-dir``, at the project's root: one cache for the command line, a
pre-commit call and a language server): the inventory (one entry), the facts of the
whole project (:mod:`swacheck.engine.facts_store`), findings per file keyed by its bytes
and a digest of the whole project index, and the run records of audits of files on disk.
Only what describes the disk is written: a document whose text is not its file's bytes
(an editor's unsaved buffer) leaves no facts, and an audit holding one (or leaving
files out, ``complete=False``) leaves no findings, so no entry per keystroke piles up
and none describes bytes that never reached the disk.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from swacheck.catalogue import RuleSpec, spec_of
from swacheck.config import Config
from swacheck.discovery import Discovery, DiscoveryProblem, below
from swacheck.engine import noqa_writer
from swacheck.engine.cache import (
    CacheFolder,
    ResultCache,
    project_digest,
    result_cache,
)
from swacheck.engine.codes import ENGINE_CODES
from swacheck.engine.decoding import UndecodableSource, source_encoding
from swacheck.engine.facts_store import FactsRecord, FactsStore
from swacheck.engine.fixer import ChangedOnDisk, fixable, write_atomic
from swacheck.engine.gc_pause import gc_paused
from swacheck.engine.limits import too_large
from swacheck.engine.prefilter import Prefilter
from swacheck.engine.project import (
    FileState,
    Inventory,
    Listing,
    digest_of,
    find_root,
    signature,
)
from swacheck.engine.result import AuditResult, CheckOutcome
from swacheck.engine.selection import ignored_for_path, is_ignored
from swacheck.engine.sources import Source, display_path, relative_to_root
from swacheck.files import read_regular
from swacheck.finding import PARSE_ERROR_CODE, UNUSED_NOQA_CODE, Finding, Position
from swacheck.triggers import FileText, TriggerSet

if TYPE_CHECKING:
    from swacheck.analysis.index import ModuleFacts, ProjectIndex
    from swacheck.engine.passes import Passes
    from swacheck.engine.workers import Workers
    from swacheck.rule import Rule

DEFAULT_ENGINE_CODES = frozenset(c.code for c in ENGINE_CODES if c.default)
# A noqa comment that may name an SWA code (what SWA100 reads).
_SWA_NOQA = re.compile(rb"noqa[ \t]*:[^\n]*swa", re.IGNORECASE)

# The digest of a file over ``max-file-size`` (not read) begins so.
_OVERSIZED = "oversized:"

# Told ``(done, total)`` files as an audit goes.
Progress = Callable[[int, int], None]
# Told, before it starts, how many of the project's files an audit indexes (parses for
# their facts): the slow part of a cold call.
Indexing = Callable[[int], None]


class _Progress:
    """An audit's progress: files whose facts are computed, then files checked."""

    def __init__(self, report: Progress | None, indexing: Indexing | None = None) -> None:
        self.report = report
        self.indexing = indexing
        self.done = 0
        self.total = 0

    def indexes(self, files: int) -> None:
        """The facts of ``files`` files are to be computed."""
        if self.indexing is not None:
            self.indexing(files)

    def start(self, total: int) -> None:
        """Some work starts: ``total`` files in all (the first call decides)."""
        if self.total or not total:
            return
        self.total = total
        if self.report is not None:
            self.report(0, total)

    def advance(self, count: int) -> None:
        if not self.total:
            return
        self.done = min(self.done + count, self.total)
        if self.report is not None:
            self.report(self.done, self.total)


@dataclass(frozen=True)
class _RunRecord:
    """What the run cache keeps of an audit: everything of its result that files decide."""

    findings: tuple[Finding, ...]
    files_parsed: int
    inactive: tuple[tuple[str, str], ...]


@dataclass
class _File:
    """One file of this audit: where it is, what is known of its bytes, and its role."""

    key: str
    # Its path (a string: a project walk makes thousands, and Path objects cost).
    location: str
    state: FileState | None = None
    data: bytes | None = None
    # Findings are asked for it (given, found under a given folder, or a document).
    report: bool = False
    document: bool = False
    display: str = ""
    # Why it could not be read, if it could not.
    problem: str = ""
    # A document whose bytes are not its file's on disk (nothing of it is cached).
    unsaved: bool = False
    # The device and inode of the file its bytes are known from (a fix is written to it
    # alone), and whether it was named itself (a link is followed) or found by a walk.
    identity: tuple[int, int] | None = None
    explicit: bool = False

    @property
    def path(self) -> Path:
        return Path(self.location)


class _Sources(dict[str, Source]):
    """An audit's :class:`Source` of each candidate file, made when first asked for: an
    edit in an editor asks for its own file's of thousands of candidates."""

    def __init__(self, make: Callable[[str], Source]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, key: str) -> Source:
        made = self[key] = self._make(key)
        return made


def _relevant(state: FileState, codes: Set[str]) -> bool:
    """Whether the triggers of one of the rules ``codes`` occur in the file."""
    return any(code in codes for code in state.triggered)


class _Scan:
    """The project's other files (key -> path, in walk order) as one scan saw them, and
    what audits derive from every one of them: ``rescan=False`` audits reuse it while
    no file changes, so an editor's keystroke does not revisit thousands of files."""

    def __init__(self, files: dict[str, str], states: dict[str, FileState]) -> None:
        self.files = files
        # Each readable file's state.
        self.states = states
        self._relevant: dict[frozenset[str], list[str]] = {}

    @cached_property
    def opened(self) -> frozenset[str]:
        """The rules whose scope some of these files opens."""
        return frozenset(code for state in self.states.values() for code in state.opens)

    def relevant(self, codes: frozenset[str], prefilter: bool) -> list[str]:
        """The readable files (in walk order) the triggers of a rule among ``codes``
        occur in; every readable file without the prefilter."""
        found = self._relevant.get(codes) if prefilter else None
        if found is None:
            states = self.states
            found = [
                key
                for key in self.files
                if key in states and (not prefilter or _relevant(states[key], codes))
            ]
            if prefilter:
                self._relevant[codes] = found
        return found


def _as_shown(key: str) -> str:
    return key.replace("/", os.sep)


def _document_bytes(text: str | bytes) -> bytes:
    """A document's bytes: text is encoded as its coding declaration says (UTF-8 if none).

    Never raises: text no encoding can hold (a lone surrogate) keeps it as encoded
    surrogates, which the parse then reports as undecodable (that document's SWA999)."""
    if isinstance(text, bytes):
        return text
    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that escapes no byte
        data = text.encode("utf-8", "surrogatepass")
    try:
        return text.encode(source_encoding(data))
    except (UndecodableSource, LookupError, UnicodeEncodeError):
        return data


class Workspace:
    """One project kept warm across audits (see the module docstring).

    ``rules``: rule specs (:func:`swacheck.catalogue.catalogue`) or rule classes;
    ``engine_codes``: the engine's codes to report (``SWA999`` by default; ``SWA100``
    when unused ``# noqa`` comments are wanted); ``known_codes``: every code that exists
    (to tell an unknown code in a ``# noqa`` from a deselected one); ``cache``: use the
    project's result cache (``cache-dir``, relative to the project's root without a
    configuration file).
    """

    def __init__(
        self,
        config: Config,
        rules: Sequence[RuleSpec | type[Rule]],
        *,
        root: Path | None = None,
        engine_codes: frozenset[str] = DEFAULT_ENGINE_CODES,
        known_codes: Iterable[str] | None = None,
        cache: bool = True,
        cache_dir: Path | CacheFolder | None = None,
        jobs: int = 1,
        prefilter: bool = True,
        keep_workers: bool = False,
    ) -> None:
        self.config = config
        self.root = root.resolve() if root is not None else None
        self.specs = [spec_of(rule, config) for rule in rules]
        self.engine_codes = engine_codes
        codes = [spec.code for spec in self.specs]
        self.known_codes = frozenset(known_codes or codes) | {c.code for c in ENGINE_CODES}
        self.jobs = jobs
        self.prefilter = prefilter
        # The worker processes the files are analysed in (engine/workers.py): made at
        # the first audit that parses, kept between audits with ``keep_workers``.
        self._keep_workers = keep_workers
        self._workers: Workers | None = None
        self._cwd = os.getcwd()
        self._cache: ResultCache | None = None
        if cache:
            salted = [*codes, *sorted(engine_codes)]
            self._cache = result_cache(config, cache_dir, self.root).for_rules(salted)
        # Any enabled rule's triggers (a quick rejection), then each rule's own.
        self._any_trigger = Prefilter(self.specs)
        self._triggers = [
            (spec.code, None if spec.triggers is None else TriggerSet(spec.triggers))
            for spec in self.specs
        ]
        self._activations = [
            (spec.code, [literal.encode() for literal in spec.activation[0]], spec.activation[1])
            for spec in self.specs
            if spec.activation is not None
        ]
        # Where the persistent entries of this project live (root-relative keys, or
        # keys relative to the working directory when there is no root).
        self._scope = str(self.root) if self.root is not None else f"cwd={self._cwd}"
        self._inventory: Inventory | None = None
        # The project's files by key, from the last walk (``None``: walk on next audit).
        self._project: dict[str, str] | None = None
        # The project's other files at the last scan, which ``rescan=False`` audits
        # trust (``None``: stat every file on next audit).
        self._last_scan: _Scan | None = None
        # Files named by :meth:`files_changed` since: paths not yet looked at, then keys
        # to re-stat on the next scan.
        self._stale_paths: set[Path] = set()
        self._stale_keys: set[str] = set()
        # Answers of :meth:`excluded`, until a ``.gitignore`` is named changed.
        self._excluded: dict[Path, bool] = {}
        self._walk_problems: list[DiscoveryProblem] = []
        bounds = (config.max_file_size, config.max_file_time)
        self._facts = FactsStore(self._cache, self._scope, bounds)
        self._index: tuple[str, ProjectIndex] | None = None
        # The last activation: (meaning digest and profile, why each inactive rule is).
        self._activation: tuple[str, dict[str, str]] | None = None
        # The last outcome of each file asked about (by key), with what it was keyed by:
        # one per file, however many versions an editor sends.
        self._outcomes: dict[str, tuple[str, CheckOutcome]] = {}

    @classmethod
    def for_paths(
        cls,
        paths: Sequence[Path],
        config: Config,
        rules: Sequence[RuleSpec | type[Rule]],
        **kw: Any,
    ) -> Workspace:
        """The workspace of the project the first of ``paths`` lies in (the working
        directory's when none is given)."""
        start = paths[0] if paths else Path(".")
        return cls(config, rules, root=find_root(start), **kw)

    def close(self) -> None:
        """Stop the worker processes kept between audits (``keep_workers``)."""
        if self._workers is not None:
            self._workers.close()

    # -- incremental updates -----------------------------------------------------------

    def files_changed(self, paths: Iterable[Path] | None = None) -> None:
        """Tell a warm workspace that files changed on disk (created, edited, deleted).

        With ``rescan=False`` audits re-stat only these (and walk the project again if
        one of them is new or gone); ``None``: walk and stat everything next time.
        """
        if paths is None:
            self._project = None
            self._last_scan = None
            self._excluded.clear()
        else:
            named = [Path(p) for p in paths]
            self._stale_paths.update(named)
            if any(p.name == ".gitignore" for p in named):
                self._excluded.clear()

    def excluded(self, path: Path) -> bool:
        """Whether this project's audits leave ``path`` out (``exclude``,
        ``extend-exclude``, ``.gitignore``), as ``force_exclude`` does a given path or
        document: an editor shows such a document no diagnostics, as ruff's server does.

        Remembered per path until :meth:`files_changed` names a ``.gitignore`` (or is
        called with ``None``), as ``rescan=False`` audits trust their last scan.
        """
        found = self._excluded.get(path)
        if found is None:
            found = Discovery(self.config).excluded(path, self._base(path))
            self._excluded[path] = found
        return found

    def files(
        self, paths: Sequence[Path], *, force_exclude: bool = False
    ) -> tuple[list[Path], list[str]]:
        """The files an audit of ``paths`` reports on, absolute and sorted (``--show-files``),
        and what their discovery warns of (a missing path, an unreadable folder)."""
        result = AuditResult()
        report = self._report_files(paths, {}, force_exclude, result)
        found = sorted(Path(os.path.abspath(f.location)) for f in report.values() if not f.problem)
        problems = [f"{f.display}: {f.problem}" for f in report.values() if f.problem]
        return found, [*result.warnings, *problems]

    # -- the audit ---------------------------------------------------------------------

    def audit(
        self,
        paths: Sequence[Path] = (),
        documents: Mapping[Path, str | bytes] | None = None,
        *,
        fix: bool = False,
        unsafe_fixes: bool = False,
        diff: bool = False,
        force_exclude: bool = False,
        rescan: bool = True,
        add_noqa: str | None = None,
        complete: bool = True,
        progress: Progress | None = None,
        indexing: Indexing | None = None,
    ) -> AuditResult:
        """Findings for ``paths`` (files, and Python files under folders) and
        ``documents`` (path -> current text, overriding the file on disk), in the
        context of the whole project.

        ``fix``: apply fixes, writing files and returning documents' fixed bytes in
        ``AuditResult.fixed_documents``; ``diff``: compute the fixes as diffs and write
        nothing; ``force_exclude``: apply ``exclude`` and ``.gitignore`` to paths given
        explicitly too; ``rescan=False``: trust the last scan of the disk except for
        paths named in :meth:`files_changed` since (only those are stat'ed);
        ``add_noqa``: write a ``# noqa`` for each finding of a file on disk, followed by
        this reason if not empty (``AuditResult.noqa_added``; those findings are dropped).
        ``complete=False``: the project's files whose facts are neither in memory nor in
        the cache are left out of the context (those the inventory holds no state of
        are not even read), and only the files asked about are
        analysed (an editor's first diagnostics, before the project's facts are in;
        ``AuditResult.partial`` says whether any file was left out). ``progress``: called
        with ``(done, total)`` files as the analysis goes (not at all when nothing has
        to be parsed); ``indexing``: called once with the number of the project's files
        whose facts must be computed, before that starts (not when none must).
        """
        with gc_paused():  # what an audit allocates (inventory, facts, trees) has no cycles
            return self._audit(
                paths,
                documents or {},
                fix,
                unsafe_fixes,
                diff,
                force_exclude,
                rescan,
                add_noqa,
                complete,
                _Progress(progress, indexing),
            )

    def _audit(
        self,
        paths: Sequence[Path],
        documents: Mapping[Path, str | bytes],
        fix: bool,
        unsafe_fixes: bool,
        diff: bool,
        force_exclude: bool,
        rescan: bool,
        add_noqa: str | None,
        complete: bool,
        progress: _Progress,
    ) -> AuditResult:
        result = AuditResult()
        scan_ns = time.time_ns()
        inventory = self._load_inventory()
        report = self._report_files(paths, documents, force_exclude, result)
        context = self._context_files(paths, documents, report, rescan)
        # Without ``complete``, a project file the inventory holds no state of is not read:
        # its facts cannot be known (none are cached for bytes no audit read) and the
        # first diagnostics should not wait for every such file to be read and classified.
        scan, fresh, unread_context = self._context_scan(
            context, report, inventory, scan_ns, rescan, complete
        )
        result.left_out = unread_context
        unread = {k: i.location for k, i in report.items() if i.state is None and not i.problem}
        identities: dict[str, tuple[int, int]] = {}
        read, data, problems = self._scan(unread, inventory, scan_ns, identities=identities)
        asked_states: dict[str, FileState] = {}
        for key, item in report.items():
            item.identity = identities.get(key)
            item.state = item.state or read.get(key)
            item.data = item.data or data.get(key)
            item.problem = item.problem or problems.get(key, "")
            if item.state is not None:
                asked_states[key] = item.state
        for item in report.values():
            if item.problem:
                self._unreadable(item, result)
        run_key = "" if result.partial else self._run_key(report, scan.states, asked_states)
        if not self._replay(run_key, result, fix or diff, unsafe_fixes):
            opened = scan.opened.union(*(state.opens for state in asked_states.values()))
            applicable = self._applicable(opened, result)
            codes = frozenset(spec.code for spec in applicable)
            # SWA100 reads the noqa comments of the files asked about: those holding one
            # that names an SWA code are checked even where no rule could fire.
            noqa = UNUSED_NOQA_CODE in self.engine_codes
            candidates = [
                item
                for item in report.values()
                if item.state is not None
                and (
                    not self.prefilter or _relevant(item.state, codes) or (noqa and item.state.noqa)
                )
            ]
            candidates += [
                _File(key, scan.files[key], state=scan.states[key], data=fresh.get(key))
                for key in scan.relevant(codes, self.prefilter)
            ]
            asked = [item for item in candidates if item.report]
            result.files_parsed = len(asked)
            if asked:
                self._analyse(
                    candidates, applicable, result, fix, unsafe_fixes, diff, complete, progress
                )
            result.findings = self._shown(result.findings, report)
            result.fixed = self._shown(result.fixed, report)
            if (
                self._cache is not None
                and run_key
                and not result.errors
                and not (fix or diff or result.partial)
            ):
                inactive = tuple(sorted(result.inactive.items()))
                record = _RunRecord(tuple(result.findings), result.files_parsed, inactive)
                self._cache.put(run_key, record)
        self._store_inventory(inventory)
        if self._cache is not None and self._cache.problem:
            result.warnings.append(self._cache.problem)
        result.files = {item.display: item.path for item in report.values()}
        if add_noqa is not None:
            self._add_noqa(report, result, add_noqa)
        return result

    # -- which files -------------------------------------------------------------------

    def _key(self, path: Path) -> str:
        """A file's name in the project index: root-relative below the root, else as shown."""
        if self.root is not None:
            parts = below(path, self.root)
            if parts is not None:
                return "/".join(parts)
        return display_path(path)

    def _report_files(
        self,
        paths: Sequence[Path],
        documents: Mapping[Path, str | bytes],
        force_exclude: bool,
        result: AuditResult,
    ) -> dict[str, _File]:
        discovery = Discovery(self.config)
        report: dict[str, _File] = {}
        walk_problems: list[DiscoveryProblem] = []
        for given in paths:
            try:
                os.stat(given)  # a dangling symlink is as missing as a missing file
            except OSError as exc:
                missing = _File(
                    self._key(given), str(given), report=True, display=display_path(given)
                )
                missing.problem = exc.strerror or "cannot be read"
                report[missing.key] = missing
                continue
            if force_exclude and discovery.excluded(given, self._base(given)):
                continue
            if self.root is not None and self._is_root(given):
                walked = self._project_walk()
                walk_problems = self._walk_problems
                # Shown relative to the working directory: the key itself when that is the root.
                show = _as_shown if os.path.realpath(self._cwd) == str(self.root) else None
            else:
                walked = {self._key(p): str(p) for p in discovery.files([given])}
                show = None
            explicit = not os.path.isdir(given)  # a file named: a link there is the user's say
            for key, location in walked.items():
                display = show(key) if show is not None else display_path(location)
                report[key] = _File(key, location, report=True, display=display, explicit=explicit)
        for problem in [*discovery.problems, *walk_problems]:
            result.warnings.append(f"{display_path(Path(problem.path))}: {problem.reason}")
        for path, text in documents.items():
            if force_exclude and discovery.excluded(path, self._base(path)):
                continue
            data = _document_bytes(text)
            key = self._key(path)
            report[key] = _File(
                key,
                str(path),
                state=self._classify(data),
                data=data,
                report=True,
                document=True,
                display=display_path(path),
                unsaved=self._cache is not None and not self._on_disk(path, data),
            )
        result.files_seen = len(report)
        return report

    def _on_disk(self, path: Path, data: bytes) -> bool:
        """Whether ``data`` (a document's) are the bytes of its file on disk."""
        try:
            return read_regular(path, len(data)).data == data
        except OSError:
            return False

    def _base(self, path: Path) -> Path:
        """The folder exclusion globs of a path given explicitly are relative to."""
        for base in (self.root, self.config.root):
            if base is not None and below(path, base) is not None:
                return base
        return Path(self._cwd)

    def _is_root(self, path: Path) -> bool:
        return os.path.isdir(path) and below(path, self.root) == () if self.root else False

    def _project_walk(self) -> dict[str, str]:
        """Every file of the project by key: from the last walk under these discovery
        settings while no folder or ``.gitignore`` it read has changed, else walked again."""
        if self._project is None:
            assert self.root is not None
            inventory = self._load_inventory()
            settings = self.config.fingerprint("discovery")
            listing = inventory.listing(settings)
            if listing is None or not listing.still_valid():
                discovery = Discovery(self.config)
                files = discovery.walk(self.root)
                ignores = {path: signature(path) for path in discovery.ignore_files()}
                problems = tuple(f"{p.path}\0{p.reason}" for p in discovery.problems)
                listing = Listing(discovery.listed, ignores, tuple(files), problems)
                inventory.record_listing(settings, listing, time.time_ns())
            prefix = str(self.root) + os.sep
            self._project = {key: prefix + key.replace("/", os.sep) for key in listing.files}
            self._walk_problems = [
                DiscoveryProblem(*problem.split("\0", 1)) for problem in listing.problems
            ]
        return self._project

    def _context_files(
        self,
        paths: Sequence[Path],
        documents: Mapping[Path, str | bytes],
        report: dict[str, _File],
        rescan: bool,
    ) -> dict[str, str]:
        """The project's other files (key -> path), when some given path belongs to the
        project (lies below its root and is not excluded from it); none otherwise."""
        if self.root is None:
            return {}
        discovery = Discovery(self.config)
        given = [*paths, *documents]
        if not any(
            below(path, self.root) is not None and not discovery.excluded(path, self.root)
            for path in given
        ):
            return {}
        if rescan:
            self._project = None
        elif self._stale_paths:
            known = set(self._project or ())
            stale = [(self._key(p), p) for p in self._stale_paths]
            if any(key not in known or not os.path.exists(p) for key, p in stale):
                self._project = None
            if self._inventory is not None:
                for key, _ in stale:
                    self._inventory.forget(key)  # read again, whatever its signature says
            self._stale_keys.update(key for key, _ in stale)
            self._stale_paths.clear()
        return {key: loc for key, loc in self._project_walk().items() if key not in report}

    def _context_scan(
        self,
        context: dict[str, str],
        report: dict[str, _File],
        inventory: Inventory,
        scan_ns: int,
        rescan: bool,
        complete: bool,
    ) -> tuple[_Scan, dict[str, bytes], int]:
        """The project's other files as a scan sees them, the bytes of those read now,
        and how many were left unread. Each file is stat'ed with ``rescan`` or when no
        scan is kept; else the last scan's states stand but for the files named stale
        since and those it lacks (new, unreadable, not read, or a document then), and the
        last scan itself while none is. Without ``complete``, files the inventory holds no
        state of (for their current signature) are not read: the scan lacks them, and the
        next one looks again."""
        if not context:
            return _Scan({}, {}), {}, 0
        last = None if rescan else self._last_scan
        stale, self._stale_keys = self._stale_keys, set()
        todo = context
        kept: dict[str, FileState] = {}
        if last is not None:
            states = last.states
            todo = {key: loc for key, loc in context.items() if key in stale or key not in states}
            if not todo and list(context) == list(last.files):
                return last, {}, 0
            kept = {key: states[key] for key in context if key in states}
        scanned, fresh, problems = self._scan(todo, inventory, scan_ns, unknown=complete)
        if self._project is not None:  # forget the files no longer part of the project
            inventory.keep_only(set(self._project) | set(report))
        self._last_scan = _Scan(context, kept | scanned)
        return self._last_scan, fresh, len(todo) - len(scanned) - len(problems)

    # -- what each file holds ----------------------------------------------------------

    def _classify(self, data: bytes) -> FileState:
        opens = tuple(
            code
            for code, needles, pattern in self._activations
            if any(needle in data for needle in needles) and pattern.search(data)
        )
        triggered: tuple[str, ...] = ()
        text = FileText(data)
        if self._any_trigger.wants(text):
            triggered = tuple(
                code
                for code, triggers in self._triggers
                if triggers is None or triggers.matches(text)
            )
        return FileState(
            digest_of(data),
            triggered=triggered,
            opens=opens,
            noqa=b"noqa" in text.lowered and _SWA_NOQA.search(data) is not None,
        )

    def _scan(
        self,
        files: dict[str, str],
        inventory: Inventory,
        scan_ns: int,
        unknown: bool = True,
        identities: dict[str, tuple[int, int]] | None = None,
    ) -> tuple[dict[str, FileState], dict[str, bytes], dict[str, str]]:
        """Each file's state: recorded, or learnt from its bytes if its signature changed
        or was racy when recorded (those bytes are returned too; with ``unknown=False`` a
        file whose signature is not the one recorded is left out); and why each file that
        cannot be read cannot. ``identities``, if given, gets each file's device and inode
        as stat'ed (what its bytes, read now or later, must come from)."""
        states: dict[str, FileState] = {}
        fresh: dict[str, bytes] = {}
        problems: dict[str, str] = {}
        # One stat per file and no call per file: this loop runs over every project file.
        entries, stat = inventory.entries, os.stat
        limit = self.config.max_file_size or sys.maxsize
        for key, location in files.items():
            try:
                info = stat(location)
                sig = (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)
                if identities is not None:
                    identities[key] = (info.st_dev, info.st_ino)
                entry = entries.get(key)
                if entry is not None and entry[0] == sig:
                    # A state recorded under another max-file-size that read the file
                    # as too large (or not) where this one would not is not this audit's.
                    if entry[2] and (sig[1] > limit) == entry[1][0].startswith(_OVERSIZED):
                        states[key] = FileState(*entry[1])
                        continue
                elif not unknown:
                    continue  # no state recorded of these bytes (nor facts, likely)
                # A regular file, opened without blocking, and not read past the size
                # limit (the signature recorded is that of the bytes read).
                read = read_regular(location, self.config.max_file_size)
            except OSError as exc:
                problems[key] = exc.strerror or "cannot be read"
                continue
            if read.data is None:
                states[key] = self._oversized(read.signature)
            else:
                states[key] = self._classify(read.data)
                fresh[key] = read.data
            inventory.record(key, read.signature, states[key], scan_ns)
        return states, fresh, problems

    def _oversized(self, signature: tuple[int, int, int, int]) -> FileState:
        """A file over ``max-file-size``, which is not read: any rule could fire in it
        (so it is answered with SWA999), and it opens no rule's scope."""
        codes = tuple(code for code, _ in self._triggers)
        return FileState(f"{_OVERSIZED}{signature}", triggered=codes, opens=(), noqa=False)

    def _bytes(self, item: _File) -> bytes:
        if item.data is None:
            read = read_regular(item.location, self.config.max_file_size)
            if read.data is None:
                raise _Oversized(read.signature[1])
            item.data = read.data
        return item.data

    def _unreadable(self, item: _File, result: AuditResult) -> None:
        if PARSE_ERROR_CODE not in self.engine_codes:
            return
        position = Position(1, 0)
        message = f"File could not be read ({item.problem})"
        result.findings.append(
            Finding(PARSE_ERROR_CODE, message, item.key, position, position, noqa_row=None)
        )

    # -- the run record ----------------------------------------------------------------

    def _run_key(
        self,
        report: dict[str, _File],
        context: dict[str, FileState],
        asked: dict[str, FileState],
    ) -> str:
        """What a run's findings are a function of, beyond the cache's salt: every file's
        key and bytes (``context``: the project's other files, ``asked``: the files asked
        about), which ones are asked about and how they are shown. None for an audit of
        documents (an editor's: a record per set of open buffers would only pile up)."""
        if self._cache is None or any(item.document for item in report.values()):
            return ""
        states = context | asked
        # The configuration's folder: ``per-file-ignores`` globs are relative to it.
        lines = [f"prefilter={self.prefilter}", f"cwd={self._cwd}", f"scope={self._scope}"]
        lines.append(f"config-root={self.config.root}")
        lines += [f"{key}\0{states[key].digest}" for key in sorted(states)]
        for key in sorted(report):
            item = report[key]
            lines.append(f"{key}\0{item.display}\0{int(item.document)}\0{item.problem}")
        return self._cache.key("run", b"", "\n".join(lines))

    def _replay(self, key: str, result: AuditResult, fixing: bool, unsafe: bool) -> bool:
        """Fill ``result`` from a run-cache hit, unless it holds a fix to make."""
        if not key or self._cache is None:
            return False
        record = self._cache.get(key)
        if not isinstance(record, _RunRecord):
            return False
        if fixing and fixable(record.findings, unsafe):
            return False
        result.findings = list(record.findings)
        result.files_parsed = record.files_parsed
        result.inactive.update(record.inactive)
        return True

    # -- rules that apply ----------------------------------------------------------------

    def _applicable(self, opened: Set[str], result: AuditResult) -> list[RuleSpec]:
        """The enabled rules whose scope (``Rule.activation``) some file of the project
        opens (``opened``)."""
        applicable = []
        for spec in self.specs:
            if spec.activation is not None and spec.code not in opened:
                result.inactive[spec.code] = _inactive(spec)
                continue
            applicable.append(spec)
        return applicable

    # -- the passes ----------------------------------------------------------------------

    def _analyse(
        self,
        candidates: list[_File],
        applicable: list[RuleSpec],
        result: AuditResult,
        fix: bool,
        unsafe: bool,
        diff: bool,
        complete: bool,
        progress: _Progress,
    ) -> None:
        from swacheck.engine.regions import Regions

        regions = None
        if self.prefilter and applicable and all(spec.triggers is not None for spec in applicable):
            regions = Regions.of(applicable)
        codes = {spec.code for spec in applicable}
        mode = "regions" if regions is not None else "whole"
        profile = f"{mode}:{','.join(spec.code for spec in applicable)}"
        by_key = {item.key: item for item in candidates}
        numbers = {key: number for number, key in enumerate(by_key)}

        def source(key: str) -> Source:
            item = by_key[key]
            return Source(
                key,
                item.display or key,
                b"",
                relative_to_root(item.path, self.config) if item.report else "",
                relevant=item.state is not None and _relevant(item.state, codes),
                report=item.report,
                number=numbers[key],
            )

        sources = _Sources(source)
        work = _Work(self, applicable, regions, progress.advance)
        try:
            records = self._first_pass(by_key, sources, profile, work, result, complete, progress)
            # What the facts say, without where their rows fall (:func:`facts_digest`): a
            # file's findings depend on its own bytes and on that.
            meaning = project_digest({key: record.facts_digest for key, record in records.items()})
            work.records = records
            # Kept in the cache only where every input is on disk.
            lasting = not result.partial and not any(item.unsaved for item in by_key.values())
            work.inactive = self._inactive(meaning, profile, work, lasting)
            result.inactive.update(work.inactive)
            self._second_pass(by_key, sources, meaning, profile, work, lasting, result, progress)
            if fix or diff:
                self._fix(by_key, sources, work, result, unsafe, diff)
        finally:
            work.close()

    def _inactive(self, meaning: str, profile: str, work: _Work, lasting: bool) -> dict[str, str]:
        """Why each rule that does not apply to the project does not, by code: decided
        on the project's facts, so kept by what they say (the project is not built
        where every finding is known)."""
        key = f"{meaning}\0{profile}"
        if self._activation is not None and self._activation[0] == key:
            return self._activation[1]
        entry = self._cache.key("activation", b"", key) if self._cache is not None else ""
        found = self._cache.get(entry) if self._cache is not None else None
        if not isinstance(found, dict):
            project = work.project()
            found = {
                rule.code: reason
                for rule in work.rules
                if (reason := rule.inactive_reason(project, self.config)) is not None
            }
            if self._cache is not None and lasting:
                self._cache.put(entry, found)
        self._activation = (key, found)
        return found

    def _first_pass(
        self,
        by_key: dict[str, _File],
        sources: dict[str, Source],
        profile: str,
        work: _Work,
        result: AuditResult,
        complete: bool,
        progress: _Progress,
    ) -> dict[str, FactsRecord]:
        """Every candidate's facts: from memory, the cache, or parsed now (``complete``;
        else only those of the files asked about are)."""
        records: dict[str, FactsRecord] = {}
        missing = []
        for key, item in by_key.items():
            assert item.state is not None
            record = self._facts.get(key, item.state.digest, profile)
            if record is not None:
                records[key] = record
            elif complete or item.report:
                missing.append(key)
            else:
                result.left_out += 1
        if missing:
            progress.indexes(len(missing))
            progress.start(len(missing) + sum(1 for item in by_key.values() if item.report))
            todo = []
            oversized: dict[int, ModuleFacts | Finding] = {}
            for key in missing:
                try:
                    sources[key].data = self._bytes(by_key[key])
                except _Oversized as exc:
                    limit = self.config.max_file_size
                    oversized[sources[key].number] = too_large(key, exc.size, limit)
                    continue
                except OSError:
                    continue  # gone since the scan: it is no longer part of the project
                todo.append(sources[key])
            result.facts_parsed = len(todo)
            known = {key: record.facts for key, record in records.items()}
            firsts = {**oversized, **work.passes.collect(todo, known)}
            for key in missing:
                first = firsts.get(sources[key].number)
                state = by_key[key].state
                if first is None or state is None:
                    continue
                records[key] = self._facts.record(state.digest, profile, first)
            if not result.partial:  # a partial set is no project's facts
                unsaved = {key for key, item in by_key.items() if item.unsaved}
                self._facts.put(records, missing, unsaved)
        return records

    def _project_index(self, records: dict[str, FactsRecord]) -> ProjectIndex:
        """The project index of these facts (the last one again if no file changed), in
        the order of a walk of the project (each folder's entries by name, depth first),
        whichever files are asked about: where several files could answer a question
        (which one builds the mapping's sentinel), the first answers, so the order is part
        of what a file's findings are a function of, and its cached findings are keyed by
        the facts alone."""
        from swacheck.analysis.index import ModuleFacts, ProjectIndex

        versions = project_digest(
            {key: f"{r.digest}\0{r.profile}\0{r.facts_digest}" for key, r in records.items()}
        )
        if self._index is not None and self._index[0] == versions:
            return self._index[1]
        facts: list[ModuleFacts] = [
            records[key].facts
            for key in sorted(records, key=lambda key: key.split("/"))
            if isinstance(records[key].facts, ModuleFacts)
        ]
        project = self._index[1].updated_to(facts) if self._index is not None else None
        if project is None:
            project = ProjectIndex(facts)
        self._index = (versions, project)
        return project

    def _second_pass(
        self,
        by_key: dict[str, _File],
        sources: dict[str, Source],
        digest: str,
        profile: str,
        work: _Work,
        lasting: bool,
        result: AuditResult,
        progress: _Progress,
    ) -> None:
        known = self.known_codes if UNUSED_NOQA_CODE in self.engine_codes else None
        active_codes = ",".join(code for code in work.codes if code not in work.inactive)
        records = work.records
        outcomes: dict[str, CheckOutcome] = {}
        keys: dict[str, str] = {}
        todo = []
        for key, item in by_key.items():
            if not item.report:
                continue
            ignored = ignored_for_path(self.config, sources[key].relative)
            if records[key].failed:
                first = records[key].facts
                if (
                    sources[key].relevant
                    and PARSE_ERROR_CODE in self.engine_codes
                    and not is_ignored(PARSE_ERROR_CODE, ignored)
                ):
                    result.findings.append(first)
                continue
            assert item.state is not None
            # The file's path below the configuration's root matters through the codes
            # ``per-file-ignores`` turns off for it only (a path given or walked to).
            keys[key] = (
                f"{key}\0{item.state.digest}\0{digest}\0{profile}"
                f"\0{active_codes}\0{','.join(sorted(ignored))}"
            )
            kept = self._outcomes.get(key)
            hit = kept[1] if kept is not None and kept[0] == keys[key] else None
            if hit is None and self._cache is not None:
                cached = self._cache.get(self._cache.key("findings", b"", keys[key]))
                hit = cached if isinstance(cached, CheckOutcome) else None
            if hit is not None:
                outcomes[key] = hit
            else:
                sources[key].data = sources[key].data or self._bytes(item)
                todo.append(sources[key])
        if todo:  # the first pass counted every file asked about, or there was none
            asked = sum(1 for item in by_key.values() if item.report)
            progress.start(asked)
            progress.advance(asked - len(todo))
        checked = work.passes.check(todo, work.active(), work.project(), known) if todo else {}
        for source in todo:
            outcome = checked[source.number]
            outcomes[source.key] = outcome
            # An SWA999 here is a bound (max-file-time) run out: not kept, so that the
            # findings of a file do not depend on the bounds.
            if not outcome.errors and all(f.code != PARSE_ERROR_CODE for f in outcome.findings):
                self._outcomes[source.key] = (keys[source.key], outcome)
                if self._cache is not None and lasting:
                    self._cache.put(self._cache.key("findings", b"", keys[source.key]), outcome)
        for key, outcome in outcomes.items():
            result.errors.extend(
                f"{by_key[key].display}: internal error: {e}" for e in outcome.errors
            )
            result.findings.extend(outcome.findings)

    def _fix(
        self,
        by_key: dict[str, _File],
        sources: dict[str, Source],
        work: _Work,
        result: AuditResult,
        unsafe: bool,
        diff: bool,
    ) -> None:
        known = self.known_codes if UNUSED_NOQA_CODE in self.engine_codes else None
        by_file: dict[str, list[Finding]] = {}
        for finding in result.findings:
            by_file.setdefault(finding.path, []).append(finding)
        kept: list[Finding] = []
        for key, findings in by_file.items():
            item = by_key.get(key)
            if item is None or not fixable(findings, unsafe):
                kept.extend(findings)
                continue
            source = sources[key]
            source.data = source.data or self._bytes(item)
            outcome = work.passes.fix(
                source, findings, work.active(), work.project(), known, unsafe=unsafe, diff=diff
            )
            if outcome.error:
                result.errors.append(f"{item.display}: {outcome.error}")
            if outcome.data is None:
                kept.extend(outcome.findings)
                continue
            if diff:
                result.diffs.append(outcome.diff)
            elif item.document:
                result.fixed_documents[item.display] = outcome.data
            else:
                try:
                    write_atomic(
                        item.path,
                        outcome.data,
                        expected=source.data,
                        identity=item.identity,
                        follow=item.explicit,
                    )
                except ChangedOnDisk as exc:
                    kept.extend(findings)
                    if PARSE_ERROR_CODE in self.engine_codes:
                        kept.append(_changed_on_disk(key))
                    else:
                        result.errors.append(f"{item.display}: {exc.strerror}; not fixed")
                    continue
                except OSError as exc:
                    result.errors.append(f"{item.display}: cannot write fix: {exc.strerror}")
                    kept.extend(findings)
                    continue
            result.fixes_applied += len(outcome.fixed)
            result.fixed.extend(outcome.fixed)
            kept.extend(outcome.findings)
        result.findings = kept

    def _add_noqa(self, report: dict[str, _File], result: AuditResult, reason: str) -> None:
        """``--add-noqa``: each file's findings suppressed where they are, in its bytes as
        they were audited (a file changed since is left alone)."""
        on_disk = {
            item.display: item
            for item in report.values()
            if not item.document and item.state is not None
        }
        by_file: dict[str, list[Finding]] = {}
        for finding in result.findings:
            if finding.noqa_row is not None and finding.path in on_disk:
                by_file.setdefault(finding.path, []).append(finding)
        done: set[int] = set()
        for shown, findings in by_file.items():
            item = on_disk[shown]
            path = Path(item.location)
            try:
                data = path.read_bytes()
                if item.state is None or digest_of(data) != item.state.digest:
                    raise noqa_writer.NoqaNotWritten("it changed during the audit")
                new, added = noqa_writer.add_noqa(data, findings, reason)
                if added:
                    write_atomic(
                        path, new, expected=data, identity=item.identity, follow=item.explicit
                    )
            except noqa_writer.NoqaNotWritten as exc:
                result.errors.append(f"{shown}: no `# noqa` added: {exc}")
                continue
            except OSError as exc:
                result.errors.append(f"{shown}: no `# noqa` added: {exc.strerror or exc}")
                continue
            result.noqa_added += added
            done.update(id(f) for f in findings)
        result.findings = [f for f in result.findings if id(f) not in done]

    # -- the result ----------------------------------------------------------------------

    @staticmethod
    def _shown(findings: list[Finding], report: dict[str, _File]) -> list[Finding]:
        """Findings named as shown (they carry index keys until here), in order."""
        shown = []
        for finding in findings:
            item = report.get(finding.path)
            if item is not None and item.display != finding.path:
                finding = replace(finding, path=item.display)
            shown.append(finding)
        shown.sort(key=lambda f: f.sort_key)
        return shown

    # -- persistence -----------------------------------------------------------------------

    def _load_inventory(self) -> Inventory:
        if self._inventory is None:
            stored = None
            if self._cache is not None:
                stored = self._cache.get(self._cache.key("inventory", b"", self._scope))
            self._inventory = Inventory(stored)
        return self._inventory

    def _store_inventory(self, inventory: Inventory) -> None:
        if self._cache is not None and inventory.changed:
            inventory.changed = False
            self._cache.put(self._cache.key("inventory", b"", self._scope), inventory.stored())


class _Work:
    """The rules, passes and project index of one analysis, each made when first
    needed: an audit whose facts and findings are all known (an editor's first
    diagnostics on a project the command line audited) imports neither the rules nor
    the parser, and builds no project index."""

    def __init__(
        self,
        workspace: Workspace,
        applicable: list[RuleSpec],
        regions: Any,
        advance: Callable[[int], None],
    ) -> None:
        self._workspace = workspace
        self._applicable = applicable
        self._regions = regions
        self._advance = advance
        self.codes = [spec.code for spec in applicable]
        # Every candidate's facts record, once the first pass has them; then why each
        # rule that does not apply to the project does not.
        self.records: dict[str, FactsRecord] = {}
        self.inactive: dict[str, str] = {}
        self._passes: Passes | None = None

    @cached_property
    def rules(self) -> list[type[Rule]]:
        return [spec.load() for spec in self._applicable]

    def active(self) -> list[type[Rule]]:
        return [rule for rule in self.rules if rule.code not in self.inactive]

    def project(self) -> ProjectIndex:
        return self._workspace._project_index(self.records)

    @property
    def passes(self) -> Passes:
        if self._passes is None:
            from swacheck.engine.passes import Passes, PassOptions
            from swacheck.engine.workers import Workers

            workspace = self._workspace
            if workspace._workers is None:
                workspace._workers = Workers(workspace.jobs, keep=workspace._keep_workers)
            options = PassOptions(self.rules, workspace.config, workspace._workers, self._regions)
            self._passes = Passes(options, self._advance)
        return self._passes

    def close(self) -> None:
        if self._passes is not None:
            self._passes.close()


def _changed_on_disk(key: str) -> Finding:
    """SWA999 for a file edited while ``--fix`` ran: its fixes were not written."""
    position = Position(1, 0)
    message = (
        "File changed on disk during the run: its fixes were not written (the findings "
        "shown are of the version read; run again)"
    )
    return Finding(PARSE_ERROR_CODE, message, key, position, position, noqa_row=None)


class _Oversized(OSError):
    """A file larger than ``max-file-size``: it is not read."""

    def __init__(self, size: int) -> None:
        super().__init__(0, "larger than max-file-size")
        self.size = size


def _inactive(spec: RuleSpec) -> str:
    """Why a rule did not apply, known before anything is parsed: no file opens its scope
    (``Rule.activation``), so the rule's reason for a project without any file holds.
    Once files are parsed, the rule says why (``inactive_reason``)."""
    needs = spec.scope_needs or "no file of the project holds what its scope needs"
    return f"{needs} (see `swacheck rule {spec.code}`)"
