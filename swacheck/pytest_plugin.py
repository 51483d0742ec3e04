"""pytest plugin: run tests under swacheck's runtime SWA sanitizer.

``--swa-sanitize=fast|full`` sanitizes every test; ``@pytest.mark.swa_sanitize``
(optionally ``level=``/``action=``) opts single tests in (or out, ``level="off"``); the
``swa_sanitizer`` fixture hands a test its sanitizer. Classes named in the ini option
``swa_sanitize_classes = module:Class[=ROLE[/CACHE]] ...`` are watched on construction,
by the role they are recognised by or the one given (``pool``, ``allocator``,
``graph-runner``, ``input-buffers``, ``backend``, ``model-runner``; a pool's cache model
after a slash: ``none``, ``memoising``, ``attribute``); runners, input buffers and
backends are wrapped before their ``__init__`` runs, so a runner that captures its
graphs there is checked. An instance that plays no role is left alone, and the session
says so once per class. A violation fails the test with its kind, the invariant in
words and where it happened in the engine's code (the sanitizer's own frames are left
out of the traceback); the session ends with one summary line (also under
pytest-xdist, whose workers send their tallies to the controller), and a warning when
it sanitized tests but watched nothing. ``--swa-sanitize-report=html`` also writes the
violations as a self-contained HTML page, each with a picture of the batch it is about
(``swa-sanitizer-report.html`` beside the JUnit XML report, else in the root folder; or
``--swa-sanitize-report=PATH.html``).

Tensor-parallel code is tested through the ``swa_sanitize_ranks`` fixture: it runs a
function on N ranks under torchrun, each rank under its own sanitizer at the test's
level and action, and fails the test on the report merged over the ranks (a pytest run
that torchrun starts itself, one session per rank, works too: violations name their rank).

This module is loaded in every pytest session of an environment with swacheck
installed, so it imports nothing heavy: torch and ``swacheck.runtime`` are imported
only once a test is actually sanitized.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from swacheck.runtime import Sanitizer, SanitizerReport

OPTION = "--swa-sanitize"
ACTION_OPTION = "--swa-sanitize-action"
REPORT_OPTION = "--swa-sanitize-report"
REPORT_NAME = "swa-sanitizer-report.html"
# Violations a session keeps for the HTML report (the first ones, in test order).
MAX_REPORTED = 200
MARKER = "swa_sanitize"
FIXTURE = "swa_sanitizer"
RANKS_FIXTURE = "swa_sanitize_ranks"
INI_LEVEL = "swa_sanitize"
INI_ACTION = "swa_sanitize_action"
INI_CLASSES = "swa_sanitize_classes"
XDIST_KEY = "swacheck_sanitizer"
XDIST_USAGE_KEY = "swacheck_usage_error"
LEVELS = ("off", "fast", "full")
ACTIONS = ("raise", "log")
# Roles and cache models (``swacheck.runtime.class_spec``, spelled here for the help text:
# this module imports nothing heavy).
ROLES = ("pool", "allocator", "backend", "graph-runner", "input-buffers", "model-runner")
CACHE_MODELS = ("none", "memoising", "attribute")

_SANITIZER = pytest.StashKey["Sanitizer"]()
_RANK_REPORTS = pytest.StashKey["list[SanitizerReport]"]()
_STATS = pytest.StashKey["SessionStats"]()
_CLASSES = pytest.StashKey["list[tuple[Any, type]]"]()
_REPORT_WRITTEN = pytest.StashKey[Path]()
_USAGE_ERROR = pytest.StashKey[str]()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class SessionStats:
    """What every sanitized test of the session added up to (merged across xdist workers)."""

    def __init__(self) -> None:
        self.tests = 0
        self.checks = 0
        self.levels: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()
        self.watched: Counter[str] = Counter()
        self.left_alone: Counter[str] = Counter()
        self.failed: list[str] = []
        # (test, violation as its dict): the first MAX_REPORTED, for the HTML report.
        self.violations: list[tuple[str, dict[str, Any]]] = []

    def add_report(self, nodeid: str, report: Any, *rank_reports: Any) -> None:
        """One sanitized test: its own report, plus the merged reports of its ranked runs."""
        self.tests += 1
        self.levels[report.level] += 1
        for r in (report, *rank_reports):
            self.checks += r.total_checks
            self.counts.update({k: n for k, n in r.counts.items() if n})
            self.watched.update(r.watched)
            self.left_alone.update(r.left_alone)
            for violation in r.violations[: MAX_REPORTED - len(self.violations)]:
                self.violations.append((nodeid, violation.to_dict()))
        if any(r.total_violations for r in (report, *rank_reports)):
            self.failed.append(nodeid)

    def to_json(self) -> str:
        return json.dumps(
            {
                "tests": self.tests,
                "checks": self.checks,
                "levels": dict(self.levels),
                "counts": dict(self.counts),
                "watched": dict(self.watched),
                "left_alone": dict(self.left_alone),
                "failed": self.failed,
                "violations": self.violations,
            }
        )

    def merge_json(self, text: str) -> None:
        data = json.loads(text)
        self.tests += data["tests"]
        self.checks += data["checks"]
        self.levels.update(data["levels"])
        self.counts.update(data["counts"])
        self.watched.update(data["watched"])
        self.left_alone.update(data["left_alone"])
        self.failed += data["failed"]
        room = MAX_REPORTED - len(self.violations)
        self.violations += [(test, v) for test, v in data.get("violations", [])[:room]]

    def summary_lines(self) -> list[str]:
        """The summary line, then what the user should know about what was watched."""
        levels = "/".join(sorted(self.levels))
        found = ", ".join(f"{k}: {n}" for k, n in sorted(self.counts.items()))
        total = sum(self.counts.values())
        watched = ", ".join(f"{n} {role}" for role, n in sorted(self.watched.items()))
        lines = [
            f"swa-sanitizer ({levels}): {_plural(self.tests, 'test')} sanitized, "
            f"{_plural(self.checks, 'check')}, {_plural(total, 'violation')}"
            + (f" ({found})" if found else "")
        ]
        if watched:
            lines.append(f"swa-sanitizer: watched {watched}")
        else:
            lines.append(
                "swa-sanitizer: WARNING: nothing was watched, so nothing was checked: name the "
                f"engine's classes in the ini option {INI_CLASSES} (module:Class[=ROLE]) or "
                f"watch objects through the {FIXTURE} fixture"
            )
        lines += [
            f"swa-sanitizer: WARNING: left {n} instance(s) of {label} alone: it plays none of "
            f"the roles; declare one in {INI_CLASSES} ({label}=ROLE, roles: {', '.join(ROLES)})"
            for label, n in sorted(self.left_alone.items())
        ]
        return lines


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("swacheck", "swacheck runtime SWA-cache sanitizer")
    group.addoption(
        OPTION,
        choices=LEVELS,
        default=None,
        help="run every test under the SWA sanitizer at this level (default: ini "
        f"{INI_LEVEL}, else off)",
    )
    group.addoption(
        ACTION_OPTION,
        choices=ACTIONS,
        default=None,
        help="raise: a violation fails the test (default); log: count and log only",
    )
    group.addoption(
        REPORT_OPTION,
        default=None,
        metavar="html|PATH.html",
        help="also write the violations as a self-contained HTML page, each with a picture "
        f"of its batch: html writes {REPORT_NAME} beside the --junitxml report (else in the "
        "root folder), PATH.html writes there",
    )
    parser.addini(INI_LEVEL, "default --swa-sanitize level (off, fast, full)", default="off")
    parser.addini(INI_ACTION, "default --swa-sanitize-action (raise, log)", default="raise")
    parser.addini(
        INI_CLASSES,
        "module:Class[=ROLE[/CACHE]] names whose instances the sanitizer watches from "
        f"construction on (ROLE: {', '.join(ROLES)}; CACHE, for a pool: "
        f"{', '.join(CACHE_MODELS)}; both recognised when left out)",
        type="args",
        default=[],
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(level='fast', action='raise'): run this test under the SWA sanitizer "
        "(level='off' opts it out)",
    )
    config.stash[_STATS] = SessionStats()
    level = _session_level(config)
    if level not in LEVELS:
        raise pytest.UsageError(f"{INI_LEVEL}: expected one of {', '.join(LEVELS)}, got {level!r}")
    action = _session_action(config)
    if action not in ACTIONS:
        raise pytest.UsageError(f"{INI_ACTION}: expected raise or log, got {action!r}")
    if level != "off" and not _torch_available():
        raise pytest.UsageError(f"{OPTION}={level} needs torch: pip install 'swacheck[runtime]'")
    report = config.getoption(REPORT_OPTION)
    if report is not None and report != "html" and not report.endswith(".html"):
        raise pytest.UsageError(f"{REPORT_OPTION}: expected html or a PATH.html, got {report!r}")
    if report is not None and not _torch_available():
        raise pytest.UsageError(f"{REPORT_OPTION} needs torch: pip install 'swacheck[runtime]'")
    if level != "off":
        _watched_classes(config)


def _watched_classes(config: pytest.Config) -> list[tuple[Any, type]]:
    """The ini option's entries (``auto``: the installed SGLang's recipe), parsed and
    loaded once per session: a usage error naming the first bad one. Called at
    configuration when the session sanitizes, else by the first sanitized test."""
    cached = config.stash.get(_CLASSES, None)
    if cached is not None:
        return cached
    from swacheck.runtime.class_spec import load_class_specs

    try:
        loaded = load_class_specs(config.getini(INI_CLASSES))
    except ValueError as exc:
        raise pytest.UsageError(f"{INI_CLASSES}: {exc}") from None
    config.stash[_CLASSES] = loaded
    return loaded


def _class_specs(config: pytest.Config) -> list[str]:
    """The entries as watched (``auto`` expanded), for ranks started by torchrun."""
    return [parsed.text for parsed, _ in _watched_classes(config)]


def _torch_available() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # ValueError: sys.modules["torch"] is None
        return False


def _session_level(config: pytest.Config) -> str:
    return config.getoption(OPTION) or config.getini(INI_LEVEL) or "off"


def _session_action(config: pytest.Config) -> str:
    return config.getoption(ACTION_OPTION) or config.getini(INI_ACTION) or "raise"


def _marked(item: pytest.Item) -> tuple[str | None, str | None] | None:
    """The ``(level, action)`` this test's marker asks for (``None`` where it leaves one
    to the session), or ``None`` without a marker: a :class:`pytest.UsageError` naming
    the test and the offending argument for anything else than ``level`` (first
    positional or by name) of :data:`LEVELS` and ``action`` of :data:`ACTIONS`."""
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return None

    def bad(what: str) -> pytest.UsageError:
        return pytest.UsageError(f"{item.nodeid}: @pytest.mark.{MARKER}: {what}")

    if len(marker.args) > 1:
        raise bad(f"takes level as its one positional argument, got {len(marker.args)}")
    unknown = sorted(set(marker.kwargs) - {"level", "action"})
    if unknown:
        raise bad(f"unknown argument {unknown[0]!r} (it takes level= and action=)")
    if marker.args and "level" in marker.kwargs:
        raise bad("level given twice (positionally and by name)")
    level = marker.kwargs.get("level", marker.args[0] if marker.args else None)
    action = marker.kwargs.get("action")
    if level is not None and level not in LEVELS:
        raise bad(f"level={level!r}: expected one of {', '.join(LEVELS)}")
    if action is not None and action not in ACTIONS:
        raise bad(f"action={action!r}: expected one of {', '.join(ACTIONS)}")
    return level, action


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Every marker is checked before any test runs: a bad one is a usage error (exit 4),
    as pytest's own option and ini errors are, not an error in the test it marks. A
    pytest-xdist worker cannot end the session so: it runs nothing and hands the error to
    the controller (:func:`pytest_testnodedown`), which ends with it."""
    try:
        for item in items:
            _marked(item)
    except pytest.UsageError as exc:
        workeroutput = getattr(config, "workeroutput", None)
        if workeroutput is None:
            raise
        workeroutput[XDIST_USAGE_KEY] = str(exc)
        items[:] = []


