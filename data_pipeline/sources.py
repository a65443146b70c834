"""Raw rows from a configured source, each either a record or the reason it is unusable.

`iter_raw(cfg)` yields `(raw, "")` or `(None, reason)` one source row at a time, so a
broken JSON line, an undecodable file or a bad commit is counted and skipped, never fatal.
A file that breaks part-way (a damaged parquet row group, garbage under a data suffix, an
I/O error) keeps the rows read before the damage and counts as one `corrupt_file`, with a
warning naming it; only a path named in `source.paths` that yields nothing at all is a
`UserError`, and so is a named path that is no regular file or folder (a FIFO would block the
build). A folder named like a data file (`x.jsonl/`) is searched, not read. A `disk` path
that is a build's output folder reads the table it holds (`dataset/` or `data.parquet`), not
its manifest. Hub datasets stream by default; local files are read in bounded chunks.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from core.errors import UserError
from core.hub import HUB_PREFIX, load_hub_dataset
from core.schema import build_output
from data_pipeline.config import SourceConfig
from data_pipeline.normalize import COMMITPACKFT_COLUMNS, normalize_row

Raw = tuple[dict[str, Any] | None, str]
Reader = Callable[[Path], Iterator[Raw]]
CORRUPT_FILE = "corrupt_file"
# What reading a damaged file raises part-way: I/O errors, bad bytes, and pyarrow's own errors.
_DAMAGE = (OSError, ValueError, pa.ArrowException)
# What turning one decoded Arrow value into Python raises: a date64 past year 9999, say.
_VALUE_ERRORS = (OverflowError, ValueError, pa.ArrowException)
# A compressed file under a .jsonl/.json name would be read as lines of noise.
_COMPRESSED = {b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd", b"\xfd7zXZ\x00": "xz", b"BZh": "bzip2"}
log = logging.getLogger(__name__)


def _loads(data: bytes) -> tuple[Any, str]:
    """(value, "") or (None, reason). Valid JSON can fail too: Python refuses integers of over
    4300 digits (a ValueError that is no JSONDecodeError), which must not end the file."""
    try:
        return json.loads(data), ""
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return None, "broken_json"
    except ValueError:
        return None, "huge_number"


def _record(value: Any, reason: str) -> Raw:
    if reason:
        return None, reason
    return (value, "") if isinstance(value, dict) else (None, "not_a_record")


def _refuse_compressed(head: bytes) -> None:
    """A damaged-file error (one `corrupt_file`, or an error for a named path) for compressed bytes."""
    for magic, kind in _COMPRESSED.items():
        if head.startswith(magic):
            raise ValueError(f"{kind}-compressed data; decompress it first")


# A jsonl line longer than this many times `source.max_bytes` cannot hold a row that is kept (its
# texts, each at most max_bytes, even fully \u-escaped): it is skipped as oversized, never held.
LINE_BYTES_PER_MAX_BYTES = 32


def _jsonl(path: Path, max_line: int) -> Iterator[Raw]:
    with path.open("rb") as fh:
        _refuse_compressed(fh.read(8))
        fh.seek(0)
        while line := fh.readline(max_line + 1):
            if len(line) > max_line and not line.endswith(b"\n"):
                _skip_to_next_line(fh)
                yield None, "oversized"
            elif line.strip():
                yield _record(*_loads(line))


def _skip_to_next_line(fh: Any) -> None:
    """Read past the current line 1 MiB at a time, so an endless line is never held whole."""
    for rest in iter(lambda: fh.readline(1 << 20), b""):
        if rest.endswith(b"\n"):
            return


def _parquet(path: Path) -> Iterator[Raw]:
    import pyarrow.parquet as pq

    file = pq.ParquetFile(str(path))
    for group in range(file.num_row_groups):  # one at a time: a damaged group loses no earlier rows
        for batch in file.iter_batches(batch_size=1024, row_groups=[group]):
            yield from _batch_rows(batch)


def _batch_rows(batch: pa.RecordBatch) -> Iterator[Raw]:
    """The batch's rows; if a value has no Python form, row by row, so only its own row is lost."""
    try:
        rows = batch.to_pylist()
    except _VALUE_ERRORS:
        yield from (_one_row(batch.slice(i, 1)) for i in range(batch.num_rows))
        return
    yield from ((row, "") for row in rows)


def _one_row(batch: pa.RecordBatch) -> Raw:
    try:
        return batch.to_pylist()[0], ""
    except _VALUE_ERRORS:
        return None, "unconvertible_value"


def _json(path: Path) -> Iterator[Raw]:
    data = path.read_bytes()
    _refuse_compressed(data[:8])
    if not data.strip():  # like an empty .jsonl: no rows, not a broken one
        return
    records, reason = _loads(data)
    if reason:
        yield None, reason
        return
    for record in records if isinstance(records, list) else [records]:
        yield _record(record, "")


_READERS = {".jsonl": _jsonl, ".json": _json, ".parquet": _parquet}


def data_files(root: Path) -> list[Path]:
    """What a `files` source reads at `root`: the path itself, or a folder's data files at any depth, sorted.

    Inside a folder, FIFOs, sockets and dangling links are passed over; a named one is an error.
    """
    if root.is_dir():
        return sorted(p for p in root.rglob("*") if p.suffix in _READERS and p.is_file())
    if not root.is_file():
        raise UserError(
            f"source.paths: {root} is not a regular file or a folder; pass a data file or its folder"
        )
    return [root]


def is_saved_dataset(root: Path) -> bool:
    return (root / "state.json").exists() or (root / "dataset_dict.json").exists()


def disk_table(root: Path) -> Path:
    """What a `disk` path reads: a build output folder's table (`dataset/` or `data.parquet`), else the path."""
    return build_output(root) or root


def source_files(cfg: SourceConfig) -> list[Path]:
    """Every file a files or disk source reads, in reading order; hub and git sources read none."""
    if cfg.kind not in ("files", "disk"):
        return []
    files: list[Path] = []
    for root in map(Path, cfg.paths):
        root = disk_table(root) if cfg.kind == "disk" else root
        if cfg.kind == "disk" and is_saved_dataset(root):
            files += sorted(p for p in root.rglob("*") if p.is_file())
        else:
            files += data_files(root)
    return files


def _read(path: Path, reader: Reader, named: bool) -> Iterator[Raw]:
    """`reader`'s rows; damage part-way is one `corrupt_file` after the rows read before it.

    A path named in `source.paths` that yields nothing before it fails is the user's mistake.
    """
    read = 0
    try:
        for item in reader(path):
            read += 1
            yield item
    except _DAMAGE as err:
        why = _why(err)
        if named and not read:
            raise UserError(f"source.paths: cannot read {path} ({why}); repair or replace it") from err
        log.warning("%s: unreadable after %d rows (%s); counted as source:%s", path, read, why, CORRUPT_FILE)
        yield None, CORRUPT_FILE


def _why(err: Exception) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0][:200]}" if text else type(err).__name__


def _files(paths: list[str], max_bytes: int) -> Iterator[Raw]:
    for root in map(Path, paths):
        for path in data_files(root):
            reader = _READERS.get(path.suffix)
            if reader is _jsonl:
                reader = partial(_jsonl, max_line=LINE_BYTES_PER_MAX_BYTES * max_bytes)
            if reader is None:
                raise UserError(
                    f"source.paths: {path} is not a .jsonl, .json or .parquet file; rename it or pass its folder"
                )
            yield from _read(path, reader, named=path == root)


def _saved(root: Path) -> Iterator[Raw]:
    import datasets

    try:
        ds = datasets.load_from_disk(str(root))
    except (TypeError, KeyError, AttributeError) as err:  # a state.json or dataset_info.json of another shape
        raise ValueError(f"not a save_to_disk folder: {type(err).__name__}: {err}") from err
    if isinstance(ds, datasets.DatasetDict):
        if "train" not in ds:
            raise UserError(
                f"source.paths: {root} has no train split ({sorted(ds)}); pass one split's folder"
            )
        ds = ds["train"]
    yield from ((row, "") for row in ds)


def _disk(paths: list[str], max_bytes: int) -> Iterator[Raw]:
    for root in map(disk_table, map(Path, paths)):
        if is_saved_dataset(root):
            yield from _read(root, _saved, named=True)
        else:
            yield from _files([str(root)], max_bytes)


def _hub(cfg: SourceConfig) -> Iterator[Raw]:
    assert cfg.name is not None
    ds = load_hub_dataset(HUB_PREFIX + cfg.name, cfg.subset, cfg.split, "source.name", cfg.streaming)
    yield from ((row, "") for row in ds)


def _git(cfg: SourceConfig) -> Iterator[Raw]:
    from data_pipeline.git_source import GitMiningConfig, mine_repositories

    g = cfg.git
    mining = GitMiningConfig(
        refs=tuple(g.refs),
        first_parent=g.first_parent,
        multi_file=g.multi_file,
        extensions=tuple(g.extensions),
        max_file_bytes=g.max_file_bytes,
        include_merges=g.include_merges,
        max_commits=g.max_commits,
    )
    yield from mine_repositories(cfg.repos, mining)


def iter_raw(cfg: SourceConfig) -> Iterator[Raw]:
    """Every raw row of the source (up to `cfg.limit`)."""
    rows = {
        "hub": lambda: _hub(cfg),
        "files": lambda: _files(cfg.paths, cfg.max_bytes),
        "disk": lambda: _disk(cfg.paths, cfg.max_bytes),
        "git": lambda: _git(cfg),
    }[cfg.kind]()
    for i, item in enumerate(rows):
        if cfg.limit is not None and i >= cfg.limit:
            return
        yield item


def source_label(cfg: SourceConfig) -> str:
    if cfg.kind == "hub":
        return f"{cfg.name}/{cfg.subset}" if cfg.subset else str(cfg.name)
    return cfg.kind


def describe_source(cfg: SourceConfig) -> str:
    """The source as the user configured it, for error messages."""
    if cfg.kind == "hub":
        return f"hub dataset {source_label(cfg)} (split {cfg.split})"
    if cfg.kind == "git":
        return f"source.repos={list(cfg.repos)}"
    return f"source.paths={list(cfg.paths)}"


def iter_records(cfg: SourceConfig) -> Iterator[tuple[dict | None, str]]:
    """Rows in the edit-example contract, or `(None, reason)`; one item per raw row."""
    columns = dict(cfg.columns) or (COMMITPACKFT_COLUMNS if cfg.kind in ("hub", "files") else {})
    label = source_label(cfg)
    for index, (raw, reason) in enumerate(iter_raw(cfg)):
        if raw is None:
            yield None, reason
            continue
        yield normalize_row(raw, columns, label, index, max_bytes=cfg.max_bytes, lang=cfg.lang)
