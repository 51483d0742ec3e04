"""Worker processes that parse and analyse the files, one at a time, so that a file that
crashes, hangs or exhausts memory costs that file only.

libcst's parser is native code: on hostile input it can overflow the C stack (the
process dies), run for minutes holding the interpreter lock (no signal handler runs, a
language server stops answering), or allocate gigabytes. So every unit of work on a file
(``engine/units.py``: the first pass, the check, the fix) runs in a worker process:

- **Long-lived workers.** Forked from the audit (they share its loaded modules, rules
  and configuration, and the project's facts known so far), each serves file after file.
  A worker keeps the trees it parsed in the first pass and checks those files in the
  second, so a file is parsed once (its check goes to the worker holding its tree).
  Work is handed out one file at a time, largest first, to whichever worker is free: the
  load balances itself by each file's cost, and the parent always knows the one file
  each worker is on. A kept worker (a language server's) that parsed a whole project
  is stopped at the audit's end rather than cleared (:meth:`WorkerPool.end`).
- **Bounds set by the operating system** around each unit (``engine/limits.py``): CPU
  time (``max-file-time``; beyond it the worker is stopped even inside native code) and
  address space (``max-file-memory`` beyond what the worker holds). A parent-side
  watchdog kills a worker that makes no progress on a file (its CPU time stands still
  for :data:`STALL_S` seconds: stopped, blocked, swapped out for good); where a process's
  CPU time cannot be read, one that holds a file longer than :func:`wall_limit`. A
  loaded machine slows a worker down, so it never decides a file's answer: the CPU-time
  bound does.
- **A crash costs one file.** When a worker dies, the file it was on is answered with
  ``SWA999`` and the reason (``parser crashed (SIGSEGV)``, over the time or the memory
  limit), a new worker is forked, and the files whose trees died with it are parsed
  again where they are checked.
- **No orphans.** A worker dies with its parent: on Linux by the parent-death signal
  (``prctl(PR_SET_PDEATHSIG)``), everywhere because each worker holds only its own end
  of its socket (every other descriptor of the parent is closed in it), so a worker
  waiting for work or sending a result sees the parent go. Workers ignore ``SIGINT``
  (a terminal sends it to the whole group): the parent's ``KeyboardInterrupt`` (or
  ``SIGTERM``, see ``cli.py``) unwinds the audit, and :meth:`WorkerPool.close` kills them.
- **The project index** is built in each worker from the same facts, in the same order,
  as in the parent: each worker mirrors the facts by key; before a check the parent sends
  only those the worker does not have (on a cold run, the other workers' files; in a
  language server, usually none), and the worker keeps its index (and the summaries it
  memoised) while the parent's index is the same object.

Where ``fork`` does not exist (Windows), :class:`InProcess` runs the units in the
audit's own process: the per-file timer and ``max-file-size`` still bound a file, a
crash of the native parser does not.
"""

from __future__ import annotations

import contextlib
import gc
import mmap
import os
import signal
import socket
import sys
import tempfile
import time
import traceback
import warnings
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from swacheck.analysis.cfg import forget_cfgs
from swacheck.analysis.index import ModuleFacts, ProjectIndex
from swacheck.analysis.skeletons import forget_analyses
from swacheck.config import Config
from swacheck.engine import units
from swacheck.engine.gc_pause import collect_unit_garbage
from swacheck.engine.limits import beyond_limits, os_limits, out_of_memory, out_of_time
from swacheck.engine.parse import Parsed
from swacheck.engine.regions import Regions
from swacheck.engine.result import CheckOutcome
from swacheck.engine.units import FixOutcome
from swacheck.finding import Finding
from swacheck.rule import Rule

# One file for the first pass: its number in the audit, key, bytes, and whether its
# tree is kept for the check (findings are asked for it).
ParseJob = tuple[int, str, bytes, bool]
# One file to check: number, key, path relative to the configuration's root, bytes.
CheckJob = tuple[int, str, str, bytes]
Facts = ModuleFacts | Finding
# Told how many more files are done (an audit's progress).
Advance = Callable[[int], None]


