"""Which of SGLang's classes to watch, read off the installed SGLang's module layout.

SGLang's SWA classes moved between releases (the allocator to ``allocator/swa.py`` in
0.5.13, the decode runner to ``runner/decode_cuda_graph_runner.py`` and its buffers
into a registry in 0.5.14) and a git checkout between releases may be anywhere in
between. Rather than guessing a release line, each role's candidates are tried, newest
layout first, against the source tree: a candidate counts where its file exists and
defines the class (``class Name`` at the start of a line). Nothing is imported, so
this works on any tree (an editable install, a wheel's extracted package) and needs no
GPU.

What the recipe holds:

- the SWA pool and its allocator; the graph runner and its input buffers (the decode
  runner's buffer registry where there is one); DeepSeek-V4's pool where it exists;
- from the design that translates in the attention backends (a registry, or
  ``KVIndexTranslator``) the backends that fill SWA buffers for replay: Triton,
  FlashInfer, FlashAttention (FA3) and TRT-LLM MHA;
- where a translation cache exists (a pool that defines ``invalidate_loc_cache``: the
  GitHub history between 0.5.12 and 0.5.13; DeepSeek-V4's ``cached_loc``: the 0.5.12
  line) the model runner, declared (its pools do not exist before its ``__init__``),
  so that a graph replay reached without an invalidation is ``forward-without-
  invalidation`` at the dispatch.

``swa_sanitize_classes = auto`` in the pytest configuration uses this at start-up;
``swacheck sanitize-recipe`` prints it as the block to paste.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "sglang"
AUTO = "auto"


@dataclass(frozen=True)
class Candidate:
    module: str
    name: str
    role: str | None = None

    @property
    def spec(self) -> str:
        text = f"{self.module}:{self.name}"
        return f"{text}={self.role}" if self.role else text

    def path(self, root: Path) -> Path:
        """The module's file under the package folder ``root`` (``sglang/``)."""
        parts = self.module.split(".")[1:]
        return root.joinpath(*parts).with_suffix(".py")


# Per role, the candidates, newest layout first; the first one the tree defines wins.
POOL = (Candidate("sglang.srt.mem_cache.swa_memory_pool", "SWAKVPool"),)
ALLOCATOR = (
    Candidate("sglang.srt.mem_cache.allocator.swa", "SWATokenToKVPoolAllocator"),
    Candidate("sglang.srt.mem_cache.swa_memory_pool", "SWATokenToKVPoolAllocator"),
)
GRAPH_RUNNER = (
    Candidate("sglang.srt.model_executor.runner.decode_cuda_graph_runner", "DecodeCudaGraphRunner"),
    Candidate("sglang.srt.model_executor.cuda_graph_runner", "CudaGraphRunner"),
)
INPUT_BUFFERS = (
    Candidate("sglang.srt.model_executor.cuda_graph_buffer_registry", "CudaGraphBufferRegistry"),
    Candidate("sglang.srt.model_executor.cuda_graph_runner", "DecodeInputBuffers"),
)
DEEPSEEK_V4_POOL = Candidate(
    "sglang.srt.mem_cache.deepseek_v4_memory_pool", "DeepSeekV4TokenToKVPool"
)
# The backends that fill SWA write locations and page tables for replay (0.5.13+).
BACKENDS = (
    Candidate("sglang.srt.layers.attention.triton_backend", "TritonAttnBackend"),
    Candidate("sglang.srt.layers.attention.flashinfer_backend", "FlashInferAttnBackend"),
    Candidate("sglang.srt.layers.attention.flashattention_backend", "FlashAttentionBackend"),
    Candidate("sglang.srt.layers.attention.trtllm_mha_backend", "TRTLLMHAAttnBackend"),
)
MODEL_RUNNER = Candidate("sglang.srt.model_executor.model_runner", "ModelRunner", "model-runner")
# What says the backends translate (the design from 0.5.13): the buffer registry, or
# the translator of 0.5.21+.
BACKEND_TRANSLATION = (
    INPUT_BUFFERS[0],
    Candidate("sglang.srt.mem_cache.kv_index_translator", "KVIndexTranslator"),
)
# What says a translation cache exists: a memoising pool, an attribute cache.
CACHE_MARKERS = (
    (POOL[0], re.compile(r"^\s+def invalidate_loc_cache\b", re.M)),
    (DEEPSEEK_V4_POOL, re.compile(r"\bself\.cached_loc\s*=", re.M)),
)


