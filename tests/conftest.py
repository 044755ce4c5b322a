"""Shared fixtures: our build, the demo model, evaluation text."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from oscar.core import paths


@pytest.fixture(scope="session")
def bin_dir() -> Path:
    if not (paths.BUILD_BIN / "llama-perplexity").exists():
        pytest.fail(f"{paths.BUILD_BIN} has no llama-perplexity: run `make build` first")
    return paths.BUILD_BIN


@pytest.fixture(scope="session")
def smollm2() -> Path:
    model = paths.MODELS / paths.SMOLLM2_FILE
    if not model.exists():
        subprocess.run([str(paths.ROOT / "scripts" / "fetch-models.sh"), "smollm2"], check=True)
    return model


@pytest.fixture(scope="session")
def wiki_slice(tmp_path_factory) -> Path:
    """The first ~60 kB of the WikiText-2 test split (evaluation text only)."""
    src = paths.WIKITEXT2_TEST
    if not src.exists():
        pytest.fail(f"{src} is missing (the shared data folder)")
    out = tmp_path_factory.mktemp("text") / "wiki-slice.txt"
    out.write_bytes(src.read_bytes()[:60000])
    return out
