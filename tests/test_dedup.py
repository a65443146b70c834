"""MinHash near-dedup: datasketch equivalence, LSH quality against exact Jaccard, determinism."""

from __future__ import annotations

import functools
import random
from itertools import combinations

import datasketch
import numpy as np
import pytest
from datasets import Dataset

from data_pipeline.dedup import (
    candidate_pairs,
    find_duplicates,
    id_sort_key,
)
from data_pipeline.dedup_text import dedup_texts
from data_pipeline.minhash import (
    MinHashConfig,
    minhash_signatures,
    shingle_hash,
    shingle_sets,
    shingles,
    tokenize,
)

CFG = MinHashConfig()
WORDS = [
    f"{a}{b}"
    for a in ("get", "set", "load", "parse", "emit", "fold", "scan")
    for b in ("_x", "Row", "_id", "Buf", "_tmp", "Key")
]
FORMS = ["{} = {}({}, {})", "if {} > {}:", "return {}[{}] + {}", "for {} in {}.{}():", "{}.{} = {} * {}"]


def _line(rng: random.Random) -> str:
    form = rng.choice(FORMS)
    args = [
        rng.choice(WORDS) if rng.random() < 0.7 else str(rng.randrange(1000)) for _ in range(form.count("{}"))
    ]
    return "    " * rng.randrange(3) + form.format(*args)


def _edited(lines: list[str], edits: int, rng: random.Random) -> list[str]:
    out = list(lines)
    for _ in range(edits):
        out[rng.randrange(len(out))] = _line(rng)
    return out


@functools.cache
def corpus() -> tuple[list[str], list[str]]:
    """Ids and texts: 120 base files, exact copies, 1-edit copies (J > 0.9) and 15-edit copies (J < 0.55).

    Similarities stay away from the 0.7 threshold, where LSH is a coin flip by design.
    """
    rng = random.Random(7)
    bases = [[_line(rng) for _ in range(40)] for _ in range(120)]
    files = [*bases]
    for i, base in enumerate(bases):
        if i % 4 == 0:
            files.append(list(base))
        if i % 2 == 0:
            files.append(_edited(base, 1, rng))
        files.append(_edited(base, 15, rng))
    order = list(range(len(files)))
    rng.shuffle(order)
    return [f"ex-{k}" for k in order], ["\n".join(files[k]) for k in order]


@functools.cache
def exact_jaccards(ngram: int) -> dict[tuple[int, int], float]:
    """Exact shingle Jaccard of every pair of the corpus, from the reference tokenizer."""
    sets = [set(shingles(t, ngram)) for t in corpus()[1]]
    return {
        (i, j): len(sets[i] & sets[j]) / len(sets[i] | sets[j]) for i, j in combinations(range(len(sets)), 2)
    }


def expected_keep(ids: list[str], pairs) -> tuple[list[bool], dict[str, str]]:
    """Keep flags and removed -> kept ids from a reference union-find over ``pairs``."""
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


def test_tokens_keep_punctuation_numbers_and_unicode():
    assert tokenize("a[i]=0.5  # héllo\tx_1") == ["a", "[", "i", "]", "=", "0", ".", "5", "#", "héllo", "x_1"]
    assert shingles("a b", 5) == [("a", "b")]
    assert shingles("", 5) == [()]
    assert tokenize("Ab(c)", lowercase=True) == ["ab", "(", "c", ")"]


def test_word_tokens_are_the_pieces_between_non_word_characters():
    assert tokenize("a[i]=0.5  # Héllo\tx_1", tokens="words") == [
        "a", "i", "", "0", "5", "", "", "", "Héllo", "x_1"
    ]  # fmt: skip
    assert tokenize("x\u00a0Y—z", tokens="words", lowercase=True) == ["x", "y", "z"]
    assert tokenize("", tokens="words") == [""] and tokenize("(", tokens="words") == ["", ""]
    assert shingles("a b", 5, tokens="words") == [("a", "b")]
    assert shingles("", 5, tokens="words") == [("",)]
    with pytest.raises(ValueError, match="tokens='chars'"):
        tokenize("a", tokens="chars")
    with pytest.raises(ValueError, match="tokens='chars'"):
        MinHashConfig(tokens="chars")


