"""Precision plans: which cache type each layer's K and V are stored in under ``-ctk oscar2 -ctv oscar2``.

A plan is two lists of llama.cpp cache-type names, one entry per layer (``type_k``,
``type_v``), written into the GGUF as ``oscar.cache_type_k`` / ``oscar.cache_type_v``
(string arrays) and applied by llama.cpp to the sides the user asked to be oscar2.

:func:`choose` makes one from calibration: layers whose cache is bounded by a sliding
window (iSWA) are stored in ``q8_0`` (2-bit saves almost nothing there, the window pool costs
more than it saves); the growing layers start in ``oscar2`` and their keys are raised (to oscar3,
q4_0 or q8_0, the K of one layer at a time, any step up the :data:`LADDER`) where the measured
attention-output error falls most per bit spent, while the whole cache stays within ``budget`` bits
per value at ``ctx`` tokens (16-bit window pools and every layer counted, :func:`bits_per_value`).
A raise may skip a type: a layer's q4_0 keys (no clip, no windows) can be worse than its oscar3
keys and its q8_0 keys still better. Values stay
``oscar2`` (:data:`RAISED_SIDES`): a growing layer then always has an oscar2 V, which the GPU
decode kernels take on their fast path beside a q4_0 or q8_0 K, where a layer with no oscar2
side takes upstream's kernels (6x the oscar2 pair's time at 64k cells on the H200) and V q4_0
beside K oscar2 a cell-at-a-time path; on the calibrated models raising V as well gains at
most 7 % of KLD (docs/RESULTS.md). When that
starting point is already over the budget (an iSWA model whose sliding layers hold much of the
cache at 32k), sliding sides are first lowered to ``q4_0`` where the error grows least per bit
saved, until the budget is met or every sliding side is ``q4_0``. When every growing layer in
oscar2 is still over the budget (below about 2.7 bits at 32k with the default windows), the
growing layers start from ``oscar2s`` instead (:data:`LOW_TYPE`, 2.25 bits: oscar2's codes around
zero, for the centred cache), K and V, and are raised from there, K along :data:`LOW_LADDER_K`
and V to oscar2 (:data:`LOW_LADDER_V`); oscar2s has CPU kernels only, so such a plan serves
CPUs (llama.cpp refuses it on a GPU, naming the fix). Where even that cannot meet the budget
(or the rotation file has no oscar2s measurements), the plan says by its ``bits`` that the
budget could not be met.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import kvmem

#: raising order of a side's type, and the sides of a growing layer the plan raises
LADDER = ("oscar2", "oscar3", "q4_0", "q8_0")
RAISED_SIDES = ("k",)
#: the growing layers' starting type when every layer in oscar2 is over the budget, and the
#: raising orders of K and V from it
LOW_TYPE = "oscar2s"
LOW_LADDER_K = (LOW_TYPE,) + LADDER
LOW_LADDER_V = (LOW_TYPE, "oscar2")
#: the type of a layer whose cache a sliding window bounds, and the lowest it is taken to when
#: the budget needs it (oscar2 would cost more: its window pool is nearly the whole window)
SLIDING_TYPE = "q8_0"
SLIDING_LOWEST = "q4_0"
#: the context a plan's budget is counted at, and the default budget
BUDGET_CTX = 32768
DEFAULT_BUDGET = 3.0


def measured_pairs() -> list[tuple[str, str]]:
    """The (K type, V type) pairs calibration measures each layer's error for: every pair of
    :data:`LADDER` types, and those of the oscar2s start (K on :data:`LOW_LADDER_K`, V on
    :data:`LOW_LADDER_V`)."""
    pairs = [(a, b) for a in LADDER for b in LADDER]
    return pairs + [(a, b) for a in LOW_LADDER_K for b in LOW_LADDER_V if (a, b) not in pairs]


@dataclass(frozen=True)
class LayerShape:
    """One layer's cache geometry: K/V values per cell, and its sliding window (None: grows)."""
    values_k: int
    values_v: int
    sliding_window: int | None = None


