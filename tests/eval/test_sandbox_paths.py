"""eval.toolchains.sandbox_paths: the toolchain folders a sandbox shows, asked only of the
languages it will run."""

from __future__ import annotations

import pytest

from eval.toolchains import cache_root, go, rust, sandbox_paths


@pytest.fixture
def homes(monkeypatch):
    asked: list[str] = []

    def home(name: str, path: str):
        def ask() -> str:
            asked.append(name)
            return path

        return ask

    monkeypatch.setattr(go, "home", home("go", "/opt-elsewhere/go"))
    monkeypatch.setattr(rust, "home", home("rust", "/root-elsewhere/.rustup/toolchains/stable"))
    return asked


def test_a_python_only_sandbox_asks_no_toolchain(homes):
    assert sandbox_paths({"python"}) == [str(cache_root())]
    assert homes == []


def test_each_language_asks_its_own_toolchain(homes):
    assert sandbox_paths({"python", "rust"}) == [
        str(cache_root()),
        "/root-elsewhere/.rustup/toolchains/stable",
    ]
    assert homes == ["rust"]
    assert sandbox_paths() == [
        str(cache_root()),
        "/opt-elsewhere/go",
        "/root-elsewhere/.rustup/toolchains/stable",
    ]
    assert homes == ["rust", "go", "rust"]