TEXTS = [
    "def f(x):\n    return x + 1  # ünïcode — ok",
    "",
    "  \n",
    "a b",
    "x = [1, 2, 3]\n" * 30,
    "((((((((",
    "y" * 100 + " " + "q" * 45,  # xxh64 stripes and every tail length
    "a\u00a0b\x1cc\x00 \ud800x = 1",  # non-ASCII space is a word char, control chars are tokens
    "Straße = ΑΣ.Β + İx  # 日本語、テスト。\u2028KELVIN \u212a",  # case mappings, CJK punctuation
    "  A,,B;; C",  # runs of separators: empty word tokens
    "\u00e9\u0301—\U0001f600 ",  # combining mark, dash, emoji (non-word in "words")
]
TOKENIZATIONS = [("code", False), ("code", True), ("words", False), ("words", True)]


@pytest.mark.parametrize("tokens, lowercase", TOKENIZATIONS)
@pytest.mark.parametrize("text", TEXTS)
def test_signatures_equal_datasketch_minhash(text, tokens, lowercase):
    cfg = MinHashConfig(tokens=tokens, lowercase=lowercase)
    m = datasketch.MinHash(num_perm=cfg.num_perm, seed=cfg.seed, hashfunc=shingle_hash, scheme=cfg.scheme)
    m.update_batch(shingles(text, cfg.ngram, tokens=tokens, lowercase=lowercase))
    ours = minhash_signatures([text], cfg)
    assert ours.dtype == np.uint64 and ours.shape == (1, cfg.num_perm)
    np.testing.assert_array_equal(ours[0], m.hashvalues)


@pytest.mark.parametrize("tokens, lowercase", TOKENIZATIONS)
def test_shingle_sets_equal_reference_hashes(tokens, lowercase):
    texts = TEXTS + corpus()[1][:20]
    ours = shingle_sets(texts, 3, tokens=tokens, lowercase=lowercase)
    for text, hashes in zip(texts, ours, strict=True):
        reference = {shingle_hash(s) for s in shingles(text, 3, tokens=tokens, lowercase=lowercase)}
        assert hashes.tolist() == sorted(reference)


def test_tokenizations_give_different_signatures():
    text = "Result = Compute(alpha, beta)  # Totals\n" * 3
    sigs = [minhash_signatures([text], MinHashConfig(tokens=t, lowercase=lo))[0] for t, lo in TOKENIZATIONS]
    assert len({s.tobytes() for s in sigs}) == len(TOKENIZATIONS)
    assert (
        minhash_signatures(["A b"], MinHashConfig(lowercase=True))
        == minhash_signatures(["a B"], MinHashConfig(lowercase=True))
    ).all()


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


def test_natural_id_order():
    assert sorted(["r10", "r9", "r1", "r01", "q", "r"], key=id_sort_key) == [
        "q",
        "r",
        "r01",
        "r1",
        "r9",
        "r10",
    ]
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


def signature_column(batch: dict[str, list], cfg: MinHashConfig) -> dict[str, np.ndarray]:
    """The signatures of a columnar batch of edit rows, as a batch function computes them."""
    return {"minhash": minhash_signatures(dedup_texts(batch, "edit"), cfg)}


