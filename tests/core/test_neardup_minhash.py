"""MinHash signatures and shingle sets: the numba kernels against the pure-Python reference and datasketch."""

from __future__ import annotations

import datasketch
import numpy as np
import pytest
from neardup_corpus import corpus

from core.minhash_config import MinHashConfig
from core.neardup.minhash import _distinct_mixed, minhash_signatures, shingle_sets
from core.shingles import shingle_hash, shingles, tokenize


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


def test_a_batch_of_real_code_gives_each_text_datasketch_signature():
    """One kernel call over many documents: nothing of one document's repeats reaches the next."""
    cfg = MinHashConfig()
    texts = corpus()[1][:40] + TEXTS
    ours = minhash_signatures(texts, cfg)
    for text, signature in zip(texts, ours, strict=True):
        m = datasketch.MinHash(num_perm=cfg.num_perm, seed=cfg.seed, hashfunc=shingle_hash, scheme=cfg.scheme)
        m.update_batch(shingles(text, cfg.ngram))
        np.testing.assert_array_equal(signature, m.hashvalues)


def _fmix64(h: int) -> int:
    mask = (1 << 64) - 1
    h = ((h ^ (h >> 33)) * 0xFF51AFD7ED558CCD) & mask
    h = ((h ^ (h >> 33)) * 0xC4CEB9FE1A85EC53) & mask
    return h ^ (h >> 33)


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 300])
def test_repeated_shingles_reach_the_permutations_once(n):
    """Repeats (and 0, the table's empty marker, whose mix is 0) leave one mixed copy each."""
    rng = np.random.default_rng(n)
    values = rng.integers(0, 2**64, max(1, n // 3), dtype=np.uint64, endpoint=False)
    hashes = np.concatenate([rng.choice(values, n), np.zeros(2 if n else 0, dtype=np.uint64)])
    table = np.empty(1024, dtype=np.uint64)
    expected = {_fmix64(int(h)) for h in hashes}
    m = _distinct_mixed(hashes, len(hashes), table)  # in place
    assert m == len(expected) and set(hashes[:m].tolist()) == expected


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


def test_no_texts_no_signatures():
    assert minhash_signatures([], MinHashConfig()).shape == (0, MinHashConfig().num_perm)
