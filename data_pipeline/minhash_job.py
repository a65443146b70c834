"""Near-dedup as a sharded job: signatures -> band buckets -> (exact checks) -> components -> filter.

The shape of the cluster tools (datatrove, text-dedup): every step is a pure task that reads
shards from disk and writes shards to disk, so a worker's memory is bounded by its shard and
the driver only hands out task descriptions and sums their counts. The same task functions
run in local processes or as Ray Data tasks across nodes (`executors.py`).

1. **signatures** (one task per input shard of `shard_rows` rows): MinHash signatures, then
   each band's key per document, sorted by (partition, key): ``sig/sNNNNN.*``.
2. **buckets** (one task per band and key partition): the partition's keys from every
   shard; buckets with two or more documents become a group file ``groups/bBBB-pPPPP.*``.
3. **decisions**, without the exact check: each bucket is one cluster (``star_task``). With
   it: **estimates** (one task per group file) join pairs whose signatures clearly clear the
   threshold, reject those clearly below it and list the ambiguous rest, each pair once and only
   where the joined edges leave it open (`core.neardup.lsh.estimate_groups`, `open_pairs`);
   **sets** (one task per input shard) compute the shingle sets of the documents in ambiguous
   pairs, once each; **exact** (one task per group file) decides the ambiguous pairs by exact
   Jaccard in compiled code (`core.neardup.lsh.verify_pairs`). Edges go to ``edges/``.
4. **components** (one task): union-find (`core.neardup.clusters`) over every edge file, one
   at a time (8 bytes per document), and the lowest id of each cluster (ids read only for
   clustered documents):
   ``drops/sNNNNN.npy``.
5. **filter**: on one machine the kept rows are selected in place (the stage store then writes
   them once); on a cluster, one task per input shard writes its kept rows: ``kept/sNNNNN.arrow``.

Each task writes its outputs under temporary names, renames them into place and writes a
``.json`` with its counts last; a rerun skips every task whose ``.json`` exists, so a killed
job resumes where it stopped.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from datasets import Dataset
from numba import njit

from core.minhash_config import MinHashConfig
from core.neardup import lsh
from core.neardup.clusters import lowest_ids, roots, union_edges
from core.neardup.dedup import sets_csr
from core.neardup.minhash import (
    minhash_signatures,
    reads_utf8_as_is,
    utf8_shingle_set_csr,
    utf8_signatures,
)
from data_pipeline.dedup_text import TEXT_COLUMNS, dedup_texts, utf8_dedup_texts
from data_pipeline.executors import Executor
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
    """Band keys of one input shard, each band sorted by (key partition, key), and the signatures
    themselves when an exact check will need their estimates."""
    source, (start, stop) = ArrowSource.from_dict(src), task["rows"]
    bands, rows = cfg.bands_rows()
    keys = np.empty((bands, stop - start), dtype=np.uint64)
    sigs = np.empty((stop - start, cfg.num_perm), dtype=np.uint64) if cfg.exact_check else None
    for k, table in enumerate(batches(source, start, stop, batch_rows, TEXT_COLUMNS[text])):
        batch = _signatures(table, text, cfg)
        keys[:, k * batch_rows : k * batch_rows + len(batch)] = lsh.band_keys(batch, bands, rows)
        if sigs is not None:
            sigs[k * batch_rows : k * batch_rows + len(batch)] = batch
    # `parts` is a power of two and a key's partition its top bits, so sorting by key alone
    # also groups the keys by partition; ties keep document order (a stable sort).
    order = np.argsort(keys, axis=-1, kind="stable")
    keys = np.take_along_axis(keys, order, -1)
    shift = np.uint64(64 - int(parts).bit_length() + 1)
    firsts = [np.uint64(p) << shift if p else np.uint64(0) for p in range(parts)]
    bounds = np.stack([np.append(np.searchsorted(keys[b], firsts), keys.shape[1]) for b in range(bands)])
    prefix = Path(task["prefix"])
    save_array(prefix.with_suffix(".keys.npy"), keys)
    save_array(prefix.with_suffix(".docs.npy"), (order + start).astype(np.int64))  # global indices
    save_array(prefix.with_suffix(".parts.npy"), bounds.astype(np.int64))
    if sigs is not None:
        save_array(prefix.with_suffix(".sigs.npy"), sigs)
    return {"rows": stop - start}


@resumable
def bucket_task(task: Task, *, sig_prefixes: list[str]) -> dict:
    """Groups (buckets of >= 2 documents) of a range of bands in one key partition, across every shard."""
    part = task["part"]
    shards = [  # each shard's files opened once (mapped, not read) for all the task's bands
        [load_array(Path(prefix).with_suffix(f".{name}.npy")) for name in ("parts", "keys", "docs")]
        for prefix in sig_prefixes
    ]
    all_offsets, all_members, base = [np.zeros(1, dtype=np.int64)], [], 0
    for band in range(*task["bands"]):
        keys, docs = [], []
        for bounds, shard_keys, shard_docs in shards:
            lo, hi = bounds[band, part : part + 2]
            keys.append(np.asarray(shard_keys[band, lo:hi]))
            docs.append(np.asarray(shard_docs[band, lo:hi]))
        offsets, members = lsh.groups_of(np.concatenate(keys), np.concatenate(docs))
        all_offsets.append(offsets[1:] + base)
        all_members.append(members)
        base += len(members)
    offsets = np.concatenate(all_offsets)
    prefix = Path(task["prefix"])
    save_array(prefix.with_suffix(".offsets.npy"), offsets)
    save_array(
        prefix.with_suffix(".members.npy"), np.concatenate([np.empty(0, dtype=np.int64), *all_members])
    )
    sizes = np.diff(offsets)
    return {"groups": len(sizes), "bucket_pairs": int((sizes * (sizes - 1) // 2).sum())}


@resumable
def star_task(task: Task) -> dict:
    """Without the exact check a bucket is one cluster: edges from each group's first member."""
    offsets = np.asarray(load_array(Path(task["groups"]).with_suffix(".offsets.npy")))
    members = np.asarray(load_array(Path(task["groups"]).with_suffix(".members.npy")))
    edges = lsh.star_edges(offsets, members)
    save_array(Path(task["edges"]), edges)
    return {"edges": len(edges)}


