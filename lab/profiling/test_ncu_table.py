"""lab/profiling/ncu-kernel-table.py: per-layer kernel times from an Nsight Compute CSV.

The CSVs here are written by the test in ncu's --csv layout, with known durations, so that
the expected table follows by hand: a prompt's kernels, then decoded tokens whose kernels
repeat with the attention kernel once per layer.
"""
from __future__ import annotations

import csv
import importlib.util
import io
import pathlib
import re

HERE = pathlib.Path(__file__).resolve().parent


def _load():
    spec = importlib.util.spec_from_file_location("ncu_table", HERE / "ncu-kernel-table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write_csv(path: pathlib.Path, kernels: list[tuple[str, float]]) -> None:
    """kernels: (name, microseconds) in launch order, written in ns as ncu does."""
    hdr = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
           "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL)
    w.writerow(hdr)
    for i, (name, us) in enumerate(kernels):
        w.writerow([i, 1, "llama-bench", "h", name, 1, 7, "(128, 1, 1)", "(8, 1, 1)", 0, "9.0",
                    "Command line profiler metrics", "gpu__time_duration.sum", "ns", f"{us*1000:,.0f}"])
    path.write_text("==PROF== Connected to process 1\n" + buf.getvalue())


def _token(layers: int, attn_us: float) -> list[tuple[str, float]]:
    ks = []
    for _ in range(layers):
        ks += [("void rms_norm_f32<1024>(const float *)", 2.0),
               ("void mul_mat_vec_q<2>(const void *)", 10.0),
               ("void oscar2_fa_partial<128, 4, 1>(oscar2_fa_args)", attn_us),
               ("void oscar2_fa_combine<128>(const float *)", 3.0)]
    return ks + [("void mul_mat_vec_q<2>(const void *)", 50.0)]  # the output layer, once per token


def _rows(out: str) -> dict[str, tuple[float, float]]:
    """kernel -> (us per layer, launches per layer) from the printed table."""
    res = {}
    for m in re.finditer(r"^\| ([0-9.]+) \| ([0-9.]+) \| `([^`]+)` \|$", out, re.M):
        res[m.group(3)] = (float(m.group(1)), float(m.group(2)))
    return res


def test_skip_first_token_takes_whole_decoded_tokens(tmp_path, capsys):
    layers = 3
    prompt = [("void oscar2_fa_expand<128>(const char *)", 500.0), ("void mul_mat_q<2>(const void *)", 900.0)] * layers
    kernels = prompt + _token(layers, 40.0) + _token(layers, 40.0) + _token(layers, 40.0)
    p = tmp_path / "k.csv"
    _write_csv(p, kernels)
    assert _load().main(["--layers", str(layers), "--skip-first-token", str(p)]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    # two whole tokens after the first: each kernel once per layer, the output layer once per token
    assert rows["oscar2_fa_partial<128, 4, 1>"] == (40.0, 1.0)
    assert rows["rms_norm_f32<1024>"] == (2.0, 1.0)
    assert rows["mul_mat_vec_q<2>"] == (round(10.0 + 50.0/layers, 2), round(1 + 1/layers, 2))
    assert "mul_mat_q<2>" not in rows and "oscar2_fa_expand<128>" not in rows  # the prompt is left out
    per_token = layers*(2.0 + 10.0 + 40.0 + 3.0) + 50.0
    assert f"{per_token:.0f} us of kernels per token" in out


def test_without_the_flag_the_prompt_leaks_into_the_last_half(tmp_path, capsys):
    # the default (last half of the kernels) is meant for runs without a prompt; with one it
    # would count prompt kernels: this is what --skip-first-token is for
    layers = 2
    kernels = [("void mul_mat_q<2>(const void *)", 900.0)] * 40 + _token(layers, 40.0) * 2
    p = tmp_path / "k.csv"
    _write_csv(p, kernels)
    assert _load().main(["--layers", str(layers), str(p)]) == 0
    assert "mul_mat_q<2>" in _rows(capsys.readouterr().out)


def test_skip_first_token_needs_two_tokens(tmp_path):
    p = tmp_path / "k.csv"
    _write_csv(p, _token(3, 40.0))
    assert _load().main(["--layers", "3", "--skip-first-token", str(p)]) == 1


def _write_raw_csv(path: pathlib.Path, kernels: list[tuple[str, float]]) -> None:
    """The same kernels in ncu's --page raw layout: a column per metric, a units row first."""
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL)
    w.writerow(["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                "Block Size", "Grid Size", "Device", "CC", "gpu__time_duration.sum"])
    w.writerow(["", "", "", "", "", "", "", "", "", "", "", "usecond"])
    for i, (name, us) in enumerate(kernels):
        w.writerow([i, 1, "llama-bench", "h", name, 1, 7, "(128, 1, 1)", "(8, 1, 1)", 0, "9.0", f"{us:.3f}"])
    path.write_text(buf.getvalue())


def test_compare_sets_two_runs_side_by_side(tmp_path, capsys):
    # run B: layer 1's attention takes another kernel at 70 us and its rotation 5 us more; the
    # difference per token is then (70 - 40) + 5 = 35 us, all of it in those two rows
    layers = 3

    def token(b: bool) -> list[tuple[str, float]]:
        ks = []
        for il in range(layers):
            slow = b and il == 1
            ks += [("void k_rot<128, 1>(rot_group)", 7.0 + (5.0 if slow else 0.0)),
                   ("void oscar2_fa_partial<128, 4, 1, 8>(oscar2_fa_args)" if slow else
                    "void oscar2_fa_partial<128, 4, 1, 0>(oscar2_fa_args)", 70.0 if slow else 40.0),
                   ("void oscar2_fa_combine<128>(const float *)", 3.0)]
        return ks + [("void mul_mat_vec_q<2>(const void *)", 50.0)]
    prompt = [("void mul_mat_q<2>(const void *)", 900.0)] * 5
    pa, pb = tmp_path / "a.csv", tmp_path / "b.csv"
    _write_csv(pa, prompt + token(False) * 3)
    _write_raw_csv(pb, prompt + token(True) * 3)
    assert _load().main(["--layers", str(layers), "--skip-first-token", "--compare", str(pa), str(pb)]) == 0
    out = capsys.readouterr().out
    per_token = layers*(7.0 + 40.0 + 3.0) + 50.0
    assert f"{pa} {per_token:.1f} us, {pb} {per_token + 35.0:.1f} us, difference +35.0 us" in out
    assert "| `oscar2_fa_partial<128, 4, 1, 8>` | 0 | 0.0 | 1 | 70.0 | +70.0 |" in out
    assert "| `oscar2_fa_partial<128, 4, 1, 0>` | 3 | 120.0 | 2 | 80.0 | -40.0 |" in out
    assert "| `k_rot<128, 1>` | 3 | 21.0 | 3 | 26.0 | +5.0 |" in out
    # layer by layer: the attention kernel and the combine after it
    assert "| 1 | 43.0 | `oscar2_fa_partial<128, 4, 1, 0>` | 73.0 | `oscar2_fa_partial<128, 4, 1, 8>` |" in out
    assert "| 2 | 43.0 | `oscar2_fa_partial<128, 4, 1, 0>` | 43.0 | `oscar2_fa_partial<128, 4, 1, 0>` |" in out


def test_compare_takes_two_files(tmp_path):
    p = tmp_path / "k.csv"
    _write_csv(p, _token(3, 40.0) * 3)
    assert _load().main(["--layers", "3", "--compare", str(p)]) == 1
