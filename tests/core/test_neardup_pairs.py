"""Near-duplicate pairs: the decisions find_duplicates makes, listed pair by pair, within one set and across two."""

from __future__ import annotations

import numpy as np
import pytest
from neardup_corpus import corpus, exact_jaccards

from core.minhash_config import MinHashConfig
from core.neardup.clusters import components, representatives
from core.neardup.dedup import find_duplicates
from core.neardup.minhash import minhash_signatures
from core.neardup.pairs import ReferenceIndex, candidate_pairs, near_duplicate_pairs

CONFIGS = [
    MinHashConfig(exact_check=True),  # estimates decide nearly every pair
    MinHashConfig(exact_check=False),  # a shared band is enough
    # 16 permutations on the same bands: estimates too rough, exact checks decide
    MinHashConfig(num_perm=16, exact_check=True, candidate_threshold=0.7),
]
IDS = ["estimates", "lsh-only", "exact-checks"]


def _pairs(texts: list[str], cfg: MinHashConfig) -> set[tuple[int, int]]:
    return set(map(tuple, near_duplicate_pairs(minhash_signatures(texts, cfg), texts, cfg).tolist()))


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_pairs_are_candidates_reaching_the_threshold(cfg):
    texts = corpus()[1]
    candidates = set(map(tuple, candidate_pairs(minhash_signatures(texts, cfg), cfg).tolist()))
    if cfg.exact_check:
        jaccard = exact_jaccards(cfg.ngram)
        candidates = {p for p in candidates if jaccard[p] >= cfg.threshold}
    assert _pairs(texts, cfg) == candidates and len(candidates) > 50


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_their_clusters_are_find_duplicates_clusters(cfg):
    ids, texts = corpus()
    pairs = near_duplicate_pairs(minhash_signatures(texts, cfg), texts, cfg)
    rep = representatives(components(len(ids), pairs), ids)
    result = find_duplicates(ids, minhash_signatures(texts, cfg), cfg, texts)
    assert {ids[i]: ids[r] for i, r in enumerate(rep) if r != i} == result.cluster_of


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_pairs_across_two_sets_are_those_within_both_together(cfg):
    texts = corpus()[1]
    refs, batch = texts[:150], texts[150:] + ["", "x = 1", texts[3]]  # a verbatim copy too
    within = _pairs(batch + refs, cfg)
    across = {(i, j - len(batch)) for i, j in within if i < len(batch) <= j}
    found = ReferenceIndex(refs, cfg).pairs(batch)
    assert set(map(tuple, found.tolist())) == across and len(across) > 20
    assert found.tolist() == sorted(found.tolist())
    assert (len(batch) - 1, 3) in across


def test_no_references_or_no_texts_give_no_pairs():
    cfg = MinHashConfig(exact_check=True)
    assert ReferenceIndex([], cfg).pairs(["x = 1"]).shape == (0, 2)
    assert ReferenceIndex(["x = 1"], cfg).pairs([]).shape == (0, 2)
    empty = near_duplicate_pairs(np.empty((0, cfg.num_perm), dtype=np.uint64), [], cfg)
    assert empty.shape == (0, 2)