def _settings(item: pytest.Item) -> tuple[str, str] | None:
    """``(level, action)`` for this test, or ``None`` when it is not sanitized."""
    level = _session_level(item.config)
    action = _session_action(item.config)
    marked = _marked(item)
    if marked is not None:
        requested, asked_action = marked
        level = requested or (level if level != "off" else "fast")
        action = asked_action or action
    elif level == "off" and {FIXTURE, RANKS_FIXTURE} & set(getattr(item, "fixturenames", ())):
        level = "fast"
    if level == "off":
        return None
    return level, action


def _watch_classes(item: pytest.Item, san: Sanitizer) -> None:
    """Watch the classes the ini option names. A bad entry found only now (a session
    sanitizing by marker or fixture alone) ends the session as a usage error."""
    try:
        loaded = _watched_classes(item.config)
    except pytest.UsageError as exc:
        pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)
    for parsed, cls in loaded:
        san.watch_class(cls, parsed.role, cache=parsed.cache)


def _start(item: pytest.Item, level: str, action: str) -> Sanitizer:
    if not _torch_available():
        pytest.skip("the SWA sanitizer needs torch (pip install 'swacheck[runtime]')")
    from swacheck.config import ConfigError, resolve_config
    from swacheck.runtime import Sanitizer

    try:
        config = resolve_config(None, [item.config.rootpath])
    except ConfigError as exc:  # once for the session, not an error in every test
        pytest.exit(f"swacheck configuration: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
    san = Sanitizer(level=level, action=action, config=config)
    try:
        _watch_classes(item, san)
    except BaseException:
        san.close()
        raise
    return san


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture: objects built by fixtures are watched too."""
    settings = _settings(item)
    if settings is not None:
        item.stash[_SANITIZER] = _start(item, *settings)


@pytest.fixture
def swa_sanitizer(request: pytest.FixtureRequest) -> Sanitizer:
    """This test's sanitizer (``fast`` unless the option or marker says otherwise); watch
    objects with ``swa_sanitizer.watch(obj)``. Violations fail the test."""
    return request.node.stash[_SANITIZER]


@pytest.fixture
def swa_sanitize_ranks(request: pytest.FixtureRequest) -> Callable[..., SanitizerReport]:
    """``swa_sanitize_ranks(target, nprocs=2, timeout=300)`` runs ``target(sanitizer)`` on
    ``nprocs`` ranks launched by torchrun (gloo on CPU, NCCL when there is a GPU per rank),
    each rank under its own sanitizer at this test's level and action, and returns the
    report merged over the ranks. ``target`` is a function or ``"module:function"``
    importable from ``sys.path`` (torchrun starts fresh interpreters). Under ``raise`` a
    violation on any rank fails the test with its kind, as in a single process."""
    item = request.node
    level, action = _settings(item) or ("fast", "raise")
    reports = item.stash.setdefault(_RANK_REPORTS, [])

    def run(
        target: str | Callable[..., Any], nprocs: int = 2, timeout: float = 300.0
    ) -> SanitizerReport:
        from swacheck.runtime import ERROR_BY_KIND
        from swacheck.runtime.distributed import launch_sanitized

        spec = target if isinstance(target, str) else f"{target.__module__}:{target.__qualname__}"
        proc, report = launch_sanitized(
            spec,
            nprocs,
            level=level,
            action=action,
            watch_classes=_class_specs(item.config),
            timeout_s=timeout,
            cwd=item.config.rootpath,
        )
        if report is None:
            output = (proc.stdout + proc.stderr)[-4000:]
            pytest.fail(
                f"{spec} on {nprocs} ranks exited {proc.returncode} without a report:\n{output}"
            )
        reports.append(report)
        if report.total_violations or report.errors:
            item.add_report_section("call", f"swa-sanitizer, {nprocs} ranks", report.to_text())
        if action == "raise" and report.violations:
            first = report.violations[0]
            raise ERROR_BY_KIND[first.kind](first)
        if report.errors:
            pytest.fail(f"{spec} failed on rank(s) {sorted(report.errors)}: {report.errors}")
        return report

    return run


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    san = item.stash.get(_SANITIZER, None)
    try:
        result = yield
        if san is not None:
            __tracebackhide__ = True  # the violation names its place; this hook is noise
            san.check_deferred()  # raises what was found on the device or deferred
        return result
    finally:
        if san is not None and sum(san.counts.values()):
            item.add_report_section("call", "swa-sanitizer", san.report().to_text())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A violation's line in the short test summary leads with its kind: pytest cuts
    that line at the terminal's width, which the exception's module path alone fills."""
    report = yield
    violation = getattr(getattr(call.excinfo, "value", None), "violation", None)
    crash = getattr(report.longrepr, "reprcrash", None)
    if report.failed and crash is not None and hasattr(violation, "headline"):
        crash.message = violation.headline()
    return report


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    try:
        return (yield)
    finally:
        san = item.stash.get(_SANITIZER, None)
        if san is not None:
            del item.stash[_SANITIZER]
            report = san.report()
            san.close()
            ranked = item.stash.get(_RANK_REPORTS, [])
            item.config.stash[_STATS].add_report(item.nodeid, report, *ranked)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[XDIST_KEY] = config.stash[_STATS].to_json()
        return
    usage_error = config.stash.get(_USAGE_ERROR, None)
    if usage_error is not None:  # a worker's, as pytest reports its own usage errors
        sys.stderr.write(f"ERROR: {usage_error}\n\n")
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        return
    path = _report_path(config)
    if path is not None:
        _write_report(path, config.stash[_STATS])
        config.stash[_REPORT_WRITTEN] = path


def _report_path(config: pytest.Config) -> Path | None:
    """Where ``--swa-sanitize-report`` writes (``None``: it was not asked for)."""
    value = config.getoption(REPORT_OPTION)
    if value is None:
        return None
    if value != "html":
        return config.invocation_params.dir / value
    junit = getattr(config.option, "xmlpath", None)
    folder = (config.invocation_params.dir / junit).parent if junit else config.rootpath
    return folder / REPORT_NAME


def _write_report(path: Path, stats: SessionStats) -> None:
    """The HTML page, written whole (a temporary file renamed over the old page)."""
    from swacheck.runtime.html_report import render
    from swacheck.runtime.violations import Violation

    entries = [(test, Violation.from_dict(data)) for test, data in stats.violations]
    total = sum(stats.counts.values())
    summary = stats.summary_lines()
    if total > len(entries):
        summary.append(f"(the first {len(entries)} of {total} violations are shown)")
    page = render("swa-sanitizer report", summary, entries)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(page)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist: a worker finished; fold its tallies into the controller's, and keep
    the usage error it found (every worker finds the same one)."""
    output = getattr(node, "workeroutput", {})
    text = output.get(XDIST_KEY)
    if text:
        node.config.stash[_STATS].merge_json(text)
    if output.get(XDIST_USAGE_KEY):
        node.config.stash[_USAGE_ERROR] = output[XDIST_USAGE_KEY]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    config = terminalreporter.config
    stats = config.stash[_STATS]
    if stats.tests:
        for line in stats.summary_lines():
            terminalreporter.write_line(line, yellow=line.startswith("swa-sanitizer: WARNING"))
    written = config.stash.get(_REPORT_WRITTEN, None)
    if written is not None:
        terminalreporter.write_line(f"swa-sanitizer: report written to {written}")
