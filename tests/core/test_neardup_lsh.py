"""LSH pieces: band keys and buckets, the lookup across two sets, and the signature estimate."""

from __future__ import annotations

import datasketch
import numpy as np

from core.minhash_config import MinHashConfig
from core.neardup.clusters import components
from core.neardup.lsh import (
    band_keys,
    cross_candidates,
    groups_of,
    open_pairs,
    signature_estimate,
    sorted_band_keys,
    verify_pairs,
)
from core.neardup.minhash import minhash_signatures


def test_band_keys_group_exactly_the_equal_bands():
    rng = np.random.default_rng(0)
    sigs = rng.integers(0, 4, size=(300, 6), dtype=np.uint64)  # many equal bands by chance
    keys = band_keys(sigs, 3, 2)
    for b in range(3):
        offsets, members = groups_of(keys[b], np.arange(300))
        expected: dict[bytes, list[int]] = {}
        for d in range(300):
            expected.setdefault(sigs[d, 2 * b : 2 * b + 2].tobytes(), []).append(d)
        groups = sorted(members[offsets[g] : offsets[g + 1]].tolist() for g in range(len(offsets) - 1))
        assert groups == sorted(v for v in expected.values() if len(v) > 1)


def test_cross_candidates_are_the_buckets_pairs_across_the_two_sides():
    rng = np.random.default_rng(1)
    sigs = rng.integers(0, 3, size=(120, 6), dtype=np.uint64)
    keys = band_keys(sigs, 3, 2)
    refs, docs = slice(0, 50), slice(50, 120)  # buckets over all 120 documents, split in two sides
    expected = set()
    for b in range(3):
        offsets, members = groups_of(keys[b], np.arange(120))
        for g in range(len(offsets) - 1):
            group = members[offsets[g] : offsets[g + 1]].tolist()
            expected |= {(d - 50, r) for d in group if d >= 50 for r in group if r < 50}
    found = cross_candidates(keys[:, docs], *sorted_band_keys(keys[:, refs]))
    assert list(map(tuple, found.tolist())) == sorted(expected) and len(expected) > 100
    empty = cross_candidates(keys[:, docs], *sorted_band_keys(keys[:, :0]))
    assert empty.shape == (0, 2)


def test_signature_estimate_is_datasketchs_jaccard():
    cfg = MinHashConfig()
    a, b = minhash_signatures(["x = f(a, b) + g(c)\n" * 4, "x = f(a, b) + h(c)\n" * 4], cfg)
    theirs = datasketch.LeanMinHash(seed=cfg.seed, hashvalues=a, scheme=cfg.scheme).jaccard(
        datasketch.LeanMinHash(seed=cfg.seed, hashvalues=b, scheme=cfg.scheme)
    )
    assert signature_estimate(a, b) == theirs and 0 < theirs < 1
    assert signature_estimate(a, a) == 1.0


def test_open_pairs_are_the_distinct_pairs_the_edges_leave_unconnected():
    edges = np.array([[10, 11], [11, 12]])
    pairs = np.array([[10, 12], [12, 20], [12, 20], [10, 11], [20, 30], [11, 20]])
    # 10-12 and 10-11 are joined through the edges; 12-20 and 11-20 stay open (each listed once)
    assert open_pairs(pairs, edges).tolist() == [[11, 20], [12, 20], [20, 30]]
    far = 1 << 33  # ids past 32 bits take the general path
    assert (open_pairs(pairs + far, edges + far) - far).tolist() == [[11, 20], [12, 20], [20, 30]]
    assert open_pairs(np.empty((0, 2), dtype=np.int64), edges).shape == (0, 2)
    assert open_pairs(pairs[:1], np.empty((0, 2), dtype=np.int64)).tolist() == [[10, 12]]


def test_verify_pairs_skips_only_pairs_the_accepted_ones_already_join():
    near = np.arange(100, dtype=np.uint64)  # sets: 0 and 1 and 2 share 95 of 100 hashes
    sets = [
        near,
        np.concatenate([near[:95], near[95:] + 1000]),
        np.concatenate([near[:95], near[95:] + 2000]),
    ]
    sets.append(np.arange(5000, 5100, dtype=np.uint64))  # 3 shares nothing
    offsets = np.cumsum([0, *map(len, sets)]).astype(np.int64)
    hashes = np.concatenate(sets)
    pairs = np.array([[0, 1], [1, 2], [0, 2], [2, 3]])
    slot = pairs.ravel().copy()
    every, checks = verify_pairs(pairs, slot, offsets, hashes, 0.8, False)
    assert every.tolist() == [[0, 1], [1, 2], [0, 2]] and checks == 4
    # 0-2 is joined through 0-1 and 1-2 by then: one check fewer, the same components
    joined, checks = verify_pairs(pairs, slot, offsets, hashes, 0.8, True)
    assert joined.tolist() == [[0, 1], [1, 2]] and checks == 3
    assert components(4, joined).tolist() == components(4, every).tolist() == [0, 0, 0, 3]


def test_groups_are_the_same_whatever_order_their_entries_come_in():
    keys = np.array([5, 5, 7, 9, 9, 9], dtype=np.uint64)
    docs = np.array([1, 4, 2, 0, 3, 8])
    expected = ([0, 2, 5], [1, 4, 0, 3, 8])
    for order in (
        [0, 1, 2, 3, 4, 5],
        [1, 0, 2, 5, 4, 3],
        [5, 2, 0, 4, 1, 3],
    ):  # sorted, docs reversed, shuffled
        offsets, members = groups_of(keys[order], docs[order])
        assert (offsets.tolist(), members.tolist()) == expected
