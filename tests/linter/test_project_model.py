"""A project's own engine knowledge (``[tool.swacheck.model]``): entries of the model
files' shape, checked as configuration and added to the engine's model, so a project
that names its locations, translators or sinks its own way is analysed by meaning."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from swacheck.config import Config, ConfigError, config_from_table
from swacheck.models.schema import model_problem
from swacheck.semantics.model import FULL, SWA, builtin_models, engine_of, model_for

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

# A backend whose batch carries its full-pool write slots as ``write_slots`` and whose
# pool translates them with ``to_window_slots``: names no built-in model knows.
BACKEND = """\
class Backend:
    def init_forward_metadata(self, metadata, forward_batch):
        loc = forward_batch.write_slots
        metadata.swa_out_cache_loc = loc
"""
FIXED = BACKEND.replace("= loc\n", "= self.pool.to_window_slots(loc)\n")
MODEL = """\
[[tool.swacheck.model.sources]]
attribute = "write_slots"
space = "full"
role = "write"

[[tool.swacheck.model.translators]]
method = "to_window_slots"
to = "swa"
"""


def project(tmp_path: Path, backend: str, model: str) -> Path:
    (tmp_path / ".git").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text(f"[tool.swacheck]\n{model}")
    (tmp_path / "backend.py").write_text(backend)
    return tmp_path


def test_every_shipped_model_has_the_documented_shape() -> None:
    models = builtin_models()
    assert {data["engine"] for data in models} >= {"sglang", "vllm"}
    for data in models:
        assert model_problem(data, engine_file=True) is None, data["engine"]


def test_a_projects_sources_and_translators_join_the_engines_model() -> None:
    config = config_from_table(tomllib.loads(MODEL)["tool"]["swacheck"])
    model = model_for(config)
    assert model.sources["write_slots"].space == FULL
    assert model.translators["to_window_slots"].to == SWA
    # the built-in entries stay, and a configuration without additions is unchanged
    assert "out_cache_loc" in model.sources
    assert "write_slots" not in model_for(Config()).sources


def test_a_full_value_under_a_projects_own_name_is_found(swacheck_at, tmp_path: Path) -> None:
    bare = swacheck_at(project(tmp_path / "bare", BACKEND, ""))
    assert "SWA009" not in bare("audit", "--no-cache", ".").stdout  # nothing names it
    modelled = swacheck_at(project(tmp_path / "modelled", BACKEND, MODEL))
    out = modelled("audit", "--no-cache", ".", check_rc=1).stdout
    assert "backend.py:4:9: SWA009" in out and "forward_batch.write_slots" in out
    fixed = swacheck_at(project(tmp_path / "fixed", FIXED, MODEL))
    fixed("audit", "--no-cache", ".", check_rc=0)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("model = 3", "model: expected a table"),
        ("model = { kernels = [] }", "model.kernels: unknown model section"),
        ("model = { engine = 'mine' }", "model.engine: unknown model section"),
        ("model = { sources = [{ attribute = 'x' }] }", "model.sources[0].space: missing"),
        (
            "model = { sources = [{ attribute = 'x', space = 'both' }] }",
            "model.sources[0].space: expected one of full, swa, got 'both'",
        ),
        ("model = { translators = { method = 'f' } }", "model.translators: expected a list"),
        ("model = { dtypes = { loc = 'int8' } }", "model.dtypes.loc: expected one of int32"),
        ("model = { modes = { flag-pattern = '(' } }", "model.modes.flag-pattern: not a valid"),
        (
            "model = { padding = { sentinel = true } }",
            "model.padding.sentinel: expected an integer",
        ),
        (
            "model = { pool-methods = [{ method = 'free', locations = ['0'] }] }",
            "model.pool-methods[0].locations: expected a list of integers",
        ),
    ],
)
def test_a_bad_model_entry_is_a_configuration_error_naming_it(table: str, message: str) -> None:
    with pytest.raises(ConfigError, match="^" + message.replace("[", r"\[").replace("(", r"\(")):
        config_from_table(tomllib.loads(table))


def test_a_bad_model_entry_exits_2_naming_the_file(swacheck_at, tmp_path: Path) -> None:
    root = project(tmp_path, BACKEND, "model = { sources = [{ attribute = 1 }] }\n")
    proc = swacheck_at(root)("audit", ".", check_rc=2)
    assert "pyproject.toml" in proc.stderr
    assert "model.sources[0].attribute: expected a string" in proc.stderr


def test_readmes_configuration_example_is_a_valid_configuration() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Configuration", 1)[1]
    block = section.split("```toml\n", 1)[1].split("```", 1)[0]
    config = config_from_table(tomllib.loads(block)["tool"]["swacheck"])
    assert model_for(config).translators["to_window_slots"].to == SWA


@pytest.mark.parametrize(
    ("path", "engine"),
    [
        ("vllm/v1/worker/gpu_model_runner.py", "vllm"),
        # as an audit names a file given by an absolute or a relative path: the folder
        # holding the package is no package of its own
        ("/src/vllm-0.33.0/vllm/v1/worker/gpu_model_runner.py", "vllm"),
        ("../../mutants/vl_cloned/vllm/v1/attention/backend.py", "vllm"),
        ("python/sglang/srt/mem_cache/swa_memory_pool.py", "sglang"),
        ("vllm_pool.py", "sglang"),  # a module named so is no package folder
        ("tests/test_pool.py", "sglang"),
    ],
)
def test_a_files_engine_is_the_package_folder_nearest_it(path: str, engine: str) -> None:
    assert engine_of(path) == engine


def _vllm_tree(root: Path, name: str, text: str) -> None:
    """A git project holding a ``vllm`` package with one module (audited with vLLM's model)."""
    (root / ".git").mkdir()
    package = root / "vllm"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / name).write_text(text)


