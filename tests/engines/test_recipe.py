"""The recipe of docs/sanitizing-sglang.md, followed as written: a project whose tests use
SGLang's real classes names them in its pytest configuration for the release line and
runs ``pytest --swa-sanitize=fast``. A test that churns 0.5.23's real pool and allocator
reports nothing; a test that drives 0.5.11's padded populate fails with
``padding-not-zeroed`` (and the report lists the int64 buffer too).

The project's conftest.py imports the release through this suite's shim, standing in for
``pip install sglang==VERSION`` (whose dependencies a CPU test machine lacks)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sglang_wheels import CACHE, PyPIUnreachable, extracted

pytest_plugins = ["pytester"]

HERE = Path(__file__).parent

# docs/sanitizing-sglang.md, per release line.
RECIPES = {
    "0.5.11": """
[tool.pytest.ini_options]
swa_sanitize_classes = [
    "sglang.srt.mem_cache.swa_memory_pool:SWAKVPool",
    "sglang.srt.mem_cache.swa_memory_pool:SWATokenToKVPoolAllocator",
    "sglang.srt.model_executor.cuda_graph_runner:CudaGraphRunner",
    "sglang.srt.model_executor.cuda_graph_runner:DecodeInputBuffers",
]
""",
    "0.5.23": """
[tool.pytest.ini_options]
swa_sanitize_classes = [
    "sglang.srt.mem_cache.swa_memory_pool:SWAKVPool",
    "sglang.srt.mem_cache.allocator.swa:SWATokenToKVPoolAllocator",
    "sglang.srt.mem_cache.deepseek_v4_memory_pool:DeepSeekV4TokenToKVPool",
    "sglang.srt.model_executor.runner.decode_cuda_graph_runner:DecodeCudaGraphRunner",
    "sglang.srt.model_executor.cuda_graph_buffer_registry:CudaGraphBufferRegistry",
]

[tool.swacheck]
runtime-swa-loc-dtypes = ["int32", "int64"]
""",
}

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


@pytest.fixture
def project(request: pytest.FixtureRequest, pytester: pytest.Pytester) -> pytest.Pytester:
    version = request.param
    try:
        extracted(version)
    except PyPIUnreachable as exc:
        pytest.skip(f"PyPI cannot be reached, so sglang=={version} cannot be tested: {exc}")
    pytester.makepyprojecttoml(RECIPES[version])
    pytester.makeconftest(CONFTEST.format(engines=str(HERE), cache=str(CACHE), version=version))
    pytester.makepyfile(test_with_sglang=TESTS[version])
    return pytester


@pytest.mark.parametrize("project", ["0.5.23"], indirect=True)
def test_recipe_on_the_newest_release_reports_nothing(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--swa-sanitize=fast", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*swa-sanitizer (fast): 1 tests sanitized, * checks, 0 violations",
            "*swa-sanitizer: watched 1 allocator, 1 pool",
        ]
    )
    assert "WARNING" not in result.stdout.str()


@pytest.mark.parametrize("project", ["0.5.11"], indirect=True)
def test_recipe_on_the_padding_bug_fails_the_test(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--swa-sanitize=fast", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*PaddingNotZeroedError: [[]swa-sanitizer[]] padding-not-zeroed (I4: *)"
            "*cuda_graph_runner.py:*in populate_from_forward_batch*",
            "*padding-not-zeroed: * checks, 1 violations",
            "*swa-loc-dtype (I3: *)*DecodeInputBuffers.out_cache_loc_swa*torch.int64*",
            "*swa-sanitizer (fast): 1 tests sanitized, * checks, 2 violations "
            "(padding-not-zeroed: 1, swa-loc-dtype: 1)",
            "*swa-sanitizer: watched 1 input-buffers",
        ]
    )
    output = result.stdout.str()
    assert "<wrapper of" not in output and "runtime/checks.py" not in output
