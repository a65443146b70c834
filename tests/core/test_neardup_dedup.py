"""find_duplicates: LSH candidates as datasketch finds them, quality against exact Jaccard, lowest id kept."""

from __future__ import annotations

import datasketch
import numpy as np
import pytest
from neardup_corpus import corpus, exact_jaccards

from core.minhash_config import MinHashConfig
from core.neardup.clusters import id_sort_key
from core.neardup.dedup import find_duplicates
from core.neardup.minhash import minhash_signatures
from core.neardup.pairs import candidate_pairs

CFG = MinHashConfig()


def expected_keep(ids: list[str], pairs) -> tuple[list[bool], dict[str, str]]:
    """Keep flags and removed -> kept ids from a plain reference union-find over ``pairs``."""
    parent = list(range(len(ids)))

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for i, j in pairs:
        parent[find(i)] = find(j)
    rep: dict[int, str] = {}
    for i in range(len(ids)):
        rep[find(i)] = min(rep.get(find(i), ids[i]), ids[i], key=id_sort_key)
    keep = [rep[find(i)] == ids[i] for i in range(len(ids))]
    return keep, {ids[i]: rep[find(i)] for i in range(len(ids)) if not keep[i]}


def test_candidates_equal_datasketch_lsh():
    ids, texts = corpus()
    sigs = minhash_signatures(texts, CFG)
    lsh = datasketch.MinHashLSH(threshold=CFG.threshold, num_perm=CFG.num_perm)
    for i, sig in enumerate(sigs):
        lsh.insert(i, datasketch.LeanMinHash(seed=CFG.seed, hashvalues=sig, scheme=CFG.scheme))
    expected = {
        (min(i, j), max(i, j))
        for i, sig in enumerate(sigs)
        for j in lsh.query(datasketch.LeanMinHash(seed=CFG.seed, hashvalues=sig, scheme=CFG.scheme))
        if i != j
    }
    assert set(map(tuple, candidate_pairs(sigs, CFG).tolist())) == expected
    result = find_duplicates(ids, sigs, CFG)
    assert result.n_bucket_pairs >= len(expected) > 0 and result.n_checks == 0


def test_precision_and_recall_against_exact_jaccard():
    ids, texts = corpus()
    found = set(map(tuple, candidate_pairs(minhash_signatures(texts, CFG), CFG).tolist()))
    truth = {pair for pair, jaccard in exact_jaccards(CFG.ngram).items() if jaccard >= CFG.threshold}
    assert len(truth) > 100
    assert len(found & truth) / len(found) >= 0.95
    assert len(found & truth) / len(truth) >= 0.95


def test_keeps_lowest_natural_id_of_each_cluster_whatever_the_order():
    ids, texts = corpus()
    sigs = minhash_signatures(texts, CFG)
    result = find_duplicates(ids, sigs, CFG)
    keep, cluster_of = expected_keep(ids, candidate_pairs(sigs, CFG).tolist())
    assert (result.keep, result.cluster_of) == (keep, cluster_of)
    assert result.n_clusters == len(set(cluster_of.values())) > 0

    perm = np.random.default_rng(0).permutation(len(ids))
    again = find_duplicates([ids[i] for i in perm], sigs[perm], CFG)
    assert again.cluster_of == result.cluster_of
    assert find_duplicates(ids, sigs, CFG) == result


def test_the_kept_id_is_the_lowest_in_natural_order():
    text = "x = compute(alpha, beta, 3) + other(4)\n" * 3
    result = find_duplicates(["ex-10", "ex-9"], minhash_signatures([text, text], CFG), CFG)
    assert result.keep == [False, True] and result.cluster_of == {"ex-10": "ex-9"}


def test_short_documents_do_not_collapse():
    texts = ["x = 1", "y = 2", "return", "", "   ", "x = 1", "x = 1 + a * b - c", "pass"]
    sigs = minhash_signatures(texts, CFG)
    assert len({s.tobytes() for s in sigs}) == 6  # only "x = 1" twice and the two empty texts collide
    result = find_duplicates([f"s{i}" for i in range(len(texts))], sigs, CFG)
    assert result.cluster_of == {"s5": "s0", "s4": "s3"}
    assert result.n_clusters == 2 and result.n_bucket_pairs == 2 * CFG.bands_rows()[0]


def test_exact_check_rejects_false_candidates():
    cfg = MinHashConfig(num_perm=16)  # 3 bands of 5 rows: pairs at J ~0.5 often collide
    ids, texts = corpus()
    sigs = minhash_signatures(texts, cfg)
    pairs = candidate_pairs(sigs, cfg).tolist()
    good = [(i, j) for i, j in pairs if exact_jaccards(cfg.ngram)[i, j] >= cfg.threshold]
    assert len(good) < len(pairs)

    # Same bands as `cfg`: the check alone decides; by default exact_check widens the bands.
    checked_cfg = MinHashConfig(num_perm=16, exact_check=True, candidate_threshold=cfg.threshold)
    checked = find_duplicates(ids, sigs, checked_cfg, texts)
    # Pairs already connected inside a bucket are not checked again: at most one check per pair.
    assert 0 < checked.n_rejected <= checked.n_checks <= checked.n_bucket_pairs
    assert checked.n_rejected >= len(pairs) - len(good) - (checked.n_bucket_pairs - checked.n_checks)
    assert (checked.keep, checked.cluster_of) == expected_keep(ids, good)
    unchecked = find_duplicates(ids, sigs, cfg)
    assert unchecked.n_checks == 0 and sum(unchecked.keep) < sum(checked.keep)
    assert MinHashConfig(exact_check=True).bands_rows() == MinHashConfig(threshold=0.5).bands_rows()
    with pytest.raises(ValueError, match="needs texts"):
        find_duplicates(ids, sigs, MinHashConfig(num_perm=16, exact_check=True))


def test_edge_cases():
    empty = find_duplicates([], np.empty((0, CFG.num_perm), dtype=np.uint64), CFG)
    assert empty.keep == [] and empty.n_clusters == 0 and empty.n_bucket_pairs == 0
    with pytest.raises(ValueError, match="unique"):
        find_duplicates(["a", "a"], minhash_signatures(["x", "y"], CFG), CFG)
