"""scripts/offline_wheels.py plans what a GPU node without an index must be given, and
scripts/gpu_checks.sh runs the GPU checks with those wheels first on the path.

The plan is computed from real package metadata (dist-info folders written here, read through
importlib.metadata); the checks script runs for real on CPU (the tiny recipe, the GPU tests
skipping), with a wheel built here that must shadow the environment's own packages. Nothing is
downloaded.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu_checks.sh"

spec = importlib.util.spec_from_file_location("offline_wheels", REPO / "scripts" / "offline_wheels.py")
assert spec is not None and spec.loader is not None
offline_wheels = importlib.util.module_from_spec(spec)
sys.modules["offline_wheels"] = offline_wheels
spec.loader.exec_module(offline_wheels)


def dist_info(root: Path, name: str, version: str, requires: list[str], tag: str = "py3-none-any") -> None:
    folder = root / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    (folder / "METADATA").write_text("\n".join(lines + [f"Requires-Dist: {r}" for r in requires]) + "\n")
    (folder / "WHEEL").write_text(f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n")


@pytest.fixture
def environment(tmp_path):
    """A small environment: root needs a>=2, b only before Python 3.12, torch and an nvidia library;
    a needs c; c needs nothing; b is built for one Python only."""
    site = tmp_path / "site"
    dist_info(
        site,
        "root",
        "1.0",
        ["a>=2", 'b; python_version < "3.12"', "torch>=2", "nvidia-cublas", 'x; extra == "dev"'],
    )
    dist_info(site, "a", "2.5", ["c<4"])
    dist_info(site, "b", "0.3", [], tag="cp311-cp311-manylinux_2_17_x86_64")
    dist_info(site, "c", "3.1", [])
    found = {d.metadata["Name"]: d for d in md.distributions(path=[str(site)])}
    return lambda name: found.get(name)


def test_the_plan_carries_what_the_node_lacks_or_has_too_old(environment):
    plan = offline_wheels.plan(
        ["root"], "3.11", {"a": "1.0", "c": "3.9", "b": "not-a-version"}, environment, {}
    )
    carried = {w.name: w for w in plan}
    assert list(carried) == ["root", "a", "b"]  # c: the node's 3.9 meets a's c<4; b's version: unreadable
    assert carried["a"].reason == "the node's 1.0 is not >=2" and carried["a"].version == "2.5"
    assert carried["b"].reason == "the node's version 'not-a-version' is not one pip compares"
    # the CUDA stack is the node's own, and an extra's requirement is not taken
    assert not {"torch", "nvidia-cublas", "x"} & set(carried)


def test_the_plan_follows_only_what_it_carries(environment):
    """a met on the node: its own requirement c is the node's business; b's marker is for 3.11 only."""
    plan = offline_wheels.plan(["root"], "3.12", {"a": "2.7"}, environment, {})
    assert [w.name for w in plan] == ["root"]
    plan = offline_wheels.plan(["root"], "3.12", {}, environment, {})
    assert [w.name for w in plan] == ["root", "a", "c"]
    assert [w.specifier for w in plan if w.name == "c"] == [offline_wheels.SpecifierSet("<4")]


def test_a_root_that_is_not_installed_here_takes_its_pin(environment):
    plan = offline_wheels.plan(
        ["root", "liger-kernel"], "3.12", {"a": None}, environment, {"liger-kernel": "0.8.5"}
    )
    assert [(w.name, w.version) for w in plan] == [("root", "1.0"), ("liger-kernel", "0.8.5")]


def test_the_nodes_package_list_reads_in_pips_formats():
    have = offline_wheels.parse_have(
        ["Package Version", "------- -------", "Torch 2.11.0", "hydra_core==1.3.2", "bare",
         "pkg @ file:///x", "# a comment", ""]
    )  # fmt: skip
    assert have == {"torch": "2.11.0", "hydra-core": "1.3.2", "bare": None, "pkg": None}


def test_pure_wheels_are_built_here_and_the_rest_downloaded_for_the_node(environment, tmp_path):
    assert offline_wheels.is_pure("a", environment) and not offline_wheels.is_pure("b", environment)
    plan = offline_wheels.plan(["root"], "3.11", {}, environment, {})
    pure = {w.name for w in plan if offline_wheels.is_pure(w.name, environment)}
    wheel, download = offline_wheels.pip_commands(plan, tmp_path, "3.11", pure)
    assert wheel[3:5] == ["wheel", "--no-deps"] and wheel[-3:] == ["root==1.0", "a==2.5", "c==3.1"]
    assert download[3] == "download" and download[-1] == "b==0.3"
    assert "--only-binary=:all:" in download and download[download.index("--python-version") + 1] == "3.11"


def test_the_plan_of_this_environment_names_every_root_at_its_version():
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "offline_wheels.py"), "--dry-run"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert f"transformers=={md.version('transformers')}  (a root)" in lines
    liger = offline_wheels.this_environment("liger-kernel")  # installed here: its version; else the pin
    assert f"liger-kernel=={liger.version if liger else offline_wheels.LIGER_KERNEL}  (a root)" in lines
    assert not any(line.startswith(("torch==", "nvidia-")) for line in lines)


def fake_wheel(folder: Path, name: str, version: str) -> Path:
    """A wheel of an empty package: enough for pip to install it and for importlib.metadata to see it."""
    folder.mkdir(parents=True, exist_ok=True)
    module, info = name.replace("-", "_"), f"{name.replace('-', '_')}-{version}.dist-info"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    files = {
        f"{module}/__init__.py": "",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{f},,\n" for f in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


@pytest.mark.slow
def test_the_gpu_checks_run_on_cpu_with_the_wheels_first_on_the_path(tmp_path):
    fake_wheel(tmp_path / "wheels", "liger-kernel", "0.0.1")
    out = tmp_path / "out"
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--device", "cpu", "--rounds", "1", "--wheels", str(tmp_path / "wheels"),
         "--out", str(out), "--", "--steps", "1", "--repeats", "2"],
        cwd=tmp_path, env={**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)},
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "liger-kernel 0.0.1" in (out / "versions.log").read_text()  # the carried wheel shadows
    results = {r["config"]: r for r in json.loads((out / "bench_train.json").read_text())["results"]}
    assert set(results) == {"padded", "default"} and all(r["tokens_per_s"] > 0 for r in results.values())
    assert "RESULT device=cpu" in (out / "bench_train.log").read_text()
    assert 'skipped="' in (out / "test_gpu.xml").read_text()  # without CUDA the GPU tests skip, saying why
    assert "needs CUDA" in (out / "test_gpu.log").read_text()
    summary = proc.stdout[proc.stdout.rindex(f"results in {out}") :]  # the figures, repeated at the end
    assert "RESULT device=cpu" in summary and "skipped in" in summary


@pytest.mark.parametrize(
    ("arguments", "message"),
    [(["--device", "tpu"], "--device takes cuda or cpu"), (["--wheels", "EMPTY"], "no wheels in"),
     (["--frobnicate"], "unknown argument --frobnicate"),
     (["--bench-minutes", "2.5"], "--bench-minutes takes a whole number above 0, not 2.5")],
)  # fmt: skip
def test_the_gpu_checks_refuse_bad_arguments_in_one_line(tmp_path, arguments, message):
    (tmp_path / "EMPTY").mkdir()
    proc = subprocess.run(
        ["bash", str(SCRIPT), *arguments, "--out", str(tmp_path / "out")],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1
