"""Git mining: scripted repositories pin the kept rows, the drop counts and which commits are walked."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from data_pipeline.config import GitOptions, SourceConfig
from data_pipeline.git_source import (
    DROP_REASONS,
    GitMiningConfig,
    GitSourceError,
    mine_repositories,
    mine_repository,
    repo_heads,
    validate_repos,
)
from data_pipeline.sources import iter_raw

PROJECT = Path(__file__).resolve().parents[2]
# Isolated from the developer's git config, with fixed identities, so commit ids are reproducible.
GIT_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_CONFIG")},
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Ed Itor",
    "GIT_AUTHOR_EMAIL": "ed@example.com",
    "GIT_COMMITTER_NAME": "Ed Itor",
    "GIT_COMMITTER_EMAIL": "ed@example.com",
}
BIG = b"x = 1\n" * 25_000  # 150,000 bytes: over the 100,000 default


def git(cwd: Path, *args: str, day: int = 1) -> str:
    date = f"2023-01-{day:02d}T12:00:00+00:00"
    env = {**GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    cmd = ["git", "-c", "commit.gpgsign=false", "-c", "protocol.file.allow=always", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


class Builder:
    """Writes files and commits them with one author day per commit."""

    def __init__(self, path: Path) -> None:
        self.path, self.day = path, 0
        path.mkdir()
        git(path, "init", "-q", "-b", "main")

    def write(self, files: dict[str, str | bytes]) -> None:
        for rel, data in files.items():
            target = self.path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data if isinstance(data, bytes) else data.encode())

    def commit(self, message: str, files: dict[str, str | bytes] | None = None) -> str:
        self.write(files or {})
        self.day += 1
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message, day=self.day)
        return git(self.path, "rev-parse", "HEAD")

    def merge(self, branch: str) -> str:
        """A merge commit even where a fast-forward was possible, as a pull-request merge makes."""
        self.day += 1
        git(self.path, "merge", "-q", "--no-ff", "-m", f"Merge {branch}", branch, day=self.day)
        return git(self.path, "rev-parse", "HEAD")


def module(i: int) -> str:
    return "".join(f"def f{k}():\n    return {k if k != i else -k}\n" for k in range(10))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The scripted history; returns the repository path and the commit ids by message."""
    root = tmp_path_factory.mktemp("git")
    sub = Builder(root / "sub")
    sub.commit("Start sub", {"lib.py": "x = 1\n"})
    b = Builder(root / "repo")
    (b.path / "link.py").symlink_to("a.py")
    initial = {
        "a.py": "A = 1\n",
        "b.py": "B = 1\n",
        "README.md": "hello\n",
        "bin.py": b"\x00\x01data\x00",
        "vendor/lib.py": "V = 1\n",
        "big.py": BIG,
        "latin.py": "s = 'caf\xe9'\n".encode("latin-1"),
        "old_name.py": module(-1),
        "pure.py": "P = 1\n",
        "notes.txt": "N = 1\n",
        "gone.py": "G = 1\n",
    }
    sha = {"Initial import": b.commit("Initial import", initial)}
    sha["Fix a"] = b.commit("Fix a\n\nThe constant was off by one.\n", {"a.py": "A = 2\n"})
    sha["Update b"] = b.commit("Update b", {"b.py": "B = 2\n"})
    b.commit("Touch three files", {"a.py": "A = 3\n", "b.py": "B = 3\n", "README.md": "bye\n"})
    b.commit("Change binary", {"bin.py": b"\x00\x02data\x00"})
    git(b.path, "mv", "old_name.py", "new_name.py")
    b.commit("Rename and edit", {"new_name.py": module(3)})
    git(b.path, "mv", "pure.py", "pkg_pure.py")
    b.commit("Move pure")
    b.commit("Update vendored", {"vendor/lib.py": "V = 2\n"})
    b.commit("Grow big", {"big.py": BIG + b"y = 2\n"})
    b.commit("Edit latin", {"latin.py": "s = 'th\xe9'\n".encode("latin-1")})
    git(b.path, "mv", "notes.txt", "notes.py")
    b.commit("Promote notes")
    (b.path / "link.py").unlink()
    (b.path / "link.py").symlink_to("b.py")
    b.commit("Retarget link")
    (b.path / "gone.py").unlink()
    b.commit("Remove gone")
    git(b.path, "submodule", "add", "-q", str(sub.path), "sub")
    b.commit("Add submodule")
    (b.path / "sub" / "lib.py").write_text("x = 2\n")
    git(b.path / "sub", "commit", "-q", "-am", "Bump lib")
    b.commit("Bump submodule")
    git(b.path, "checkout", "-q", "-b", "feature")
    b.commit("Tweak a on feature", {"a.py": "A = 4\n"})
    git(b.path, "checkout", "-q", "main")
    sha["Tweak b on main"] = b.commit("Tweak b on main", {"b.py": "B = 4\n"})
    b.day += 1
    git(b.path, "merge", "-q", "--no-ff", "-m", "Merge feature", "feature", day=b.day)
    sha["Merge feature"] = git(b.path, "rev-parse", "HEAD")
    git(b.path, "update-index", "--chmod=+x", "b.py")
    b.day += 1
    git(b.path, "commit", "-q", "-m", "Make b executable", day=b.day)
    return {"path": b.path, "sha": sha, "root": root}


