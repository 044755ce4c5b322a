"""PNG figures of oscar-eval and oscar-bench (matplotlib, headless Agg backend)."""
from __future__ import annotations

from pathlib import Path


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(plt, fig, path: str | Path, title: str) -> Path:
    """Title, layout, write the PNG, free the figure."""
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    from ..core import atomic
    try:
        atomic.check_file_output(path, "figure")  # savefig would write through a link or into a FIFO
    except atomic.NotRegularOutput:
        plt.close(fig)
        raise
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def quality_vs_bits(rows: list[dict], path: str | Path, title: str) -> Path:
    """Two panels, one point per KV configuration: mean KLD against f16 (log scale, with its
    standard error) and perplexity (with llama-perplexity's ±), against bits per K/V value.

    rows: dicts with ``kv``, ``bits``, ``kld``, ``kld_err``, ``ppl``, ``ppl_err``; the f16
    reference (KLD 0) is left out of the KLD panel."""
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, r in enumerate(rows):
        x, c = r["bits"], colors[i % len(colors)]
        if r["kld"] > 0:
            a1.errorbar([x], [r["kld"]], yerr=[[min(r.get("kld_err") or 0, r["kld"] * 0.99)], [r.get("kld_err") or 0]],
                        fmt="o", capsize=3, color=c)
            a1.annotate(r["kv"], (x, r["kld"]), textcoords="offset points", xytext=(5, 4), fontsize=8)
        a2.errorbar([x], [r["ppl"]], yerr=[r.get("ppl_err") or 0], fmt="s", capsize=3, color=c)
        a2.annotate(r["kv"], (x, r["ppl"]), textcoords="offset points", xytext=(5, 4), fontsize=8)
    a1.set_yscale("log")
    a1.set_xlabel("bits per K/V value (16-bit window pool included)")
    a1.set_ylabel("mean KL divergence vs f16")
    a2.set_xlabel("bits per K/V value (16-bit window pool included)")
    a2.set_ylabel("perplexity")
    for a in (a1, a2):
        a.grid(alpha=0.3)
    return _save(plt, fig, path, title)


def speed_vs_depth(rows: list[dict], path: str | Path, title: str) -> Path:
    """Three panels against context depth, one line per KV configuration: prompt processing
    tok/s, decode tok/s (both with llama-bench's standard deviation) and KV MiB.

    rows: dicts with ``kv``, ``depth``, ``pp_ts``, ``pp_sd``, ``tg_ts``, ``tg_sd``, ``kv_mib``
    (speeds None where the run failed or was not asked for)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    kvs = list(dict.fromkeys(r["kv"] for r in rows))
    for kv in kvs:
        rs = sorted((r for r in rows if r["kv"] == kv), key=lambda r: r["depth"])
        for ax, key in ((axes[0], "pp"), (axes[1], "tg")):
            pts = [r for r in rs if r.get(key + "_ts")]
            if pts:
                ax.errorbar([r["depth"] for r in pts], [r[key + "_ts"] for r in pts],
                            yerr=[r.get(key + "_sd") or 0 for r in pts], marker="o", capsize=3, label=kv)
        axes[2].plot([r["depth"] for r in rs], [r["kv_mib"] for r in rs], marker="o", label=kv)
    for ax, lab in zip(axes, ("prompt processing tok/s", "decode tok/s", "KV cache MiB (model)")):
        ax.set_xlabel("context depth (tokens)")
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    depths = sorted({r["depth"] for r in rows})
    if len(depths) > 2 and depths[-1] > 16 * max(depths[1], 1):
        for ax in axes:
            ax.set_xscale("symlog", linthresh=max(depths[1], 1))
    return _save(plt, fig, path, title)


def passkey_accuracy(rows: list[dict], path: str | Path, title: str) -> Path:
    """Retrieval accuracy (percent) against the depth of the hidden number, one line per KV
    configuration and context length. rows: ``kv``, ``ctx``, ``depth``, ``accuracy``."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    keys = list(dict.fromkeys((r["kv"], r["ctx"]) for r in rows))
    for i, key in enumerate(keys):
        rs = sorted((r for r in rows if (r["kv"], r["ctx"]) == key), key=lambda r: r["depth"])
        shift = (i - (len(keys) - 1) / 2) * 1.2  # side by side where lines coincide
        ax.errorbar([100 * r["depth"] + shift for r in rs], [r["accuracy"] for r in rs],
                    yerr=[[r["accuracy"] - r.get("ci_low", r["accuracy"]) for r in rs],
                          [r.get("ci_high", r["accuracy"]) - r["accuracy"] for r in rs]],
                    marker="osD^v<>"[i % 7], capsize=3, label=f"{key[0]}, ctx {key[1]}")
    ax.set_xlabel("depth of the passkey (% of the filler)")
    ax.set_ylabel("retrieval accuracy (%), 95 % Wilson interval")
    ax.set_ylim(-5, 105)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    from ..core import atomic
    try:
        atomic.check_file_output(path, "figure")  # savefig would write through a link or into a FIFO
    except atomic.NotRegularOutput:
        plt.close(fig)
        raise
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