@resumable
def estimate_task(
    task: Task, *, cfg: MinHashConfig, sig_prefixes: list[str], starts: list[int], chunk_members: int
) -> dict:
    """One group file decided by signature estimates: joined edges, and the ambiguous pairs they
    leave open for the exact check (with the documents they involve). Groups go in chunks of about
    `chunk_members` members, so the signatures held at once are bounded."""
    offsets = np.asarray(load_array(Path(task["groups"]).with_suffix(".offsets.npy")))
    members = np.asarray(load_array(Path(task["groups"]).with_suffix(".members.npy")))
    margin = lsh.estimate_margin(cfg.threshold, cfg.num_perm)
    edges, pairs, estimates = [np.empty((0, 2), dtype=np.int64)], [np.empty((0, 2), dtype=np.int64)], 0
    for lo, hi in _chunks(offsets, chunk_members):
        chunk = members[offsets[lo] : offsets[hi]]
        unique = np.unique(chunk)  # a document in several bands of the chunk is read once
        sigs = _gather_rows(unique, sig_prefixes, np.asarray(starts))
        e, p, n = lsh.estimate_groups(
            offsets[lo : hi + 1] - offsets[lo],
            chunk,
            np.searchsorted(unique, chunk),
            sigs,
            cfg.threshold,
            margin,
        )
        edges.append(e)
        pairs.append(p)
        estimates += n
    edges = np.concatenate(edges)
    pairs = lsh.open_pairs(np.concatenate(pairs), edges)
    prefix = Path(task["prefix"])
    save_array(Path(task["edges"]), edges)
    save_array(prefix.with_suffix(".pairs.npy"), pairs)
    save_array(prefix.with_suffix(".involved.npy"), np.unique(pairs))
    return {"estimates": int(estimates), "ambiguous": len(pairs)}


def _gather_rows(docs: np.ndarray, sig_prefixes: list[str], starts: np.ndarray) -> np.ndarray:
    """The signatures of ascending global `docs`, read from their shards' signature files."""
    shard_of = np.searchsorted(starts, docs, side="right") - 1
    parts = []
    for s in np.unique(shard_of):
        rows = docs[shard_of == s] - starts[s]
        parts.append(np.asarray(load_array(Path(sig_prefixes[s]).with_suffix(".sigs.npy"))[rows]))
    return np.concatenate(parts) if parts else np.empty((0, 1), dtype=np.uint64)


