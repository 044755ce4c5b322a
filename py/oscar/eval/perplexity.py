"""Run llama.cpp's ``llama-perplexity`` (our build) and parse its report.

One f16 run saves the reference logits (``--kl-divergence-base``); each KV
configuration then runs on the same chunks with ``--kl-divergence`` and reports
perplexity, KL divergence against f16 and top-1 agreement.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..core import paths


@dataclass
class KVConfig:
    """A KV cache configuration: K type, V type, extra environment and flags."""
    k: str
    v: str
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or (self.k if self.k == self.v else f"{self.k}/{self.v}")

    @classmethod
    def parse(cls, spec: str) -> "KVConfig":
        """``oscar2``, ``q8_0/oscar2`` (K/V); ``+norot`` turns llama.cpp's Hadamard rotation
        off; ``:sink=N,recent=M`` sets the 16-bit windows of an oscar2 cache."""
        env: dict[str, str] = {}
        args: list[str] = []
        base, _, opts = spec.partition(":")
        if base.endswith("+norot"):
            base = base[: -len("+norot")]
            env["LLAMA_ATTN_ROT_DISABLE"] = "1"
        for opt in filter(None, opts.split(",")):
            key, _, val = opt.partition("=")
            flag = {"sink": "--kv-sink", "recent": "--kv-recent"}.get(key.strip())
            if flag is None or not val.strip().isdigit():
                raise ValueError(f"bad option '{opt}' in KV configuration '{spec}': use sink=N and recent=N")
            args += [flag, val.strip()]
        k, _, v = base.partition("/")
        return cls(k=k, v=v or k, env=env, args=args, label=spec)


def split_specs(spec: str) -> list[str]:
    """Split a comma-separated list of ``name[:key=N,key=N]`` items; ``key=N`` parts belong
    to the item before (``q4_0,oscar2:sink=0,recent=0`` is two items)."""
    items: list[str] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" in part and ":" not in part and items:
            items[-1] += "," + part
        else:
            items.append(part)
    return items


def parse_kv_list(spec: str) -> list[KVConfig]:
    """Comma-separated configurations; ``key=value`` parts belong to the one before
    (``q4_0,oscar2:sink=0,recent=0`` is two configurations)."""
    return [KVConfig.parse(s) for s in split_specs(spec)]


@dataclass
class PerplexityResult:
    ppl: float
    ppl_err: float
    kld_mean: float | None = None
    kld_err: float | None = None
    kld_p99: float | None = None
    same_top: float | None = None      # percent
    same_top_err: float | None = None  # percent
    log: str = ""


_NUM = r"([-+0-9.eE]+|nan|inf)"


def parse_report(text: str) -> PerplexityResult:
    """Numbers of a llama-perplexity log (plain or with --kl-divergence)."""
    def grab(pattern: str) -> tuple[float, ...] | None:
        m = re.search(pattern, text)
        return tuple(float(g) for g in m.groups()) if m else None

    final = grab(r"Final estimate: PPL = " + _NUM + r" \+/- " + _NUM)
    mean_q = grab(r"Mean PPL\(Q\)\s*:\s*" + _NUM + r"\s*±\s*" + _NUM)
    ppl = final or mean_q
    if ppl is None:
        raise RuntimeError("llama-perplexity printed no perplexity; its log ends with:\n" + text[-2000:])
    kld = grab(r"Mean\s+KLD:\s*" + _NUM + r"\s*±\s*" + _NUM)
    p99 = grab(r"99\.0%\s+KLD:\s*" + _NUM)
    top = grab(r"Same top p:\s*" + _NUM + r"\s*±\s*" + _NUM)
    return PerplexityResult(ppl=ppl[0], ppl_err=ppl[1],
                            kld_mean=kld[0] if kld else None, kld_err=kld[1] if kld else None,
                            kld_p99=p99[0] if p99 else None,
                            same_top=top[0] if top else None, same_top_err=top[1] if top else None,
                            log=text)


def run(model: str | Path, text_file: str | Path, cfg: KVConfig, ctx: int, chunks: int | None,
        kld_base: Path | None = None, save_base: bool = False, threads: int | None = None,
        extra: list[str] | None = None) -> PerplexityResult:
    """One llama-perplexity run with K/V cache types from ``cfg``.

    kld_base: logits file; written when save_base, else compared against (KL divergence).
    """
    cmd = [str(paths.tool("llama-perplexity")), "-m", str(model), "-f", str(text_file), "-c", str(ctx),
           "-ctk", cfg.k, "-ctv", cfg.v, "-fa", "on"]
    if chunks:
        cmd += ["--chunks", str(chunks)]
    if threads:
        cmd += ["-t", str(threads)]
    if kld_base is not None:
        cmd += ["--kl-divergence-base", str(kld_base)]
        if not save_base:
            cmd += ["--kl-divergence"]
    cmd += cfg.args + (extra or [])
    env = dict(os.environ, **cfg.env)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"llama-perplexity failed ({cfg.name}, exit {p.returncode}): "
                           + (p.stderr or p.stdout)[-2000:])
    return parse_report(p.stdout + p.stderr)
