"""The sharded MinHash job: same clusters as the in-memory path, resumable, Ray = local."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pytest
from datasets import Dataset
from neardup_corpus import corpus

from core.minhash_config import MinHashConfig
from core.neardup.dedup import find_duplicates
from core.neardup.minhash import (
    Utf8Texts,
    minhash_signatures,
    shingle_set_csr,
    utf8_shingle_set_csr,
    utf8_signatures,
)
from data_pipeline.dedup_text import dedup_texts, utf8_dedup_texts
from data_pipeline.executors import LocalExecutor
from data_pipeline.filters import filter_batch
from data_pipeline.minhash_job import run_minhash_dedup


def _rows() -> Dataset:
    ids, texts = corpus()
    half = [len(t) // 2 for t in texts]
    return Dataset.from_dict(
        {
            "id": ids,
            "before": [t[:h] for t, h in zip(texts, half, strict=True)],
            "after": [t[h + 1 :] for t, h in zip(texts, half, strict=True)],
            "instruction": ["Edit"] * len(ids),
        }
    )


def _expected(cfg: MinHashConfig, text: str = "edit") -> list[str]:
    """What the in-memory path keeps of the same rows."""
    rows = _rows()
    texts = dedup_texts(rows.to_dict(), text)
    result = find_duplicates(rows["id"], minhash_signatures(texts, cfg), cfg, texts)
    return [i for i, k in zip(rows["id"], result.keep, strict=True) if k]


# Many small shards and key partitions, so every cross-shard path runs.
RULES = [("imperative_subject", {}), ("changed", {})]
SMALL = {"batch_size": 16, "shard_rows": 37, "partition_rows": 200}


@pytest.mark.parametrize(
    "cfg",
    [
        MinHashConfig(exact_check=True),  # the pipeline's default: estimates decide these pairs
        MinHashConfig(exact_check=False),
        # 16 permutations: estimates too rough to decide, so pairs go to the exact check.
        MinHashConfig(num_perm=16, exact_check=True, candidate_threshold=0.7),
    ],
    ids=["estimates", "lsh-only", "exact-checks"],
)
def test_sharded_job_keeps_what_the_in_memory_path_keeps(tmp_path, cfg):
    kept, counts = run_minhash_dedup(_rows(), cfg, "edit", LocalExecutor(**SMALL), tmp_path / "work")
    assert kept["id"] == _expected(cfg)
    assert len(kept) < len(_rows()) and counts["clusters"] > 0 and counts["shards"] == 9
    assert counts["key_partitions"] == 2 and counts["bucket_pairs"] > 0
    assert (counts["estimates"] > 0) == cfg.exact_check
    assert (counts["exact_checks"] > counts["checks_rejected"] > 0) == (cfg.num_perm == 16)
    assert kept.column_names == _rows().column_names


@pytest.mark.parametrize(
    "cfg, text",
    [(MinHashConfig(tokens="words", lowercase=True), "edit"), (MinHashConfig(), "formatted")],
    ids=["words-lowercase", "formatted"],
)
def test_texts_arrow_cannot_give_as_they_are_go_through_python(tmp_path, cfg, text):
    """Lower-cased or word tokens, or the formatted text: the signatures are not read from Arrow's
    bytes (see utf8_dedup_texts), and the job still keeps what the in-memory path keeps."""
    kept, counts = run_minhash_dedup(_rows(), cfg, text, LocalExecutor(**SMALL), tmp_path / "work")
    assert kept["id"] == _expected(cfg, text) and counts["clusters"] > 0


def _texts_of(part: Utf8Texts) -> list[str]:
    return [bytes(part.buf[part.starts[i] : part.ends[i]]).decode() for i in range(len(part))]


def test_arrow_gives_the_edit_texts_bytes_for_bytes_and_picks_rows_by_their_ranges():
    before = ["def f(x):\n    return 1", "", "ünï — x = 1  # 日本", "a b c d e f " * 6000, "z"]
    after = ["def f(x):\n    return 2", "", "y", "", "\n"]
    tables = [
        pa.Table.from_batches(  # two record batches: texts are read batch by batch
            [
                pa.record_batch({"before": pa.array(before[:2], kind), "after": pa.array(after[:2], kind)}),
                pa.record_batch({"before": pa.array(before[2:], kind), "after": pa.array(after[2:], kind)}),
            ]
        )
        for kind in (pa.string(), pa.large_string())
    ]
    cfg = MinHashConfig()
    parts = [part for t in tables for part in (t, t.slice(1, 3), t.slice(4, 1), t.slice(0, 0))]
    for part in parts:
        for rows in (None, np.array([0, 2]) if part.num_rows > 2 else None):
            encoded = utf8_dedup_texts(part, "edit", rows)
            texts = dedup_texts((part.take(rows) if rows is not None else part).to_pydict(), "edit")
            assert sum((_texts_of(p) for p in encoded), []) == texts
            signatures = [utf8_signatures(p, cfg) for p in encoded]
            assert (
                np.concatenate([np.empty((0, cfg.num_perm), np.uint64), *signatures])
                == minhash_signatures(texts, cfg)
            ).all()
            sets = [utf8_shingle_set_csr(p, cfg.ngram) for p in encoded]
            hashes = np.concatenate([np.empty(0, np.uint64), *(h for _, h in sets)])
            assert (hashes == shingle_set_csr(texts, cfg.ngram)[1]).all()
    with_null = pa.table({"before": ["a", None], "after": ["b", "c"]})
    assert utf8_dedup_texts(with_null, "edit") is None  # dedup_texts raises on it, as before
    assert (
        utf8_dedup_texts(pa.table({"before": ["a"], "after": ["b"], "instruction": ["i"]}), "formatted")
        is None
    )


def test_process_pool_gives_the_same_output(tmp_path):
    cfg = MinHashConfig(exact_check=True)
    kept, _ = run_minhash_dedup(_rows(), cfg, "edit", LocalExecutor(num_proc=2, **SMALL), tmp_path / "w")
    assert kept["id"] == _expected(cfg)


def test_a_killed_job_resumes_where_it_stopped(tmp_path):
    cfg = MinHashConfig(exact_check=True)
    work = tmp_path / "work"
    reference, _ = run_minhash_dedup(_rows(), cfg, "edit", LocalExecutor(**SMALL), work)
    reference_rows = reference.to_list()
    # A kill after the buckets: later outputs gone, a half-written file left behind.
    for name in ("pairs", "sets", "edges", "drops", "kept"):
        shutil.rmtree(work / name)
    (work / "components.json").unlink()
    (work / "groups" / "b000-p0000.offsets.npy.tmp-99.npy").write_bytes(b"partial")
    done = sorted((work / "sig").glob("*.json"))
    stamps = {p: p.stat().st_mtime_ns for p in done}
    again, _ = run_minhash_dedup(_rows(), cfg, "edit", LocalExecutor(**SMALL), work)
    assert again.to_list() == reference_rows
    assert {p: p.stat().st_mtime_ns for p in done} == stamps  # finished tasks were not redone


def test_empty_and_duplicate_free_inputs(tmp_path):
    cfg = MinHashConfig(exact_check=True)
    empty = _rows().select([])
    kept, counts = run_minhash_dedup(empty, cfg, "edit", LocalExecutor(**SMALL), tmp_path / "a")
    assert len(kept) == 0 and counts["clusters"] == 0
    one_each = _rows().select(range(5))
    kept, _ = run_minhash_dedup(one_each, cfg, "edit", LocalExecutor(**SMALL), tmp_path / "b")
    assert kept.to_list() == one_each.to_list()


@pytest.mark.slow
def test_ray_cluster_of_two_workers_matches_local_and_the_driver_holds_no_shard(tmp_path):
    ray = pytest.importorskip("ray")
    from data_pipeline.executors import RayExecutor

    cfg = MinHashConfig(exact_check=True)
    rows = _rows()
    local, local_counts = run_minhash_dedup(rows, cfg, "edit", LocalExecutor(**SMALL), tmp_path / "l")
    executor = RayExecutor(scratch=tmp_path / "scratch", num_cpus=2, **SMALL)
    try:
        assert ray.cluster_resources()["CPU"] == 2
        remote, remote_counts = run_minhash_dedup(rows, cfg, "edit", executor, tmp_path / "r")
        marked = executor.map_batches(rows, filter_batch, {"rules": RULES}, desc="Filtering")
    finally:
        executor.close()
    assert remote.to_list() == local.to_list() and remote_counts == local_counts
    expected = LocalExecutor(**SMALL).map_batches(rows, filter_batch, {"rules": RULES}, desc="Filtering")
    assert marked.to_list() == expected.to_list() and "drop_reason" in marked.column_names
    # Only counts came back: the largest reply is far smaller than one shard of the input.
    shard_bytes = min(len(json.dumps(rows.select(range(i, i + 37)).to_dict())) for i in (0, 37))
    assert 0 < executor.max_result_bytes < shard_bytes / 100
