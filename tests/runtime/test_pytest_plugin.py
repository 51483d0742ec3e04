"""The pytest plugin, run for real through ``pytester``: option, marker, fixture, ini
option naming foreign classes, failure reports naming the kind, the summary line,
pytest-xdist, and a session without torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest_plugins = ["pytester"]

# A pool class written independently of swacheck (not the reference implementation):
# it memoises on the storage pointer, so two views of one buffer collide.
FOREIGN_ENGINE = """
import torch


class LegacySlidingCache:
    def __init__(self, size):
        self.full_to_swa_index_mapping = torch.arange(size + 1, dtype=torch.int64) % 7
        self.full_to_swa_index_mapping[-1] = -1
        self._memo_key = None
        self._memo = None

    def translate_loc_from_full_to_swa(self, kv_indices):
        key = (kv_indices.untyped_storage().data_ptr(), kv_indices.numel())
        if key != self._memo_key:
            self._memo = self.full_to_swa_index_mapping[kv_indices].to(torch.int32)
            self._memo_key = key
        return self._memo

    def invalidate_loc_cache(self):
        self._memo_key = None
"""

FOREIGN_TEST = """
import torch
from foreign_engine import LegacySlidingCache


def test_two_micro_batches():
    cache = LegacySlidingCache(32)
    locs = torch.arange(1, 9)
    first = cache.translate_loc_from_full_to_swa(locs[:4])
    second = cache.translate_loc_from_full_to_swa(locs[4:])
    assert first.tolist() == [1, 2, 3, 4]
    assert second.shape == (4,)


def test_clean_use():
    cache = LegacySlidingCache(32)
    locs = torch.arange(1, 5)
    cache.translate_loc_from_full_to_swa(locs)
    cache.invalidate_loc_cache()
    cache.translate_loc_from_full_to_swa(locs[:2])
"""

INI = """
[pytest]
swa_sanitize_classes = foreign_engine:LegacySlidingCache
"""


@pytest.fixture
def foreign(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(foreign_engine=FOREIGN_ENGINE, test_foreign=FOREIGN_TEST)
    pytester.makeini(INI)
    pytester.syspathinsert()
    return pytester


def test_foreign_class_caught_by_fast(foreign: pytest.Pytester) -> None:
    result = foreign.runpytest_subprocess("--swa-sanitize=fast")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*swacheck.runtime.StaleTranslationError: stale-translation: *another view*",
            "*  I2: a cached translation*",
            "*swa-sanitizer (fast): 2 tests sanitized, * checks, 1 violation "
            "(stale-translation: 1)",
            # The short summary leads with the kind (its line is cut at 80 columns).
            "FAILED test_foreign.py::test_two_micro_batches - stale-translation: *",
        ]
    )
    output = result.stdout.str()
    assert "test_foreign.py:9" in output  # the call site of the stale hit
    # The sanitizer's own frames are left out of the traceback: no generated wrapper
    # (pytest's "???"), no record() source.
    assert "<wrapper of" not in output and "???" not in output
    assert "def record(" not in output and "runtime/checks.py" not in output


def test_not_sanitized_without_the_option(foreign: pytest.Pytester) -> None:
    result = foreign.runpytest_subprocess()
    result.assert_outcomes(passed=2)
    assert "swa-sanitizer" not in result.stdout.str()


def test_log_action_counts_without_failing(foreign: pytest.Pytester) -> None:
    result = foreign.runpytest_subprocess("--swa-sanitize=full", "--swa-sanitize-action=log")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*swa-sanitizer (full): 2 tests sanitized, *1 violation*"])


def test_marker_opts_single_tests_in(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(foreign_engine=FOREIGN_ENGINE)
    pytester.makeini(INI)
    pytester.syspathinsert()
    pytester.makepyfile(
        test_marked="""
        import pytest
        import torch
        from foreign_engine import LegacySlidingCache

        def collide():
            cache = LegacySlidingCache(32)
            locs = torch.arange(1, 9)
            cache.translate_loc_from_full_to_swa(locs[:4])
            cache.translate_loc_from_full_to_swa(locs[4:])

        @pytest.mark.swa_sanitize
        def test_marked():
            collide()

        @pytest.mark.swa_sanitize(level="full")
        def test_marked_full(swa_sanitizer):
            assert swa_sanitizer.level == "full"
            collide()

        def test_unmarked():
            collide()
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*swa-sanitizer (fast/full): 2 tests sanitized*"])


