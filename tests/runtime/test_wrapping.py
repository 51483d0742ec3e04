"""Instance-level wrapping: other instances untouched, undone exactly, foreign classes too."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from swacheck.runtime import Sanitizer, StaleTranslationError
from swacheck.runtime.wrapping import Patcher, WrapError, original_of


def test_only_the_watched_instance_is_wrapped(toy: SimpleNamespace) -> None:
    watched, other = toy.Pool(), toy.Pool()
    san = Sanitizer()
    san.watch(watched)
    assert "translate_loc_from_full_to_swa" in vars(watched)
    assert "translate_loc_from_full_to_swa" not in vars(other)
    assert "alloc" in vars(watched)  # any public method may write the mapping
    assert original_of(watched.alloc).__func__ is toy.Pool.alloc
    san.close()
    assert not {k for k in vars(watched) if callable(vars(watched)[k])}
    assert (
        watched.translate_loc_from_full_to_swa.__func__ is toy.Pool.translate_loc_from_full_to_swa
    )


def test_closed_sanitizer_checks_nothing(toy: SimpleNamespace) -> None:
    pool = toy.Pool()
    locs = pool.alloc(4)
    san = Sanitizer()
    san.watch(pool)
    pool.translate_loc_from_full_to_swa(locs)
    san.close()
    locs.add_(1)
    pool.translate_loc_from_full_to_swa(locs)  # stale, but nobody is watching any more
    assert san.report().ok
    with pytest.raises(RuntimeError, match="closed"):
        san.watch(pool)


def test_undo_keeps_a_user_attribute_set_later(toy: SimpleNamespace) -> None:
    pool = toy.Pool()
    patcher = Patcher()
    patcher.wrap_method(pool, "alloc", lambda original: original)
    mine = lambda n: None  # noqa: E731
    pool.alloc = mine
    patcher.undo_all()
    assert pool.alloc is mine


def test_wrappers_stack_and_unstack_in_order(toy: SimpleNamespace) -> None:
    pool = toy.Pool()
    calls: list[str] = []

    def tracer(name: str):
        def make(original):
            def wrapper(*args, **kwargs):
                calls.append(name)
                return original(*args, **kwargs)

            return wrapper

        return make

    patcher = Patcher()
    patcher.wrap_method(pool, "alloc", tracer("inner"))
    patcher.wrap_method(pool, "alloc", tracer("outer"))
    pool.alloc(1)
    assert calls == ["outer", "inner"]
    patcher.undo_all()
    assert "alloc" not in vars(pool)


def test_slots_objects_cannot_be_wrapped() -> None:
    class Slotted:
        __slots__ = ("full_to_swa_index_mapping",)

        def __init__(self) -> None:
            self.full_to_swa_index_mapping = torch.zeros(3, dtype=torch.int64)

        def translate_loc_from_full_to_swa(self, kv_indices):
            return kv_indices

    with Sanitizer() as san, pytest.raises(WrapError, match="no __dict__"):
        san.watch(Slotted())


def test_nn_module_pool(toy: SimpleNamespace) -> None:
    """Engines often make pools nn.Modules: wrapping must not trip Module.__setattr__ and
    must leave Module's own methods alone."""

    class ModulePool(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.full_to_swa_index_mapping = torch.tensor([0, 1, 2, -1])
            self._cache: torch.Tensor | None = None

        def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
            if self._cache is None:
                self._cache = self.full_to_swa_index_mapping[kv_indices].to(torch.int32)
            return self._cache

    pool = ModulePool()
    with Sanitizer() as san:
        san.watch(pool)
        assert "to" not in vars(pool) and "forward" not in vars(pool)
        key = torch.tensor([1, 2])
        pool.translate_loc_from_full_to_swa(key)
        key.add_(0)
        with pytest.raises(StaleTranslationError):
            pool.translate_loc_from_full_to_swa(key)


def test_watch_class_wraps_new_instances_until_close(toy: SimpleNamespace) -> None:
    before = toy.Pool()
    san = Sanitizer(action="log")
    san.watch_class(toy.Pool)
    during = toy.Pool()
    assert "translate_loc_from_full_to_swa" in vars(during)
    assert "translate_loc_from_full_to_swa" not in vars(before)
    san.close()
    after = toy.Pool()
    assert "translate_loc_from_full_to_swa" not in vars(after)
    assert "__init__" not in toy.Pool.__dict__ or toy.Pool.__init__.__name__ == "__init__"
    assert not hasattr(toy.Pool.__init__, "__wrapped__")