def layer_cells(layer: LayerShape, ctx: int, ubatch: int = kvmem.UBATCH) -> int:
    """Cells llama.cpp allocates for the layer at ``ctx``: the padded context, or for a sliding
    layer its window plus one ubatch (the iSWA cache), whichever is smaller."""
    n = kvmem.cells(ctx)
    if layer.sliding_window is not None:
        n = min(n, kvmem.cells(layer.sliding_window + ubatch))
    return n


def bits_per_value(layers: list[LayerShape], type_k: list[str], type_v: list[str], ctx: int = BUDGET_CTX,
                   sink: int = 64, recent: int = 256) -> float:
    """Average bits per stored K/V value of the whole cache at ``ctx`` (one sequence), the
    16-bit window pools of oscar2 sides included."""
    stored = 0.0
    values = 0.0
    for lay, tk, tv in zip(layers, type_k, type_v, strict=True):
        n = layer_cells(lay, ctx)
        slots = min(n, kvmem.pool_slots(ctx, sink, recent))
        for t, nv in ((tk, lay.values_k), (tv, lay.values_v)):
            stored += n * nv * kvmem.bits(t) + (slots * nv * 16 if t in kvmem.WINDOWED and slots else 0)
            values += n * nv
    return stored / values


@dataclass
class Plan:
    """A chosen plan with what it costs and what the calibration measured of it."""
    type_k: list[str]
    type_v: list[str]
    bits: float              # bits per value at BUDGET_CTX
    rel_error: float         # summed per-layer relative attention-output error
    rel_error_oscar2: float  # the same with every growing layer in oscar2
    base: str = "oscar2"     # the growing layers' starting type (LOW_TYPE under a tight budget)
    low_measured: bool = True  # the errors held oscar2s pairs (False: a rotation file from before them)
    bits_oscar2: float = 0.0   # bits per value of the oscar2 start (every growing layer in oscar2)

    def as_meta(self, budget: float, layers: list[LayerShape] | None = None,
                errors: list[dict[tuple[str, str], float]] | None = None) -> dict:
        """The rotation file's ``meta.plan``: the choice, and (with ``layers``/``errors``) what it
        was chosen from, so that :func:`replan` can choose again for another budget."""
        m = {"type_k": self.type_k, "type_v": self.type_v, "bits_per_value": round(self.bits, 4),
             "budget_bits": budget, "budget_ctx": BUDGET_CTX, "rel_error": self.rel_error,
             "rel_error_all_oscar2": self.rel_error_oscar2, "base": self.base,
             "low_measured": self.low_measured, "bits_all_oscar2": round(self.bits_oscar2, 4)}
        if layers is not None and errors is not None:
            m["layers"] = [[lay.values_k, lay.values_v, lay.sliding_window] for lay in layers]
            m["errors"] = [{f"{a},{b}": float(e) for (a, b), e in t.items()} for t in errors]
        return m


