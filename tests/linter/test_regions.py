"""Blanking out irrelevant top-level definitions before parsing (``engine/regions``)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from swacheck.engine.regions import Regions, blank_irrelevant_definitions
from swacheck.triggers import TriggerSet, all_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REGION_SAFE = "SWA003,SWA006,SWA008,SWA009,SWA010,SWA011"

SOURCE = b"""\
import torch

@decorator(
    arg=1,
)
def unrelated(x):
    return x  # nothing here


class Buffers:
    def __init__(self, n):
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int64)


def also_unrelated():
    pass
LIMIT = 4
"""


def test_irrelevant_definitions_become_line_breaks_and_the_rest_is_kept() -> None:
    out = blank_irrelevant_definitions(SOURCE, Regions(TriggerSet({"swa_", "_swa"})))
    assert out.count(b"\n") == SOURCE.count(b"\n")
    kept = [line for line in out.decode().splitlines() if line.strip('"')]
    assert kept == [
        "import torch",
        "class Buffers:",
        "    def __init__(self, n):",
        "        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int64)",
        "LIMIT = 4",
    ]
    # Kept lines sit on their original line numbers.
    original = SOURCE.decode().splitlines()
    for row, line in enumerate(out.decode().splitlines()):
        assert not line.strip('"') or line == original[row]
    # What replaces a definition is one string literal per definition.
    assert len(ast.parse(out).body) == 5


def test_crlf_is_kept_and_nothing_is_blanked_when_everything_matches() -> None:
    crlf = SOURCE.replace(b"\n", b"\r\n")
    out = blank_irrelevant_definitions(crlf, Regions(TriggerSet({"swa_"})))
    assert out.count(b"\r\n") == crlf.count(b"\r\n") and b"unrelated" not in out
    assert blank_irrelevant_definitions(SOURCE, Regions(TriggerSet({"def"}))) is SOURCE


def test_a_file_holding_a_trigger_of_a_rule_that_reads_whole_files_is_kept_whole() -> None:
    # SWA002 follows `torch.zeros` helpers that need not name SWA: its files are whole.
    regions = Regions(TriggerSet({"swa_"}), whole=TriggerSet({"full_to_swa_index_mapping"}))
    assert blank_irrelevant_definitions(SOURCE, regions) != SOURCE
    table = SOURCE + b"mapping = full_to_swa_index_mapping\n"
    assert blank_irrelevant_definitions(table, regions) is table


def test_a_conjunction_holds_in_a_definition_by_its_first_group_and_the_file() -> None:
    # The class names no tensor: the file's import does.
    graph = b"import torch\n\nclass Runner:\n    def replay(self):\n        pass\n"
    regions = Regions(TriggerSet({all_of({"replay"}, {"torch"})}))
    assert blank_irrelevant_definitions(graph, regions) is graph
    no_tensor = graph.replace(b"import torch", b"import json")
    assert b"replay" not in blank_irrelevant_definitions(no_tensor, regions)
    # The first group is the definition's own: "torch" in the class alone is not enough.
    only_tensor = b"import replay\n\nclass Runner:\n    x: torch.Tensor\n"
    assert b"torch" not in blank_irrelevant_definitions(only_tensor, regions)


def test_a_file_cpython_rejects_is_not_blanked() -> None:
    broken = SOURCE + b"def broken(:\n"
    assert blank_irrelevant_definitions(broken, Regions(TriggerSet({"swa_"}))) is None


def test_findings_equal_without_prefilter_on_the_examples(swacheck_at) -> None:
    runner = swacheck_at(EXAMPLES)
    for select in (REGION_SAFE, "ALL"):
        args = ("audit", ".", "--no-cache", "--select", select, "--output-format", "json")
        regions = json.loads(runner(*args).stdout)
        whole = json.loads(runner(*args, "--no-prefilter").stdout)
        assert regions == whole
        assert set(REGION_SAFE.split(",")) <= {f["code"] for f in regions}


def test_syntax_error_in_an_irrelevant_definition_is_still_reported(swacheck, tmp_path) -> None:
    (tmp_path / "m.py").write_text(
        "swa_loc = torch.zeros(4, dtype=torch.int32)\n\ndef other(:\n    pass\n"
    )
    found = json.loads(swacheck("audit", "--no-cache", "--output-format", "json").stdout)
    assert [f["code"] for f in found] == ["SWA999"]


ALLOCATOR = """

class Allocator:
    def __init__(self, n):
        self.full_to_swa_index_mapping = torch.cat([torch.zeros(n), torch.tensor([-1])])

    def clear(self):
        self.full_to_swa_index_mapping.fill_(0)
"""


def test_fix_writes_the_whole_file_not_the_blanked_text(swacheck, tmp_path: Path) -> None:
    text = SOURCE.decode() + ALLOCATOR + "\n\ndef tail():\n    return 1\n"
    target = tmp_path / "bufs.py"
    target.write_text(text)
    swacheck("audit", "--no-cache", "--fix", "--select", REGION_SAFE)
    fixed = target.read_text()
    assert fixed == text.replace(".fill_(0)", "[:-1].fill_(0)")
