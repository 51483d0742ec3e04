"""Checks on a CUDA-graph runner: capture/warm-up runs start with an empty cache (I5),
static SWA-location buffers have the SWA dtype (I3), padded tails hold the sentinel
after populate (I4), and replay is a forward (I6, consequence check).

A runner is recognised by its ``populate_from_forward_batch``/``replay``/``capture``
methods. Each ``run_once`` call inside ``capture`` is one capture run; a runner without
``run_once`` counts its whole ``capture`` call as one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from . import violations as V
from .deferred import DeviceFlags, is_capturing, segment_size
from .forward_watch import batch_argument
from .locations import AttributeScan, argument, parameters

if TYPE_CHECKING:
    from .sanitizer import Sanitizer

POPULATE = "populate_from_forward_batch"
RUN_METHOD = "run_once"
# Padded slots must point at the sentinel slot (I4).
SENTINEL_SLOT = 0
# Where populate says how many tokens are real and how many the bucket holds, first match
# wins: its arguments, then attributes it left on the runner.
RAW_COUNT_NAMES = ("raw_num_token", "raw_num_tokens", "raw_bs")
PADDED_COUNT_NAMES = ("num_tokens", "num_token", "padded_bs", "bs")
# A location buffer is one whose name holds this (DESIGN.md, SWA003).
LOCATION_WORD = "loc"
# Padded-tail views kept for reuse (a few per bucket); the cache restarts when full.
MAX_TAIL_VIEWS = 256


def install_graph_runner(san: Sanitizer, runner: object) -> GraphRunnerWatch:
    watch = GraphRunnerWatch(san, runner)
    patch = san.patcher.wrap_method
    if callable(getattr(runner, "capture", None)):
        patch(runner, "capture", watch.wrap_capture)
    run_target = _run_target(runner)
    if run_target is not None:
        patch(*run_target, watch.wrap_run)
    for owner in _populate_owners(runner):
        patch(owner, POPULATE, watch.wrap_populate(owner))
    if callable(getattr(runner, "replay", None)):
        patch(runner, "replay", watch.wrap_replay)
    return watch


def _run_target(runner: object) -> tuple[object, str] | None:
    """What one capture/warm-up run calls: the runner's ``run_once`` method, else (SGLang,
    where ``run_once`` is a closure) the forward of ``runner.model_runner.model``."""
    if callable(getattr(runner, RUN_METHOD, None)):
        return runner, RUN_METHOD
    model = getattr(getattr(runner, "model_runner", None), "model", None)
    if model is not None and callable(getattr(model, "forward", None)):
        return model, "forward"
    return None


def _populate_owners(runner: object) -> list[object]:
    """The runner, or the input-buffer object it holds, whichever has the populate method."""
    owners = [runner] if callable(getattr(runner, POPULATE, None)) else []
    for value in list(vars(runner).values()):
        if not isinstance(value, (type, torch.Tensor)) and callable(getattr(value, POPULATE, None)):
            owners.append(value)
    return owners


class GraphRunnerWatch:
    def __init__(self, san: Sanitizer, runner: object) -> None:
        self.san = san
        self.runner = runner
        self.label = type(runner).__qualname__
        self.runs_known = _run_target(runner) is not None
        self._batch_locs_registered = False
        names = san.names
        self._swa_buffers = AttributeScan(runner, lambda name, _: names.is_swa(name))
        # Per populate owner: its location buffers; per buffer, its accumulator segment.
        self._location_buffers: dict[int, AttributeScan] = {}
        self._slots: dict[tuple[int, str], tuple[DeviceFlags, int]] = {}
        # Padded tails as views, by (buffer, raw, padded): the buffers are static, so the
        # same few views serve every populate (bounded by the buckets' sizes).
        self._tails: dict[tuple[int, int, int], tuple[torch.Tensor, int, torch.Tensor]] = {}

    def wrap_capture(self, original: Callable[..., Any]) -> Callable[..., Any]:
        san = self.san

        def capture(*args: Any, **kwargs: Any) -> Any:
            san.enter_capture()
            if not self.runs_known:
                san.begin_capture_run()
            try:
                result = original(*args, **kwargs)
            except BaseException:
                if not self.runs_known:
                    san.end_scope(ok=False)
                san.leave_capture()
                raise
            if not self.runs_known:
                san.end_scope()
            san.leave_capture()
            self._check_buffer_dtypes("after capture")
            return result

        return capture

    def wrap_run(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """One capture/warm-up run when inside ``capture``; otherwise (an eager "replay" on
        CPU, an eager forward) part of whatever forward is in progress. The run's first
        cache access checks that it began with an empty cache (I5): the invalidation may
        sit at the top of the run itself, as in SGLang's ``run_once``."""
        san = self.san

        def run(*args: Any, **kwargs: Any) -> Any:
            if not san.in_capture:
                return original(*args, **kwargs)
            san.begin_capture_run()
            try:
                result = original(*args, **kwargs)
            except BaseException:
                san.end_scope(ok=False)
                raise
            san.end_scope()
            return result

        return run

    def wrap_populate(self, owner: object) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        self._location_buffers[id(owner)] = AttributeScan(owner, _is_location_buffer)

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            params = parameters(original)
            raw_params = _named(params, RAW_COUNT_NAMES)
            padded_params = _named(params, PADDED_COUNT_NAMES)

            def populate(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                if not self._batch_locs_registered:
                    self._register_batch_locs()
                self._check_buffer_dtypes("after populate_from_forward_batch")
                if not is_capturing():
                    raw = _count(args, kwargs, raw_params, RAW_COUNT_NAMES, owner, self.runner)
                    if raw is None:
                        batch = batch_argument(args, kwargs)
                        locs = self.san.names.batch_locs(batch) if batch is not None else []
                        raw = locs[0].numel() if locs else None
                    padded = _count(
                        args, kwargs, padded_params, PADDED_COUNT_NAMES, owner, self.runner
                    )
                    if raw is not None and padded is not None and padded > raw:
                        self._check_padding(owner, raw, padded)
                return result

            return populate

        return make

    def wrap_replay(self, original: Callable[..., Any]) -> Callable[..., Any]:
        san = self.san

        def replay(*args: Any, **kwargs: Any) -> Any:
            if not self._batch_locs_registered:
                self._register_batch_locs()
            san.begin_forward(batch_argument(args, kwargs))
            try:
                san.dispatch()
                result = original(*args, **kwargs)
            except BaseException:
                san.end_scope(ok=False)
                raise
            san.end_scope()
            return result

        return replay

    # -- checks -------------------------------------------------------------------------

    def _register_batch_locs(self) -> None:
        """The runner's static location buffers are the batch's locations during replay."""
        locs = self.san.names.batch_locs(self.runner)
        if locs:
            self.san.add_static_batch_locs(locs)
            self._batch_locs_registered = True

    def _check_buffer_dtypes(self, when: str) -> None:
        san = self.san
        for label, _, t in self._swa_buffers.tensors():
            san.dtype_checks += 1
            if t.dtype is not san.swa_dtype:
                san.flag_dtype(t, f"{self.label}.{label} ({when})")

    def _check_padding(self, owner: object, raw: int, padded: int) -> None:
        """I4: every location buffer's padded tail points at the sentinel slot."""
        san = self.san
        for label, _, buffer in self._location_buffers[id(owner)].tensors():
            if buffer.numel() < padded:
                continue
            tail = self._tail(buffer, raw, padded)
            san.padding_checks += 1
            if not san.full:
                # Slot 0 is the sentinel, so a tail entry off it is simply a non-zero one.
                flags, segment = self._slot(owner, label, buffer)
                flags.accumulate(segment, raw, padded, tail)
                continue
            where = tail.ne(SENTINEL_SLOT).nonzero().reshape(-1)[: V.MAX_VALUES]
            if where.numel():
                san.record(
                    V.PADDING_NOT_ZEROED,
                    f"{type(owner).__qualname__}.{label}: padded tail [{raw}:{padded}] holds "
                    f"non-sentinel slots at positions {[raw + i for i in where.tolist()]}; "
                    f"padded tokens write their KV there",
                    values=tail[where].tolist(),
                )

    def bookkeeping(self) -> dict[str, int]:
        """Sizes of what this watch keeps (see ``Sanitizer.bookkeeping``)."""
        scans = [self._swa_buffers, *self._location_buffers.values()]
        return {
            "scan_snapshot_values": sum(scan.snapshot_size() for scan in scans),
            "flag_slot_handles": len(self._slots),
            "tail_views": len(self._tails),
        }

    def _tail(self, buffer: torch.Tensor, raw: int, padded: int) -> torch.Tensor:
        """``buffer``'s flattened elements ``[raw:padded]``, a view cached while the buffer
        keeps its memory (a non-contiguous buffer's flattening is a copy: never cached)."""
        key = (id(buffer), raw, padded)
        found = self._tails.get(key)
        if found is not None and found[0] is buffer and found[1] == buffer.data_ptr():
            return found[2]
        if buffer.dim() == 1:
            tail = buffer[raw:padded]
        elif buffer.is_contiguous():
            tail = buffer.view(-1)[raw:padded]
        else:
            return buffer.reshape(-1)[raw:padded]
        if len(self._tails) >= MAX_TAIL_VIEWS:
            self._tails.clear()
        self._tails[key] = (buffer, buffer.data_ptr(), tail)
        return tail

    def _slot(self, owner: object, label: str, buffer: torch.Tensor) -> tuple[DeviceFlags, int]:
        key = (id(owner), label)
        slot = self._slots.get(key)
        if slot is None or slot[0].device != buffer.device or segment_size(slot) < buffer.numel():
            slot = self._slots[key] = self.san.flags.slot(
                f"{type(owner).__qualname__}.{label}", buffer, V.call_site
            )
        return slot


def _is_location_buffer(name: str, value: torch.Tensor) -> bool:
    return LOCATION_WORD in name and value.dim() >= 1


def _named(
    params: list[tuple[int | None, str]], names: tuple[str, ...]
) -> list[tuple[int | None, str]]:
    """The parameters among ``params`` called one of ``names``, in the order of ``names``."""
    by_name = dict((name, index) for index, name in params)
    return [(by_name[name], name) for name in names if name in by_name]


def _count(
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    params: list[tuple[int | None, str]],
    names: tuple[str, ...],
    owner: object,
    runner: object,
) -> int | None:
    """The first of ``names`` that holds an int: populate's arguments, then attributes it
    left on the owner, then on the runner."""
    for index, name in params:
        value = argument(args, kwargs, index, name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    for source in (vars(owner), vars(runner)):
        for name in names:
            value = source.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None
