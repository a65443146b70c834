"""Streaming wrappers over the git CLI: repository checks, a commit-and-diff reader, blob reads.

Only machine-readable output is parsed (`git log -z --raw`, `git cat-file --batch`,
`git rev-parse --verify`, `git for-each-ref` with a NUL-separated format) and every option
that shapes it is passed explicitly, so a user's git config (colours, abbreviation, rename
settings, signatures) cannot change what we read. Nothing here holds more than one commit's
file list in memory.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

GITLINK_MODE = "160000"  # a submodule: the object is a commit of another repository
SYMLINK_MODE = "120000"
ALL_REFS = "--all"  # git's spelling for every ref under refs/ plus HEAD

# Variables that would point git at another repository than the one given with -C (set, e.g.,
# when the pipeline runs from inside a git hook).
_REPO_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
)
# One header token (marked by \x01) per commit; fields are NUL-separated because a commit
# message cannot contain NUL. The trailing %x00 ends the body before the diff entries start.
_LOG_FORMAT = "%x01%H%x00%P%x00%aI%x00%s%x00%b%x00"
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # SHA-1 or SHA-256 object name


class GitSourceError(ValueError):
    """A repository path is unusable, or git failed on it; the message names the path."""


@dataclass(frozen=True)
class FileChange:
    """One entry of `git diff --raw`: modes, blob ids, status ("M", "A", "D", "T", "R087")."""

    status: str
    old_mode: str
    new_mode: str
    old_blob: str
    new_blob: str
    old_path: str  # paths are decoded with surrogateescape: undecodable bytes survive
    new_path: str


@dataclass(frozen=True)
class Commit:
    """A commit and its diff against its first parent (the empty tree for a root commit)."""

    sha: str
    parents: tuple[str, ...]
    author_date: str
    subject: str
    body: str
    changes: tuple[FileChange, ...]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _REPO_ENV}
    env["GIT_NO_LAZY_FETCH"] = "1"  # a partial clone must report a missing blob, not fetch it
    return env


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, env=_env(), check=False
        )
    except FileNotFoundError as e:
        raise GitSourceError("the git executable was not found on PATH; install git") from e


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "no message"


def check_repository(path: str | Path) -> Path:
    """The resolved path of a work tree's top level or of a git directory (bare repository)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise GitSourceError(f"{path}: does not exist")
    if not p.is_dir():
        raise GitSourceError(f"{path}: is not a directory")
    p = p.resolve()
    git_dir = _git(p, "rev-parse", "--absolute-git-dir")
    if git_dir.returncode != 0:
        raise GitSourceError(f"{path}: is not a git repository ({_first_line(git_dir.stderr)})")
    if Path(git_dir.stdout.strip()).resolve() == p:
        return p
    top = _git(p, "rev-parse", "--show-toplevel")
    top_level = Path(top.stdout.strip()).resolve() if top.returncode == 0 else None
    if top_level != p:
        # Mining a subdirectory would silently mine the whole enclosing repository.
        raise GitSourceError(f"{path}: is inside the git repository {top_level} but is not its top level")
    return p


def resolve_commit(repo: Path, rev: str) -> str | None:
    """The commit one revision names (a tag is peeled), or None: unborn HEAD, unknown name, a range.

    A name starting with "-" is refused, since git would read it as an option.
    """
    if not rev or rev.startswith("-"):
        return None
    proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    sha = proc.stdout.strip()
    # rev-parse also succeeds on "^rev" (an exclusion), printing "^<sha>": not one commit.
    return sha if proc.returncode == 0 and _SHA.fullmatch(sha) else None


def list_refs(repo: Path) -> dict[str, str]:
    """Every ref `git for-each-ref` lists, by full name, to its object, plus HEAD.

    An annotated tag maps to the object it tags. An unborn HEAD is left out, so a repository
    without commits gives {}.
    """
    fmt = "--format=%(refname)%00%(objectname)%00%(*objectname)"
    proc = _git(repo, "for-each-ref", "--sort=refname", fmt)
    if proc.returncode != 0:
        raise GitSourceError(f"{repo}: git for-each-ref failed ({_first_line(proc.stderr)})")
    refs = {}
    for line in proc.stdout.splitlines():  # ref names cannot contain a newline or NUL
        name, target, peeled = line.split("\0")
        refs[name] = peeled or target
    head = resolve_commit(repo, "HEAD")
    if head is not None:
        refs["HEAD"] = head
    return refs


def _nul_tokens(stream: IO[bytes]) -> Iterator[bytes]:
    pending: list[bytes] = []  # pieces of a token that spans chunks (long commit messages)
    while chunk := stream.read(1 << 16):
        *done, tail = chunk.split(b"\0")
        if done:
            pending.append(done[0])
            yield b"".join(pending)
            yield from done[1:]
            pending = []
        pending.append(tail)
    if rest := b"".join(pending):
        yield rest


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")  # git re-encodes messages to UTF-8; replace what lies


