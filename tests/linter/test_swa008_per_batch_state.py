"""SWA008 beyond its documented examples: setters, reads and resets across files."""

from __future__ import annotations

from pathlib import Path

import pytest

from swacheck.config import Config
from swacheck.engine.audit import AuditOptions, audit_sources
from swacheck.rules.swa008_per_batch_state_on_long_lived_object import (
    PerBatchStateOnLongLivedObject,
)

RULE = PerBatchStateOnLongLivedObject

POOL = """
class SWAKVPool:
    def __init__(self):
        self.swa_loc = None

    def set_swa_loc(self, loc):
        self.swa_loc = loc

    def set_kv_buffer(self, layer, loc, k, v):
        if self.swa_loc is not None:
            loc = self.swa_loc
        self.write(loc, k, v)
"""


def _audit(files: dict[str, str], root: Path, **options: bool):
    result = audit_sources(
        files, AuditOptions(rules=[RULE], config=Config(), jobs=1, **options), root=root
    )
    assert not result.errors, result.errors
    return result


def _rows(files: dict[str, str], root: Path) -> list[int]:
    return [f.start.row for f in _audit(files, root).findings if f.path == "example.py"]


def test_reported_at_the_setter_with_every_read_in_notes(tmp_path: Path) -> None:
    [finding] = _audit({"example.py": POOL}, tmp_path).findings
    assert finding.start.row == 7
    assert finding.notes == (
        "read at example.py:10 in SWAKVPool.set_kv_buffer()",
        "read at example.py:11 in SWAKVPool.set_kv_buffer()",
    )
    assert "set_swa_loc()" in finding.message and "(I8)" in finding.message


@pytest.mark.parametrize(
    "caller",
    [
        "def after(pool):\n    pool.swa_loc = None\n",
        "def after(pool):\n    pool.set_swa_loc(None)\n",
        "class Pool2:\n    def clear(self):\n        self.pool.set_swa_loc(None)\n",
    ],
)
def test_reset_elsewhere_in_the_tree(caller: str, tmp_path: Path) -> None:
    assert _rows({"example.py": POOL, "runner.py": caller}, tmp_path) == []


def test_reset_in_a_subclass_counts(tmp_path: Path) -> None:
    sub = (
        "from example import SWAKVPool\n\n"
        "class Pool(SWAKVPool):\n"
        "    def end_forward(self):\n"
        "        del self.swa_loc\n"
    )
    assert _rows({"example.py": POOL, "sub.py": sub}, tmp_path) == []


def test_constructor_none_is_not_a_batch_boundary(tmp_path: Path) -> None:
    assert _rows({"example.py": POOL}, tmp_path) == [7]


def test_getattr_read_on_another_object(tmp_path: Path) -> None:
    pool = "class SWAKVPool:\n    def set_swa_loc(self, loc):\n        self.swa_loc = loc\n"
    reader = "def narrow(pool):\n    return getattr(pool, 'swa_loc', None)\n"
    assert _rows({"example.py": pool, "reader.py": reader}, tmp_path) == [3]


def test_ambiguous_attribute_read_on_another_object_is_not_counted(tmp_path: Path) -> None:
    pool = "class SWAKVPool:\n    def set_swa_loc(self, loc):\n        self.swa_loc = loc\n"
    other = (
        "class Batch:\n"
        "    def __init__(self, swa_loc):\n"
        "        self.swa_loc = swa_loc\n\n"
        "def use(batch):\n"
        "    return batch.swa_loc\n"
    )
    assert _rows({"example.py": pool, "other.py": other}, tmp_path) == []


@pytest.mark.parametrize(
    "setter",
    [
        # a constructor is not a per-batch setter
        "    def __init__(self, swa_loc):\n        self.swa_loc = swa_loc\n",
        # not a location
        "    def set_window(self, window):\n        self.window = window\n",
        # a location, but not an SWA one (out of I8's scope)
        "    def set_out_cache_loc(self, loc):\n        self.out_cache_loc = loc\n",
    ],
)
def test_not_a_per_batch_setter(setter: str, tmp_path: Path) -> None:
    code = (
        "class SWAKVPool:\n"
        + setter
        + "\n    def set_kv_buffer(self, loc):\n"
        + "        return self.swa_loc, self._swa_loc, self.window, self.out_cache_loc\n"
    )
    assert _rows({"example.py": code}, tmp_path) == []


