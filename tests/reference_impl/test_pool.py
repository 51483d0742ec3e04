"""SWAKVPool: mapping layout, memoised translation (I2), invalidation at every mutation
point (I1), SWA dtype (I3), and allocator invariants under churn."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from swacheck.reference_impl.bugs import BUG_NAMES, validate_bug
from swacheck.reference_impl.pool import SWAKVPool
from swacheck.reference_impl.tensor_types import SwaLoc

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def make_pool(size=32, size_swa=16, inject_bug=None):
    return SWAKVPool(size, size_swa, (0, 2), 4, 2, 8, torch.float32, DEV, inject_bug=inject_bug)


def test_layout_sentinels_and_layers():
    pool = make_pool()
    m = pool.full_to_swa_index_mapping
    assert m.dtype == torch.int64 and m.shape == (pool.size + 2,)
    assert int(m[0]) == 0 and int(m[-1]) == -1
    assert pool.layers_mapping == {0: (0, True), 1: (0, False), 2: (1, True), 3: (1, False)}
    assert pool.swa_k_buffer[0].shape[0] == 17 and pool.full_k_buffer[0].shape[0] == 33
    assert pool.translate_loc_from_full_to_swa(torch.tensor([-1, 0], device=DEV)).tolist() == [
        -1,
        0,
    ]


def test_translation_is_int32_and_memoised_on_data_ptr():
    pool = make_pool()
    loc = pool.alloc(10)
    a, b = loc[:5], loc[:5]
    assert a is not b
    ra = pool.translate_loc_from_full_to_swa(a)
    assert ra.dtype == torch.int32 and isinstance(ra, SwaLoc)
    assert pool.translate_loc_from_full_to_swa(b) is ra  # same data_ptr and numel: a hit
    hi = pool.translate_loc_from_full_to_swa(loc[5:10])  # same storage, other offset: a miss
    assert hi is not ra
    assert torch.equal(hi, pool.full_to_swa_index_mapping[loc[5:10]].to(torch.int32))


def test_storage_pointer_key_collides_across_offsets():
    """The bug: views at different offsets of one storage share a key."""
    pool = make_pool(inject_bug="storage-pointer-key")
    loc = pool.alloc(10)
    lo = pool.translate_loc_from_full_to_swa(loc[0:5])
    hi = pool.translate_loc_from_full_to_swa(loc[5:10])
    assert hi is lo  # stale: the SWA slots of the first five tokens
    assert not torch.equal(hi, pool.full_to_swa_index_mapping[loc[5:10]].to(torch.int32))


MUTATIONS = {
    "alloc": lambda pool, loc: pool.alloc(2),
    "free": lambda pool, loc: pool.free(loc[:2]),
    "free_swa": lambda pool, loc: pool.free_swa(loc[:2]),
    "clear": lambda pool, loc: pool.clear(),
    "set_full_to_swa_mapping": lambda pool, loc: pool.set_full_to_swa_mapping(
        loc[:1], torch.tensor([7], dtype=torch.int32, device=DEV)
    ),
    "register_mapping": lambda pool, loc: pool.register_mapping(
        pool.full_to_swa_index_mapping.clone()
    ),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_every_mapping_mutation_invalidates(name):
    pool = make_pool()
    loc = pool.alloc(4)
    pool.translate_loc_from_full_to_swa(loc)
    assert pool._cached_loc_key is not None
    MUTATIONS[name](pool, loc)
    assert pool._cached_loc_key is None and pool._cached_swa_loc is None


def test_missing_invalidation_serves_a_stale_translation():
    """free_swa without invalidation: a second lookup of the same tensor returns SWA slots
    that are back on the free list, so the next writer through it corrupts their new owner."""
    fresh, buggy = make_pool(), make_pool(inject_bug="missing-invalidation")
    for pool, stale in ((fresh, False), (buggy, True)):
        loc = pool.alloc(4)
        before = pool.translate_loc_from_full_to_swa(loc).clone()
        pool.free_swa(loc)  # the tokens left the window
        after = pool.translate_loc_from_full_to_swa(loc)
        assert torch.equal(after, before) is stale
        assert torch.equal(after, torch.zeros_like(after)) is not stale
    reused = buggy.alloc(buggy.swa_available_size())  # freed SWA slots go to new tokens ...
    taken = set(buggy.full_to_swa_index_mapping[reused].tolist())
    assert taken & set(before.tolist())  # ... which the stale translation still points at


def test_swa_loc_int64_breaks_the_dtype_contract():
    pool = make_pool(inject_bug="swa-loc-int64")
    out = pool.translate_loc_from_full_to_swa(pool.alloc(3))
    assert out.dtype == torch.int64 and not isinstance(out, SwaLoc)


def test_set_kv_buffer_prefers_the_precomputed_swa_loc():
    pool = make_pool()
    loc = pool.alloc(3)
    k = torch.randn(3, 2, 8, device=DEV)
    pool.set_kv_buffer(0, loc, k, -k)  # translated (#25824 path)
    swa = pool.full_to_swa_index_mapping[loc]
    assert torch.equal(pool.swa_k_buffer[0][swa], k)
    other = torch.tensor([9, 10, 11], dtype=torch.int32, device=DEV)
    pool.set_kv_buffer(2, loc, k, -k, out_cache_loc_swa=other)  # precomputed (#24138 path)
    assert torch.equal(pool.swa_v_buffer[1][other.long()], -k)
    pool.set_kv_buffer(1, loc, k, -k)  # full layer: full-space slots
    assert torch.equal(pool.full_k_buffer[0][loc], k)


def test_validate_bug_names():
    assert validate_bug(None) is None
    for name in BUG_NAMES:
        assert validate_bug(name) == name
    with pytest.raises(ValueError, match=r"'nope'.*padding-not-zeroed"):
        validate_bug("nope")
    with pytest.raises(ValueError):
        make_pool(inject_bug="padding_not_zeroed")


def _check_invariants(pool, live):
    """Free lists and mapping agree; slot 0 is never handed out; SWA slots are unique."""
    m = pool.full_to_swa_index_mapping
    free_full = pool._free_full.tolist()
    free_swa = pool._free_swa.tolist()
    assert 0 not in free_full and 0 not in free_swa
    assert len(set(free_full)) == len(free_full) and len(set(free_swa)) == len(free_swa)
    allocated = set(range(1, pool.size + 1)) - set(free_full)
    assert allocated == set(live)
    mapped = [int(m[f]) for f in live if int(m[f]) > 0]
    assert len(set(mapped)) == len(mapped)
    assert set(mapped) | set(free_swa) == set(range(1, pool.size_swa + 1))
    assert not set(mapped) & set(free_swa)
    assert int(m[0]) == 0 and int(m[-1]) == -1
    for f in free_full:
        assert int(m[f]) == 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["alloc", "free", "evict", "clear"]), st.integers(1, 6))))
def test_allocator_invariants_under_churn(ops):
    pool = make_pool(size=24, size_swa=12)
    live: list[int] = []  # allocated full slots, oldest first
    in_window: list[int] = []  # the ones that still hold an SWA slot
    for op, n in ops:
        if op == "alloc":
            loc = pool.alloc(n)
            if loc is None:
                assert n > pool.available_size() or n > pool.swa_available_size()
                continue
            live += loc.tolist()
            in_window += loc.tolist()
        elif op == "free" and live:
            gone, live = live[:n], live[n:]
            pool.free(torch.tensor(gone, device=DEV))
            in_window = [f for f in in_window if f not in gone]
        elif op == "evict" and in_window:
            gone, in_window = in_window[:n], in_window[n:]
            pool.free_swa(torch.tensor(gone, device=DEV))
        elif op == "clear":
            pool.clear()
            live, in_window = [], []
        assert pool._cached_loc_key is None
        _check_invariants(pool, live)
        assert all(int(pool.full_to_swa_index_mapping[f]) > 0 for f in in_window)
