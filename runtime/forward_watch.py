"""Forward boundaries: the model runner's ``forward`` and the attention backend's metadata
builders. A forward's first cache access (building metadata, replaying, translating)
is where I6 requires an empty cache."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .wrapping import public_methods

if TYPE_CHECKING:
    from .sanitizer import Sanitizer

BATCH_PARAM = "forward_batch"
METADATA_PREFIX = "init_forward_metadata"


def batch_argument(args: tuple[Any, ...], kwargs: dict[str, Any]) -> object | None:
    """The forward batch a call was given: by name, else the first object argument."""
    if BATCH_PARAM in kwargs:
        return kwargs[BATCH_PARAM]
    for value in args:
        if hasattr(value, "__dict__") and not isinstance(value, type):
            return value
    return None


def scoped_forward(san: Sanitizer, original: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``original`` as an explicit forward (nested ones join the outer forward)."""

    def forward(*args: Any, **kwargs: Any) -> Any:
        san.forward_called(args, kwargs)
        try:
            result = original(*args, **kwargs)
        except BaseException:
            san.end_scope(ok=False)
            raise
        san.end_scope()
        return result

    return forward


def install_model_runner(san: Sanitizer, runner: object) -> None:
    san.patcher.wrap_method(runner, "forward", lambda original: scoped_forward(san, original))


def install_backend(san: Sanitizer, backend: object) -> None:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def init_forward_metadata(*args: Any, **kwargs: Any) -> Any:
            # Within a dispatched scope (a replay builds metadata after dispatching) there
            # is nothing to do, not even finding the batch argument.
            if not san.scope.dispatched:
                san.dispatch(batch_argument(args, kwargs))
            return original(*args, **kwargs)

        return init_forward_metadata

    for name in public_methods(backend):
        if name.startswith(METADATA_PREFIX):
            san.patcher.wrap_method(backend, name, make)
