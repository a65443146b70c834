"""`run.push_to_hub`: a run that cannot push stops at start-up in one line, before any data or
model loads; a run that can pushes DIR/final (model, tokenizer, config and card) at the end.

The hub is a local HTTP server speaking the part of the Hub API that huggingface_hub calls
(whoami, create repo, validate the card's YAML, preupload, commit), reached through `HF_ENDPOINT`: training and
huggingface_hub run unchanged, as a subprocess, the way a user starts them.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from conftest import REPO, JSONHandler, local_server
from test_entry_points import assert_one_line_error

TOKEN = "hf_editforge_test_token"
USER, ORG = "edit-tester", "edit-org"


class _Hub(JSONHandler, BaseHTTPRequestHandler):
    """Answers as the Hub does for a write token of USER (member of ORG); records what it was sent."""

    created: list[dict] = []
    commits: list[dict] = []
    role = "write"

    def _authorised(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {TOKEN}":
            return True
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()
        return False

    def do_GET(self):
        if self.path == "/api/whoami-v2" and self._authorised():
            auth = {"type": "access_token", "accessToken": {"role": self.role}}
            self.reply_json({"type": "user", "name": USER, "orgs": [{"name": ORG}], "auth": auth})

    def do_POST(self):
        if not self._authorised():
            return
        if self.path == "/api/repos/create":
            payload = self.read_json()
            self.created.append(payload)
            namespace = payload.get("organization") or USER
            self.reply_json({"url": f"http://{self.headers['Host']}/{namespace}/{payload['name']}"})
        elif self.path == "/api/validate-yaml":  # the card's metadata, checked before the upload
            self.read_json()
            self.reply_json({"errors": [], "warnings": []})
        elif m := re.fullmatch(r"/api/models/(.+)/preupload/main", self.path):
            files = [
                {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                for f in self.read_json()["files"]
            ]
            self.reply_json({"files": files})
        elif m := re.fullmatch(r"/api/models/(.+)/commit/main", self.path):
            lines = self.rfile.read(int(self.headers["Content-Length"])).decode().splitlines()
            records = [json.loads(line) for line in lines]
            files = {
                r["value"]["path"]: base64.b64decode(r["value"]["content"])
                for r in records
                if r["key"] == "file"
            }
            header = next(r["value"] for r in records if r["key"] == "header")
            self.commits.append({"repo": m.group(1), "summary": header["summary"], "files": files})
            url = f"http://{self.headers['Host']}/{m.group(1)}/commit/{'a' * 40}"
            self.reply_json({"commitUrl": url, "commitOid": "a" * 40})
        else:
            self.send_error(404)


@pytest.fixture
def hub():
    _Hub.created, _Hub.commits, _Hub.role = [], [], "write"
    with local_server(_Hub) as url:
        yield url


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "WANDB_", "EDITFORGE_DEBUG"))}
    return {**env, "HF_HOME": str(tmp_path / "hf-home"), "OMP_NUM_THREADS": "1", **extra}  # no stored token


def _sft(tmp_path: Path, env: dict[str, str], *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "train" / "sft.py"), "recipe=tiny", f"run.output_dir={tmp_path / 'run'}",
         "run.report_to=none", "run.push_to_hub=true", *overrides],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.mark.parametrize(
    "case, needle",
    [
        ("offline", "HF_HUB_OFFLINE=1 switches the hub off"),
        ("unreachable", "the hub (http://127.0.0.1:9) is unreachable"),
        ("no token", "no hub token is set"),
        ("bad token", "the hub refused the token"),
        ("read-only token", "the hub token is read-only"),
        ("foreign namespace", "may not write to 'someone-else'"),
    ],
)
def test_a_run_that_cannot_push_stops_before_loading_anything(tmp_path, hub, case, needle):
    env = _env(tmp_path, HF_ENDPOINT=hub, HF_TOKEN=TOKEN)
    repo = f"{ORG}/tiny-edit"
    if case == "offline":
        env["HF_HUB_OFFLINE"] = "1"
    elif case == "unreachable":
        env["HF_ENDPOINT"] = "http://127.0.0.1:9"  # the discard port: nothing listens
    elif case == "no token":
        del env["HF_TOKEN"]
    elif case == "bad token":
        env["HF_TOKEN"] = "hf_wrong"
    elif case == "read-only token":
        _Hub.role = "read"
    else:
        repo = "someone-else/tiny-edit"
    proc = _sft(tmp_path, env, f"run.hub_model_id={repo}")
    assert_one_line_error(proc, "run.push_to_hub=true" if case != "foreign namespace" else repo, needle)
    assert not (tmp_path / "run").exists()  # no data read, no tokenizer trained, no folder made
    assert "Tokenizing" not in proc.stdout + proc.stderr and not _Hub.created and not _Hub.commits


@pytest.mark.slow
def test_the_final_model_and_its_card_are_pushed_at_the_end(tmp_path, hub):
    env = _env(tmp_path, HF_ENDPOINT=hub, HF_TOKEN=TOKEN)
    proc = _sft(
        tmp_path, env, "run.hub_model_id=tiny-edit", "run.hub_private_repo=true", "run.max_steps=2",
        "data.datasets=[{synthetic: 40}]", "data.val_size=0",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [created] = _Hub.created
    assert created["name"] == "tiny-edit" and not created.get("organization")  # the token user's namespace
    assert created.get("visibility") == "private"
    assert len(_Hub.commits) == 1
    commit = _Hub.commits[0]
    final = tmp_path / "run" / "final"
    assert commit["repo"] == f"{USER}/tiny-edit" and commit["summary"] == "EditForge recipe=tiny, run run"
    assert set(commit["files"]) == {p.name for p in final.iterdir()}  # final/ as it is on disk
    for name in ("README.md", "model.safetensors", "editforge_config.yaml", "tokenizer.json"):
        assert commit["files"][name] == (final / name).read_bytes()
    assert "recipe=tiny" in commit["files"]["README.md"].decode()  # our card, not a generic one
    assert "pushed" in proc.stdout + proc.stderr
