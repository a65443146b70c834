"""Near-dedup as a sharded job: signatures -> band buckets -> (exact checks) -> components -> filter.

The shape of the cluster tools (datatrove, text-dedup): every step is a pure task that reads
shards from disk and writes shards to disk, so a worker's memory is bounded by its shard and
the driver only hands out task descriptions and sums their counts. The same task functions
run in local processes or as Ray Data tasks across nodes (`executors.py`).

1. **signatures** (one task per input shard of `shard_rows` rows): MinHash signatures, then
   each band's key per document, sorted by (partition, key): ``sig/sNNNNN.*``.
2. **buckets** (one task per band and key partition): the partition's keys from every
   shard; buckets with two or more documents become a group file ``groups/bBBB-pPPPP.*``.
3. **sets** (exact check only, one task per input shard): the shingle sets of the shard's
   documents that are in some group, computed once: ``sets/sNNNNN.*``.
4. **verify** (one task per group file): per bucket, exact Jaccard checks in compiled code
   (`lsh.verify_groups`), or the whole bucket as one cluster without the check:
   ``edges/bBBB-pPPPP.npy``.
5. **components** (one task): union-find over every edge file, one at a time (8 bytes per
   document), and the lowest id of each cluster (ids read only for clustered documents):
   ``drops/sNNNNN.npy``.
6. **filter** (one task per input shard): the shard without its dropped rows: ``kept/sNNNNN.arrow``.

Each task writes its outputs under temporary names, renames them into place and writes a
``.json`` with its counts last; a rerun skips every task whose ``.json`` exists, so a killed
job resumes where it stopped.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset

from core.minhash_config import MinHashConfig
from data_pipeline.dedup import representatives, sets_csr
from data_pipeline.dedup_text import TEXT_COLUMNS, dedup_texts
from data_pipeline.executors import Executor
from data_pipeline.lsh import (
    band_keys,
    copy_ranges,
    groups_of,
    roots,
    set_fingerprints,
    star_edges,
    union_edges,
    verify_groups,
)
from data_pipeline.minhash import minhash_signatures
from data_pipeline.shards import (
    ArrowSource,
    RawWriter,
    arrow_source,
    batches,
    dataset_from_files,
    load_array,
    load_raw,
    read_rows,
    save_array,
    save_json,
    take_rows,
    write_arrow,
)

Task = dict[str, Any]


def resumable(fn: Callable[..., dict]) -> Callable[..., dict]:
    """Run a task once: its counts are saved to ``task["done"]`` after its outputs are in place."""

    @functools.wraps(fn)
    def run(task: Task, **shared: Any) -> dict:
        done = Path(task["done"])
        if done.exists():
            return json.loads(done.read_text())
        done.parent.mkdir(parents=True, exist_ok=True)
        counts = fn(task, **shared)
        save_json(done, counts)
        return counts

    return run


def _shard(i: int) -> str:
    return f"s{i:05d}"


def _group(band: int, part: int) -> str:
    return f"b{band:03d}-p{part:04d}"


@resumable
def signature_task(
    task: Task, *, src: dict, cfg: MinHashConfig, text: str, parts: int, batch_rows: int
) -> dict:
    """Band keys of one input shard, each band sorted by (key partition, key)."""
    source, (start, stop) = ArrowSource.from_dict(src), task["rows"]
    bands, rows = cfg.bands_rows()
    keys = np.empty((bands, stop - start), dtype=np.uint64)
    for k, table in enumerate(batches(source, start, stop, batch_rows, TEXT_COLUMNS[text])):
        sigs = minhash_signatures(dedup_texts(table.to_pydict(), text), cfg)
        keys[:, k * batch_rows : k * batch_rows + len(sigs)] = band_keys(sigs, bands, rows)
    part = keys % np.uint64(parts)
    order = np.lexsort((keys, part), axis=-1)
    docs = order + start  # global document indices
    bounds = np.stack(
        [np.searchsorted(np.take_along_axis(part, order, -1)[b], np.arange(parts + 1)) for b in range(bands)]
    )
    prefix = Path(task["prefix"])
    save_array(prefix.with_suffix(".keys.npy"), np.take_along_axis(keys, order, -1))
    save_array(prefix.with_suffix(".docs.npy"), docs.astype(np.int64))
    save_array(prefix.with_suffix(".parts.npy"), bounds.astype(np.int64))
    return {"rows": stop - start}


@resumable
def bucket_task(task: Task, *, sig_prefixes: list[str]) -> dict:
    """Groups (buckets of >= 2 documents) of a range of bands in one key partition, across every shard."""
    part = task["part"]
    all_offsets, all_members, base = [np.zeros(1, dtype=np.int64)], [], 0
    for band in range(*task["bands"]):
        keys, docs = [], []
        for prefix in map(Path, sig_prefixes):
            lo, hi = load_array(prefix.with_suffix(".parts.npy"))[band, part : part + 2]
            keys.append(np.asarray(load_array(prefix.with_suffix(".keys.npy"))[band, lo:hi]))
            docs.append(np.asarray(load_array(prefix.with_suffix(".docs.npy"))[band, lo:hi]))
        offsets, members = groups_of(np.concatenate(keys), np.concatenate(docs))
        all_offsets.append(offsets[1:] + base)
        all_members.append(members)
        base += len(members)
    offsets = np.concatenate(all_offsets)
    members = np.concatenate([np.empty(0, dtype=np.int64), *all_members])
    prefix = Path(task["prefix"])
    save_array(prefix.with_suffix(".offsets.npy"), offsets)
    save_array(prefix.with_suffix(".members.npy"), members)
    save_array(prefix.with_suffix(".involved.npy"), np.unique(members))
    sizes = np.diff(offsets)
    return {"groups": len(sizes), "bucket_pairs": int((sizes * (sizes - 1) // 2).sum())}


@resumable
def sets_task(
    task: Task, *, src: dict, cfg: MinHashConfig, text: str, group_prefixes: list[str], batch_rows: int
) -> dict:
    """Shingle sets of this shard's documents that share a bucket with another document.

    Texts are read `batch_rows` at a time and the hashes streamed to a raw file, so memory holds
    one batch of texts and the set offsets, not the shard's sets.
    """
    start, stop = task["rows"]
    found = []
    for prefix in map(Path, group_prefixes):
        involved = load_array(prefix.with_suffix(".involved.npy"))
        lo, hi = np.searchsorted(involved, [start, stop])
        found.append(np.asarray(involved[lo:hi]))
    docs = np.unique(np.concatenate([np.empty(0, dtype=np.int64), *found]))
    source, prefix = ArrowSource.from_dict(src), Path(task["prefix"])
    offsets, fps, total = [np.zeros(1, dtype=np.int64)], [], 0
    with RawWriter(prefix.with_suffix(".hashes.bin")) as out:
        for lo in range(0, len(docs), batch_rows):
            table = take_rows(source, docs[lo : lo + batch_rows], TEXT_COLUMNS[text])
            batch_offsets, hashes = sets_csr(dedup_texts(table.to_pydict(), text), cfg)
            out.write(hashes)
            offsets.append(batch_offsets[1:] + total)
            fps.append(set_fingerprints(batch_offsets, hashes))
            total += len(hashes)
    save_array(prefix.with_suffix(".offsets.npy"), np.concatenate(offsets))
    save_array(prefix.with_suffix(".fp.npy"), np.concatenate([np.empty(0, dtype=np.uint64), *fps]))
    save_array(prefix.with_suffix(".docs.npy"), docs)
    return {"documents": len(docs)}


def _gather_sets(members: np.ndarray, set_prefixes: list[str], starts: np.ndarray) -> tuple[np.ndarray, ...]:
    """CSR shingle sets (offsets, hashes, fingerprints) of `members`, in their order."""
    shard_of = np.searchsorted(starts, members, side="right") - 1
    found = []  # (shard, member positions, positions in the shard's set files)
    lengths = np.zeros(len(members), dtype=np.int64)
    fps = np.zeros(len(members), dtype=np.uint64)
    for s in np.unique(shard_of):
        prefix = Path(set_prefixes[s])
        where = np.flatnonzero(shard_of == s)
        pos = np.searchsorted(load_array(prefix.with_suffix(".docs.npy")), members[where])
        offsets = load_array(prefix.with_suffix(".offsets.npy"))
        lengths[where] = offsets[pos + 1] - offsets[pos]
        fps[where] = load_array(prefix.with_suffix(".fp.npy"))[pos]
        found.append((prefix, where, np.asarray(offsets[pos])))
    set_offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    hashes = np.empty(set_offsets[-1], dtype=np.uint64)
    for prefix, where, src_starts in found:
        copy_ranges(
            load_raw(prefix.with_suffix(".hashes.bin")),
            src_starts,
            hashes,
            set_offsets[where],
            lengths[where],
        )
    return set_offsets, hashes, fps


@resumable
def verify_task(
    task: Task, *, cfg: MinHashConfig, set_prefixes: list[str] | None, starts: list[int], chunk_members: int
) -> dict:
    """Accepted edges of one group file: exact checks per bucket, or star edges without them.

    Groups are checked in chunks of about `chunk_members` members, so the shingle sets held at
    once are bounded whatever the size of the file.
    """
    prefix = Path(task["prefix"])
    offsets = np.asarray(load_array(Path(task["groups"]).with_suffix(".offsets.npy")))
    members = np.asarray(load_array(Path(task["groups"]).with_suffix(".members.npy")))
    if set_prefixes is None:
        save_array(prefix.with_suffix(".npy"), star_edges(offsets, members))
        return {"edges": len(members) - len(offsets) + 1, "checks": 0, "rejected": 0}
    edges, checks, rejected = [np.empty((0, 2), dtype=np.int64)], 0, 0
    for lo, hi in _chunks(offsets, chunk_members):
        chunk = members[offsets[lo] : offsets[hi]]
        unique = np.unique(chunk)  # a document in several bands of the chunk is read once
        set_offsets, hashes, fps = _gather_sets(unique, set_prefixes, np.asarray(starts))
        e, c, r = verify_groups(
            offsets[lo : hi + 1] - offsets[lo], chunk, np.searchsorted(unique, chunk),
            set_offsets, hashes, fps, cfg.threshold,
        )  # fmt: skip
        edges.append(e)
        checks, rejected = checks + c, rejected + r
    edges = np.concatenate(edges)
    save_array(prefix.with_suffix(".npy"), edges)
    return {"edges": len(edges), "checks": int(checks), "rejected": int(rejected)}


def _chunks(offsets: np.ndarray, members: int) -> list[tuple[int, int]]:
    """Consecutive group ranges [lo, hi) of about `members` members each (a larger group alone)."""
    bounds = [0]
    while bounds[-1] < len(offsets) - 1:
        lo = bounds[-1]
        hi = int(np.searchsorted(offsets, offsets[lo] + members, side="right")) - 1
        bounds.append(max(hi, lo + 1))
    return list(zip(bounds[:-1], bounds[1:], strict=True))


@resumable
def components_task(task: Task, *, src: dict, edge_files: list[str], starts: list[int]) -> dict:
    """Connected components over every edge file; each keeps its lowest id, the rest are dropped."""
    source = ArrowSource.from_dict(src)
    parent = np.arange(source.num_rows, dtype=np.int64)
    for path in edge_files:
        union_edges(parent, np.asarray(load_array(Path(path))))
    root = roots(parent)
    clustered = np.flatnonzero(root != np.arange(len(root)))
    members = np.union1d(clustered, root[clustered])  # ascending; roots are members too
    ids = take_rows(source, members, ["id"]).column("id").to_pylist()
    rep = representatives(np.searchsorted(members, root[members]), ids)
    dropped = members[rep != np.arange(len(members))]
    bounds = [*starts, source.num_rows]
    for i in range(len(starts)):
        lo, hi = np.searchsorted(dropped, bounds[i : i + 2])
        save_array(Path(task["drops"][i]), dropped[lo:hi])
    return {"clusters": len(np.unique(rep[rep != np.arange(len(members))])), "dropped": len(dropped)}


@resumable
def filter_task(task: Task, *, src: dict, batch_rows: int) -> dict:
    """The input shard without its dropped rows, as an Arrow stream file."""
    source, (start, stop) = ArrowSource.from_dict(src), task["rows"]
    drops = np.asarray(load_array(Path(task["drops"])))

    def kept():
        for lo in range(start, stop, batch_rows):
            table = read_rows(source, lo, min(lo + batch_rows, stop))
            mask = np.ones(table.num_rows, dtype=bool)
            mask[drops[(drops >= lo) & (drops < lo + table.num_rows)] - lo] = False
            yield table.filter(mask)

    schema = read_rows(source, 0, 0).schema
    return {"kept": write_arrow(Path(task["out"]), kept(), schema)}


def run_minhash_dedup(
    ds: Dataset, cfg: MinHashConfig, text: str, executor: Executor, work: Path
) -> tuple[Dataset, dict[str, int]]:
    """`ds` without near-duplicates (input order kept) and the job's counts; resumable in `work`."""
    if len(ds) == 0:
        counts = ("shards", "key_partitions", "groups", "bucket_pairs", "exact_checks", "checks_rejected")
        return ds, {**dict.fromkeys(counts, 0), "bands": cfg.bands_rows()[0], "clusters": 0}
    src = arrow_source(ds, work)
    n, shard_rows = src.num_rows, executor.shard_rows
    starts = list(range(0, n, shard_rows))
    shard_rows_of = [(s, min(s + shard_rows, n)) for s in starts]
    parts = max(1, math.ceil(n / executor.partition_rows))
    bands, _ = cfg.bands_rows()
    dirs = {name: work / name for name in ("sig", "groups", "sets", "edges", "drops", "kept")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    sig = [str(dirs["sig"] / _shard(i)) for i in range(len(starts))]
    executor.run_tasks(
        signature_task,
        [{"rows": r, "prefix": p, "done": p + ".json"} for r, p in zip(shard_rows_of, sig, strict=True)],
        {"src": src.as_dict(), "cfg": cfg, "text": text, "parts": parts, "batch_rows": executor.batch_size},
        desc="MinHash signatures",
    )
    # A bucket task holds about partition_rows (key, document) entries: as many bands as fit.
    per_task = max(1, executor.partition_rows // max(1, math.ceil(n / parts)))
    ranges = [(b, min(b + per_task, bands)) for b in range(0, bands, per_task)]
    grp = [str(dirs["groups"] / _group(b, p)) for b, _ in ranges for p in range(parts)]
    bucket_counts = executor.run_tasks(
        bucket_task,
        [
            {"bands": r, "part": p, "prefix": g, "done": g + ".json"}
            for (r, p), g in zip(((r, p) for r in ranges for p in range(parts)), grp, strict=True)
        ],
        {"sig_prefixes": sig},
        desc="LSH buckets",
    )
    set_prefixes = None
    if cfg.exact_check:
        set_prefixes = [str(dirs["sets"] / _shard(i)) for i in range(len(starts))]
        executor.run_tasks(
            sets_task,
            [
                {"rows": r, "prefix": p, "done": p + ".json"}
                for r, p in zip(shard_rows_of, set_prefixes, strict=True)
            ],
            {
                "src": src.as_dict(),
                "cfg": cfg,
                "text": text,
                "group_prefixes": grp,
                "batch_rows": executor.batch_size,
            },
            desc="Shingle sets",
        )
    edges = [str(dirs["edges"] / Path(g).name) for g in grp]
    verify_counts = executor.run_tasks(
        verify_task,
        [{"groups": g, "prefix": e, "done": e + ".json"} for g, e in zip(grp, edges, strict=True)],
        {
            "cfg": cfg,
            "set_prefixes": set_prefixes,
            "starts": starts,
            "chunk_members": max(1, executor.shard_rows // 10),
        },
        desc="Exact checks" if cfg.exact_check else "Bucket edges",
    )
    drops = [str(dirs["drops"] / f"{_shard(i)}.npy") for i in range(len(starts))]
    (components,) = executor.run_tasks(
        components_task,
        [{"drops": drops, "done": str(work / "components.json")}],
        {"src": src.as_dict(), "edge_files": [e + ".npy" for e in edges], "starts": starts},
        desc="Connected components",
    )
    kept = [dirs["kept"] / f"{_shard(i)}.arrow" for i in range(len(starts))]
    executor.run_tasks(
        filter_task,
        [
            {"rows": r, "drops": d, "out": str(k), "done": f"{k}.json"}
            for r, d, k in zip(shard_rows_of, drops, kept, strict=True)
        ],
        {"src": src.as_dict(), "batch_rows": executor.batch_size},
        desc="Dropping duplicates",
    )
    counts = {
        "shards": len(starts),
        "bands": bands,
        "key_partitions": parts,
        "groups": sum(c["groups"] for c in bucket_counts),
        "bucket_pairs": sum(c["bucket_pairs"] for c in bucket_counts),
        "exact_checks": sum(c["checks"] for c in verify_counts),
        "checks_rejected": sum(c["rejected"] for c in verify_counts),
        "clusters": components["clusters"],
    }
    return dataset_from_files(kept, ds.features), counts
