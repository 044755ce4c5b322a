"""lab/profiling/ncu-source-table.py: a kernel's executed instructions by function and by line.

The CSV here is written by the test in the layout of ncu's source view (`--page source --csv
--print-source cuda,sass`): per file, a header row, then each CUDA line with its counts and the
SASS rows under it (no line number). The source file is written too, so that the regions
(functions and lambdas) and their sums follow by hand.
"""
from __future__ import annotations

import csv
import io
import lzma
import pathlib
import re
import subprocess

HERE = pathlib.Path(__file__).resolve().parent
TOOL = HERE / "ncu-source-table.py"

SOURCE = """\
#include "x.cuh"
static __device__ __forceinline__ float dot(const int * w) {
    return w[0]*2.0f;
}
template <int D>
static __global__ void kern(const int * w) {
    auto issue = [&](int c) {
        cp(c);
    };
    float s = dot(w);
    store(s);
}
"""

HDR = ["Line No", "Source", "Address", "Source", "Warp Stall Sampling (All Samples)",
       "Warp Stall Sampling (Not-issued Samples)", "# Samples", "Instructions Executed"]


def _write(path: pathlib.Path, lines: dict[tuple[str, int], tuple[int, int]]) -> None:
    """lines: (file, line number) -> (instructions, samples); each followed by a SASS row."""
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL)
    for f in sorted({f for f, _ in lines}):
        w.writerow(["File Path", f"/src/{f}"])
        w.writerow(["Function Name", "void kern<128>(const int *)"])
        w.writerow(HDR)
        for (g, n), (i, s) in sorted(lines.items()):
            if g == f:
                w.writerow([n, "text", "-", "-", s, s, s, i])
                w.writerow(["", "", "0x10", "  IADD3 R1, R2, R3", 0, 0, 0, i * 7])  # must not count
    path.write_bytes(lzma.compress(buf.getvalue().encode()))


def test_regions_and_lines_sum_as_by_hand(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(SOURCE)
    lines = {("k.cu", 3): (300, 30),   # dot()
             ("k.cu", 8): (100, 10),   # the lambda issue
             ("k.cu", 10): (40, 4),    # after the lambda: counted with it (the tool's rule)
             ("k.cu", 11): (60, 6),
             ("x.cuh", 5): (500, 50)}  # an inlined header: summed per file
    csv_path = tmp_path / "src.csv.xz"
    _write(csv_path, lines)
    out = subprocess.run(["python3", str(TOOL), str(csv_path), str(src), "--per", "10", "--lines", "3"],
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0].startswith("1000 warp instructions, 100 stall samples; per 10: 100.0")
    rows = {m.group(4): (float(m.group(1)), float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^\| ([0-9.]+) \| ([0-9.]+) % \| ([0-9.]+) % \| (.+) \|$", out, re.M)}
    assert rows["x.cuh"] == (50.0, 50.0, 50.0)
    assert rows["dot()"] == (30.0, 30.0, 30.0)
    assert rows["issue (lambda, and what follows it)"] == (20.0, 20.0, 20.0)
    assert "kern()" not in rows  # no line of kern's own before the lambda has counts
    # the three busiest lines of k.cu, in line order
    busy = re.findall(r"^\| (\d+) \| ([0-9.]+) \| (\d+) \| `(.*)` \|$", out, re.M)
    assert [(int(n), float(i)) for n, i, _, _ in busy] == [(3, 30.0), (8, 10.0), (11, 6.0)]
    assert busy[0][3] == "return w[0]*2.0f;"


def test_file_option_names_a_copy(tmp_path):
    src = tmp_path / "copy-of-k.cu"
    src.write_text(SOURCE)
    csv_path = tmp_path / "src.csv.xz"
    _write(csv_path, {("k.cu", 3): (10, 1)})

    def run(*a: str) -> str:
        return subprocess.run(["python3", str(TOOL), str(csv_path), str(src), *a],
                              capture_output=True, text=True, check=True).stdout

    assert "| 10.0 | 100.0 % | 100.0 % | k.cu |" in run()            # not matched: summed as another file
    assert "| 10.0 | 100.0 % | 100.0 % | dot() |" in run("--file", "k.cu")