def test_same_signatures_in_one_batch_or_many():
    ids, texts = corpus()
    rows = [
        {"id": i, "before": t[: len(t) // 2], "after": t[len(t) // 2 :]}
        for i, t in zip(ids, texts, strict=True)
    ]
    batch = {k: [r[k] for r in rows] for k in rows[0]}
    whole = signature_column(batch, CFG)["minhash"]
    parts = [
        signature_column({k: v[s : s + 37] for k, v in batch.items()}, CFG)["minhash"]
        for s in range(0, len(rows), 37)
    ]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    np.testing.assert_array_equal(
        whole,
        minhash_signatures(dedup_texts({k: [r[k] for r in rows] for k in ("before", "after")}, "edit"), CFG),
    )

    rows.append({"id": "short", "before": "x", "after": "y"})  # one shingle: values above 2**63 are likely
    mapped = Dataset.from_list(rows).map(
        signature_column, batched=True, batch_size=50, num_proc=2, fn_kwargs={"cfg": CFG}
    )
    expected = minhash_signatures(
        dedup_texts({k: [r[k] for r in rows] for k in ("before", "after")}, "edit"), CFG
    )
    assert (expected[-1] >= 2**63).any()
    np.testing.assert_array_equal(
        np.asarray(mapped.with_format("numpy")[:]["minhash"], dtype=np.uint64), expected
    )


# What datasketch 2.0.0 (the pinned version) picks: MinHashLSH(threshold, num_perm) -> (b, r).
DATASKETCH_BANDS_ROWS = {(0.5, 128): (25, 5), (0.7, 128): (14, 9), (0.85, 128): (8, 16), (0.5, 256): (42, 6)}


def _built_manifest(tmp_path, overrides: list[str]) -> dict:
    """manifest.json of a real build of a few commits with these dedup settings."""
    from conftest import build_commits

    bodies = [f"def f{i}(x):\n    y = x * {i}\n    return y + {i}\n" for i in range(6)]
    return build_commits(tmp_path, bodies, ["pipeline=editpackft", *overrides])


@pytest.mark.parametrize(
    "threshold, num_perm, exact_check",
    [(0.5, 128, False), (0.7, 128, False), (0.85, 128, False), (0.7, 256, True)],
)
def test_config_matches_datasketch_lsh_params_and_manifest(tmp_path, threshold, num_perm, exact_check):
    # the documented LSH threshold: the dedup threshold, or 0.2 below it with the exact check
    lsh_threshold = round(threshold - 0.2, 4) if exact_check else threshold
    lsh = datasketch.MinHashLSH(threshold=lsh_threshold, num_perm=num_perm)  # datasketch's own choice
    expected = {"bands": lsh.b, "rows": lsh.r, "lsh_threshold": lsh_threshold}
    assert (lsh.b, lsh.r) == DATASKETCH_BANDS_ROWS[(lsh_threshold, num_perm)]
    cfg = MinHashConfig(threshold=threshold, num_perm=num_perm, exact_check=exact_check)
    assert cfg.bands_rows() == (lsh.b, lsh.r) and lsh.b * lsh.r <= num_perm
    manifest = _built_manifest(
        tmp_path,
        [
            f"pipeline.dedup.minhash.threshold={threshold}",
            f"pipeline.dedup.minhash.num_perm={num_perm}",
            f"pipeline.dedup.minhash.exact_check={exact_check}",
        ],
    )["minhash"]
    assert {k: manifest[k] for k in expected} == expected
    assert (manifest["threshold"], manifest["num_perm"], manifest["ngram"]) == (threshold, num_perm, 5)
    assert (
        manifest["scheme"] == "affine64"
        and manifest["datasketch_version"] == datasketch.__version__ == "2.0.0"
    )
    with pytest.raises(ValueError, match="affine64"):
        MinHashConfig(scheme="affine32")


def test_edge_cases():
    empty = find_duplicates([], np.empty((0, CFG.num_perm), dtype=np.uint64), CFG)
    assert empty.keep == [] and empty.n_clusters == 0 and empty.n_bucket_pairs == 0
    assert minhash_signatures([], CFG).shape == (0, CFG.num_perm)
    with pytest.raises(ValueError, match="unique"):
        find_duplicates(["a", "a"], minhash_signatures(["x", "y"], CFG), CFG)
    assert dedup_texts({"before": ["a"], "after": ["b"]}, "edit") == ["a\nb"]