@pytest.mark.parametrize(
    ("store", "row"),
    [
        # a property setter stores the batch's value on the object all the same
        ("    @swa_loc.setter\n    def swa_loc(self, loc):\n        self._swa_loc = loc\n", 4),
        # a converted argument is still the batch's value
        ("    def set_swa_loc(self, loc):\n        self.swa_loc = loc.int()\n", 3),
    ],
)
def test_stores_other_than_a_plain_setter(store: str, row: int, tmp_path: Path) -> None:
    code = (
        "class SWAKVPool:\n"
        + store
        + "\n    def set_kv_buffer(self, loc):\n"
        + "        return self.swa_loc, self._swa_loc\n"
    )
    assert _rows({"example.py": code}, tmp_path) == [row]


@pytest.mark.parametrize(
    ("receiver", "flagged"),
    [
        # the batch and what is made per batch carry their own state
        ("forward_batch", False),
        ("self.forward_metadata", False),
        ("spec_info", False),
        # a local built here is a new object
        ("Holder()", False),
        # long-lived holders
        ("self.token_to_kv_pool", True),
        ("pool", True),
        ("self.pool", True),
    ],
)
def test_which_objects_are_long_lived(receiver: str, flagged: bool, tmp_path: Path) -> None:
    if receiver.endswith("()"):
        store = f"        holder = {receiver}\n        holder.swa_loc = forward_batch.loc\n"
    else:
        store = f"        {receiver}.swa_loc = forward_batch.loc\n"
    code = (
        "class Runner:\n"
        "    def step(self, forward_batch, pool, spec_info):\n" + store + "\n"
        "def use(x):\n"
        "    return x.swa_loc\n"
    )
    assert bool(_rows({"example.py": code}, tmp_path)) is flagged


def test_a_store_from_the_object_itself_is_not_the_batch_value(tmp_path: Path) -> None:
    code = (
        "class Runner:\n"
        "    def step(self, forward_batch, bs):\n"
        "        self.pool.swa_loc = self.static_swa_loc[:bs]\n"
        "\n"
        "def use(pool):\n"
        "    return pool.swa_loc\n"
    )
    assert _rows({"example.py": code}, tmp_path) == []


def test_a_dataclass_holder_travels_with_the_batch(tmp_path: Path) -> None:
    code = (
        "from dataclasses import dataclass\n\n"
        "@dataclass\n"
        "class Holder:\n"
        "    swa_loc: object = None\n\n"
        "class Runner:\n"
        "    def step(self, forward_batch, holder: Holder):\n"
        "        holder.swa_loc = forward_batch.out_cache_loc_swa\n\n"
        "def use(holder):\n"
        "    return holder.swa_loc\n"
    )
    assert _rows({"example.py": code}, tmp_path) == []


def test_annotated_setter_with_docstring(tmp_path: Path) -> None:
    code = (
        "class SWAKVPool:\n"
        "    def set_swa_slots(self, swa_slots: torch.Tensor) -> None:\n"
        '        """Per batch."""\n'
        "        self.swa_slots: torch.Tensor = swa_slots\n"
        "\n"
        "    def write(self):\n"
        "        return self.swa_slots\n"
    )
    assert _rows({"example.py": code}, tmp_path) == [4]


def test_noqa_on_the_setter_line(tmp_path: Path) -> None:
    code = POOL.replace("self.swa_loc = loc\n", "self.swa_loc = loc  # noqa: SWA008\n")
    assert _rows({"example.py": code}, tmp_path) == []


@pytest.mark.parametrize("example", range(len(RULE.INVALID)))
def test_prefilter_changes_nothing(example: int, tmp_path: Path) -> None:
    case = RULE.INVALID[example]
    files = {"example.py": case.code, **case.files}
    on = _audit(files, tmp_path / "on").findings
    off = _audit(files, tmp_path / "off", prefilter=False).findings
    assert [(f.path, f.start) for f in on] == [(f.path, f.start) for f in off]
