"""The build's side of near-dedup: signatures per batch of edit rows, and the MinHash parameters in the manifest.

The engine itself (`core.neardup`) is tested in tests/core/.
"""

from __future__ import annotations

import datasketch
import numpy as np
import pytest
from datasets import Dataset
from neardup_corpus import corpus

from core.minhash_config import MinHashConfig
from core.neardup.minhash import minhash_signatures
from data_pipeline.dedup_text import dedup_texts

CFG = MinHashConfig()


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


def test_edit_text_is_before_and_after():
    assert dedup_texts({"before": ["a"], "after": ["b"]}, "edit") == ["a\nb"]


def test_warming_loads_every_kernel_of_the_dedup_on_a_thread_where_nothing_forks():
    """In a fresh process: warm_kernels leaves each compiled step of find_duplicates loaded (the
    first real call then compiles and loads nothing), and start_warming runs it on a thread where
    every stage runs in this process."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import threading
        from core.neardup import clusters, lsh, minhash
        from data_pipeline.executors import LocalExecutor
        from data_pipeline.near_dedup import start_warming

        kernels = [minhash._signatures_kernel, minhash._shingle_sets_kernel, lsh.band_keys,
                   lsh.estimate_groups, lsh.verify_pairs, clusters.union_edges, clusters.roots]
        assert not any(k.signatures for k in kernels)
        assert start_warming(object()) is None  # Ray's workers are other processes
        assert start_warming(LocalExecutor(num_proc=2)) is None  # stages fork: not while it runs
        thread = start_warming(LocalExecutor())
        thread.join()
        print([k.__name__ for k in kernels if not k.signatures])
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr
