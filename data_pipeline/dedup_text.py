"""The text each edit example is near-deduplicated on (`DedupOptions.text`).

- ``"edit"``: ``before + "\\n" + after``, the change alone. The same change under two commit
  messages is one duplicate.
- ``"formatted"``: the training text itself, instruction included, rendered by the
  ``editcoder`` prompt format that training uses (`core.formats`). EditPackFT was
  deduplicated on this text (nuprl/CanItEdit ``editpackft/format.py`` builds it as the
  ``content`` column that its near-dedup step reads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.formats import FORMATS
from core.neardup.minhash import Utf8Texts

# The columns each mode reads, so that a job loads only those.
TEXT_COLUMNS: dict[str, tuple[str, ...]] = {
    "edit": ("before", "after"),
    "formatted": ("before", "instruction", "after"),
}
_FORMAT = FORMATS["editcoder"]


def dedup_texts(columns: Mapping[str, Sequence[str]], text: str) -> list[str]:
    """One dedup text per row of a columnar batch; a pure function of its rows."""
    if text not in TEXT_COLUMNS:
        raise ValueError(f"dedup text={text!r}: choose one of {tuple(TEXT_COLUMNS)}")
    rows = zip(*(columns[c] for c in TEXT_COLUMNS[text]), strict=True)
    if text == "edit":
        return [before + "\n" + after for before, after in rows]
    return [_FORMAT.prompt(before, instr) + _FORMAT.completion(after) for before, instr, after in rows]


def utf8_dedup_texts(table: pa.Table, text: str, rows: np.ndarray | None = None) -> list[Utf8Texts] | None:
    """The dedup texts of `table` (only ``rows``, ascending, where given) as UTF-8 bytes, one
    `Utf8Texts` per record batch, joined by Arrow from its own buffers: no Python string is made,
    decoded and encoded again (the near-dedup job reads every row's text for its signatures, and
    those conversions were a tenth of its time), and only the picked rows are joined. For
    ``"edit"`` texts with no null; None otherwise (use `dedup_texts`)."""
    if text != "edit" or any(table.column(c).null_count for c in TEXT_COLUMNS[text]):
        return None
    found, start = [], 0
    for batch in table.to_batches():
        stop = start + batch.num_rows
        if rows is not None:  # only the picked rows are copied and joined
            batch = batch.take(pa.array(rows[(rows >= start) & (rows < stop)] - start))
        start = stop
        joined = pc.binary_join_element_wise(
            batch.column("before").cast(pa.large_string()),
            batch.column("after").cast(pa.large_string()),
            pa.scalar("\n", pa.large_string()),
        )
        _, offsets, data = joined.buffers()
        bounds = np.frombuffer(offsets, dtype=np.int64, count=len(joined) + 1, offset=8 * joined.offset)
        buf = np.frombuffer(data if data is not None else b"\0", dtype=np.uint8)
        buf.flags.writeable = False  # the array type the kernels are compiled for already
        found.append(Utf8Texts(buf, bounds[:-1].copy(), bounds[1:].copy()))
    return found
