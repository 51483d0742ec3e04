"""Forward boundaries: the model runner's ``forward`` opens a forward; its first cache
access (building metadata, replaying, translating: ``backend_watch``, ``graph_watch``,
``pool_watch``) is where I6 requires an empty cache."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import violations as V
from .checks import Checks

# Left out of a violation's pytest traceback (``violations.hide_from_traceback``).
__tracebackhide__ = V.hide_from_traceback


def scoped_forward(checks: Checks, original: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``original`` as an explicit forward (nested ones join the outer forward)."""

    def forward(*args: Any, **kwargs: Any) -> Any:
        checks.forward_called(args, kwargs)
        try:
            result = original(*args, **kwargs)
        except BaseException:
            checks.end_scope(ok=False)
            raise
        checks.end_scope()
        return result

    return forward


def install_model_runner(checks: Checks, runner: object) -> None:
    checks.patcher.wrap_method(runner, "forward", lambda original: scoped_forward(checks, original))
