"""Decontamination and the audit's independence check find exactly what the dedup engine finds on the same texts."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from neardup_corpus import corpus

from core.benchmarks import Benchmark
from core.minhash_config import MinHashConfig
from core.neardup.clusters import id_sort_key
from core.neardup.dedup import find_duplicates
from core.neardup.minhash import minhash_signatures
from core.neardup.pairs import near_duplicate_pairs
from core.problems import Problem
from data_pipeline.config import DecontamOptions, DedupOptions
from data_pipeline.decontam import BenchmarkIndex, decontam_batch
from eval.audit.independence import shared_codebases, similar_pairs


def _problem(k: int, before: str, after: str) -> Problem:
    return Problem(
        id=str(k), name=f"p{k}", before=before, after=after, tests="", instructions={"d": f"Do {k}."}
    )


def test_decontamination_matches_the_engines_pairs():
    texts = corpus()[1]
    programs, rows = texts[:60], [*texts[60:], texts[7]]
    problems = [_problem(k, programs[2 * k], programs[2 * k + 1]) for k in range(30)]
    index = BenchmarkIndex(
        [Benchmark("a", problems[:12]), Benchmark("b", problems[12:])],
        DecontamOptions(threshold=0.5),
        DedupOptions(),
    )
    cfg = index.cfg
    assert cfg == replace(MinHashConfig(exact_check=True), threshold=0.5)  # the pipeline's settings at 0.5
    both = rows + programs
    first: dict[int, int] = {}
    for i, j in near_duplicate_pairs(minhash_signatures(both, cfg), both, cfg).tolist():
        if i < len(rows) <= j:
            first.setdefault(i, j - len(rows))
    expected = [("a" if first[i] < 24 else "b") if i in first else None for i in range(len(rows))]
    assert index.code_matches(rows) == expected
    assert expected[-1] == "a" and 10 < sum(e is not None for e in expected) < len(rows) / 2

    batch = {"before": ["nothing alike"] * 3, "after": [rows[-1], "x = 1", "y = 2"]}
    marked = decontam_batch({**batch, "instruction": ["Go.", "do 3!", "Do 300."]}, index, ["before", "after"])
    assert marked["drop_reason"] == ["contaminated_code", "contaminated_instruction", ""]
    assert marked["benchmark"] == ["a", "a", ""]


def test_independence_finds_the_engines_pairs_and_clusters():
    ids, texts = corpus()
    threshold = 0.5
    cfg = MinHashConfig(threshold=threshold, exact_check=True)
    sigs = minhash_signatures(texts, cfg)
    pairs = similar_pairs(texts, threshold)
    assert [(i, j) for i, j, _ in pairs] == list(map(tuple, near_duplicate_pairs(sigs, texts, cfg).tolist()))

    problems = [_problem(k, text, text) for k, text in enumerate(texts)]
    out = shared_codebases(problems, threshold)
    result = find_duplicates([p.id for p in problems], sigs, cfg, texts)
    clusters: dict[str, list[str]] = defaultdict(list)
    for removed, kept in result.cluster_of.items():
        clusters[kept].append(removed)
    expected = sorted(
        (sorted([k, *m], key=id_sort_key) for k, m in clusters.items()), key=lambda c: id_sort_key(c[0])
    )
    assert out["clusters"] == expected and len(expected) > 20
    assert out["distinct_contexts"] == sum(result.keep)
