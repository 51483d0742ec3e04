"""Checks on a CUDA-graph runner: capture/warm-up runs start with an empty cache (I5),
static SWA-location buffers have the SWA dtype (I3), padded tails hold the sentinel
after populate (I4), and replay is a forward (I6, consequence check).

A runner is recognised by its ``populate_from_forward_batch``/``replay``/``capture``
methods. Each ``run_once`` call inside ``capture`` is one capture run; a runner without
``run_once`` counts its whole ``capture`` call as one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from . import violations as V
from .deferred import is_capturing
from .forward_watch import batch_argument
from .locations import attributes

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


def install_graph_runner(san: Sanitizer, runner: object) -> None:
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
        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            try:
                signature: inspect.Signature | None = inspect.signature(original)
            except (TypeError, ValueError):
                signature = None

            def populate(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                self._register_batch_locs()
                self._check_buffer_dtypes("after populate_from_forward_batch")
                self._check_padding(owner, signature, args, kwargs)
                return result

            return populate

        return make

    def wrap_replay(self, original: Callable[..., Any]) -> Callable[..., Any]:
        san = self.san

        def replay(*args: Any, **kwargs: Any) -> Any:
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
        if self._batch_locs_registered:
            return
        locs = self.san.names.batch_locs(self.runner)
        if locs:
            self.san.static_batch_locs.extend(locs)
            self._batch_locs_registered = True

    def _check_buffer_dtypes(self, when: str) -> None:
        for name, t in self.san.names.swa_tensors(self.runner):
            self.san.check_dtype(t, f"{self.label}.{name} ({when})")

    def _counts(
        self,
        owner: object,
        signature: inspect.Signature | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> tuple[int | None, int | None]:
        bound: dict[str, Any] = {}
        if signature is not None:
            try:
                bound = dict(signature.bind_partial(*args, **kwargs).arguments)
            except TypeError:
                bound = {}

        def find(names: tuple[str, ...]) -> int | None:
            for source in (bound, vars(owner), vars(self.runner)):
                for name in names:
                    value = source.get(name)
                    if isinstance(value, int) and not isinstance(value, bool):
                        return value
            return None

        raw = find(RAW_COUNT_NAMES)
        if raw is None:
            batch = batch_argument(args, kwargs)
            locs = self.san.names.batch_locs(batch) if batch is not None else []
            raw = locs[0].numel() if locs else None
        return raw, find(PADDED_COUNT_NAMES)

    def _check_padding(
        self,
        owner: object,
        signature: inspect.Signature | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        """I4: every location buffer's padded tail points at the sentinel slot."""
        if is_capturing():
            return
        raw, padded = self._counts(owner, signature, args, kwargs)
        if raw is None or padded is None or padded <= raw:
            return
        label = type(owner).__qualname__
        for name, buffer in _location_buffers(owner):
            if buffer.numel() < padded:
                continue
            tail = buffer.reshape(-1)[raw:padded]
            self.san.tally(V.PADDING_NOT_ZEROED)
            if not self.san.full:
                self.san.flags.add(f"{label}.{name}", V.call_site(), tail.ne(SENTINEL_SLOT).any())
                continue
            where = tail.ne(SENTINEL_SLOT).nonzero().reshape(-1)[: V.MAX_VALUES]
            if where.numel():
                self.san.record(
                    V.PADDING_NOT_ZEROED,
                    f"{label}.{name}: padded tail [{raw}:{padded}] holds non-sentinel slots "
                    f"at positions {[raw + i for i in where.tolist()]}; padded tokens write "
                    f"their KV there",
                    values=tail[where].tolist(),
                )


def _location_buffers(runner: object) -> list[tuple[str, torch.Tensor]]:
    return [
        (label, value)
        for label, name, value in attributes(runner)
        if isinstance(value, torch.Tensor) and LOCATION_WORD in name and value.dim() >= 1
    ]
