"""The dtype an SWA location must have where it is consumed, by its role (I3).

SGLang consumes SWA locations in two roles, with a convention each: *write indices*
(the scatter targets of the KV stores: ``set_kv_buffer``'s SWA location, a
``KVWriteLoc``'s ``swa_loc``, ``out_cache_loc_swa``, a graph's SWA write-location buffer)
and *page tables* (SWA page tables and window indices read by attention kernels). To
0.5.12 both are int32; from 0.5.13 write indices are int64 on purpose (the translation
is a gather from the int64 mapping and the KV store takes it as it comes) while the page
tables handed to kernels stay int32.

The contract is configured as the linter's ``swa-loc-dtype`` is (one configuration
serves both): ``"auto"``, a dtype, or a table by role (``{ write = "int64", page-table
= "int32" }``); ``runtime-swa-loc-dtypes`` overrides it for the sanitizer alone (and
also takes a list: every role may have any of those dtypes). Under ``"auto"`` a role's
convention is inferred from the engine as it runs:

- *write*: the dtype the project's annotations state (a translate method's result
  annotated ``Int32[Tensor, ...]``: ``contracts``), else the dtype the project's
  translation produces (the first result of a watched
  pool's translate method), else, until one is seen, the first SWA write location a
  forward hands over (a batch's SWA field, a KV write's SWA argument). Static buffers
  (a graph runner's or a backend's) never set the convention: they are what is checked
  against it, and a buffer found before anything set it is judged once something has
  (or, at the latest, at the next safe point, against int32: the design card's default);
- *page-table*: the dtype of the full-space page tables next to the SWA ones (an
  attention backend's ``page_table``/``kv_indices`` buffers: a kernel takes both the
  same way), else int32.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

import torch

from swacheck.config import AUTO, SWA_ROLES, Config

WRITE, PAGE_TABLE = SWA_ROLES

# What an unset "auto" role is judged against at a safe point (the design card's I3).
FALLBACK = torch.int32

# Name words that make an SWA location a page table (read by kernels), not a write index.
PAGE_TABLE_WORDS = frozenset(("indices", "index", "table", "tables"))
# Names whose role is remembered (``role_of_name``), at most.
MAX_ROLE_NAMES = 4096


@functools.lru_cache(maxsize=MAX_ROLE_NAMES)
def role_of_name(name: str) -> str:
    """The role an SWA location named ``name`` plays: a page table if its name says so
    (``swa_page_table``, ``window_kv_indices``), else a write index. Remembered per name
    (the checks ask on every populate and replay)."""
    words = set(name.strip("_").replace("[", "_").replace("]", "_").replace("'", "").split("_"))
    return PAGE_TABLE if words & PAGE_TABLE_WORDS else WRITE


def contract_spec(config: Config) -> Any:
    """The contract the configuration states: ``runtime-swa-loc-dtypes`` when set, else
    ``swa-loc-dtype`` unless it holds its default, else ``"auto"``."""
    if config.runtime_swa_loc_dtypes:
        return config.runtime_swa_loc_dtypes
    default = next(f.default for f in fields(Config) if f.name == "swa_loc_dtype")
    if isinstance(config.swa_loc_dtype, Mapping) or config.swa_loc_dtype != default:
        return config.swa_loc_dtype
    return AUTO


def _dtypes(value: Any) -> frozenset[torch.dtype] | None:
    """A role's allowed dtypes (``None``: auto)."""
    if value == AUTO:
        return None
    names = (value,) if isinstance(value, str) else value
    return frozenset(getattr(torch, name) for name in names)


class DtypeContract:
    """Per role, the dtypes an SWA location may have: configured, or learned (``auto``).
    ``on_learned`` is called with the role when an auto role learns its dtype (the
    checks then judge the buffers that waited for it)."""

    def __init__(self, spec: Any, on_learned: Callable[[str], None] | None = None) -> None:
        if isinstance(spec, Mapping):
            self._allowed = {role: _dtypes(spec.get(role, AUTO)) for role in SWA_ROLES}
        else:
            self._allowed = dict.fromkeys(SWA_ROLES, _dtypes(spec))
        self.auto = {role for role, allowed in self._allowed.items() if allowed is None}
        # How each learned role was learned, for a message.
        self.learned_from: dict[str, str] = {}
        self.declared: set[str] = set()
        self.on_learned = on_learned

    @classmethod
    def from_config(cls, config: Config) -> DtypeContract:
        return cls(contract_spec(config))

    def allowed(self, role: str) -> frozenset[torch.dtype] | None:
        """The dtypes ``role`` may have; ``None`` while an auto role has learned nothing."""
        return self._allowed[role]

    def accepts(self, role: str, dtype: torch.dtype) -> bool:
        """Whether ``dtype`` keeps ``role``'s convention (an auto role not learned yet
        accepts anything: the caller decides whether to wait)."""
        allowed = self._allowed[role]
        return allowed is None or dtype in allowed

    def learn(self, role: str, dtype: torch.dtype, source: str) -> None:
        """An auto role not learned yet takes ``dtype`` from ``source``."""
        if role in self.auto and self._allowed[role] is None:
            self._allowed[role] = frozenset((dtype,))
            self.learned_from[role] = source
            if self.on_learned is not None:
                self.on_learned(role)

    def declare(self, role: str, dtype: torch.dtype, source: str) -> None:
        """The project states ``role``'s convention (an annotation): an auto role takes
        it over anything only observed."""
        if role in self.auto and role not in self.declared:
            self.declared.add(role)
            self._allowed[role] = None
            self.learn(role, dtype, source)

    def settle(self) -> None:
        """A safe point: auto roles that learned nothing take the fallback (int32)."""
        for role in SWA_ROLES:
            if self._allowed[role] is None:
                self.learn(role, FALLBACK, "nothing observed: the design card's default")

    def expected(self, role: str) -> str:
        """What ``role`` expects, for a message."""
        allowed = self._allowed[role]
        if allowed is None:
            return "(not known yet)"
        text = " or ".join(sorted(map(str, allowed)))
        source = self.learned_from.get(role)
        return f"{text} ({role} convention, learned from {source})" if source else text

    def union(self) -> frozenset[torch.dtype]:
        """Every dtype some role allows (what a location of unknown role may have)."""
        found: set[torch.dtype] = set()
        for allowed in self._allowed.values():
            found |= allowed or {FALLBACK}
        return frozenset(found)
