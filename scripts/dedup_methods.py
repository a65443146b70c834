"""The methods scripts/bench_dedup.py times: ours and its baselines, each from texts to a keep mask."""

from __future__ import annotations

from dataclasses import replace

import datasketch
import numpy as np
import xxhash
from rensa import RMinHash, RMinHashLSH

from core.minhash_config import MinHashConfig
from core.neardup.clusters import components
from core.neardup.dedup import find_duplicates
from core.neardup.minhash import minhash_signatures
from core.shingles import shingles

PIPELINE_CFG = MinHashConfig(exact_check=True)  # data_pipeline.config.DedupOptions' default
LSH_CFG = replace(PIPELINE_CFG, exact_check=False)
LIBRARY = {"ours": PIPELINE_CFG, "ours_lsh": LSH_CFG}


def keep_lowest(n: int, pairs: np.ndarray) -> np.ndarray:
    """Keep mask of union-find over ``pairs``: the lowest index of each cluster survives."""
    return components(n, pairs) == np.arange(n)


def query_pairs(results) -> np.ndarray:
    """Distinct (i, j), i < j, from per-document LSH query results (which include the query)."""
    pairs = [(min(i, j), max(i, j)) for i, keys in enumerate(results) for j in keys if j != i]
    return np.unique(np.asarray(pairs, dtype=np.int64).reshape(-1, 2), axis=0)


def shingle_strings(text: str, ngram: int) -> list[str]:
    return [" ".join(s) for s in shingles(text, ngram)]


def shingle_bytes(text: str, ngram: int) -> list[bytes]:
    """UTF-8 shingle strings, for datasketch's hashfunc (xxhash takes bytes only)."""
    return [" ".join(s).encode() for s in shingles(text, ngram)]


def ours(texts: list[str], cfg: MinHashConfig, batch: int) -> tuple[np.ndarray, None]:
    """The library path; its pairs are listed after the clock stops (`library_worker`)."""
    sigs = np.concatenate(
        [minhash_signatures(texts[i : i + batch], cfg) for i in range(0, len(texts), batch)]
    )
    ids = [f"doc-{i}" for i in range(len(texts))]
    result = find_duplicates(ids, sigs, cfg, texts if cfg.exact_check else None)
    return np.asarray(result.keep), None


def datasketch_lsh(minhashes: list, cfg: MinHashConfig) -> tuple[np.ndarray, np.ndarray]:
    lsh = datasketch.MinHashLSH(threshold=cfg.threshold, num_perm=cfg.num_perm, params=cfg.bands_rows())
    with lsh.insertion_session() as session:
        for i, m in enumerate(minhashes):
            session.insert(i, m, check_duplication=False)
    pairs = query_pairs(lsh.query(m) for m in minhashes)
    return keep_lowest(len(minhashes), pairs), pairs


def datasketch_bulk(texts: list[str], cfg: MinHashConfig) -> tuple[np.ndarray, np.ndarray]:
    minhashes = datasketch.MinHash.bulk(
        [shingle_bytes(t, cfg.ngram) for t in texts],
        num_perm=cfg.num_perm,
        seed=cfg.seed,
        scheme=cfg.scheme,
        hashfunc=xxhash.xxh64_intdigest,
    )
    return datasketch_lsh(minhashes, cfg)


def datasketch_token(texts: list[str], cfg: MinHashConfig) -> tuple[np.ndarray, np.ndarray]:
    minhashes = []
    for text in texts:
        m = datasketch.MinHash(
            cfg.num_perm, seed=cfg.seed, scheme=cfg.scheme, hashfunc=xxhash.xxh64_intdigest
        )
        for s in shingle_bytes(text, cfg.ngram):
            m.update(s)
        minhashes.append(m)
    return datasketch_lsh(minhashes, cfg)


def rensa_dedup(texts: list[str], cfg: MinHashConfig) -> tuple[np.ndarray, np.ndarray]:
    bands, rows = cfg.bands_rows()
    minhashes = RMinHash.from_token_sets(
        [shingle_strings(t, cfg.ngram) for t in texts], bands * rows, cfg.seed
    )
    lsh = RMinHashLSH(cfg.threshold, bands * rows, bands)
    lsh.insert_many(minhashes)
    pairs = query_pairs(lsh.query_all(minhashes))
    return keep_lowest(len(texts), pairs), pairs


def run_method(method: str, texts: list[str], batch: int) -> tuple[np.ndarray, np.ndarray | None]:
    if method in LIBRARY:
        return ours(texts, LIBRARY[method], batch)
    return {"datasketch_bulk": datasketch_bulk, "datasketch_token": datasketch_token, "rensa": rensa_dedup}[
        method
    ](texts, LSH_CFG)
