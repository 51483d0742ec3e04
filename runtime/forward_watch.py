"""Forward boundaries: the model runner's ``forward`` and the attention backend's metadata
builders. A forward's first cache access (building metadata, replaying, translating)
is where I6 requires an empty cache."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import violations as V
from .checks import Checks
from .locations import batch_argument
from .wrapping import public_methods

# Left out of a violation's pytest traceback (``violations.hide_from_traceback``).
__tracebackhide__ = V.hide_from_traceback

METADATA_PREFIX = "init_forward_metadata"


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


def install_backend(checks: Checks, backend: object) -> None:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def init_forward_metadata(*args: Any, **kwargs: Any) -> Any:
            # Within a dispatched scope (a replay builds metadata after dispatching) there
            # is nothing to do, not even finding the batch argument.
            if not checks.scope.dispatched:
                checks.dispatch(batch_argument(args, kwargs))
            return original(*args, **kwargs)

        return init_forward_metadata

    for name in public_methods(backend):
        if name.startswith(METADATA_PREFIX):
            checks.patcher.wrap_method(backend, name, make)
