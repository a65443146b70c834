"""The second moment of MLP inputs, E[k kᵀ], estimated once per model and layer and cached on disk.

ROME, MEMIT and PMET weigh their updates by it (what the layer must keep computing) and
AlphaEdit projects onto its null space. ROME and MEMIT estimate it on 100,000 Wikipedia
records; for code models the corpus is code, chosen by `corpus`:

- `stdlib` (the default): the Python standard library's own source, which every Python has;
- a folder: every UTF-8 text file under it, in path order (a `python -m data_pipeline.build`
  output folder is read as its table's `after` column instead);
- `hub:NAME` (or `hub:NAME:SPLIT`): a hub dataset's `content`/`text`/`after` column, streamed.

Each text is cut into chunks of at most `chunk_tokens` tokens; the first `samples` chunks
count. The cache key covers the model (its name, config and a strided fingerprint of the
weights up to the layer), the module, the corpus and both counts, so an edited or retrained
model never reads another's statistics.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import os
import sysconfig
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from core.errors import ConfigError
from core.progress import tqdm
from core.schema import build_output

log = logging.getLogger(__name__)
HUB_PREFIX = "hub:"
TEXT_COLUMNS = ("content", "text", "after", "code")


def default_stats_dir() -> Path:
    root = os.environ.get("EDITFORGE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache")), "editforge"
    )
    return Path(root) / "second_moments"


@dataclass(frozen=True)
class Corpus:
    """Where the statistics' texts come from (`spec` as the `corpus` option gives it)."""

    spec: str = "stdlib"

    def check(self) -> None:
        if self.spec == "stdlib" or self.spec.startswith(HUB_PREFIX):
            return
        if not Path(self.spec).expanduser().is_dir():
            raise ConfigError(
                f"editor.options.corpus={self.spec!r}: not a folder; give a local text folder, "
                "a data-pipeline output folder, 'stdlib' or hub:NAME"
            )

    def identity(self) -> str:
        """What the cache key records: the folder and its files' names and sizes, or the name."""
        if self.spec == "stdlib":
            return f"stdlib:{sysconfig.get_python_version()}"
        if self.spec.startswith(HUB_PREFIX):
            return self.spec
        files = self._files()
        digest = hashlib.sha256("\n".join(f"{p}:{p.stat().st_size}" for p in files).encode()).hexdigest()
        return f"{Path(self.spec).expanduser().resolve()}:{digest[:16]}"

    def _root(self) -> Path:
        return (
            Path(sysconfig.get_paths()["stdlib"]) if self.spec == "stdlib" else Path(self.spec).expanduser()
        )

    def _files(self) -> list[Path]:
        root = self._root()
        pattern = "*.py" if self.spec == "stdlib" else "*"
        skip = ("site-packages", "test", "tests", "idlelib", "__pycache__")
        return sorted(
            p
            for p in root.rglob(pattern)
            if p.is_file() and not any(part in skip for part in p.relative_to(root).parts)
        )

    def texts(self) -> Iterator[str]:
        self.check()
        if self.spec.startswith(HUB_PREFIX):
            yield from _hub_texts(self.spec[len(HUB_PREFIX) :])
            return
        table = None if self.spec == "stdlib" else build_output(self._root())
        if table is not None:
            yield from _table_texts(table)
            return
        for path in self._files():
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue  # binaries and unreadable files are not text
            if text.strip():
                yield text


def _table_texts(table: Path) -> Iterator[str]:
    import datasets

    data = (
        datasets.load_from_disk(str(table)) if table.is_dir() else datasets.Dataset.from_parquet(str(table))
    )
    for row in data:
        if row.get("after"):
            yield row["after"]


def _hub_texts(name: str) -> Iterator[str]:
    import datasets

    dataset, _, split = name.partition(":")
    stream = datasets.load_dataset(dataset, split=split or "train", streaming=True)
    for row in stream:
        column = next((c for c in TEXT_COLUMNS if isinstance(row.get(c), str)), None)
        if column is None:
            raise ConfigError(f"corpus hub:{name}: rows have none of the text columns {TEXT_COLUMNS}")
        yield row[column]


def chunks(tokenizer: Any, texts: Iterator[str], chunk_tokens: int, samples: int) -> Iterator[list[int]]:
    """Token chunks of at most `chunk_tokens` (BOS first), `samples` of them at most."""
    made = 0
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    step = chunk_tokens - len(bos)
    for text in texts:
        # tokenized a piece at a time, so a huge file costs only the chunks that are used
        for piece in range(0, len(text), step * 8):
            ids = tokenizer(text[piece : piece + step * 8], add_special_tokens=False)["input_ids"]
            for start in range(0, len(ids), step):
                yield bos + ids[start : start + step]
                made += 1
                if made >= samples:
                    return


