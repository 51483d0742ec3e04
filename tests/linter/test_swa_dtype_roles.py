"""SWA002 by role (``swacheck.semantics.conventions``, the model's roles, ``dtypes``):
the ``swa-loc-dtype`` configuration, conventions as project facts (a partial file list
finds what the whole tree finds), the prefilter's soundness for helpers, asserted
consumers."""

from __future__ import annotations

import ast
import subprocess
import textwrap
from pathlib import Path

import pytest

from swacheck.config import Config, ConfigError, config_from_table, parse_override
from swacheck.engine.workspace import Workspace
from swacheck.rules import rule_by_code
from swacheck.semantics.dtypes import asserted_parameters
from swacheck.semantics.model import PAGE_TABLE, WRITE, model_for
from swacheck.semantics.module import module_facts

SWA002 = rule_by_code("SWA002")

POOL_INT32 = """
import torch

class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices].to(torch.int32)
"""
POOL_INT64 = """
class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices]
"""
RUNNER = """
import torch

class CudaGraphRunner:
    def __init__(self, n):
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int64)
"""


# -- configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "write", "page_table"),
    [
        ("auto", "auto", "auto"),
        ("int64", "int64", "int64"),
        ({"write": "int64", "page-table": "int32"}, "int64", "int32"),
        ({"page-table": "int32"}, "auto", "int32"),
    ],
)
def test_swa_loc_dtype_per_role(value: object, write: str, page_table: str) -> None:
    config = config_from_table({"swa-loc-dtype": value})
    assert (config.swa_dtype_for(WRITE), config.swa_dtype_for(PAGE_TABLE)) == (write, page_table)


def test_auto_is_the_default() -> None:
    assert Config().swa_dtype_for(WRITE) == "auto"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["int32", "int64"], "a table of roles"),
        ("int16", "expected one of auto, int32, int64, got 'int16'"),
        ({"read": "int32"}, "unknown role 'read' (roles: write, page-table)"),
        ({"write": "i64"}, "swa-loc-dtype.write: expected one of auto, int32, int64"),
        ({"write": 64}, "swa-loc-dtype.write"),
    ],
)
def test_bad_values_name_the_problem(value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config_from_table({"swa-loc-dtype": value})


def test_an_inline_table_on_the_command_line() -> None:
    table = parse_override('swa-loc-dtype = { write = "int64", page-table = "int32" }')
    assert config_from_table(table).swa_dtype_for(PAGE_TABLE) == "int32"
    with pytest.raises(ConfigError, match="unknown role 'pages'"):
        parse_override('swa-loc-dtype = { pages = "int32" }')


def test_show_settings_prints_the_table(tmp_path: Path, swacheck) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "pyproject.toml").write_text(
        '[tool.swacheck]\nswa-loc-dtype = { write = "int64" }\n'
    )
    proc = swacheck("audit", "--show-settings", check_rc=0)
    assert 'swa-loc-dtype = {"write": "int64"}' in proc.stdout


# -- names --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("out_cache_loc_swa", WRITE),
        ("cuda_graph_swa_out_cache_loc", WRITE),
        ("swa_loc", WRITE),
        ("swa_slots", WRITE),
        ("swa_page_table", PAGE_TABLE),
        ("cuda_graph_swa_page_table", PAGE_TABLE),
        ("window_kv_indices", PAGE_TABLE),
        ("swa_kv_indices", PAGE_TABLE),
        ("swa_block_table", PAGE_TABLE),
        ("full_to_swa_index_mapping", None),
        ("window_kv_indices_full", None),
        ("window_kv_indptr", None),
        ("swap_loc", None),
        ("out_cache_loc", None),
    ],
)
def test_roles_by_name(name: str, role: str | None) -> None:
    assert model_for(Config()).swa_role(name) == role


@pytest.mark.parametrize(
    ("name", "full"),
    [
        ("out_cache_loc", True),
        ("req_to_token", True),
        ("page_table", True),
        ("full_loc", True),
        ("window_kv_indices_full", True),
        ("full_to_swa_index_mapping", False),
        ("swa_page_table", False),
        ("kv_indices", False),
    ],
)
def test_full_side_names(name: str, full: bool) -> None:
    model = model_for(Config())
    assert (model.full_role(name) is not None or name in model.sources) is full


# -- asserted consumers -------------------------------------------------------------------


def _requirements_of(source: str) -> dict[str, str]:
    """The asserted parameters of the first function of ``source``."""
    text = textwrap.dedent(source)
    facts = module_facts(ast.parse(text), text, "f.py")
    return asserted_parameters(next(iter(facts.functions.values())))


def test_requirements_from_asserts_and_annotations() -> None:
    found = _requirements_of(
        """
        def decode(self, q, swa_page_table, loc: torch.IntTensor, window_kv_indices):
            assert swa_page_table.dtype == torch.int32 and q.is_contiguous()
            assert window_kv_indices.dtype in (torch.int64,)
        """
    )
    assert found == {"swa_page_table": "int32", "loc": "int32", "window_kv_indices": "int64"}


def test_a_parameter_bound_again_is_not_required() -> None:
    found = _requirements_of(
        """
        def set_kv_buffer(self, layer, loc, k, v):
            loc = self.translate_loc_from_full_to_swa(loc)
            assert loc.dtype == torch.int32
        """
    )
    assert found == {}


# -- conventions are project facts ----------------------------------------------------------


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "project"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def _swa002(root: Path, paths: list[str], **kw: object) -> list[tuple[str, int, bool]]:
    workspace = Workspace(Config(), [SWA002], root=root, cache=False, **kw)  # type: ignore[arg-type, list-item]
    result = workspace.audit([root / p for p in paths])
    return sorted(
        (Path(f.path).name, f.start.row, f.fix is not None and f.fix.applicability.value == "safe")
        for f in result.findings
    )


@pytest.mark.parametrize(
    ("pool", "expected"), [(POOL_INT32, [("runner.py", 6, True)]), (POOL_INT64, [])]
)
def test_the_runner_alone_is_judged_by_the_project_translation(
    tmp_path: Path, pool: str, expected: list[tuple[str, int, bool]]
) -> None:
    """0.5.11 against 0.5.13+: one int64 runner buffer, two translations. The pre-commit
    call on the runner alone finds what the whole tree finds."""
    root = _project(tmp_path, {"mem_cache/pool.py": pool, "runner.py": RUNNER})
    assert _swa002(root, ["runner.py"]) == expected
    whole = _swa002(root, ["."])
    assert [row for row in whole if row[0] == "runner.py"] == expected


def test_a_helper_is_followed_only_in_files_that_hold_a_trigger(tmp_path: Path) -> None:
    """The prefilter keeps the files that decide: ``--no-prefilter`` finds the same. (A
    helper's result is reported without a fix: the helper may serve other tensors.)"""
    helper = (
        "import torch\n\ndef alloc_index_buffer(n):\n    return torch.zeros(n, dtype=torch.int64)\n"
    )
    user = (
        "from util import alloc_index_buffer\n\n"
        "class Runner:\n    def __init__(self, n):\n"
        "        self.out_cache_loc_swa = alloc_index_buffer(n)\n"
    )
    root = _project(tmp_path, {"util.py": helper, "runner.py": user, "pool.py": POOL_INT32})
    assert _swa002(root, ["."]) == _swa002(root, ["."], prefilter=False) == []
    (root / "util.py").write_text('"""SWA buffers."""\n' + helper)
    assert (
        _swa002(root, ["."]) == _swa002(root, ["."], prefilter=False) == [("runner.py", 5, False)]
    )
