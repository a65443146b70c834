"""Go for HumanEvalFix: `go test` in GOPATH mode over Debian's testify, with a prebuilt build cache.

bigcode's harness writes the program and its tests to `main_test.go` and runs `go test` on it, in a
module that fetched testify from the network. Offline, GOPATH mode (`GO111MODULE=off`) finds
testify in Debian's GOPATH, /usr/share/gocode (golang-github-stretchr-testify-dev), and
`GOPROXY=off` keeps the go command off the network. Compiling testify and the standard packages
takes seconds, so it is done once per Go version into a build cache that every run reads:
bubblewrap shows it read-only and go's attempts to add a run's own builds to it fail quietly (the
weaker local backend lets them in; go's cache is keyed by content), and `-count=1` keeps go from
replaying a test result instead of running the test.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from eval.toolchains import ToolchainError, ask, build_once, digest, run

GOPATH = "/usr/share/gocode"
TESTIFY = f"{GOPATH}/src/github.com/stretchr/testify/assert"
INSTALL = "apt-get install golang-go golang-github-stretchr-testify-dev"
# What every run compiles against: testify's assert and the packages bigcode's helper may import.
WARM_UP = """package main

import (
    "testing"
    "github.com/stretchr/testify/assert"
    _ "bytes"
    _ "crypto/md5"
    _ "fmt"
    _ "math"
    _ "math/rand"
    _ "regexp"
    _ "sort"
    _ "strconv"
    _ "strings"
    _ "time"
)

func TestWarmUp(t *testing.T) {
    assert.New(t).Equal(1, 1)
}
"""


@dataclass(frozen=True)
class Go:
    go: str  # the go binary
    cache: str  # the prebuilt build cache every run reads

    def script(self, command: str) -> str:
        """A shell line that runs ``command`` (a go command) offline against the prebuilt cache."""
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**settings(), "GOCACHE": self.cache}.items())
        return f"export {exports} && {shlex.quote(self.go)} {command}"


def settings() -> dict[str, str]:
    """The environment both the warm-up and the runs use (the cache is only reused under the same one)."""
    return {
        "GO111MODULE": "off",
        "GOPATH": GOPATH,
        "GOPROXY": "off",
        "GOFLAGS": "",
        "GOENV": "off",  # no user settings file
        "GOTOOLCHAIN": "local",  # Go >= 1.21 would otherwise download a newer toolchain
        "GOTELEMETRY": "off",
    }


def problem() -> str | None:
    """Why Go programs cannot run here, or None."""
    if shutil.which("go") is None:
        return f"no go on PATH ({INSTALL})"
    if not os.path.isdir(TESTIFY):
        return f"testify is not installed in {GOPATH} ({INSTALL})"
    return None


@functools.cache
def home() -> str | None:
    """GOROOT, the folder the sandbox must see to run go, or None without a working go."""
    go = shutil.which("go")
    return None if go is None else ask([go, "env", "GOROOT"], {**os.environ, **settings()})


_lock = threading.Lock()


def toolchain() -> Go:
    """The go binary and its prebuilt cache (built on first use; concurrent callers wait for it)."""
    with _lock:
        return _toolchain()


@functools.cache
def _toolchain() -> Go:
    why = problem()
    if why is not None:
        raise ToolchainError(f"HumanEvalFix Go cannot run here: {why}")
    go = os.path.realpath(shutil.which("go") or "go")
    version = run([go, "version"], "go version", env={**os.environ, **settings()})
    # go's cache is keyed by content: a changed testify only makes the first runs slower, never wrong
    key = digest(go, version, WARM_UP, *(f"{k}={v}" for k, v in settings().items()))

    def warm(folder: Path) -> None:
        with tempfile.TemporaryDirectory() as work:
            Path(work, "main_test.go").write_text(WARM_UP)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": work, **settings()}
            env["GOCACHE"] = str(folder / "cache")
            run([go, "test", "main_test.go"], "building Go's cache", env, Path(work))

    return Go(go, str(build_once("go", key, warm) / "cache"))