def mine(path: Path, **cfg) -> tuple[list[dict], Counter]:
    rows, reasons = [], Counter()
    for row, reason in mine_repository(path, GitMiningConfig(**cfg)):
        assert (row is None) != (reason is None)
        if row is not None:
            rows.append(row)
        else:
            reasons[reason] += 1
    return rows, reasons


DEFAULT_DROPS = {
    "added_file": 10,  # root: every candidate; link.py is a symlink but added first
    "multi_file_not_chosen": 1,
    "binary": 1,
    "unchanged": 2,  # pure rename; mode-only change
    "vendored": 1,
    "oversized": 1,
    "not_utf8": 1,
    "extension_changed": 1,
    "symlink": 1,
    "deleted_file": 1,
    "submodule": 2,  # added, then bumped: never read as a blob
}
FIRST_PARENT_DROPS = {**DEFAULT_DROPS, "merge_commit": 1}  # the merge is walked there, and dropped


def test_default_config_keeps_exact_rows_and_counts_every_drop(repo: dict) -> None:
    rows, reasons = mine(repo["path"])
    assert reasons == DEFAULT_DROPS
    assert set(reasons) <= set(DROP_REASONS)
    got = [(r["instruction"], json.loads(r["meta"])["new_path"], r["before"], r["after"]) for r in rows]
    assert got == [  # newest first; the merge is left out of the walk, the merged commit is not
        ("Tweak b on main", "b.py", "B = 3\n", "B = 4\n"),
        ("Tweak a on feature", "a.py", "A = 3\n", "A = 4\n"),
        ("Rename and edit", "new_name.py", module(-1), module(3)),
        ("Touch three files", "b.py", "B = 2\n", "B = 3\n"),  # seed 0's choice, pinned
        ("Update b", "b.py", "B = 1\n", "B = 2\n"),
        ("Fix a", "a.py", "A = 1\n", "A = 2\n"),
    ]
    assert len(rows) + sum(reasons.values()) == 28  # every candidate accounted for
    for row in rows:
        assert row["lang"] == "python" and row["source"] == "git:repo"
        assert row["before"] != row["after"]


def test_row_meta_and_ids(repo: dict) -> None:
    rows, _ = mine(repo["path"])
    by_subject = {r["instruction"]: r for r in rows}
    sha = repo["sha"]
    fix = by_subject["Fix a"]
    assert fix["id"] == f"repo:{sha['Fix a']}:a.py"
    assert json.loads(fix["meta"]) == {
        "repo": str(repo["path"].resolve()),
        "commit": sha["Fix a"],
        "parent": sha["Initial import"],
        "author_date": "2023-01-02T12:00:00+00:00",
        "body": "The constant was off by one.",
        "old_path": "a.py",
        "new_path": "a.py",
        "status": "M",
        "files_changed": 1,
    }
    renamed = json.loads(by_subject["Rename and edit"]["meta"])
    assert (renamed["old_path"], renamed["new_path"]) == ("old_name.py", "new_name.py")
    assert renamed["status"].startswith("R")
    assert json.loads(by_subject["Touch three files"]["meta"])["files_changed"] == 3
    assert len({r["id"] for r in rows}) == len(rows)