def choose(layers: list[LayerShape], errors: list[dict[tuple[str, str], float]], budget: float = DEFAULT_BUDGET,
           sink: int = 64, recent: int = 256, sides: tuple[str, ...] = RAISED_SIDES) -> Plan:
    """Greedy plan under ``budget`` bits per value at :data:`BUDGET_CTX`, raising the growing
    layers' ``sides`` ("k", "v").

    errors[l][(type_k, type_v)]: layer l's relative attention-output error with those types
    (:func:`measured_pairs`; a sliding layer needs its q8_0/q4_0 pairs only when the budget
    makes the plan lower it, a growing layer its oscar2s pairs only when the budget is below
    every growing layer in oscar2, and then both sides are raised from oscar2s whatever
    ``sides`` says)."""
    if len(errors) != len(layers):
        raise ValueError(f"{len(errors)} error tables for {len(layers)} layers")
    tk = [SLIDING_TYPE if lay.sliding_window is not None else "oscar2" for lay in layers]
    tv = list(tk)

    def err(i: int) -> float:
        return errors[i][(tk[i], tv[i])]

    cost = bits_per_value(layers, tk, tv, sink=sink, recent=recent)
    while cost > budget:  # over budget from the start: lower sliding sides, least harm per bit first
        best = None
        for i, lay in enumerate(layers):
            if lay.sliding_window is None:
                continue
            for cur in (tk, tv):
                if cur[i] == SLIDING_LOWEST:
                    continue
                old, before = cur[i], err(i)
                cur[i] = SLIDING_LOWEST
                saved = cost - bits_per_value(layers, tk, tv, sink=sink, recent=recent)
                harm = err(i) - before
                cur[i] = old
                if saved > 0 and (best is None or harm / saved < best[0]):
                    best = (harm / saved, i, cur)
        if best is None:
            break
        _, i, cur = best
        cur[i] = SLIDING_LOWEST
        cost = bits_per_value(layers, tk, tv, sink=sink, recent=recent)
    err_oscar2 = sum(err(i) for i in range(len(layers)))
    growing = [i for i, lay in enumerate(layers) if lay.sliding_window is None]
    start, ladder = "oscar2", {"k": LADDER, "v": LADDER}
    low_measured = all((LOW_TYPE, LOW_TYPE) in errors[i] for i in growing)
    cost_oscar2 = cost
    if cost > budget and growing and low_measured:  # every growing layer in oscar2 is over the budget
        start, ladder, sides = LOW_TYPE, {"k": LOW_LADDER_K, "v": LOW_LADDER_V}, ("k", "v")
        for i in growing:
            tk[i] = tv[i] = LOW_TYPE
        cost = bits_per_value(layers, tk, tv, sink=sink, recent=recent)
    while True:
        best = None
        for i in growing:
            for side in sides:
                cur = tk if side == "k" else tv
                old = cur[i]
                steps = ladder[side]
                for t in steps[steps.index(old) + 1:]:
                    if (t if side == "k" else tk[i], t if side == "v" else tv[i]) not in errors[i]:
                        continue  # not measured (a rotation file from before oscar3)
                    cur[i] = t
                    new_cost = bits_per_value(layers, tk, tv, sink=sink, recent=recent)
                    gain = errors[i][(old if side == "k" else tk[i], old if side == "v" else tv[i])] - err(i)
                    cur[i] = old
                    if new_cost > budget or new_cost <= cost:
                        continue
                    score = gain / (new_cost - cost)
                    if gain > 0 and (best is None or score > best[0]):
                        best = (score, i, side, t, new_cost)
        if best is None:
            break
        _, i, side, t, cost = best
        (tk if side == "k" else tv)[i] = t
    return Plan(tk, tv, cost, sum(err(i) for i in range(len(layers))), err_oscar2, start, low_measured, cost_oscar2)


def uniform(n_layer: int, kv_type: str = "oscar2") -> tuple[list[str], list[str]]:
    """Every layer's K and V in one type."""
    return [kv_type] * n_layer, [kv_type] * n_layer


def replan(meta_plan: dict, budget: float, sink: int = 64, recent: int = 256) -> Plan:
    """A new plan for ``budget`` from a rotation file's ``meta.plan`` (its layers and measured
    errors); ValueError when the file does not carry them (made before plans kept them)."""
    if not isinstance(meta_plan, dict) or "errors" not in meta_plan or "layers" not in meta_plan:
        raise ValueError("the rotations carry no measured per-layer errors to plan from; recalibrate "
                         "(--rotations calibrate --kv-bits B)")
    layers = [LayerShape(int(a), int(b), None if w is None else int(w)) for a, b, w in meta_plan["layers"]]
    errors = [{tuple(k.split(",")): float(v) for k, v in t.items()} for t in meta_plan["errors"]]
    return choose(layers, errors, budget, sink, recent)
