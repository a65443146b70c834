"""The code trees a fix-task build reads: folders and git clones as they are, sdists unpacked, and PyPI
packages downloaded as sdists (the sdist carries the tests a wheel leaves out)."""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from pathlib import Path

from core.errors import UserError
from data_pipeline.config import SourceConfig
from data_pipeline.novel_api.mining import fetch_sdist

ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")


def code_trees(cfg: SourceConfig, work: Path) -> list[tuple[str, Path]]:
    """(label, folder) of every tree of a `tree` or `pypi` source; archives unpack under `work`."""
    trees = []
    if cfg.kind == "pypi":
        downloads = work / "downloads"
        for spec in cfg.packages:
            trees.append((spec, unpack(download_sdist(spec, downloads), work / "trees")))
        return trees
    for raw in cfg.paths:
        path = Path(raw)
        if path.is_dir():
            trees.append((path.resolve().name, path))
        elif path.name.endswith(ARCHIVES):
            trees.append((path.name, unpack(path, work / "trees")))
        else:
            raise UserError(f"source.paths: {raw} is neither a folder nor an sdist ({', '.join(ARCHIVES)})")
    return trees


def download_sdist(spec: str, folder: Path) -> Path:
    """The sdist of `spec` (`name==version`), from the index the novel-API miner reads too (its JSON
    simple API, `UV_INDEX_URL`/`PIP_INDEX_URL` when set), downloaded once into `folder`."""
    name, _, version = spec.partition("==")
    found = fetch_sdist(name.strip(), version.strip(), folder / name.strip())
    if found is None:
        raise UserError(
            f"source.packages: could not download the sdist of {spec!r} (the index has none, or cannot be reached)"
        )
    return found


def unpack(archive: Path, folder: Path) -> Path:
    """`archive` unpacked into a folder of its own under `folder` (again only if not complete)."""
    name = archive.name
    for suffix in ARCHIVES:
        name = name.removesuffix(suffix)
    target = folder / name
    marker = target / ".unpacked"
    if not marker.exists():
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        try:
            if archive.name.endswith(".zip"):
                with zipfile.ZipFile(archive) as zf:
                    zf.extractall(target)
            else:
                with tarfile.open(archive) as tf:
                    tf.extractall(target, filter="data")  # no links out of the folder, no devices
        except (OSError, tarfile.TarError, zipfile.BadZipFile) as err:
            raise UserError(f"{archive}: cannot unpack it ({err})") from err
        marker.write_text("")
    # an sdist holds one top folder (name-version/): the tree is that folder, on every run alike
    entries = [p for p in target.iterdir() if p != marker]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else target