def test_marker_opts_out(foreign: pytest.Pytester) -> None:
    foreign.makepyfile(
        test_optout="""
        import pytest
        import torch
        from foreign_engine import LegacySlidingCache

        @pytest.mark.swa_sanitize(level="off")
        def test_known_bad():
            cache = LegacySlidingCache(32)
            locs = torch.arange(1, 9)
            cache.translate_loc_from_full_to_swa(locs[:4])
            cache.translate_loc_from_full_to_swa(locs[4:])
        """
    )
    result = foreign.runpytest_subprocess("--swa-sanitize=fast", "test_optout.py")
    result.assert_outcomes(passed=1)


def test_fixture_watches_objects_and_fails_on_deferred_violations(
    pytester: pytest.Pytester,
) -> None:
    """``log`` inside the test, then the end-of-test check fails it with the kind named."""
    pytester.makepyfile(
        test_fixture="""
        import pytest
        import torch

        class Runner:
            def __init__(self):
                self.out_cache_loc = torch.zeros(4, dtype=torch.int64)
                self.out_cache_loc_swa = torch.zeros(4, dtype=torch.int32)

            def populate_from_forward_batch(self, locs, swa_locs, raw_bs, bs):
                self.out_cache_loc.zero_()
                self.out_cache_loc[:raw_bs] = locs
                self.out_cache_loc_swa[:raw_bs] = swa_locs  # tail never zeroed

            def replay(self):
                pass

        def test_padding(swa_sanitizer):
            assert swa_sanitizer.level == "fast"
            runner = Runner()
            swa_sanitizer.watch(runner)
            runner.populate_from_forward_batch(
                torch.tensor([5, 6, 7]), torch.tensor([1, 2, 3], dtype=torch.int32), 3, 3
            )
            runner.populate_from_forward_batch(
                torch.tensor([5, 6]), torch.tensor([1, 2], dtype=torch.int32), 2, 4
            )
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*PaddingNotZeroedError: padding-not-zeroed: *Runner.out_cache_loc_swa*",
            "*  I4: a padded CUDA-graph batch must reset * sentinel slot 0",
            "*Captured swa-sanitizer call*",
            "*swa-sanitizer (fast): 1 test sanitized*1 violation (padding-not-zeroed: 1)",
        ]
    )


def test_summary_under_xdist(foreign: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = foreign.runpytest_subprocess("--swa-sanitize=fast", "-n", "2", "-p", "xdist")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*swa-sanitizer (fast): 2 tests sanitized, * checks, 1 violation (stale-translation: 1)"]
    )


def test_harmless_without_torch(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import sys\nsys.modules['torch'] = None  # as if not installed\n")
    pytester.makepyfile(
        test_plain="""
        def test_plain():
            assert True

        def test_wants_sanitizer(swa_sanitizer):
            raise AssertionError("not reached")
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1, skipped=1)
    result = pytester.runpytest_subprocess("--swa-sanitize=fast")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--swa-sanitize=fast needs torch*"])