def test_multi_file_policies(repo: dict) -> None:
    def subjects(rows: list[dict]) -> list[str]:
        return [r["instruction"] for r in rows]

    kept_all, reasons = mine(repo["path"], multi_file="keep_all")
    assert subjects(kept_all).count("Touch three files") == 2 and "multi_file_not_chosen" not in reasons
    dropped, reasons = mine(repo["path"], multi_file="drop")
    assert "Touch three files" not in subjects(dropped) and reasons["multi_file_dropped"] == 2
    assert len(dropped) == 5  # single-file commits only; a rename is one changed path

    def choice(seed: int) -> str:
        rows, _ = mine(repo["path"], seed=seed)
        return next(
            json.loads(r["meta"])["new_path"] for r in rows if r["instruction"] == "Touch three files"
        )

    choices = [choice(seed) for seed in range(8)]
    assert choices == [choice(seed) for seed in range(8)]  # reruns agree
    assert set(choices) == {"a.py", "b.py"}  # the seed, not the path order, decides


def test_first_parent_and_merges(repo: dict) -> None:
    rows, reasons = mine(repo["path"], first_parent=True)
    assert "Tweak a on feature" not in [r["instruction"] for r in rows]
    assert len(rows) == 5 and reasons == FIRST_PARENT_DROPS
    rows, reasons = mine(repo["path"], first_parent=True, include_merges=True)
    merge = next(r for r in rows if r["instruction"] == "Merge feature")
    assert (merge["before"], merge["after"]) == ("A = 3\n", "A = 4\n")  # against the first parent
    assert merge["id"] == f"repo:{repo['sha']['Merge feature']}:a.py"
    assert json.loads(merge["meta"])["parent"] == repo["sha"]["Tweak b on main"]
    assert "merge_commit" not in reasons


def test_limits_and_patterns(repo: dict) -> None:
    assert mine(repo["path"], max_commits=1) == ([], Counter(unchanged=1))
    rows, reasons = mine(repo["path"], max_file_bytes=200_000, vendored_patterns=())
    assert reasons["oversized"] == 0 and reasons["vendored"] == 0
    assert {"Grow big", "Update vendored"} <= {r["instruction"] for r in rows}


def test_bare_clone_and_detached_head(repo: dict) -> None:
    def outcomes(path: Path) -> list[tuple[str | None, str | None]]:
        return [(row and row["id"], why) for row, why in mine_repository(path, GitMiningConfig())]

    bare = repo["root"] / "mirrors" / "repo.git"  # named "repo" like the original, so ids match
    git(repo["root"], "clone", "-q", "--bare", str(repo["path"]), str(bare))
    assert outcomes(bare) == outcomes(repo["path"])
    clone = repo["root"] / "detached"
    git(repo["root"], "clone", "-q", str(repo["path"]), str(clone))
    git(clone, "checkout", "-q", "--detach", repo["sha"]["Update b"])
    rows, reasons = mine(clone)
    assert [r["instruction"] for r in rows] == ["Update b", "Fix a"]
    assert reasons == {"added_file": 10}


