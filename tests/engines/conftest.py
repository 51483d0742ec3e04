"""The integration suite on SGLang's real classes: every test gets a release (the
``sglang`` fixture, parametrized by version) downloaded from PyPI and imported through
the shim in ``sglang_shim.py``; the suite skips, saying why, only when PyPI cannot be reached.

``--engine-figures=FILE`` writes the sanitizer reports the tests record (``figures``
fixture) as JSON lines, the source of the runtime section of docs/real-world.md.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

# SGLang's Triton kernels (a backend's replay metadata) run on the CPU under Triton's
# interpreter, which must be chosen before triton is first imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).parent))

from sglang_shim import Release, activated
from sglang_wheels import PyPIUnreachable, extracted

# The releases the suite covers: the padding bug (0.5.11), its fix (0.5.12), the
# DeepSeek-V4 attribute cache fix (0.5.12.post1), int64 SWA locations and the buffer
# registry (0.5.13), the runner refactor (0.5.14) and the newest line (0.5.23).
RELEASES = ("0.5.11", "0.5.12", "0.5.12.post1", "0.5.13", "0.5.14", "0.5.23")
_FIGURES = pytest.StashKey[list[dict[str, Any]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--engine-figures",
        default=None,
        help="write the sanitizer reports of the engine suite to this file (JSON lines)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_FIGURES] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--engine-figures", None)
    records = session.config.stash.get(_FIGURES, [])
    if path and records:
        with open(path, "a", encoding="utf-8") as out:
            for record in records:
                out.write(json.dumps(record, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def sglang(request: pytest.FixtureRequest) -> Iterator[Release]:
    """The release named by the test's parameter, imported (module scope: one import per
    release and test module, undone at the end)."""
    version = request.param
    try:
        root = extracted(version)
    except PyPIUnreachable as exc:
        pytest.skip(f"PyPI cannot be reached, so sglang=={version} cannot be tested: {exc}")
    with activated(version, root) as release:
        yield release


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``figures(scenario, report)`` records a report for --engine-figures."""
    records = request.config.stash[_FIGURES]

    def record(scenario: str, report: Any) -> None:
        version = request.node.callspec.params.get("sglang", "?")
        records.append({"release": version, "scenario": scenario, **report.to_dict()})

    return record
