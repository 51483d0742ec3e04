"""pytest plugin: run tests under swacheck's runtime SWA sanitizer.

``--swa-sanitize=fast|full`` sanitizes every test; ``@pytest.mark.swa_sanitize``
(optionally ``level=``/``action=``) opts single tests in (or out, ``level="off"``); the
``swa_sanitizer`` fixture hands a test its sanitizer. Classes named in the ini option
``swa_sanitize_classes = module:Class ...`` are watched on construction. A violation
fails the test with its kind in the message; the session ends with one summary line
(also under pytest-xdist, whose workers send their tallies to the controller).

Tensor-parallel code is tested through the ``swa_sanitize_ranks`` fixture: it runs a
function on N ranks under torchrun, each rank under its own sanitizer at the test's
level and action, and fails the test on the report merged over the ranks (a pytest run
that torchrun starts itself, one session per rank, works too: violations name their rank).

This module is loaded in every pytest session of an environment with swacheck
installed, so it imports nothing heavy: torch and ``swacheck.runtime`` are imported
only once a test is actually sanitized.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections import Counter
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from swacheck.runtime import Sanitizer, SanitizerReport

OPTION = "--swa-sanitize"
ACTION_OPTION = "--swa-sanitize-action"
MARKER = "swa_sanitize"
FIXTURE = "swa_sanitizer"
RANKS_FIXTURE = "swa_sanitize_ranks"
INI_LEVEL = "swa_sanitize"
INI_ACTION = "swa_sanitize_action"
INI_CLASSES = "swa_sanitize_classes"
XDIST_KEY = "swacheck_sanitizer"
LEVELS = ("off", "fast", "full")
ACTIONS = ("raise", "log")

_SANITIZER = pytest.StashKey["Sanitizer"]()
_RANK_REPORTS = pytest.StashKey["list[SanitizerReport]"]()
_STATS = pytest.StashKey["SessionStats"]()


class SessionStats:
    """What every sanitized test of the session added up to (merged across xdist workers)."""

    def __init__(self) -> None:
        self.tests = 0
        self.checks = 0
        self.levels: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()
        self.failed: list[str] = []

    def add_report(self, nodeid: str, report: Any, *rank_reports: Any) -> None:
        """One sanitized test: its own report, plus the merged reports of its ranked runs."""
        self.tests += 1
        self.levels[report.level] += 1
        for r in (report, *rank_reports):
            self.checks += r.total_checks
            self.counts.update({k: n for k, n in r.counts.items() if n})
        if any(r.total_violations for r in (report, *rank_reports)):
            self.failed.append(nodeid)

    def to_json(self) -> str:
        return json.dumps(
            {
                "tests": self.tests,
                "checks": self.checks,
                "levels": dict(self.levels),
                "counts": dict(self.counts),
                "failed": self.failed,
            }
        )

    def merge_json(self, text: str) -> None:
        data = json.loads(text)
        self.tests += data["tests"]
        self.checks += data["checks"]
        self.levels.update(data["levels"])
        self.counts.update(data["counts"])
        self.failed += data["failed"]

    def summary_line(self) -> str:
        levels = "/".join(sorted(self.levels))
        found = ", ".join(f"{k}: {n}" for k, n in sorted(self.counts.items()))
        total = sum(self.counts.values())
        return (
            f"swa-sanitizer ({levels}): {self.tests} tests sanitized, {self.checks} checks, "
            f"{total} violations" + (f" ({found})" if found else "")
        )


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
    parser.addini(INI_LEVEL, "default --swa-sanitize level (off, fast, full)", default="off")
    parser.addini(INI_ACTION, "default --swa-sanitize-action (raise, log)", default="raise")
    parser.addini(
        INI_CLASSES,
        "module:Class names whose instances the sanitizer watches from construction on",
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


def _torch_available() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # ValueError: sys.modules["torch"] is None
        return False


def _session_level(config: pytest.Config) -> str:
    return config.getoption(OPTION) or config.getini(INI_LEVEL) or "off"


def _session_action(config: pytest.Config) -> str:
    return config.getoption(ACTION_OPTION) or config.getini(INI_ACTION) or "raise"


def _settings(item: pytest.Item) -> tuple[str, str] | None:
    """``(level, action)`` for this test, or ``None`` when it is not sanitized."""
    level = _session_level(item.config)
    action = _session_action(item.config)
    marker = item.get_closest_marker(MARKER)
    if marker is not None:
        requested = marker.kwargs.get("level", marker.args[0] if marker.args else None)
        level = requested or (level if level != "off" else "fast")
        action = marker.kwargs.get("action", action)
    elif level == "off" and {FIXTURE, RANKS_FIXTURE} & set(getattr(item, "fixturenames", ())):
        level = "fast"
    if level == "off":
        return None
    if level not in LEVELS or action not in ACTIONS:
        raise pytest.UsageError(f"{item.nodeid}: bad {MARKER} marker: level={level!r}")
    return level, action


def _import_class(spec: str) -> type:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise pytest.UsageError(f"{INI_CLASSES}: expected module:Class, got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise pytest.UsageError(f"{INI_CLASSES}: {spec} is not a class")
    return obj


def _start(item: pytest.Item, level: str, action: str) -> Sanitizer:
    if not _torch_available():
        pytest.skip("the SWA sanitizer needs torch (pip install 'swacheck[runtime]')")
    from swacheck.config import resolve_config
    from swacheck.runtime import Sanitizer

    config = resolve_config(None, [item.config.rootpath])
    san = Sanitizer(level=level, action=action, config=config)
    try:
        for spec in item.config.getini(INI_CLASSES):
            san.watch_class(_import_class(spec))
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
            watch_classes=item.config.getini(INI_CLASSES),
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
            san.check_deferred()
            if san.action == "raise" and san.unraised:
                from swacheck.runtime import ERROR_BY_KIND

                first = san.unraised[0]
                raise ERROR_BY_KIND[first.kind](first)
        return result
    finally:
        if san is not None and sum(san.counts.values()):
            item.add_report_section("call", "swa-sanitizer", san.report().to_text())


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
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[XDIST_KEY] = session.config.stash[_STATS].to_json()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist: a worker finished; fold its tallies into the controller's."""
    text = getattr(node, "workeroutput", {}).get(XDIST_KEY)
    if text:
        node.config.stash[_STATS].merge_json(text)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    stats = terminalreporter.config.stash[_STATS]
    if stats.tests:
        terminalreporter.write_line(stats.summary_line())