def test_empty_repository_yields_nothing(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    assert list(mine_repository(tmp_path, GitMiningConfig())) == []


def test_stopping_early_ends_git(repo: dict) -> None:
    items = mine_repository(repo["path"], GitMiningConfig())
    assert next(items) == (None, "unchanged")
    items.close()  # kills the streaming git log; must not hang


def test_bad_paths_fail_before_any_work(repo: dict, tmp_path: Path) -> None:
    missing, plain, file = tmp_path / "missing", tmp_path / "plain", tmp_path / "file.txt"
    plain.mkdir()
    file.write_text("x")
    for bad in (missing, plain, file, repo["path"] / "vendor"):
        with pytest.raises(GitSourceError, match=re.escape(str(bad))):
            mine_repository(bad, GitMiningConfig())  # raises on the call, not on iteration
    with pytest.raises(GitSourceError) as err:
        mine_repositories([repo["path"], missing, plain], GitMiningConfig())
    assert str(missing) in str(err.value) and str(plain) in str(err.value)
    assert validate_repos([repo["path"]]) == [repo["path"].resolve()]
    with pytest.raises(ValueError, match="multi_file"):
        GitMiningConfig(multi_file="some")


def _candidate_count(path: Path) -> int:
    """Candidates counted independently from `git log --raw` (no merges, renames, root diff)."""
    # The developer's own git config (safe.directory in CI containers) applies to this checkout.
    cmd = ["git", "-C", str(path), "log", "--no-merges", "-M", "--root"]
    out = subprocess.run([*cmd, "--raw", "--format="], check=True, capture_output=True, text=True).stdout
    count = 0
    for line in filter(None, out.splitlines()):
        meta, *paths = line.split("\t")
        count += "160000" in meta or any(p.endswith(".py") for p in paths)
    return count


def test_mines_this_projects_history() -> None:
    try:
        validate_repos([PROJECT])
    except GitSourceError as e:
        pytest.skip(f"cannot mine this checkout: {e}")
    items = list(mine_repository(PROJECT, GitMiningConfig(multi_file="keep_all")))
    rows = [row for row, _ in items if row is not None]
    if not rows:
        shallow = subprocess.run(
            ["git", "-C", str(PROJECT), "rev-parse", "--is-shallow-repository"],
            capture_output=True,
            text=True,
        )
        if shallow.stdout.strip() == "true":
            pytest.skip("shallow clone without a modified Python file in its history")
    assert rows
    assert all(row["before"] != row["after"] for row in rows)
    assert len({row["id"] for row in rows}) == len(rows)
    assert len(items) == _candidate_count(PROJECT)  # input = kept + sum(dropped)


MAINLINE = ("Tune core", "Speed up util", "Document util", "Rename helper in util")
BRANCHES = ("Add retry to app", "Handle timeout in app", "Validate input in core")
UNMERGED = "Try a cache in core"


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A pull-request history: two branches merged with --no-ff, a fast-forward, an unmerged branch."""
    b = Builder(tmp_path_factory.mktemp("flow") / "flow")
    sha = {
        "Create app": b.commit(
            "Create app", {"app.py": "A = 0\n", "core.py": "C = 0\n", "util.py": "U = 0\n"}
        )
    }
    sha["Tune core"] = b.commit("Tune core", {"core.py": "C = 1\n"})
    git(b.path, "checkout", "-q", "-b", "feat-a")
    sha["Add retry to app"] = b.commit("Add retry to app", {"app.py": "A = 1\n"})
    sha["Handle timeout in app"] = b.commit("Handle timeout in app", {"app.py": "A = 2\n"})
    git(b.path, "checkout", "-q", "main")
    sha["Speed up util"] = b.commit("Speed up util", {"util.py": "U = 1\n"})
    sha["Merge feat-a"] = b.merge("feat-a")
    git(b.path, "checkout", "-q", "-b", "feat-b")
    sha["Validate input in core"] = b.commit("Validate input in core", {"core.py": "C = 2\n"})
    git(b.path, "checkout", "-q", "main")
    sha["Document util"] = b.commit("Document util", {"util.py": '"""Helpers."""\nU = 1\n'})
    sha["Merge feat-b"] = b.merge("feat-b")
    git(b.path, "checkout", "-q", "-b", "feat-c")
    sha["Rename helper in util"] = b.commit("Rename helper in util", {"util.py": '"""Helpers."""\nV = 1\n'})
    git(b.path, "checkout", "-q", "main")
    git(b.path, "merge", "-q", "--ff-only", "feat-c")  # no merge commit
    git(b.path, "checkout", "-q", "-b", "wip")
    sha[UNMERGED] = b.commit(UNMERGED, {"core.py": "C = 3\n"})
    git(b.path, "checkout", "-q", "main")
    git(b.path, "tag", "-a", "v1", "-m", "Release 1", sha["Merge feat-a"], day=b.day)
    return {"path": b.path, "sha": sha}


def commits(rows: list[dict]) -> set[str]:
    return {json.loads(r["meta"])["commit"] for r in rows}


def shas(flow: dict, *subjects: str) -> set[str]:
    return {flow["sha"][s] for s in subjects}


def test_default_walk_mines_every_non_merge_commit_once(flow: dict) -> None:
    rows, reasons = mine(flow["path"])
    assert commits(rows) == shas(flow, *MAINLINE, *BRANCHES)
    assert len(rows) == len(MAINLINE) + len(BRANCHES)  # one edit each: merges add no second copy
    assert reasons == {"added_file": 3}  # the root commit; merges are not candidates at all


def test_first_parent_walks_only_the_mainline(flow: dict) -> None:
    rows, reasons = mine(flow["path"], first_parent=True)
    assert commits(rows) == shas(flow, *MAINLINE)
    assert reasons == {"added_file": 3, "merge_commit": 2}


def test_include_merges_adds_each_merge_against_its_first_parent(flow: dict) -> None:
    rows, _ = mine(flow["path"], include_merges=True)
    assert commits(rows) == shas(flow, *MAINLINE, *BRANCHES, "Merge feat-a", "Merge feat-b")
    merge = next(r for r in rows if r["instruction"] == "Merge feat-a")
    assert (merge["before"], merge["after"]) == ("A = 0\n", "A = 2\n")  # the branch's two edits as one


@pytest.mark.parametrize("refs", [["--all"], ["HEAD", "wip"], ["wip"]])
def test_more_refs_reach_the_unmerged_branch(flow: dict, refs: list[str]) -> None:
    rows, reasons = mine(flow["path"], refs=refs)
    assert commits(rows) == shas(flow, *MAINLINE, *BRANCHES, UNMERGED)
    assert reasons == {"added_file": 3}


def test_refs_may_be_tags_and_commit_ids(flow: dict) -> None:
    rows, _ = mine(flow["path"], refs=["v1"])  # an annotated tag on the first merge
    assert commits(rows) == shas(
        flow, "Tune core", "Speed up util", "Add retry to app", "Handle timeout in app"
    )
    rows, _ = mine(flow["path"], refs=[flow["sha"]["Speed up util"]])
    assert commits(rows) == shas(flow, "Tune core", "Speed up util")


def test_a_bad_ref_fails_before_any_work(flow: dict, repo: dict) -> None:
    path = flow["path"].resolve()
    with pytest.raises(GitSourceError) as err:
        mine_repository(path, GitMiningConfig(refs=["HEAD", "no-such-branch"]))  # on the call
    assert str(err.value) == f"{path}: ref 'no-such-branch' does not name a commit"
    with pytest.raises(GitSourceError) as err:
        mine_repositories([repo["path"], path], GitMiningConfig(refs=["wip"]))
    assert str(repo["path"].resolve()) in str(err.value) and str(path) not in str(err.value)
    with pytest.raises(GitSourceError, match="main..wip"):
        mine_repository(path, GitMiningConfig(refs=["main..wip"]))  # a range is not one revision
    for bad in ([], [""], ["--no-merges"], "HEAD"):
        with pytest.raises(ValueError, match="refs"):
            GitMiningConfig(refs=bad)


def test_repo_heads(flow: dict, tmp_path: Path) -> None:
    path, sha = flow["path"], flow["sha"]
    tip = sha["Rename helper in util"]
    assert repo_heads([str(path)], ["HEAD", "wip", "v1"]) == {
        str(path): {"HEAD": tip, "v1": sha["Merge feat-a"], "wip": sha[UNMERGED]}  # v1 peeled
    }
    assert repo_heads([path], ["--all"]) == {
        str(path): {
            "HEAD": tip,
            "refs/heads/feat-a": sha["Handle timeout in app"],
            "refs/heads/feat-b": sha["Validate input in core"],
            "refs/heads/feat-c": tip,
            "refs/heads/main": tip,
            "refs/heads/wip": sha[UNMERGED],
            "refs/tags/v1": sha["Merge feat-a"],
        }
    }
    with pytest.raises(GitSourceError, match="nope"):
        repo_heads([path], ["nope"])
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(path), str(clone))
    before = repo_heads([clone], ["HEAD", "--all"])
    assert before == repo_heads([clone], ["HEAD", "--all"])  # cheap to call twice, same answer
    (clone / "app.py").write_text("A = 3\n")
    git(clone, "commit", "-q", "-am", "Log retries", day=28)
    after = repo_heads([clone], ["HEAD", "--all"])[str(clone)]
    assert after["HEAD"] == git(clone, "rev-parse", "HEAD") != before[str(clone)]["HEAD"]
    assert after["refs/heads/main"] == after["HEAD"]
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert repo_heads([empty], ["HEAD", "--all"]) == {str(empty): {}}
    assert list(mine_repository(empty, GitMiningConfig(refs=["HEAD", "--all"]))) == []


def test_source_config_walks_the_configured_refs(flow: dict) -> None:
    def mined(git_options: GitOptions) -> tuple[set[str], int]:
        items = list(iter_raw(SourceConfig(kind="git", repos=[str(flow["path"])], git=git_options)))
        return commits([raw for raw, _ in items if raw is not None]), sum(raw is None for raw, _ in items)

    assert mined(GitOptions()) == (shas(flow, *MAINLINE, *BRANCHES), 3)
    assert mined(GitOptions(refs=["HEAD", "wip"])) == (shas(flow, *MAINLINE, *BRANCHES, UNMERGED), 3)
    assert mined(GitOptions(first_parent=True)) == (shas(flow, *MAINLINE), 5)
    with pytest.raises(GitSourceError, match="no-such-branch"):
        mined(GitOptions(refs=["no-such-branch"]))
