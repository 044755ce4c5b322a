"""lab/cpu/cpu-decode-placement.py and lab/cpu/cpu-pingpong.c: CPU decode runs grouped by where
the two vCPUs sat.

The jsonl here is written by the test with known speeds and round trips, so that the groups,
medians and ratios follow by hand; the ping-pong program is built and run for real.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE / "cpu-decode-placement.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def _write(path: pathlib.Path, runs: list[tuple[str, float, list[int]]]) -> None:
    path.write_text("".join(json.dumps({"label": lb, "n_depth": 4096, "avg_ts": ts, "rt_ns": rt, "round": 1}) + "\n"
                            for lb, ts, rt in runs))


def test_runs_grouped_by_placement_with_medians_and_ratios(tmp_path):
    f16, o2 = "this fork, f16", "this fork, oscar2 (zoo model)"
    p = tmp_path / "rounds.jsonl"
    _write(p, [
        (f16, 50.0, [55, 60]), (f16, 52.0, [50, 90]), (f16, 10.0, [60, 340]),   # the last: moved
        (f16, 48.0, [330, 350]),
        (o2, 75.0, [52, 57]), (o2, 80.0, [61, 70]), (o2, 70.0, [58, 66]),
        (o2, 64.0, [340, 360]), (o2, 60.0, [300, 320]), (o2, 99.0, [345, 58]),  # the last: moved
    ])
    r = _run(str(p))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert f"| {f16} | 50.00-52.00 (51.0, 2) | 48.00-48.00 (48.0, 1) |" in lines
    assert f"| {o2} | 70.00-80.00 (75.0, 3) | 60.00-64.00 (62.0, 2) |" in lines
    assert f"| {o2} / {f16} | {75/51:.2f} | {62/48:.2f} |" in lines
    assert "8 runs grouped, 2 left out" in lines[-1]


def test_a_file_without_round_trips_is_refused(tmp_path):
    p = tmp_path / "old.jsonl"
    p.write_text(json.dumps({"label": "this fork, f16", "n_depth": 4096, "avg_ts": 50.0}) + "\n")
    r = _run(str(p))
    assert r.returncode != 0 and "no run with rt_ns" in r.stderr


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_pingpong_times_a_round_trip(tmp_path):
    exe = tmp_path / "pingpong"
    subprocess.run(["cc", "-O2", "-pthread", str(HERE / "cpu-pingpong.c"), "-o", str(exe)], check=True)
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: nothing to ping-pong with")
    cpus = sorted(os.sched_getaffinity(0))[:2]
    bad = subprocess.run([str(exe), str(cpus[0]), str(cpus[1]), "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "round_trips must be a positive number" in bad.stderr
    # (few round trips: a spinning thread that loses its CPU to another process waits a time slice)
    out = subprocess.run([str(exe), str(cpus[0]), str(cpus[1]), "20000"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ns = float(out.stdout)
    # a cache line's round trip between two cores: tens to a few thousand ns (a loaded machine's
    # scheduler can stretch it, but never to zero or to a second)
    assert 10 < ns < 1e6, ns