VLLM_BUILDER = """
import torch


class CPUMetadataBuilder:
    def build(self, common_attn_metadata, query_start_loc, block_size):
        block_table_tensor = common_attn_metadata.block_table_tensor
        slot_mapping = common_attn_metadata.slot_mapping.to({dtype})
        torch.ops._C.compute_slot_mapping_kernel_impl(
            query_start_loc, common_attn_metadata.positions, block_table_tensor,
            slot_mapping, block_size,
        )
"""


@pytest.mark.parametrize(
    ("dtype", "found"),
    [
        ("block_table_tensor.dtype", True),  # the block table's int32 (vLLM's [dtypes])
        ("torch.int32", True),
        ("torch.int64", False),
    ],
)
def test_vllms_cache_kernels_take_int64_slots(
    swacheck_at, tmp_path: Path, dtype: str, found: bool
) -> None:
    """The vLLM model's sinks: a slot mapping handed to a cache kernel of vLLM's csrc in
    another dtype than int64, whether cast literally or to another tensor's dtype."""
    _vllm_tree(tmp_path, "cpu_attn.py", VLLM_BUILDER.format(dtype=dtype))
    out = swacheck_at(tmp_path)("audit", "--no-cache", "--select", "SWA002", ".", check_rc=None)
    assert ("cpu_attn.py:8:" in out.stdout and "torch.int64" in out.stdout) == found, out.stdout


VLLM_SPECULATOR = """
import torch


class Speculator:
    def __init__(self, num_groups, max_num_tokens, device):
        self._context_slot_mappings = torch.full(
            (num_groups, max_num_tokens), -1, dtype={dtype}, device=device
        )
"""


@pytest.mark.parametrize(("dtype", "found"), [("torch.int32", True), ("torch.int64", False)])
def test_a_qualified_slot_mapping_is_one_of_vllms_slot_mappings(
    swacheck_at, tmp_path: Path, dtype: str, found: bool
) -> None:
    """A name ending in a location the model names (``_context_slot_mappings``) is that
    location: vLLM's slot mappings are int64 whatever their prefix."""
    _vllm_tree(tmp_path, "speculator.py", VLLM_SPECULATOR.format(dtype=dtype))
    out = swacheck_at(tmp_path)("audit", "--no-cache", "--select", "SWA002", ".", check_rc=None)
    assert ("speculator.py:8:" in out.stdout and "torch.int64" in out.stdout) == found, out.stdout
