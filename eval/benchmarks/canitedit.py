"""CanItEdit (nuprl/CanItEdit on the hub, or a local jsonl in its schema)."""

from __future__ import annotations

from pathlib import Path

from eval.problems import BenchmarkError, Problem, check_unique, problem_from_canitedit, read_jsonl

HUB_ID = "nuprl/CanItEdit"


def load_canitedit(path: str | None = None) -> list[Problem]:
    """Problems from `path` (jsonl), or from the hub's test split when no path is given."""
    if path is not None:
        records = read_jsonl(Path(path))
        return check_unique([problem_from_canitedit(r, where) for where, r in records], path)
    import datasets

    try:
        ds = datasets.load_dataset(HUB_ID, split="test")
    except Exception as err:  # offline, gated, renamed: say what to do instead
        raise BenchmarkError(
            f"could not load {HUB_ID} from the hub ({err}); download it and pass benchmark.path=FILE.jsonl"
        ) from err
    return check_unique([problem_from_canitedit(dict(r), f"{HUB_ID}[{i}]") for i, r in enumerate(ds)], HUB_ID)
