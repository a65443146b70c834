"""Independence: which problems share a codebase, and so are not independent samples of the benchmark.

Two problems share a codebase when their `before` code is a near-duplicate as the data pipeline's
dedup decides it, by the same code (`core.neardup`): `MinHashConfig`'s signatures, LSH bands tuned
0.2 below the threshold (so pairs at the threshold are nearly always candidates), and the exact
check: a candidate pair counts when its Jaccard similarity reaches the threshold, by the
signatures' estimate when five standard deviations clear of it and by the shingle sets when
closer. Pairs are joined by the same union-find into clusters; `distinct_contexts` is the number of
clusters (problems that stand alone count one each).

The default threshold is calibrated, not guessed: `calibrate` picks from 0.30..0.95 (step 0.05) the
threshold with the best F1 on a hand-labelled sample of code pairs shipped with this module
(`data/codebase_pairs.jsonl`: the same class or module with another method or a small edit, renamed
variables, versus independent code on the same topic and unrelated boilerplate-heavy files). Among
thresholds tied on F1 it takes the middle one, the farthest from where F1 drops. On the shipped 31
pairs (15 same-codebase) that is 0.40: precision 1.00, recall 0.93, F1 0.97 (0.35: 0.93, 0.45: 0.89;
leaving any one pair out picks 0.35 or 0.40). What it misses: 5-token shingles break wherever a
renamed identifier appears, so heavy renaming (a binary search with lo/hi/mid renamed scores 0.28)
falls below the threshold, and short programs that are mostly shared boilerplate rise above it
(HumanEvalPack's C++ functions, a few lines after the same `#include` block, cluster at 0.40).
The sample is scored by each pair's signature estimate of its Jaccard similarity (σ ≈ 0.03 at 256
permutations), which `pairs` in the output also report; the pairs themselves are decided as above.
Scored by exact Jaccard the sample would pick 0.30 (F1 0.97; 0.40 gives 0.93, one same-codebase pair
at 0.398 falling below): 31 pairs do not tell these apart.

Separately, `identical_instructions` groups problems whose instruction text is the same after
normalisation (`core.neardup.instructions`, the form decontamination compares: lower case,
whitespace collapsed, trailing punctuation stripped).
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.minhash_config import MinHashConfig
from core.neardup.clusters import components, id_sort_key
from core.neardup.instructions import normalize_instruction
from core.neardup.lsh import signature_estimate
from core.neardup.minhash import minhash_signatures
from core.neardup.pairs import near_duplicate_pairs
from core.problems import Problem

SAMPLE = Path(__file__).resolve().parent / "data" / "codebase_pairs.jsonl"
CONFIG = MinHashConfig()  # the pipeline's defaults: num_perm 256, 5-token shingles, seed 42, affine64
GRID = tuple(round(0.30 + 0.05 * i, 2) for i in range(14))  # 0.30 .. 0.95


def similar_pairs(
    texts: Sequence[str], threshold: float, config: MinHashConfig = CONFIG
) -> list[tuple[int, int, float]]:
    """(i, j, estimated Jaccard) for i < j: the pairs the pipeline's dedup joins at `threshold`."""
    cfg = replace(config, threshold=threshold, exact_check=True, candidate_threshold=None)
    sigs = minhash_signatures(texts, cfg)
    pairs = near_duplicate_pairs(sigs, texts, cfg).tolist()
    return [(i, j, float(signature_estimate(sigs[i], sigs[j]))) for i, j in pairs]


def identical_instructions(problems: Sequence[Problem]) -> list[dict[str, Any]]:
    """Groups of two or more problems that share a normalised instruction (in any split)."""
    groups: dict[str, set[str]] = defaultdict(set)
    for p in problems:
        for text in p.instructions.values():
            if key := normalize_instruction(text):
                groups[key].add(p.id)
    by_ids: dict[tuple[str, ...], list[str]] = defaultdict(list)  # one group per set of problems
    for key, ids in groups.items():
        if len(ids) > 1:
            by_ids[tuple(sorted(ids, key=id_sort_key))].append(key)
    found = [
        {"instruction": keys[0], "ids": list(ids), "instructions": len(keys)} for ids, keys in by_ids.items()
    ]
    return sorted(found, key=lambda g: (id_sort_key(g["ids"][0]), g["instruction"]))


