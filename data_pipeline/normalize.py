"""Bring raw rows from any source into the edit-example contract, or name why not.

Sources hand us rows with other column names (CommitPackFT: old_contents, new_contents,
subject, message, ...), fields that may be None, bytes that may not decode, binary blobs
or enormous files, and JSON accepts what Arrow cannot store (a lone surrogate such as
"\\ud800", a `meta` that is a number or a list). `normalize_row` maps and checks one row; it
never raises on bad data. Every text field, the optional ones (`id`, `lang`, `source`) too,
is a string (an `id` or `commit` may be an integer) of at most `max_bytes` UTF-8 bytes with
no NUL; `meta` is strict JSON (no NaN or Infinity), so any JSON reader can load it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

CONTRACT = ("id", "before", "after", "instruction", "lang", "source", "meta")
REQUIRED = ("before", "after", "instruction")
COMMITPACKFT_COLUMNS = {
    "old_contents": "before",
    "new_contents": "after",
    "subject": "instruction",
    "commit": "commit",
}
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _text(value: Any, max_bytes: int) -> tuple[str | None, str]:
    if value is None:
        return None, "missing_field"
    if isinstance(value, (bytes, bytearray)):
        if len(value) > max_bytes:
            return None, "oversized"
        if b"\x00" in value:
            return None, "binary"
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None, "not_utf8"
    if not isinstance(value, str):
        return None, "wrong_type"
    if _oversized(value, max_bytes):
        return None, "oversized"
    if "\x00" in value:
        return None, "binary"
    return value, ""


def _oversized(text: str, max_bytes: int) -> bool:
    """More than `max_bytes` once UTF-8 encoded; the length test first bounds the copy to 4x."""
    if len(text) > max_bytes:
        return True
    return not text.isascii() and len(text.encode("utf-8", "surrogatepass")) > max_bytes


def _optional_text(mapped: Mapping[str, Any], name: str, max_bytes: int) -> tuple[str | None, str]:
    """An optional field as text ("" when absent or None), or (None, reason) like a required one.

    Ids and commits are often numbers (`5` becomes "5"); any other non-string, such as a
    `lang` that is a list, is a `wrong_type` rather than its Python repr in the dataset.
    """
    value = mapped.get(name)
    if value is None:
        return "", ""
    if name in ("id", "commit") and type(value) is int:
        value = str(value)
    return _text(value, max_bytes)


def normalize_row(
    raw: Mapping[str, Any] | Any,
    columns: Mapping[str, str],
    source: str,
    index: int,
    max_bytes: int = 1_000_000,
    lang: str = "python",
) -> tuple[dict | None, str]:
    """(row, "") for a usable row, (None, reason) otherwise."""
    if not isinstance(raw, Mapping):
        return None, "not_a_record"
    mapped = {columns.get(key, key): value for key, value in raw.items()}
    row: dict[str, Any] = {}
    for field in REQUIRED:
        if field not in mapped:
            return None, "missing_field"
        text, reason = _text(mapped[field], max_bytes)
        if text is None:
            return None, reason
        row[field] = text
    row["instruction"] = row["instruction"].strip().splitlines()[0] if row["instruction"].strip() else ""
    given: dict[str, str] = {}
    for field in ("id", "commit", "new_file", "lang", "source"):
        text, reason = _optional_text(mapped, field, max_bytes)
        if text is None:
            return None, reason
        given[field] = text
    row["id"] = given["id"] or _generated_id(given, source, index)
    row["lang"] = (given["lang"] or lang).lower()
    row["source"] = given["source"] or source
    extra = {k: v for k, v in mapped.items() if k not in (*CONTRACT, "commit") and _jsonable(v)}
    meta = _meta(mapped.get("meta"), extra)
    if meta is None:
        return None, "bad_meta"
    if _oversized(meta, max_bytes):
        return None, "oversized"
    row["meta"] = meta
    if any(_has_lone_surrogate(row[field]) for field in CONTRACT):
        return None, "lone_surrogate"
    return row, ""


def _generated_id(given: Mapping[str, str], source: str, index: int) -> str:
    """A row without an id: its commit and file (CommitPackFT), else its place in the source."""
    if given["commit"]:
        return f"{source}:{given['commit']}:{given['new_file']}"
    return f"{source}:{index}"


def _meta(meta: Any, extra: dict[str, Any]) -> str | None:
    """`meta` as JSON object text, or None: a number, a list, NaN or unserialisable values are no object."""
    if isinstance(meta, str):
        try:
            return meta if isinstance(json.loads(meta, parse_constant=_no_constant), dict) else None
        except (ValueError, RecursionError):  # ValueError: bad JSON, NaN, an integer over 4300 digits
            return None
    if meta is not None and not isinstance(meta, Mapping):
        return None
    try:  # ASCII output: surrogates and other odd characters become escapes Arrow can store
        return json.dumps({**(meta or {}), **extra}, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def _no_constant(name: str) -> None:
    """NaN and Infinity: Python's json reads them, but they are not JSON and other readers refuse them."""
    raise ValueError(f"{name} is not JSON")


def _has_lone_surrogate(text: str) -> bool:
    """JSON decodes "\\ud800" into a str that UTF-8, and so Arrow, cannot encode."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def _jsonable(value: Any) -> bool:
    """Extra scalar columns worth keeping in `meta`; NaN and Infinity would make it invalid JSON."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (str, int, bool)) and (not isinstance(value, str) or len(value) < 10_000)