def _path(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _take(tokens: Iterator[bytes]) -> bytes:
    token = next(tokens, None)
    if token is None:
        raise GitSourceError("git log output ended in the middle of a commit")
    return token


def _commit_header(token: bytes, tokens: Iterator[bytes]) -> tuple[str, tuple[str, ...], str, str, str]:
    parents, date, subject, body = (_take(tokens) for _ in range(4))
    return token[1:].decode(), tuple(parents.decode().split()), date.decode(), _text(subject), _text(body)


def _parse_log(tokens: Iterator[bytes]) -> Iterator[Commit]:
    header: tuple[str, tuple[str, ...], str, str, str] | None = None
    changes: list[FileChange] = []
    for token in tokens:
        if token.startswith(b"\x01"):
            if header is not None:
                yield Commit(*header, tuple(changes))
            header = _commit_header(token, tokens)
            changes = []
            continue
        entry = token.lstrip(b"\n")
        if not entry:
            continue
        if not entry.startswith(b":") or header is None:
            raise GitSourceError(f"unexpected git log output: {token[:80]!r}")
        old_mode, new_mode, old_blob, new_blob, status = entry[1:].decode().split()
        old_path = _path(_take(tokens))
        new_path = _path(_take(tokens)) if status[0] in "RC" else old_path
        changes.append(FileChange(status, old_mode, new_mode, old_blob, new_blob, old_path, new_path))
    if header is not None:
        yield Commit(*header, tuple(changes))


def iter_commits(
    repo: Path,
    revisions: Sequence[str],
    *,
    first_parent: bool,
    skip_merges: bool,
    max_commits: int | None,
) -> Iterator[Commit]:
    """Commits reachable from `revisions`, newest first, each with its first-parent diff (renames as R).

    `revisions` are commit ids or ALL_REFS, never names: a name could be read as an option or a
    path. One `git log` process streams the whole history; close the iterator to stop it early.
    """
    cmd = ["git", "-C", str(repo), "log", "-z", "--raw", "--no-abbrev", "-M", "--root"]
    cmd += ["--diff-merges=first-parent", "--ignore-submodules=none", "--no-color", "--no-ext-diff"]
    cmd += ["--no-textconv", "--no-show-signature", "--encoding=UTF-8", f"--format={_LOG_FORMAT}"]
    if first_parent:
        cmd.append("--first-parent")
    if skip_merges:
        cmd.append("--no-merges")
    if max_commits is not None:
        cmd.append(f"--max-count={max_commits}")
    cmd += [*revisions, "--"]
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: warnings must never block git
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=_env())
        assert proc.stdout is not None
        finished = False
        try:
            yield from _parse_log(_nul_tokens(proc.stdout))
            finished = True
        finally:
            if not finished:
                proc.kill()  # stopped early: git may be blocked writing the rest of the history
            proc.stdout.close()
            code = proc.wait()
        if code != 0:
            err.seek(0)
            message = _first_line(err.read().decode(errors="replace"))
            raise GitSourceError(f"{repo}: git log failed ({message})")


class BlobReader:
    """Persistent `git cat-file` processes, so reading a blob costs a pipe round trip, not a fork.

    `size` asks `--batch-check` (header only), so an oversized blob is never read; `read` asks
    `--batch`. Use as a context manager.
    """

    def __init__(self, repo: Path) -> None:
        self._repo = repo
        self._check = self._start("--batch-check")
        self._batch = self._start("--batch")

    def _start(self, mode: str) -> subprocess.Popen[bytes]:
        cmd = ["git", "-C", str(self._repo), "cat-file", mode]
        pipe = subprocess.PIPE
        return subprocess.Popen(cmd, stdin=pipe, stdout=pipe, stderr=subprocess.DEVNULL, env=_env())

    def _header(self, proc: subprocess.Popen[bytes], blob: str) -> list[str]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(blob.encode() + b"\n")
        proc.stdin.flush()
        header = proc.stdout.readline().decode().split()
        if not header:
            raise GitSourceError(f"{self._repo}: git cat-file stopped answering")
        return header

    def size(self, blob: str) -> int | None:
        """The blob's size in bytes, or None if the object is missing (shallow or partial clone)."""
        header = self._header(self._check, blob)
        return int(header[2]) if header[1] == "blob" else None

    def read(self, blob: str) -> bytes:
        """The blob's content; call only after `size` found it."""
        header = self._header(self._batch, blob)
        assert self._batch.stdout is not None
        data = self._batch.stdout.read(int(header[2]))
        self._batch.stdout.read(1)  # the newline git writes after each object
        return data

    def close(self) -> None:
        for proc in (self._check, self._batch):
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.close()
            proc.wait()
            proc.stdout.close()

    def __enter__(self) -> BlobReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