def shared_codebases(
    problems: Sequence[Problem], threshold: float | None = None, config: MinHashConfig = CONFIG
) -> dict[str, Any]:
    """Clusters of problems whose `before` code is near-duplicate, and identical instructions.

    `threshold`: estimated Jaccard at which two problems share a codebase; None uses the threshold
    calibrated on the shipped sample (`default_threshold()`).
    """
    if threshold is None:
        threshold = default_threshold()
    ids = [p.id for p in problems]
    pairs = similar_pairs([p.before for p in problems], threshold, config)
    members: dict[int, list[str]] = defaultdict(list)
    for pid, root in zip(ids, components(len(ids), [(i, j) for i, j, _ in pairs]).tolist(), strict=True):
        members[root].append(pid)
    clusters = sorted((sorted(m, key=id_sort_key) for m in members.values()), key=lambda m: id_sort_key(m[0]))
    shared = [c for c in clusters if len(c) > 1]
    sharing = sum(len(c) for c in shared)
    return {
        "threshold": threshold,
        "num_perm": config.num_perm,
        "ngram": config.ngram,
        "problems": len(problems),
        "distinct_contexts": len(clusters),
        "clusters": shared,
        "problems_sharing": sharing,
        "share_fraction": sharing / len(problems) if problems else 0.0,
        "pairs": [{"a": ids[i], "b": ids[j], "jaccard": round(jac, 4)} for i, j, jac in pairs],
        "identical_instructions": identical_instructions(problems),
    }


def load_pairs(path: Path = SAMPLE) -> list[dict[str, Any]]:
    """The hand-labelled calibration sample: {"a", "b", "same_codebase", "why"} per line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _scores(truth: list[bool], predicted: list[bool]) -> dict[str, float]:
    tp = sum(t and p for t, p in zip(truth, predicted, strict=True))
    fp = sum(p and not t for t, p in zip(truth, predicted, strict=True))
    fn = sum(t and not p for t, p in zip(truth, predicted, strict=True))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def pair_scores(pairs: Sequence[dict[str, Any]], config: MinHashConfig = CONFIG) -> list[float]:
    """The signatures' estimate of each labelled pair's Jaccard similarity."""
    a = minhash_signatures([p["a"] for p in pairs], config)
    b = minhash_signatures([p["b"] for p in pairs], config)
    return [float(signature_estimate(x, y)) for x, y in zip(a, b, strict=True)]


def pick_threshold(
    truth: Sequence[bool], scores: Sequence[float], grid: Sequence[float] = GRID
) -> dict[str, Any]:
    """The grid threshold with the best F1 (ties: the middle one), its scores, and the whole curve."""
    curve = [{"threshold": t, **_scores(list(truth), [s >= t for s in scores])} for t in grid]
    best_f1 = max(row["f1"] for row in curve)
    best = [row for row in curve if row["f1"] == best_f1]
    return {**best[(len(best) - 1) // 2], "tied": [row["threshold"] for row in best], "curve": curve}


def calibrate(
    pairs: Sequence[dict[str, Any]], config: MinHashConfig = CONFIG, grid: Sequence[float] = GRID
) -> dict[str, Any]:
    """The threshold with the best F1 on labelled `pairs`, with its precision, recall and F1."""
    truth = [bool(p["same_codebase"]) for p in pairs]
    scores = pair_scores(pairs, config)
    return {
        **pick_threshold(truth, scores, grid),
        "pairs": len(pairs),
        "positives": sum(truth),
        "jaccard": scores,
    }


@functools.cache
def default_threshold() -> float:
    """The threshold calibrated on the shipped sample (computed once per process)."""
    return calibrate(load_pairs())["threshold"]