@resumable
def sets_task(
    task: Task, *, src: dict, cfg: MinHashConfig, text: str, pair_prefixes: list[str], batch_rows: int
) -> dict:
    """Shingle sets of this shard's documents that are in an ambiguous pair.

    Texts are read `batch_rows` at a time and the hashes streamed to a raw file, so memory holds
    one batch of texts and the set offsets, not the shard's sets.
    """
    start, stop = task["rows"]
    found = []
    for prefix in map(Path, pair_prefixes):
        involved = load_array(prefix.with_suffix(".involved.npy"))
        lo, hi = np.searchsorted(involved, [start, stop])
        found.append(np.asarray(involved[lo:hi]))
    docs = np.unique(np.concatenate([np.empty(0, dtype=np.int64), *found]))
    source, prefix = ArrowSource.from_dict(src), Path(task["prefix"])
    offsets, total = [np.zeros(1, dtype=np.int64)], 0
    with RawWriter(prefix.with_suffix(".hashes.bin")) as out:
        for batch_offsets, hashes in _shingle_sets(source, docs, start, stop, text, cfg, batch_rows):
            out.write(hashes)
            offsets.append(batch_offsets[1:] + total)
            total += len(hashes)
    save_array(prefix.with_suffix(".offsets.npy"), np.concatenate(offsets))
    save_array(prefix.with_suffix(".docs.npy"), docs)
    return {"documents": len(docs)}


def _signatures(table: pa.Table, text: str, cfg: MinHashConfig) -> np.ndarray:
    """The signatures of a batch's dedup texts, read in place from Arrow where the config allows."""
    encoded = utf8_dedup_texts(table, text) if reads_utf8_as_is(cfg) else None
    if encoded is None:
        return minhash_signatures(dedup_texts(table.to_pydict(), text), cfg)
    return np.concatenate(
        [np.empty((0, cfg.num_perm), np.uint64), *(utf8_signatures(t, cfg) for t in encoded)]
    )


