"""Where the project's build outputs, models and data live."""
from __future__ import annotations

import os
from pathlib import Path

from .models import BUNDLED

#: repository root (py/oscar/core/paths.py -> ../../..)
ROOT = Path(__file__).resolve().parents[3]
BUILD_BIN = Path(os.environ.get("OSCAR_BUILD_BIN", ROOT / "build" / "bin"))
MODELS = Path(os.environ.get("OSCAR_MODELS", ROOT / "models"))
SHARED_DATA = Path(os.environ.get("OSCAR_DATA", ROOT.parent / "shared" / "data"))
WIKITEXT2_TEST = SHARED_DATA / "wikitext-2-raw" / "wiki.test.raw"
WIKITEXT2_VALID = SHARED_DATA / "wikitext-2" / "valid.txt"

SMOLLM2_FILE = BUNDLED["smollm2-135m"].file


def tool(name: str) -> Path:
    """Path of a llama.cpp program we built (``llama-perplexity``, ...); a clear error if missing."""
    p = BUILD_BIN / name
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist: run `make build` first")
    return p
