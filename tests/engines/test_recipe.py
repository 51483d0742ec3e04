"""The recipe of README's "Sanitizing SGLang's test suite", followed as written: a
project whose tests use SGLang's real classes names them in its pytest configuration for
the release line (or writes ``auto``) and runs ``pytest --swa-sanitize=fast``. A test
that churns 0.5.23's real pool and allocator reports nothing; a test that drives 0.5.11's
padded populate fails with ``padding-not-zeroed`` (and the report lists the int64 buffer
too). Every class a recipe names loads on each release of its line, and each README
block is what ``swacheck sanitize-recipe`` prints for those releases (read off the
module layout: a git checkout between releases gets its own).

The project's conftest.py imports the release through this suite's shim, standing in for
``pip install sglang==VERSION`` (whose dependencies a CPU test machine lacks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sglang_shim import activated
from sglang_wheels import CACHE, PyPIUnreachable, extracted

from swacheck.runtime.class_spec import parse_class_spec
from swacheck.runtime.recipe import recipe_toml, sglang_root

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytest_plugins = ["pytester"]

HERE = Path(__file__).parent

README = HERE.parents[1] / "README.md"


def recipe(release_line: str) -> str:
    """The TOML of README's "Sanitizing SGLang's test suite" for a release line: the
    block after its ``<!-- sglang-recipe LINE -->`` marker, as a user copies it."""
    text = README.read_text(encoding="utf-8")
    marker = f"<!-- sglang-recipe {release_line} -->\n```toml\n"
    assert marker in text, f"README has no recipe for SGLang {release_line}"
    return text.split(marker, 1)[1].split("```", 1)[0]


# README's release lines (by their marker) and the releases of each this suite covers.
RELEASE_LINES = {
    "0.5.11": ("0.5.11",),
    "0.5.12": ("0.5.12", "0.5.12.post1"),
    "0.5.13": ("0.5.13",),
    "0.5.23": ("0.5.14", "0.5.23"),
}


@pytest.mark.parametrize(
    ("line", "version"), [(line, v) for line, versions in RELEASE_LINES.items() for v in versions]
)
def test_every_class_a_recipe_names_loads_on_each_release_of_its_line(
    line: str, version: str
) -> None:
    """A name that does not resolve stops the user's whole session (a usage error)."""
    try:
        root = extracted(version)
    except PyPIUnreachable as exc:
        pytest.skip(f"PyPI cannot be reached, so sglang=={version} cannot be tested: {exc}")
    specs = tomllib.loads(recipe(line))["tool"]["pytest"]["ini_options"]["swa_sanitize_classes"]
    with activated(version, root):
        loaded = [parse_class_spec(spec).load().__name__ for spec in specs]
    assert loaded == [spec.rpartition(":")[2].partition("=")[0] for spec in specs]
    # The block is the layout's recipe: what `auto` and `swacheck sanitize-recipe` give.
    assert recipe_toml(sglang_root(root)) == recipe(line)


def test_sanitize_recipe_command_prints_the_block(tmp_path: Path) -> None:
    try:
        root = extracted("0.5.23")
    except PyPIUnreachable as exc:
        pytest.skip(f"PyPI cannot be reached: {exc}")
    proc = subprocess.run(
        [sys.executable, "-m", "swacheck", "sanitize-recipe", "--sglang", str(root)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == recipe("0.5.23")
    missing = subprocess.run(
        [sys.executable, "-m", "swacheck", "sanitize-recipe", "--sglang", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "not an SGLang package folder" in missing.stderr


CONFTEST = """
import os
import sys
sys.path.insert(0, {engines!r})
os.environ.setdefault("SWACHECK_ENGINES", {cache!r})  # pytester moves HOME

import pytest
from sglang_shim import activated
from sglang_wheels import extracted

_release = activated({version!r}, extracted({version!r}))
RELEASE = _release.__enter__()  # as if sglang=={version} were installed


@pytest.fixture
def release():
    return RELEASE
"""

TESTS = {
    "0.5.23": """
from sglang_objects import churn, pool_and_allocator


def test_serving_churn(release):
    pool, allocator = pool_and_allocator(release)
    assert churn(release, pool, allocator) > 0
""",
    "0.5.11": """
from sglang_objects import decode_input_buffers, populate


def test_padded_decode_batches(release):
    buffers = decode_input_buffers(release, max_bs=4)
    populate(buffers, raw_bs=4, bs=4)
    populate(buffers, raw_bs=3, bs=4)
    populate(buffers, raw_bs=2, bs=4)
""",
}


AUTO = """
[tool.pytest.ini_options]
swa_sanitize_classes = ["auto"]
"""


@pytest.fixture
def project(request: pytest.FixtureRequest, pytester: pytest.Pytester) -> pytest.Pytester:
    """A project using release ``VERSION`` with README's block for it (``VERSION/auto``:
    with ``swa_sanitize_classes = ["auto"]`` instead)."""
    version, _, auto = request.param.partition("/")
    try:
        extracted(version)
    except PyPIUnreachable as exc:
        pytest.skip(f"PyPI cannot be reached, so sglang=={version} cannot be tested: {exc}")
    pytester.makepyprojecttoml(AUTO if auto else recipe(version))
    pytester.makeconftest(CONFTEST.format(engines=str(HERE), cache=str(CACHE), version=version))
    pytester.makepyfile(test_with_sglang=TESTS[version])
    return pytester


@pytest.mark.parametrize("project", ["0.5.23", "0.5.23/auto"], indirect=True)
def test_recipe_on_the_newest_release_reports_nothing(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--swa-sanitize=fast", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*swa-sanitizer (fast): 1 test sanitized, * checks, 0 violations",
            "*swa-sanitizer: watched 1 allocator, 1 pool",
        ]
    )
    assert "WARNING" not in result.stdout.str()


@pytest.mark.parametrize("project", ["0.5.11", "0.5.11/auto"], indirect=True)
def test_recipe_on_the_padding_bug_fails_the_test(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--swa-sanitize=fast", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*PaddingNotZeroedError: padding-not-zeroed: *DecodeInputBuffers.out_cache_loc_swa*",
            "*  at *cuda_graph_runner.py:*in populate_from_forward_batch",
            "*padding-not-zeroed: * checks, 1 violation",
            "*swa-loc-dtype: *DecodeInputBuffers.out_cache_loc_swa*torch.int64*",
            "*swa-sanitizer (fast): 1 test sanitized, * checks, 2 violations "
            "(padding-not-zeroed: 1, swa-loc-dtype: 1)",
            "*swa-sanitizer: watched 1 input-buffers",
            "FAILED test_with_sglang.py::test_padded_decode_batches - padding-not-zeroed: *",
        ]
    )
    output = result.stdout.str()
    assert "<wrapper of" not in output and "runtime/checks.py" not in output