def no_progress(done: int) -> None:
    """The progress of an audit nobody watches."""


# Exit status of a worker that could not set itself up (not a file's fault).
_SETUP_FAILED = 70
# What a worker is doing, in a byte the parent reads after a crash.
_IDLE, _PHASES = b"-", {units.PARSING: b"p", units.ANALYSING: b"a"}
_PR_SET_PDEATHSIG = 1


# Seconds a worker's CPU time may stand still on one file before the watchdog stops it.
STALL_S = 30.0
# How often the watchdog looks (at most), in seconds.
_WATCH_S = 1.0


def wall_limit(config: Config) -> float:
    """Where a worker's CPU time cannot be read (no ``/proc``): the seconds of wall-clock
    time one file may hold it before the watchdog stops it. Generous, so that a loaded
    machine does not change a file's answer."""
    seconds = config.max_file_time
    return 4 * seconds + STALL_S if seconds > 0 else 0.0


def _cpu_ticks(pid: int) -> int | None:
    """A process's CPU time so far, in clock ticks (Linux); ``None`` where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


class WorkerError(RuntimeError):
    """A worker process could not be started (not the fault of any file)."""


# -- the worker process ----------------------------------------------------------------


def _prctl() -> Callable[..., int] | None:
    """Linux's ``prctl``, looked up once in the parent (a worker must not pay for
    importing ctypes at each fork); ``None`` elsewhere."""
    global _PRCTL
    if _PRCTL is None and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError, ImportError):
            import ctypes

            _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
    return _PRCTL


_PRCTL: Callable[..., int] | None = None


def _die_with_parent(parent: int) -> None:
    """Linux: the kernel kills this process when the thread that forked it ends."""
    prctl = _PRCTL
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(0)


def _prepare_child(parent: int, keep: Sequence[int], errors: int) -> None:
    """Set up a freshly forked worker: it dies with its parent, holds no descriptor of
    the parent's but ``keep`` (so a socket or pipe of another worker, or a language
    server's stdout, is not kept open by it), writes its error output to ``errors``,
    leaves SIGINT to the parent and dumps no core."""
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(errors, 2)
    start = 3
    for fd in sorted({*keep, 2}):
        if fd >= start:
            os.closerange(start, fd)
            start = fd + 1
    os.closerange(start, max(os.sysconf("SC_OPEN_MAX"), start))
    gc.disable()  # trees are long-lived and acyclic (see engine/gc_pause.py)
    with contextlib.suppress(Exception):
        import faulthandler

        faulthandler.enable(file=sys.__stderr__ or 2)


def _forget_trees() -> None:
    """The memos sharing a function's CFG and analysis between the passes hold this
    audit's trees: a kept worker (a language server's) would keep every one."""
    forget_cfgs()
    forget_analyses()


class _Serving:
    """A worker's state between messages: its facts by key, the project index built
    from them, and the trees it keeps for this audit."""

    def __init__(
        self,
        conn: Connection,
        rules: Sequence[type[Rule]],
        config: Config,
        regions: Regions | None,
        facts: dict[str, Any],
        phase: mmap.mmap,
    ) -> None:
        self.conn, self.rules, self.config, self.regions = conn, rules, config, regions
        self.facts = facts
        self.order: list[str] = []
        self.index: ProjectIndex | None = None
        # The facts changed since ``index`` was built (it is updated on next use).
        self.stale = False
        self.trees: dict[int, Parsed] = {}
        self._phase = phase
        self._frozen = False

    def _settle(self) -> None:
        """Between audits of a kept worker (a language server's): collect what the audit
        left in reference cycles; after the first, freeze what lives on (the project's
        facts), so later collections do not walk it again (as the server itself does,
        ``server/projects.py``). The cyclic collector stays off while files are handled."""
        gc.collect()
        if not self._frozen:
            gc.freeze()
            self._frozen = True

    def phase(self, name: str) -> None:
        self._phase[0:1] = _PHASES.get(name, _IDLE)

    def project(self) -> ProjectIndex:
        if self.index is None or self.stale:
            modules = [self.facts[key] for key in self.order]
            updated = self.index.updated_to(modules) if self.index is not None else None
            self.index = updated if updated is not None else ProjectIndex(modules)
            self.stale = False
        return self.index

    def serve(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                return  # the parent closed the socket, or is gone
            kind = message[0]
            if kind == "project":
                _, delta, removed, order = message
                self.facts.update(delta)
                for key in removed:
                    self.facts.pop(key, None)
                if order is not None:
                    self.order = order
                self.stale = True
                continue
            if kind == "end":
                self.trees.clear()
                _forget_trees()
                self._settle()
                continue
            number = message[1]
            if kind != "parse":
                self.project()  # built once per change of the index, outside the file's bounds
            reply: Any = None
            try:
                with os_limits(self.config.max_file_time, self.config.max_file_memory):
                    reply = getattr(self, kind)(*message[1:])
            except MemoryError:
                reply = None
            self.phase("")
            if reply is None:  # out of memory outside what the unit catches
                findings = message[6] if kind == "fix" else []
                reply = _failure(kind, message[2], ("memory", ""), self.config, findings)
            self.conn.send((number, reply))
            collect_unit_garbage()

    def parse(self, number: int, key: str, data: bytes, keep: bool) -> Facts:
        tree, result = units.first_pass(
            key, data, self.rules, self.config, self.regions, self.phase
        )
        if isinstance(result, ModuleFacts):
            self.facts[key] = result
            if keep and tree is not None:
                units.keep_for_check(self.trees, number, tree)
        return result

    def check(
        self,
        number: int,
        key: str,
        relative: str,
        data: bytes | None,
        active: Sequence[int],
        known: frozenset[str] | None,
    ) -> CheckOutcome:
        tree: Parsed | bytes | None = self.trees.get(number) if data is None else data
        if tree is None:
            raise LookupError(f"no tree kept for file {number}")  # the parent's bug
        rules = [self.rules[i] for i in active]
        return units.check(
            key,
            relative,
            tree,
            rules,
            self.config,
            self.project(),
            known,
            self.regions,
            self.phase,
        )

    def fix(
        self,
        number: int,
        key: str,
        relative: str,
        data: bytes,
        display: str,
        findings: list[Finding],
        active: Sequence[int],
        known: frozenset[str] | None,
        unsafe: bool,
        diff: bool,
    ) -> FixOutcome:
        rules = [self.rules[i] for i in active]
        return units.fix(
            key,
            relative,
            data,
            display,
            findings,
            rules,
            self.config,
            self.project(),
            known,
            unsafe=unsafe,
            diff=diff,
            tree=self.trees.get(number),
            phase=self.phase,
        )


# -- the parent's side -----------------------------------------------------------------


@dataclass
class _Task:
    kind: str  # "parse", "check", "fix"
    number: int
    key: str
    data: bytes
    # What the message holds after the key and the bytes (see ``_send``).
    rest: tuple[Any, ...]
    done: Callable[[_Task, _Worker | None, Any], None]


@dataclass
class _Worker:
    pid: int
    conn: Connection
    errors: Any  # the temporary file its error output goes to
    phase: mmap.mmap
    # The parent's view of its facts (key -> the parent's object it mirrors).
    synced: dict[str, Any]
    order: list[str] = field(default_factory=list)
    project: ProjectIndex | None = None
    # Files (by number) whose trees it keeps for this audit.
    trees: set[int] = field(default_factory=set)
    # Files it parsed in this audit (their analyses' memos live in it until the end).
    parsed: int = 0
    task: _Task | None = None
    # The watchdog's last look: when, the CPU ticks it saw, and when they last moved.
    looked: float = 0.0
    ticks: int | None = None
    progress: float = 0.0
    stopped: bool = False  # killed by the watchdog


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _why(status: int, errors: bytes, phase: bytes, stopped: bool) -> tuple[str, str]:
    """Why a worker died: ``("time" | "stalled" | "memory" | "crash", details)``."""
    if stopped:
        return "stalled", ""
    memory = b"memory allocation of" in errors or b"MemoryError" in errors
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number == signal.SIGXCPU:
            return "time", ""
        if memory:
            return "memory", ""
        if number == signal.SIGKILL:
            return "crash", "killed (SIGKILL; by the system for lack of memory?)"
        where = "parser" if phase == _PHASES[units.PARSING] else "analysis"
        return "crash", f"{where} crashed ({_signal_name(number)})"
    if memory:
        return "memory", ""
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    last = errors.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
    return "crash", f"the worker exited with status {code}: {last[0][:200]}".rstrip(": ")


def _failure(
    kind: str, key: str, why: tuple[str, str], config: Config, findings: list[Finding]
) -> Any:
    """The answer for a file whose unit of work a worker could not finish (``findings``:
    those a fix was to fix, which stay)."""
    cause, details = why
    if cause == "time":
        finding = out_of_time(key, config.max_file_time)
    elif cause == "memory":
        finding = out_of_memory(key, config.max_file_memory)
    elif cause == "stalled":
        finding = beyond_limits(
            key,
            f"File too slow to analyse (over the time limit: its worker made no progress "
            f"for {details} s and was stopped; `max-file-time`)",
        )
    elif details.startswith("parser"):
        finding = beyond_limits(key, f"File could not be parsed ({details})")
    else:
        finding = beyond_limits(key, f"File could not be analysed ({details})")
    if kind == "parse":
        return finding
    if kind == "check":
        return CheckOutcome([finding])
    reason = finding.message[finding.message.index("(") + 1 : -1]
    return FixOutcome(None, findings, error=f"fix not applied ({reason})")


class WorkerPool:
    """Up to ``size`` workers for one rule set (the audit's applicable rules)."""

    def __init__(
        self,
        rules: Sequence[type[Rule]],
        config: Config,
        regions: Regions | None,
        size: int,
        stall: float | None = None,
    ) -> None:
        self.rules = tuple(rules)
        self.config, self.regions = config, regions
        self.size = max(1, size)
        if stall is None:
            stall = STALL_S if _cpu_ticks(os.getpid()) is not None else wall_limit(config)
        self.stall = stall
        self._workers: list[_Worker] = []
        # The facts the parent holds, by key: what a worker forked now starts with.
        self._view: dict[str, Any] = {}
        self._project: ProjectIndex | None = None

    # -- processes ---------------------------------------------------------------------

    def _spawn(self) -> _Worker:
        parent_end, child_end = socket.socketpair()
        errors = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker
        phase = mmap.mmap(-1, 1)
        phase[0:1] = _IDLE
        view = dict(self._view)
        parent = os.getpid()
        _prctl()
        with warnings.catch_warnings():
            # Python 3.12+ warns of fork() in a process with threads (a language server's
            # event loop): the child runs only the loop below, which takes no lock another
            # thread could hold (it talks through its socket and writes with os.write).
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the worker
            status = 0
            try:
                try:
                    _prepare_child(parent, [child_end.fileno()], errors.fileno())
                    conn = Connection(child_end.detach())
                except BaseException:
                    os.write(2, traceback.format_exc().encode())
                    os._exit(_SETUP_FAILED)
                _Serving(conn, self.rules, self.config, self.regions, view, phase).serve()
            except BaseException:
                status = 1
                with contextlib.suppress(BaseException):
                    os.write(2, traceback.format_exc().encode())
            finally:
                os._exit(status)
        child_end.close()
        worker = _Worker(pid, Connection(parent_end.detach()), errors, phase, view)
        self._workers.append(worker)
        return worker

    def _reap(self, worker: _Worker) -> tuple[str, str]:
        """Collect a dead (or killed) worker; why it died."""
        with contextlib.suppress(OSError):
            worker.conn.close()
        try:
            _, status = os.waitpid(worker.pid, 0)
        except ChildProcessError:
            status = 0
        try:
            size = os.fstat(worker.errors.fileno()).st_size
            errors = os.pread(worker.errors.fileno(), 8192, max(0, size - 8192))
        except OSError:
            errors = b""
        worker.errors.close()
        phase = bytes(worker.phase[0:1])
        worker.phase.close()
        if worker in self._workers:
            self._workers.remove(worker)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == _SETUP_FAILED:
            raise WorkerError(
                "swacheck: a worker process could not start: "
                + errors.decode("utf-8", "replace").strip()[-500:]
            )
        return _why(status, errors, phase, worker.stopped)

    def _kill(self, worker: _Worker) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGKILL)

    def _stop(self, worker: _Worker) -> None:
        self._kill(worker)
        with contextlib.suppress(WorkerError):
            self._reap(worker)

    def close(self) -> None:
        """Stop every worker now (they keep nothing worth waiting for)."""
        for worker in list(self._workers):
            self._stop(worker)

    def end(self) -> None:
        """The audit is over: the workers drop its trees (and stay, for the next one).

        A worker that parsed many files (:data:`RETIRE_AFTER_FILES`; a language server's
        complete round) is stopped instead: freeing their trees and memos object by object
        and collecting would keep it from the next file for seconds (8 s after 0.5.23's
        1,700), while the system reclaims a killed process at once and a fresh fork of
        this process, which holds the project's facts, is ready as soon."""
        for worker in list(self._workers):
            worker.trees.clear()
            parsed, worker.parsed = worker.parsed, 0
            if parsed >= RETIRE_AFTER_FILES:
                self._stop(worker)
                continue
            try:
                worker.conn.send(("end",))
            except OSError:
                self._stop(worker)

    # -- scheduling --------------------------------------------------------------------

    def _send(self, worker: _Worker, task: _Task) -> None:
        if task.kind != "parse":
            self._sync(worker)
        data = None if task.kind == "check" and task.number in worker.trees else task.data
        if task.kind == "parse":
            message = ("parse", task.number, task.key, data, *task.rest)
        else:
            message = (task.kind, task.number, task.key, task.rest[0], data, *task.rest[1:])
        worker.task = task
        worker.looked = worker.progress = time.monotonic()
        worker.ticks = None
        worker.conn.send(message)

    def _sync(self, worker: _Worker) -> None:
        """Bring a worker's facts in line with the parent's project index (only what it
        lacks travels)."""
        project = self._project
        if project is None or worker.project is project:
            return
        modules = project.modules
        synced = worker.synced
        delta = {key: facts for key, facts in modules.items() if synced.get(key) is not facts}
        removed = [key for key in synced if key not in modules]
        order = list(modules)
        worker.conn.send(("project", delta, removed, None if order == worker.order else order))
        worker.synced, worker.order, worker.project = dict(modules), order, project

    def _run(self, tasks: Sequence[_Task]) -> None:
        """Run ``tasks``, largest first, each on the worker holding its file's tree if
        one does, else on the next free worker."""
        free = deque(sorted(tasks, key=lambda task: -len(task.data)))
        owned: dict[int, deque[_Task]] = {}
        for task in list(free):
            if task.kind != "parse":
                holder = next((w for w in self._workers if task.number in w.trees), None)
                if holder is not None:
                    owned.setdefault(holder.pid, deque()).append(task)
                    free.remove(task)
        while True:
            for worker in list(self._workers):
                if worker.task is None and worker in self._workers:
                    queue = owned.get(worker.pid)
                    task = queue.popleft() if queue else (free.popleft() if free else None)
                    if task is not None:
                        self._start(worker, task, free, owned)
            while free and len(self._workers) < self.size:
                self._start(self._spawn(), free.popleft(), free, owned)
            busy = [w for w in self._workers if w.task is not None]
            if busy:
                self._wait(busy, free, owned)
            elif not free:
                return

    def _start(
        self,
        worker: _Worker,
        task: _Task,
        free: deque[_Task],
        owned: dict[int, deque[_Task]],
    ) -> None:
        try:
            self._send(worker, task)
        except OSError:  # it died between two files
            worker.task = None
            free.appendleft(task)
            self._lost(worker, free, owned)

    def _wait(
        self, busy: list[_Worker], free: deque[_Task], owned: dict[int, deque[_Task]]
    ) -> None:
        by_conn = {worker.conn: worker for worker in busy}
        for conn in wait(list(by_conn), _WATCH_S if self.stall > 0 else None):
            worker = by_conn[conn]
            try:
                _, reply = conn.recv()
            except (EOFError, OSError):
                self._lost(worker, free, owned)
                continue
            task, worker.task = worker.task, None
            assert task is not None
            task.done(task, worker, reply)
        if self.stall > 0:
            self._watch(busy, free, owned)

    def _watch(
        self, busy: list[_Worker], free: deque[_Task], owned: dict[int, deque[_Task]]
    ) -> None:
        """Stop a worker whose CPU time has not moved for ``stall`` seconds."""
        now = time.monotonic()
        for worker in busy:
            if worker.task is None or now - worker.looked < _WATCH_S:
                continue
            worker.looked = now
            ticks = _cpu_ticks(worker.pid)
            if ticks is not None and ticks != worker.ticks:
                worker.ticks, worker.progress = ticks, now
            elif now - worker.progress > self.stall:
                worker.stopped = True
                self._kill(worker)
                self._lost(worker, free, owned)

    def _lost(self, worker: _Worker, free: deque[_Task], owned: dict[int, deque[_Task]]) -> None:
        """A worker died: its file is answered with the reason, its other files (whose
        trees died with it) go to the others."""
        self._kill(worker)
        why = self._reap(worker)
        if why[0] == "stalled":
            why = ("stalled", f"{self.stall:g}")
        task, worker.task = worker.task, None
        if task is not None:
            findings = task.rest[2] if task.kind == "fix" else []
            task.done(task, None, _failure(task.kind, task.key, why, self.config, findings))
        free.extend(owned.pop(worker.pid, ()))

    # -- the passes --------------------------------------------------------------------

    def first_pass(
        self, jobs: Sequence[ParseJob], known: Mapping[str, Any], advance: Advance = no_progress
    ) -> dict[int, Facts]:
        """Each file's facts (or ``SWA999``), by number; trees of ``keep`` files stay in
        the worker that parsed them. ``known``: facts the parent holds already (a worker
        forked from now on starts with them); ``advance``: told of each file done."""
        self._view.update((k, f) for k, f in known.items() if isinstance(f, ModuleFacts))
        results: dict[int, Facts] = {}

        def done(task: _Task, worker: _Worker | None, reply: Facts) -> None:
            results[task.number] = reply
            advance(1)
            if worker is not None:
                worker.parsed += 1
            if isinstance(reply, ModuleFacts):
                self._view[task.key] = reply
                if worker is not None:
                    worker.synced[task.key] = reply
                    if task.rest[0]:
                        worker.trees.add(task.number)

        self._run(
            [_Task("parse", number, key, data, (keep,), done) for number, key, data, keep in jobs]
        )
        return results

    def check(
        self,
        jobs: Sequence[CheckJob],
        rules: Sequence[type[Rule]],
        project: ProjectIndex,
        known_codes: frozenset[str] | None,
        advance: Advance = no_progress,
    ) -> dict[int, CheckOutcome]:
        """Each file's outcome under ``rules`` (a subset of the pool's), by number."""
        self._project = project
        self._view = dict(project.modules)
        active = tuple(self.rules.index(rule) for rule in rules)
        outcomes: dict[int, CheckOutcome] = {}

        def done(task: _Task, worker: _Worker | None, reply: CheckOutcome) -> None:
            outcomes[task.number] = reply
            advance(1)

        self._run(
            [
                _Task("check", number, key, data, (relative, active, known_codes), done)
                for number, key, relative, data in jobs
            ]
        )
        return outcomes

    def fix(
        self,
        job: CheckJob,
        display: str,
        findings: list[Finding],
        rules: Sequence[type[Rule]],
        project: ProjectIndex,
        known_codes: frozenset[str] | None,
        *,
        unsafe: bool,
        diff: bool,
    ) -> FixOutcome:
        self._project = project
        active = tuple(self.rules.index(rule) for rule in rules)
        number, key, relative, data = job
        found: list[FixOutcome] = []

        def done(task: _Task, worker: _Worker | None, reply: FixOutcome) -> None:
            found.append(reply)

        rest = (relative, display, findings, active, known_codes, unsafe, diff)
        self._run([_Task("fix", number, key, data, rest, done)])
        return found[0]


class InProcess:
    """The units run in the audit's own process: where ``fork`` does not exist. The
    per-file timer and ``max-file-size`` bound a file; a crash of the native parser is
    the process's."""

    def __init__(
        self, rules: Sequence[type[Rule]], config: Config, regions: Regions | None
    ) -> None:
        self.rules, self.config, self.regions = tuple(rules), config, regions
        self._trees: dict[int, Parsed] = {}

    def first_pass(
        self, jobs: Sequence[ParseJob], known: Mapping[str, Any], advance: Advance = no_progress
    ) -> dict[int, Facts]:
        results: dict[int, Facts] = {}
        for number, key, data, keep in jobs:
            tree, results[number] = units.first_pass(
                key, data, self.rules, self.config, self.regions
            )
            if keep and tree is not None:
                units.keep_for_check(self._trees, number, tree)
            collect_unit_garbage()
            advance(1)
        return results

    def check(
        self,
        jobs: Sequence[CheckJob],
        rules: Sequence[type[Rule]],
        project: ProjectIndex,
        known_codes: frozenset[str] | None,
        advance: Advance = no_progress,
    ) -> dict[int, CheckOutcome]:
        outcomes: dict[int, CheckOutcome] = {}
        for number, key, relative, data in jobs:
            tree = self._trees.get(number) or data
            outcomes[number] = units.check(
                key, relative, tree, rules, self.config, project, known_codes, self.regions
            )
            collect_unit_garbage()
            advance(1)
        return outcomes

    def fix(
        self,
        job: CheckJob,
        display: str,
        findings: list[Finding],
        rules: Sequence[type[Rule]],
        project: ProjectIndex,
        known_codes: frozenset[str] | None,
        *,
        unsafe: bool,
        diff: bool,
    ) -> FixOutcome:
        number, key, relative, data = job
        return units.fix(
            key,
            relative,
            data,
            display,
            findings,
            rules,
            self.config,
            project,
            known_codes,
            unsafe=unsafe,
            diff=diff,
            tree=self._trees.get(number),
        )

    def end(self) -> None:
        self._trees.clear()
        _forget_trees()

    def close(self) -> None:
        self.end()


Executor = WorkerPool | InProcess


class Workers:
    """A workspace's worker processes: one pool for the rule set of its audits, closed
    at the end of each audit, or kept for the next (``keep``: a language server, whose
    next audit then forks nothing and sends a worker only the facts it lacks)."""

    def __init__(self, jobs: int, keep: bool = False) -> None:
        self.jobs = max(1, jobs)
        self.keep = keep
        self._pool: Executor | None = None
        self._key: tuple[Any, ...] | None = None

    def executor(
        self, rules: Sequence[type[Rule]], config: Config, regions: Regions | None, files: int
    ) -> Executor:
        """The executor for an audit of these rules, with up to ``jobs`` workers (one
        where fewer than :data:`PARALLEL_THRESHOLD` files are to be handled)."""
        key = (tuple(rules), config, regions is None)
        if self._pool is not None and self._key != key:
            self.close()
        if self._pool is None:
            self._key = key
            if not hasattr(os, "fork"):
                self._pool = InProcess(rules, config, regions)
            else:
                self._pool = WorkerPool(rules, config, regions, 1)
        if isinstance(self._pool, WorkerPool) and files >= PARALLEL_THRESHOLD:
            self._pool.size = max(self._pool.size, self.jobs)
        return self._pool

    def release(self) -> None:
        """The audit is over."""
        if self._pool is not None:
            if self.keep:
                self._pool.end()
            else:
                self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
            self._key = None


# Below this many files to handle, one worker: more cost more to start than they save.
PARALLEL_THRESHOLD = 24
# A kept worker that parsed this many files in an audit is stopped at its end, not
# cleared (:meth:`WorkerPool.end`); one that parsed fewer (an editor's edit) keeps the
# summaries it memoised.
RETIRE_AFTER_FILES = 64