def test_plugin_module_imports_nothing_heavy() -> None:
    code = textwrap.dedent(
        """
        import sys
        import swacheck.pytest_plugin
        heavy = {"torch", "swacheck.runtime", "typeguard", "jaxtyping"} & set(sys.modules)
        assert not heavy, heavy
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


RUNNER_ENGINE = """
import torch


class Runner:
    \"\"\"Captures its graphs in __init__, as SGLang's runners do; plays no role by its
    method names (step/warm), so it is declared in the ini option.\"\"\"

    def __init__(self):
        self.out_cache_loc_swa = torch.zeros(4, dtype=torch.int64)
        self.warm()

    def warm(self):
        pass

    def step(self):
        pass


class Scheduler:
    def __init__(self):
        self.steps = 0


SENTINEL = 0
"""

RUNNER_TEST = """
from runner_engine import Runner, Scheduler


def test_runner():
    Runner()


def test_scheduler():
    assert Scheduler().steps == 0
"""


@pytest.fixture
def declared(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(runner_engine=RUNNER_ENGINE, test_runner=RUNNER_TEST)
    pytester.syspathinsert()
    return pytester


def test_roles_declared_in_the_ini_option(declared: pytest.Pytester) -> None:
    """``module:Class=ROLE``: wrapped before ``__init__``, so what it does there (here: a
    capture, ``warm``, leaving an int64 SWA buffer) is checked; an undeclared class that
    plays no role is left alone (its constructor untouched) and the session says so once."""
    declared.makeini(
        """
        [pytest]
        swa_sanitize_classes =
            runner_engine:Runner=graph-runner
            runner_engine:Scheduler
        """
    )
    declared.makepyprojecttoml(
        """
        [tool.swacheck]
        replay-methods = ["step"]
        capture-methods = ["warm"]
        """
    )
    result = declared.runpytest_subprocess("--swa-sanitize=fast")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*SWALocDtypeError: swa-loc-dtype: *Runner.out_cache_loc_swa (after capture)*",
            "*swa-sanitizer: watched 1 graph-runner",
            "*swa-sanitizer: WARNING: left 1 instance(s) of runner_engine.Scheduler alone*",
        ]
    )


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        ("runner_engine:Runner=runner", "unknown role 'runner'"),
        ("runner_engine:Runner=graph-runner/none", "a cache model follows the role pool"),
        ("runner_engine", "expected module:Class"),
        ("no_such_engine:Runner", "no_such_engine:Runner: cannot import no_such_engine"),
        (
            "runner_engine:NoSuchClass",
            "runner_engine:NoSuchClass: runner_engine has no NoSuchClass",
        ),
        ("runner_engine:SENTINEL", "runner_engine:SENTINEL: SENTINEL is a int, not a class"),
        ("builtins:int", "builtins:int: int is a built-in class*"),
    ],
)
def test_bad_class_spec_is_a_usage_error(
    declared: pytest.Pytester, spec: str, complaint: str
) -> None:
    """One usage error at start-up (exit 4) naming the spec, not an error in every test
    (issue 29): the specs are parsed and their classes loaded once, at configuration."""
    declared.makeini(f"[pytest]\nswa_sanitize_classes = {spec}\n")
    declared.makepyfile(test_more="def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    result = declared.runpytest_subprocess("--swa-sanitize=fast")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*swa_sanitize_classes: *{complaint}*"])
    assert result.stderr.str().count("swa_sanitize_classes") == 1
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_bad_class_spec_under_a_marker_only_session_ends_it(declared: pytest.Pytester) -> None:
    """Sanitizing by marker alone, the specs are loaded by the first sanitized test: a bad
    one ends the session there as a usage error, once."""
    declared.makeini("[pytest]\nswa_sanitize_classes = no_such_engine:Runner\n")
    declared.makepyfile(
        test_marked="import pytest\n\n\n@pytest.mark.swa_sanitize\ndef test_one():\n    pass\n"
        "\n\n@pytest.mark.swa_sanitize\ndef test_two():\n    pass\n"
    )
    result = declared.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert output.count("no_such_engine:Runner: cannot import no_such_engine") == 1


@pytest.mark.parametrize(
    ("body", "raised"),
    [
        ("import sys\nsys.exit('no GPU here')\n", "SystemExit: no GPU here"),
        ("raise RuntimeError('CUDA is not available')\n", "RuntimeError: CUDA is not available"),
        ("raise KeyError('device')\n", "KeyError: 'device'"),
        ("def __getattr__(name):\n    raise RuntimeError('lazy load failed')\n", "reading"),
    ],
)
@pytest.mark.parametrize("sanitizing", ["option", "marker"])
def test_a_class_whose_module_fails_is_one_usage_error(
    pytester: pytest.Pytester, body: str, raised: str, sanitizing: str
) -> None:
    """A module named in the ini option that raises at import (``SystemExit`` included)
    or whose attribute cannot be read was a pytest INTERNALERROR (exit 3): now one usage
    error (exit 4) naming the class and what was raised, at start-up or at the first
    sanitized test."""
    pytester.makepyfile(broken_engine=body)
    pytester.syspathinsert()
    pytester.makeini("[pytest]\nswa_sanitize_classes = broken_engine:Pool\n")
    marker = "@pytest.mark.swa_sanitize\n" if sanitizing == "marker" else ""
    pytester.makepyfile(
        test_two=f"import pytest\n\n\n{marker}def test_one():\n    pass\n\n\n"
        f"{marker}def test_two():\n    pass\n"
    )
    args = ["--swa-sanitize=fast"] if sanitizing == "option" else []
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output
    assert output.count("swa_sanitize_classes: broken_engine:Pool: ") == 1, output
    assert raised in output


@pytest.mark.parametrize(
    ("marker", "complaint"),
    [
        ('level="fast", action="explode"', "action='explode': expected one of raise, log"),
        ('level="slow"', "level='slow': expected one of off, fast, full"),
        ('"slow"', "level='slow': expected one of off, fast, full"),
        ('levle="fast"', "unknown argument 'levle' (it takes level= and action=)"),
        ('"fast", "raise"', "takes level as its one positional argument, got 2"),
        ('"fast", level="full"', "level given twice"),
    ],
)
def test_a_bad_marker_is_a_usage_error_naming_its_argument(
    pytester: pytest.Pytester, marker: str, complaint: str
) -> None:
    """``@pytest.mark.swa_sanitize(level="fast", action="explode")`` blamed ``level`` and
    was an error in its test (exit 1): each marker is checked at collection, and a bad one
    ends the session before any test runs (exit 4), naming the test and the argument."""
    pytester.makepyfile(
        test_marks=f"import pytest\n\n\n@pytest.mark.swa_sanitize({marker})\n"
        "def test_marked():\n    pass\n\n\ndef test_plain():\n    pass\n"
    )
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: test_marks.py::test_marked: @pytest.mark.swa_sanitize: {complaint}*"]
    )
    assert "passed" not in result.stdout.str()


def test_a_bad_swacheck_configuration_is_one_usage_error(pytester: pytest.Pytester) -> None:
    """The sanitizer reads ``[tool.swacheck]`` (the names it recognises roles by): a bad
    one was a ``ConfigError`` traceback in every sanitized test; now the session ends
    with it once, naming the file and the key."""
    pytester.makepyprojecttoml("[tool.swacheck]\nreplay-methods = 'step'\n")
    pytester.makepyfile(test_two="def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    result = pytester.runpytest_subprocess("--swa-sanitize=fast")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert output.count("swacheck configuration: ") == 1, output
    assert "pyproject.toml: replay-methods: expected a list of strings" in output
    assert "Traceback" not in output


def test_a_bad_marker_is_a_usage_error_under_xdist(pytester: pytest.Pytester) -> None:
    """The workers collect; the controller ends the session with their usage error."""
    pytest.importorskip("xdist")
    pytester.makepyfile(
        test_marks='import pytest\n\n\n@pytest.mark.swa_sanitize(action="explode")\n'
        "def test_marked():\n    pass\n\n\ndef test_plain():\n    pass\n"
    )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert output.count("action='explode': expected one of raise, log") == 1, output
    assert "INTERNALERROR" not in output and "passed" not in result.stdout.str()


def test_roles_spelled_for_the_help_text_are_the_runtime_ones() -> None:
    from swacheck import pytest_plugin
    from swacheck.runtime import class_spec

    assert pytest_plugin.ROLES == class_spec.ROLES
    assert pytest_plugin.CACHE_MODELS == class_spec.CACHE_MODELS


def test_nothing_watched_is_said(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess("--swa-sanitize=fast")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*swa-sanitizer (fast): 1 test sanitized, 0 checks, 0 violations",
            "*swa-sanitizer: WARNING: nothing was watched, so nothing was checked*",
        ]
    )
