"""LSH pieces: band keys and buckets, the lookup across two sets, and the signature estimate."""

from __future__ import annotations

import datasketch
import numpy as np

from core.minhash_config import MinHashConfig
from core.neardup.lsh import band_keys, cross_candidates, groups_of, signature_estimate, sorted_band_keys
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
