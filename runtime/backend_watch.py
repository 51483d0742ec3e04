"""Checks on an attention backend: its first metadata build in a forward is a dispatch
(I6), and the SWA buffers it fills for a graph replay are checked like a runner's input
buffers.

From SGLang 0.5.13 the backends translate: before a replay, ``init_forward_metadata_
out_graph`` (``init_forward_metadata_replay_cuda_graph`` up to 0.5.12, and in the
reference implementation) refills the backend's own captured buffers: the SWA write
locations (``cuda_graph_swa_out_cache_loc``), SWA page tables
(``decode_cuda_graph_metadata["swa_page_table"]``) and window indices
(``cuda_graph_window_kv_indices``). After such a call, outside capture:

- every padded row of an SWA write-location buffer holds the sentinel 0 (I4: else the
  padded tokens write their KV into live slots), and its live rows are the translation
  of the batch's full write locations (I9, ``translation.py``);
- a padded request's row of a 2-D SWA page table starts with the sentinel (a padded
  request attends to one token, its first);
- each buffer has its role's dtype (I3: write index, page table; ``dtype_roles``), as a
  property of the allocation (reported at the next safe point).

Which rows are padded: the current replay's token counts from the runner's populate
(``Checks.replay_rows``), else the call's batch (SGLang's replay view carries the real
batch's ``out_cache_loc`` and ``num_padding``). CSR window indices (a flat list) are
checked for their dtype only: where a padded request's entries lie is in the device's
``indptr``. In ``fast`` the padded rows go to the device flags (``deferred.py``) on a
sample of replays, as the runner's tails do (``graph_watch``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from . import violations as V
from .bytecode import definition
from .checks import Checks
from .deferred import DeviceFlags, segment_size
from .dtype_roles import PAGE_TABLE, WRITE, role_of_name
from .locations import AttributeScan, batch_argument
from .sampling import Sampler
from .wrapping import public_methods

# Left out of a violation's pytest traceback (``violations.hide_from_traceback``).
__tracebackhide__ = V.hide_from_traceback

METADATA_PREFIX = "init_forward_metadata"
# A metadata method that prepares a graph replay (the words of its name).
REPLAY_WORDS = ("replay", "out_graph")
SENTINEL_SLOT = 0
# ``fast``: replays per staging of the padded rows, on average (as ``graph_watch``).
PADDING_SAMPLE_EVERY = 8
# Padded shapes remembered as seen (their first replay is always checked), at most.
MAX_SHAPES = 256
# Words of a buffer name that make it SWA-side, a page table, or not a location at all.
_SWA_SIDE = frozenset(("swa", "window"))
_TABLE = frozenset(("table", "indices", "index"))
_NOT_LOCATIONS = frozenset(("indptr", "lens", "offsets", "splits", "logits", "seqlens", "mask"))


def _words(name: str) -> set[str]:
    cleaned = name.replace("[", "_").replace("]", "_").replace("'", "").replace(".", "_")
    return set(cleaned.strip("_").split("_"))


def install_backend(checks: Checks, backend: object) -> BackendWatch:
    watch = BackendWatch(checks, backend)
    for name in public_methods(backend):
        if name.startswith(METADATA_PREFIX):
            replay = any(word in name for word in REPLAY_WORDS)
            checks.patcher.wrap_method(
                backend, name, lambda original, replay=replay: watch.wrap(original, replay)
            )
    return watch


class ReplayBuffer(NamedTuple):
    """A backend buffer as the replay checks see it: its label, its name in a report and
    in a dtype finding, the tensor, its role, whether it is an SWA write-location list
    (I9, padded rows) or a 2-D table (padded requests' rows)."""

    label: str
    name: str
    what: str
    tensor: torch.Tensor
    role: str
    write: bool
    table: bool


class BackendWatch:
    def __init__(self, checks: Checks, backend: object) -> None:
        self.checks = checks
        self.backend = backend
        self.label = type(backend).__qualname__
        names = checks.names

        def wanted(name: str, t: torch.Tensor) -> bool:
            words = _words(name)
            if "mapping" in words or words & _NOT_LOCATIONS:
                return False
            if names.is_swa(name):
                return True
            return bool(words & _SWA_SIDE) and bool(words & _TABLE)

        self._scan = AttributeScan(backend, wanted, into_dicts=True)
        self._full_tables = AttributeScan(backend, _full_page_table, into_dicts=True)
        self._slots: dict[str, tuple[DeviceFlags, int]] = {}
        self.padding_sampler = Sampler(PADDING_SAMPLE_EVERY)
        self._shapes: set[object] = set()
        # The buffers of the last scan (its list, compared by identity) as checked.
        self._buffers_of: list[tuple[str, str, torch.Tensor]] | None = None
        self._buffers: list[ReplayBuffer] = []
        self._learn_page_table_dtype()

    def _learn_page_table_dtype(self) -> None:
        """Under ``auto``, SWA page tables take the dtype of the full ones beside them."""
        for label, _, t in self._full_tables.tensors():
            self.checks.dtypes.learn(PAGE_TABLE, t.dtype, f"{self.label}.{label}")
            return

    def wrap(self, original: Callable[..., Any], replay: bool) -> Callable[..., Any]:
        checks = self.checks
        site = definition(original)

        def init_forward_metadata(*args: Any, **kwargs: Any) -> Any:
            # Within a dispatched scope (a replay builds metadata after dispatching) there
            # is nothing to do, not even finding the batch argument.
            if not checks.scope.dispatched:
                checks.dispatch(batch_argument(args, kwargs))
            result = original(*args, **kwargs)
            # Inside a runner's capture nothing is read (``in_capture``: 0.5.13+'s flag).
            if replay and not kwargs.get("in_capture") and not checks.in_capture:
                self.after_replay_metadata(args, kwargs, site)
            return result

        return init_forward_metadata

    def after_replay_metadata(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], site: str
    ) -> None:
        """The backend's SWA buffers as this replay will read them."""
        found = self._scan.tensors()
        if not found:
            return
        checks = self.checks
        if checks.dtypes.allowed(PAGE_TABLE) is None:
            self._learn_page_table_dtype()  # the buffers exist once graphs are set up
        if found is not self._buffers_of:
            self._buffers = self._classify(found)
            self._buffers_of = found
        batch = batch_argument(args, kwargs)
        for buffer in self._buffers:
            checks.check_dtype(buffer.tensor, buffer.what, buffer.role, static=True)
        tokens, requests = self._rows(args, kwargs, batch)
        full = getattr(batch, "out_cache_loc", None) if batch is not None else None
        # ``fast``: the first replay of each padded shape, then one in PADDING_SAMPLE_EVERY.
        shape = (tokens, requests)
        sample = checks.full or shape not in self._shapes or self.padding_sampler.due()
        if len(self._shapes) < MAX_SHAPES:
            self._shapes.add(shape)
        for buffer in self._buffers:
            t = buffer.tensor
            if buffer.write:
                if tokens is None:
                    continue
                raw, padded = tokens
                if isinstance(full, torch.Tensor) and raw > 0:
                    mapping = checks.mapping_for(self.backend)
                    if mapping is not None:
                        checks.translation.check_rows(
                            buffer.name, mapping, full, t, raw, checks.scope.scope_id, site
                        )
                if padded > raw and t.numel() >= padded and sample:
                    self._check_rows(buffer.label, t, t[raw:padded], raw, padded, site)
            elif buffer.table and requests is not None and sample:
                raw_bs, bs = requests
                if bs > raw_bs and t.shape[0] >= bs:
                    self._check_rows(buffer.label, t, t[raw_bs:bs, 0], raw_bs, bs, site)

    def _classify(self, found: list[tuple[str, str, torch.Tensor]]) -> list[ReplayBuffer]:
        """What each buffer a scan found is checked as (worked out once per scan)."""
        is_swa = self.checks.names.is_swa
        buffers = []
        for label, name, t in found:
            role = role_of_name(name) if is_swa(name) else PAGE_TABLE
            swa_write = is_swa(name) and role == WRITE
            buffers.append(
                ReplayBuffer(
                    label,
                    f"{self.label}.{label}",
                    f"{self.label}.{label} (after a replay's metadata)",
                    t,
                    role,
                    swa_write and t.dim() == 1,
                    not swa_write and t.dim() == 2,
                )
            )
        return buffers

    def _rows(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], batch: object | None
    ) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """``(raw, padded)`` tokens and requests of this replay (``None`` where unknown)."""
        tokens = self.checks.replay_rows
        padded_bs = getattr(batch, "batch_size", None) if batch is not None else None
        if not isinstance(padded_bs, int):
            padded_bs = kwargs.get("bs", args[0] if args and type(args[0]) is int else None)
        if tokens is None and batch is not None:
            full = getattr(batch, "out_cache_loc", None)
            positions = getattr(batch, "positions", None)
            if isinstance(full, torch.Tensor) and isinstance(positions, torch.Tensor):
                tokens = (full.numel(), positions.numel())
        requests = None
        if isinstance(padded_bs, int):
            padding = getattr(batch, "num_padding", None) if batch is not None else None
            if isinstance(padding, int):
                requests = (padded_bs - padding, padded_bs)
            elif tokens is not None and tokens[1] and tokens[1] % padded_bs == 0:
                per = tokens[1] // padded_bs
                requests = (tokens[0] // per, padded_bs)
        return tokens, requests

    def _check_rows(
        self, label: str, buffer: torch.Tensor, rows: torch.Tensor, raw: int, padded: int, site: str
    ) -> None:
        """I4: the rows of padded tokens (requests) hold the sentinel: read now in
        ``full``, through the device flags in ``fast``."""
        checks = self.checks
        checks.padding_checks += 1
        basis = buffer if buffer.dim() == 1 else buffer[:, 0]  # one element per row
        if checks.full:
            where = rows.ne(SENTINEL_SLOT).nonzero().reshape(-1)[: V.MAX_VALUES]
            if where.numel():
                start = max(padded - V.MAX_PICTURE_ROWS, 0)
                actual = basis[start:padded].tolist()
                checks.record(
                    V.PADDING_NOT_ZEROED,
                    f"{self.label}.{label}: padded rows [{raw}:{padded}] hold non-sentinel "
                    f"slots at rows {[raw + i for i in where.tolist()]} after the replay "
                    f"metadata; the replay's padded tokens use them",
                    values=rows[where].tolist(),
                    site=site,
                    picture=V.Picture(
                        f"{self.label}.{label}",
                        first_row=start,
                        raw=raw,
                        expected=tuple(
                            SENTINEL_SLOT if start + i >= raw else V.UNKNOWN
                            for i in range(len(actual))
                        ),
                        actual=tuple(actual),
                    ),
                )
            return
        slot = self._slots.get(label)
        if slot is None or slot[0].device != buffer.device or segment_size(slot) < padded:
            slot = self._slots[label] = checks.flags.slot(
                f"{self.label}.{label}", basis, lambda: site
            )
        flags, segment = slot
        flags.accumulate(segment, raw, padded, rows)

    def bookkeeping(self) -> dict[str, int]:
        return {"flag_slot_handles": len(self._slots), "backend_shapes": len(self._shapes)}


def _full_page_table(name: str, t: torch.Tensor) -> bool:
    """A full-space page table or index list (``page_table``, ``cuda_graph_kv_indices``)."""
    words = _words(name)
    if words & _SWA_SIDE or words & _NOT_LOCATIONS or t.is_floating_point():
        return False
    return ("page" in words and "table" in words) or ("kv" in words and "indices" in words)