def model_fingerprint(model: nn.Module, upto: Sequence[str]) -> str:
    """A hash of the model's name and config, and a strided sample of every parameter in the
    modules before and at `upto` (what the layer's inputs depend on)."""
    config = getattr(model, "config", None)
    h = hashlib.sha256()
    h.update(str(getattr(config, "name_or_path", "")).encode())
    h.update((config.to_json_string() if config is not None else type(model).__name__).encode())
    last = max(upto)
    for name, param in model.named_parameters():
        if _before(name, last):
            flat = param.detach().flatten()
            sample = flat[:: max(1, flat.numel() // 4096)].float().cpu()
            h.update(name.encode())
            h.update(sample.numpy().tobytes())
    return h.hexdigest()


def _before(param_name: str, module_name: str) -> bool:
    """Whether a parameter sits in a decoder layer at or before the module's, or outside all layers
    (embeddings); `model.layers.3.mlp.down_proj` vs `model.layers.2.self_attn.q_proj.weight`."""
    prefix, _, rest = module_name.rpartition(".layers.")
    layer = int(rest.split(".")[0]) if rest else None
    marker = f"{prefix}.layers." if prefix else None
    if layer is None or marker is None or not param_name.startswith(marker):
        return ".layers." not in param_name
    return int(param_name[len(marker) :].split(".")[0]) <= layer


class StopForward(Exception):
    """Raised by the last hook a statistics pass needs: the layers above it are not run."""


@dataclass(frozen=True)
class MomentOptions:
    corpus: str = "stdlib"
    samples: int = 100_000  # chunks: ROME/MEMIT's mom2_n_samples
    chunk_tokens: int = 1024
    batch_size: int = 8
    stats_dir: str | None = None  # default: $EDITFORGE_CACHE or ~/.cache/editforge, /second_moments


class SecondMoments:
    """E[k kᵀ] (float32) of the input of each named module; `computed` lists what this process
    computed rather than read from the cache."""

    def __init__(self, model: nn.Module, tokenizer: Any, options: MomentOptions) -> None:
        Corpus(options.corpus).check()
        self.model, self.tokenizer, self.options = model, tokenizer, options
        self.dir = Path(options.stats_dir).expanduser() if options.stats_dir else default_stats_dir()
        self.computed: list[str] = []

    def path(self, module_name: str) -> Path:
        o = self.options
        key = json.dumps(
            [
                model_fingerprint(self.model, [module_name]),
                module_name,
                Corpus(o.corpus).identity(),
                o.samples,
                o.chunk_tokens,
            ]
        )
        digest = hashlib.sha256(key.encode()).hexdigest()[:20]
        return self.dir / f"{module_name.replace('.', '_')}-{digest}.pt"

    def get(self, module_names: Sequence[str]) -> dict[str, torch.Tensor]:
        """Each module's second moment, from the cache where it is there; the rest in one pass."""
        paths = {name: self.path(name) for name in module_names}
        missing = [name for name, path in paths.items() if not path.exists()]
        if missing:
            for name, moment in self._compute(missing).items():
                paths[name].parent.mkdir(parents=True, exist_ok=True)
                tmp = paths[name].with_suffix(".tmp")
                torch.save({"moment": moment, "module": name, "options": self.options.__dict__}, tmp)
                tmp.replace(paths[name])  # atomic: a killed run leaves no half-written cache
                self.computed.append(name)
        device = next(self.model.parameters()).device
        return {name: torch.load(path, map_location=device)["moment"] for name, path in paths.items()}

    def _compute(self, names: Sequence[str]) -> dict[str, torch.Tensor]:
        o = self.options
        modules = {name: self.model.get_submodule(name) for name in names}
        sums = {name: None for name in names}
        count = 0
        device = next(self.model.parameters()).device
        last = max(names, key=_layer_of)
        pending: dict[str, torch.Tensor] = {}

        def hook(mod: nn.Module, args: tuple, out: Any, name: str) -> None:
            pending[name] = args[0]
            if name == last:
                raise StopForward

        handles = [
            m.register_forward_hook(lambda mod, a, out, n=n: hook(mod, a, out, n)) for n, m in modules.items()
        ]
        log.info(
            "estimating E[kk^T] of %s on %s (%d chunks of <= %d tokens)",
            ", ".join(names),
            o.corpus,
            o.samples,
            o.chunk_tokens,
        )
        stream = chunks(self.tokenizer, Corpus(o.corpus).texts(), o.chunk_tokens, o.samples)
        progress = tqdm(total=o.samples, desc="second moments", unit="chunk")
        try:
            # chunks are read as they are used: the corpus is never held tokenized in memory
            while batch := list(itertools.islice(stream, o.batch_size)):
                ids, mask = _pad(batch, self.tokenizer, device)
                pending.clear()
                with torch.no_grad(), contextlib.suppress(StopForward):
                    self.model(input_ids=ids, attention_mask=mask, use_cache=False)
                keep = mask.bool()
                for name in names:
                    k = pending[name][keep].float()
                    sums[name] = k.T @ k if sums[name] is None else sums[name] + k.T @ k
                count += int(keep.sum())
                progress.update(len(batch))
        finally:
            progress.close()
            for handle in handles:
                handle.remove()
        if count == 0:
            raise ConfigError(
                f"editor.options.corpus={o.corpus!r} gave no text to estimate the second moment on"
            )
        return {name: (total / count).cpu() for name, total in sums.items()}


def _layer_of(module_name: str) -> int:
    _, _, rest = module_name.rpartition(".layers.")
    return int(rest.split(".")[0]) if rest else -1


def _pad(batch: list[list[int]], tokenizer: Any, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(len(row) for row in batch)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, row in enumerate(batch):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    return ids.to(device), mask.to(device)
