"""scripts/fetch-llama.sh refuses bad input loudly and never leaves a half-patched tree."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from oscar.core import paths

SCRIPT = paths.ROOT / "scripts" / "fetch-llama.sh"


def test_wrong_checksum_is_refused_and_changes_nothing(tmp_path):
    fake = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    fake.write_bytes(b"not the source distribution")
    stamp = paths.ROOT / "llama.cpp" / ".oscar-series"
    before = stamp.read_text() if stamp.exists() else None
    p = subprocess.run([str(SCRIPT), "--force"], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "OSCAR_CACHE": str(tmp_path)})
    assert p.returncode != 0
    assert "checksum mismatch" in p.stderr and "Delete the file" in p.stderr
    assert (stamp.read_text() if stamp.exists() else None) == before


def test_patch_that_does_not_apply_leaves_no_tree(tmp_path):
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "scripts" / "fetch-llama.sh")
    patches = root / "ggml-patches"
    patches.mkdir()
    first = sorted((paths.ROOT / "ggml-patches").glob("0001-*.patch"))[0]
    broken = first.read_text().replace("GGML_TYPE_Q2_0    = 42,", "GGML_TYPE_Q2_0    = 4242,")
    (patches / "0001-broken.patch").write_text(broken)
    (patches / "series").write_text("0001-broken.patch\n")
    p = subprocess.run([str(root / "scripts" / "fetch-llama.sh")], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "OSCAR_CACHE": str(paths.ROOT / ".cache"), "HOME": str(tmp_path)})
    assert p.returncode != 0
    assert "patch 0001-broken.patch does not apply" in p.stderr
    assert not (root / "llama.cpp").exists()
    assert not any(Path(root).glob(".llama.cpp.*"))