def _shingle_sets(
    source: ArrowSource,
    docs: np.ndarray,
    start: int,
    stop: int,
    text: str,
    cfg: MinHashConfig,
    batch_rows: int,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """CSR shingle sets of the ascending global `docs` (all in rows [start, stop)), in order: read in
    place, batch after batch of the shard, where the config allows; else taken row by row."""
    if not reads_utf8_as_is(cfg) or text != "edit":
        for lo in range(0, len(docs), batch_rows):
            table = take_rows(source, docs[lo : lo + batch_rows], TEXT_COLUMNS[text])
            yield sets_csr(dedup_texts(table.to_pydict(), text), cfg)
        return
    for lo in range(start, stop, batch_rows):
        hi = min(lo + batch_rows, stop)
        wanted = docs[(docs >= lo) & (docs < hi)] - lo
        if not len(wanted):
            continue
        table = read_rows(source, lo, hi, TEXT_COLUMNS[text])
        encoded = utf8_dedup_texts(table, text, wanted)
        if encoded is None:  # a null text: dedup_texts says what is wrong
            yield sets_csr(dedup_texts(table.take(wanted).to_pydict(), text), cfg)
            continue
        for part in encoded:
            yield utf8_shingle_set_csr(part, cfg.ngram)


def _gather_sets(
    docs: np.ndarray, set_prefixes: list[str], starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """CSR shingle sets (offsets, hashes) of ascending global `docs`, in their order."""
    shard_of = np.searchsorted(starts, docs, side="right") - 1
    found = []  # (shard prefix, positions in docs, start of each set in the shard's hash file)
    lengths = np.zeros(len(docs), dtype=np.int64)
    for s in np.unique(shard_of):
        prefix = Path(set_prefixes[s])
        where = np.flatnonzero(shard_of == s)
        pos = np.searchsorted(load_array(prefix.with_suffix(".docs.npy")), docs[where])
        offsets = load_array(prefix.with_suffix(".offsets.npy"))
        lengths[where] = offsets[pos + 1] - offsets[pos]
        found.append((prefix, where, np.asarray(offsets[pos])))
    set_offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    hashes = np.empty(set_offsets[-1], dtype=np.uint64)
    for prefix, where, src_starts in found:
        _copy_ranges(
            load_raw(prefix.with_suffix(".hashes.bin")),
            src_starts,
            hashes,
            set_offsets[where],
            lengths[where],
        )
    return set_offsets, hashes


@njit(cache=True)
def _copy_ranges(src, src_starts, dst, dst_starts, lengths):
    """dst[dst_starts[i] : +lengths[i]] = src[src_starts[i] : +lengths[i]] for every i."""
    for i in range(lengths.shape[0]):
        for k in range(lengths[i]):
            dst[dst_starts[i] + k] = src[src_starts[i] + k]


@resumable
def exact_task(
    task: Task, *, cfg: MinHashConfig, set_prefixes: list[str], starts: list[int], chunk_members: int
) -> dict:
    """The ambiguous pairs of one group file decided by exact Jaccard, `chunk_members` documents at a time."""
    pairs = np.asarray(load_array(Path(task["pairs"])))
    accepted, checks = [np.empty((0, 2), dtype=np.int64)], 0
    step = max(1, chunk_members // 2)
    for lo in range(0, len(pairs), step):
        chunk = pairs[lo : lo + step]
        docs = np.unique(chunk)
        set_offsets, hashes = _gather_sets(docs, set_prefixes, np.asarray(starts))
        slot = np.searchsorted(docs, chunk.ravel())
        edges, made = lsh.verify_pairs(chunk, slot, set_offsets, hashes, cfg.threshold, True)
        accepted.append(edges)
        checks += made
    edges = np.concatenate(accepted)
    save_array(Path(task["edges"]), edges)
    return {"checks": checks, "rejected": checks - len(edges)}


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
    rep = lowest_ids(
        roots(parent), lambda members: take_rows(source, members, ["id"]).column("id").to_pylist()
    )
    dropped = np.flatnonzero(rep != np.arange(len(rep)))
    bounds = [*starts, source.num_rows]
    for i in range(len(starts)):
        lo, hi = np.searchsorted(dropped, bounds[i : i + 2])
        save_array(Path(task["drops"][i]), dropped[lo:hi])
    return {"clusters": len(np.unique(rep[dropped])), "dropped": len(dropped)}


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


COUNTS = (
    "shards",
    "key_partitions",
    "groups",
    "bucket_pairs",
    "estimates",
    "exact_checks",
    "checks_rejected",
)


def run_minhash_dedup(
    ds: Dataset, cfg: MinHashConfig, text: str, executor: Executor, work: Path
) -> tuple[Dataset, dict[str, int]]:
    """`ds` without near-duplicates (input order kept) and the job's counts; resumable in `work`."""
    bands = cfg.bands_rows()[0]
    if len(ds) == 0:
        return ds, {**dict.fromkeys(COUNTS, 0), "bands": bands, "clusters": 0}
    job = _Job(arrow_source(ds, work), cfg, text, executor, work)
    counts = {"shards": len(job.starts), "bands": bands, "key_partitions": job.parts}
    counts |= job.buckets()
    edge_files = job.decide(counts)
    counts["clusters"] = job.components(edge_files)
    return job.filter(ds), counts


class _Job:
    """The task lists of one job and the shared arguments of each step (the driver's whole state)."""

    def __init__(self, src: ArrowSource, cfg: MinHashConfig, text: str, executor: Executor, work: Path):
        self.src, self.cfg, self.text, self.executor, self.work = src.as_dict(), cfg, text, executor, work
        self.n = n = src.num_rows
        self.starts = list(range(0, n, executor.shard_rows))
        self.rows = [(s, min(s + executor.shard_rows, n)) for s in self.starts]
        # A power of two: a band key's partition is its top log2(parts) bits.
        self.parts = 1 << max(0, math.ceil(n / executor.partition_rows) - 1).bit_length()
        self.chunk = max(
            1, executor.shard_rows // 10
        )  # documents' signatures or sets held by a decision task
        for name in ("sig", "groups", "pairs", "sets", "edges", "drops", "kept"):
            (work / name).mkdir(parents=True, exist_ok=True)
        self.sig = [str(work / "sig" / _shard(i)) for i in range(len(self.starts))]

    def buckets(self) -> dict[str, int]:
        shared = {"src": self.src, "cfg": self.cfg, "text": self.text, "parts": self.parts}
        tasks = [
            {"rows": r, "prefix": p, "done": p + ".json"} for r, p in zip(self.rows, self.sig, strict=True)
        ]
        self.executor.run_tasks(
            signature_task, tasks, {**shared, "batch_rows": self.executor.batch_size}, "MinHash signatures"
        )
        # A bucket task holds about partition_rows (key, document) entries: as many bands as fit.
        bands = self.cfg.bands_rows()[0]
        per_task = max(1, self.executor.partition_rows // max(1, math.ceil(self.n / self.parts)))
        ranges = [(b, min(b + per_task, bands)) for b in range(0, bands, per_task)]
        self.groups = [
            (r, p, str(self.work / "groups" / _group(r[0], p))) for r in ranges for p in range(self.parts)
        ]
        tasks = [{"bands": r, "part": p, "prefix": g, "done": g + ".json"} for r, p, g in self.groups]
        counts = self.executor.run_tasks(bucket_task, tasks, {"sig_prefixes": self.sig}, "LSH buckets")
        return {
            "groups": sum(c["groups"] for c in counts),
            "bucket_pairs": sum(c["bucket_pairs"] for c in counts),
        }

    def decide(self, counts: dict[str, int]) -> list[str]:
        """Edge files: buckets as clusters, or signature estimates plus exact checks of ambiguous pairs."""
        names = [Path(g).name for _, _, g in self.groups]
        if not self.cfg.exact_check:
            edges = [str(self.work / "edges" / f"{name}.npy") for name in names]
            tasks = [
                {"groups": g, "edges": e, "done": e + ".json"}
                for (_, _, g), e in zip(self.groups, edges, strict=True)
            ]
            self.executor.run_tasks(star_task, tasks, {}, "Bucket edges")
            counts.update(estimates=0, exact_checks=0, checks_rejected=0)
            return edges
        pairs = [str(self.work / "pairs" / name) for name in names]
        joined = [str(self.work / "edges" / f"{name}.estimate.npy") for name in names]
        tasks = [
            {"groups": g, "prefix": p, "edges": e, "done": p + ".json"}
            for (_, _, g), p, e in zip(self.groups, pairs, joined, strict=True)
        ]
        shared = {
            "cfg": self.cfg,
            "sig_prefixes": self.sig,
            "starts": self.starts,
            "chunk_members": self.chunk,
        }
        estimated = self.executor.run_tasks(estimate_task, tasks, shared, "Signature estimates")
        sets = [str(self.work / "sets" / _shard(i)) for i in range(len(self.starts))]
        tasks = [{"rows": r, "prefix": p, "done": p + ".json"} for r, p in zip(self.rows, sets, strict=True)]
        shared = {"src": self.src, "cfg": self.cfg, "text": self.text, "pair_prefixes": pairs}
        self.executor.run_tasks(
            sets_task, tasks, {**shared, "batch_rows": self.executor.batch_size}, "Shingle sets"
        )
        exact = [str(self.work / "edges" / f"{name}.exact.npy") for name in names]
        tasks = [
            {"pairs": p + ".pairs.npy", "edges": e, "done": e + ".json"}
            for p, e in zip(pairs, exact, strict=True)
        ]
        shared = {"cfg": self.cfg, "set_prefixes": sets, "starts": self.starts, "chunk_members": self.chunk}
        checked = self.executor.run_tasks(exact_task, tasks, shared, "Exact checks")
        counts.update(
            estimates=sum(c["estimates"] for c in estimated),
            exact_checks=sum(c["checks"] for c in checked),
            checks_rejected=sum(c["rejected"] for c in checked),
        )
        return joined + exact

    def components(self, edge_files: list[str]) -> int:
        self.drops = [str(self.work / "drops" / f"{_shard(i)}.npy") for i in range(len(self.starts))]
        (counts,) = self.executor.run_tasks(
            components_task,
            [{"drops": self.drops, "done": str(self.work / "components.json")}],
            {"src": self.src, "edge_files": edge_files, "starts": self.starts},
            "Connected components",
        )
        return counts["clusters"]

    def filter(self, ds: Dataset) -> Dataset:
        """The kept rows: selected in place on one machine (the stage store writes them once), or
        written shard by shard by the workers of a cluster, so that no table passes the driver."""
        if not self.executor.distributed:
            drops = np.concatenate([np.load(d) for d in self.drops])
            keep = np.ones(self.n, dtype=bool)
            keep[drops] = False
            return ds.select(np.flatnonzero(keep)) if len(drops) else ds
        kept = [self.work / "kept" / f"{_shard(i)}.arrow" for i in range(len(self.starts))]
        tasks = [
            {"rows": r, "drops": d, "out": str(k), "done": f"{k}.json"}
            for r, d, k in zip(self.rows, self.drops, kept, strict=True)
        ]
        shared = {"src": self.src, "batch_rows": self.executor.batch_size}
        self.executor.run_tasks(filter_task, tasks, shared, "Dropping duplicates")
        return dataset_from_files(kept, ds.features)