class NoSGLang(LookupError):
    """No SGLang source tree where one was looked for."""


def sglang_root(path: str | os.PathLike[str] | None = None) -> Path:
    """The ``sglang`` package folder: ``path`` (the package folder or a folder holding
    it, such as a checkout's ``python/``), else the installed one (found without
    importing it)."""
    if path is not None:
        root = Path(path)
        for candidate in (root, root / PACKAGE, root / "python" / PACKAGE):
            if (candidate / "srt").is_dir():
                return candidate
        raise NoSGLang(f"{path}: not an SGLang package folder (no srt/ inside)")
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        if (Path(location) / "srt").is_dir():
            return Path(location)
    raise NoSGLang("SGLang is not installed in this environment (no `sglang` package)")


_SOURCES: dict[Path, str | None] = {}


def _source(path: Path) -> str | None:
    if path not in _SOURCES:
        try:
            _SOURCES[path] = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            _SOURCES[path] = None
    return _SOURCES[path]


def defines(root: Path, candidate: Candidate) -> bool:
    """Whether the tree's module defines the class (at the top level)."""
    text = _source(candidate.path(root))
    return (
        text is not None
        and re.search(rf"^class {re.escape(candidate.name)}\b", text, re.M) is not None
    )


def _first(root: Path, candidates: Iterable[Candidate]) -> Candidate | None:
    return next((c for c in candidates if defines(root, c)), None)


def recipe_classes(root: Path) -> list[str]:
    """The ``swa_sanitize_classes`` entries for the SGLang tree at ``root``."""
    chosen = [
        _first(root, POOL),
        _first(root, ALLOCATOR),
        _first(root, GRAPH_RUNNER),
        _first(root, INPUT_BUFFERS),
    ]
    if defines(root, DEEPSEEK_V4_POOL):
        chosen.append(DEEPSEEK_V4_POOL)
    if any(defines(root, marker) for marker in BACKEND_TRANSLATION):
        chosen += [c for c in BACKENDS if defines(root, c)]
    if has_cache(root) and defines(root, MODEL_RUNNER):
        chosen.append(MODEL_RUNNER)
    return [c.spec for c in chosen if c is not None]


def has_cache(root: Path) -> bool:
    """Whether the tree keeps a translation cache (see the module docstring)."""
    for candidate, marker in CACHE_MARKERS:
        text = _source(candidate.path(root))
        if text is not None and marker.search(text):
            return True
    return False


def recipe_toml(root: Path) -> str:
    """The pytest configuration block for the tree at ``root``, as README gives it."""
    lines = ["[tool.pytest.ini_options]", "swa_sanitize_classes = ["]
    lines += [f'    "{spec}",' for spec in recipe_classes(root)]
    lines.append("]")
    return "\n".join(lines) + "\n"


def expand(specs: Iterable[str], path: str | os.PathLike[str] | None = None) -> list[str]:
    """``specs`` with each ``auto`` replaced by the installed SGLang's recipe."""
    out: list[str] = []
    for spec in specs:
        if spec == AUTO:
            out += [c for c in recipe_classes(sglang_root(path)) if c not in out]
        elif spec not in out:
            out.append(spec)
    return out


def main(argv: list[str]) -> int:
    """``swacheck sanitize-recipe [--sglang PATH]``: print the pytest configuration block
    for the installed SGLang (or the tree at PATH); exit 2 when there is none."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="swacheck sanitize-recipe",
        description="print the swa_sanitize_classes block for the installed SGLang, read "
        "off its module layout (paste it into SGLang's pytest configuration)",
    )
    parser.add_argument(
        "--sglang",
        metavar="PATH",
        help="an SGLang source tree (the package folder, or a checkout holding python/sglang) "
        "instead of the installed one",
    )
    args = parser.parse_args(argv)
    try:
        root = sglang_root(args.sglang)
    except NoSGLang as exc:
        print(f"swacheck: {exc}", file=sys.stderr)
        return 2
    print(f"# swa_sanitize_classes for the SGLang at {root}", file=sys.stderr)
    sys.stdout.write(recipe_toml(root))
    return 0
