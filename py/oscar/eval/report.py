"""What every report says about where its numbers come from: model, data, build, machine.

Standard library only (oscar-bench runs on machines with just numpy/matplotlib/tqdm).
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from ..core.paths import ROOT



def _git(args: list[str], cwd: Path) -> str:
    try:
        p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return p.stdout.strip() if p.returncode == 0 else ""


def build_info(root: Path = ROOT) -> dict[str, str]:
    """This repository's commit (``+dirty`` with uncommitted edits to tracked files), and
    the llama.cpp fork's: its HEAD and the number of OSCAR patches in ``ggml-patches/series``."""
    commit = _git(["rev-parse", "--short=10", "HEAD"], root) or "unknown"
    if commit != "unknown" and _git(["status", "--porcelain", "--untracked-files=no"], root):
        commit += "+dirty"
    series = root / "ggml-patches" / "series"
    n = 0
    if series.is_file():
        n = sum(1 for ln in series.read_text().splitlines() if ln.strip() and not ln.startswith("#"))
    llama = _git(["log", "-1", "--format=%h %s"], root / "llama.cpp") or "unknown"
    return {"repo_commit": commit, "llama_cpp_head": llama, "patch_series": f"{n} patches (ggml-patches/series)"}


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (else platform.processor())."""
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.lower().startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpus() -> list[str]:
    """``name, memory`` of each NVIDIA GPU that nvidia-smi lists (empty without one)."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [ln.strip() for ln in p.stdout.splitlines() if ln.strip()] if p.returncode == 0 else []


def machine_info() -> dict:
    """CPU model, usable cores, memory, GPUs and OS of this machine."""
    mem = ""
    try:
        for ln in Path("/proc/meminfo").read_text().splitlines():
            if ln.startswith("MemTotal:"):
                mem = f"{int(ln.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu_model(), "cores": cores, "memory": mem, "gpus": gpus() or ["none"],
            "os": f"{platform.system()} {platform.release()}"}


def metadata(**fields) -> dict:
    """Report metadata: the caller's fields (model, text, ctx, ...) plus date, build and machine."""
    return {**fields, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "build": build_info(), "machine": machine_info()}


def markdown_meta(meta: dict) -> str:
    """The metadata as a markdown bullet list (nested dicts flattened one level)."""
    out = []
    for k, v in meta.items():
        if isinstance(v, dict):
            v = "; ".join(f"{kk}: {', '.join(map(str, vv)) if isinstance(vv, list) else vv}" for kk, vv in v.items())
        elif isinstance(v, list):
            v = ", ".join(map(str, v))
        out.append(f"- {k}: {v}")
    return "\n".join(out)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table from a header and rows of already formatted cells."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def write_json(path: str | Path, obj: dict) -> None:
    from ..core import atomic
    atomic.write_text(path, json.dumps(obj, indent=2, default=str) + "\n")
