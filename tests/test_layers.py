"""The package's layers: every module's imports (read with ast, nothing imported) go one way.

core (no torch) <- calib <- eval <- bench <- sim (the research simulator) and the CLI
(``oscar.cli``) on top. No module imports a higher layer, no import cycle, nothing in the
product imports the simulator, and the core imports no torch or transformers.
"""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "py" / "oscar"

#: the layers, lowest first; a module may import its own layer and those below
LAYERS = ("core", "calib", "eval", "bench", "sim", "top")
#: what no module of the core imports, at any depth
TORCH = ("torch", "transformers", "accelerate")


def _layer(mod: str) -> str:
    """``oscar.calib.zoo`` -> ``calib``; ``oscar`` and ``oscar.cli`` -> ``top``."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else "top"


def _modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the package (``__init__`` as its package)."""
    out = {}
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = f
    return out


def _imports(mod: str, f: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """(modules of the package, top-level outside packages) that ``f`` imports, lazily or not."""
    pkg = mod if f.name == "__init__.py" else mod.rsplit(".", 1)[0]
    inner, outer = set(), set()
    for n in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
        if isinstance(n, ast.ImportFrom):
            if n.level:
                base = pkg.split(".")
                base = base[:len(base) - n.level + 1]
                name = ".".join(base + ([n.module] if n.module else []))
            else:
                name = n.module or ""
            if name == "oscar" or name.startswith("oscar."):
                subs = {f"{name}.{a.name}" for a in n.names}
                inner |= {s for s in subs if s in known} or {name}
                if any(s not in known for s in subs):
                    inner.add(name)
            else:
                outer.add(name.split(".")[0])
        elif isinstance(n, ast.Import):
            for a in n.names:
                (inner if a.name.split(".")[0] == "oscar" else outer).add(
                    a.name if a.name.split(".")[0] == "oscar" else a.name.split(".")[0])
    return inner, outer


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    mods = _modules()
    inner, outer = {}, {}
    for m, f in mods.items():
        inner[m], outer[m] = _imports(m, f, set(mods))
        inner[m].discard(m)
    return inner, outer


def test_every_module_has_a_layer():
    for m in _modules():
        assert _layer(m) in LAYERS, m


def test_no_module_imports_a_higher_layer():
    inner, _ = _graph()
    bad = [f"{m} ({_layer(m)}) imports {d} ({_layer(d)})" for m, ds in inner.items() for d in ds
           if d != "oscar" and LAYERS.index(_layer(d)) > LAYERS.index(_layer(m))]
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    inner, _ = _graph()
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(inner.get(m, ())):
            if d == "oscar" or d not in inner:
                continue
            assert state.get(d) != 1, "import cycle: " + " -> ".join(path + [m, d])
            if d not in state:
                visit(d, path + [m])
        state[m] = 2

    for m in sorted(inner):
        if m not in state:
            visit(m, [])


def test_the_product_does_not_import_the_simulator():
    inner, _ = _graph()
    bad = [f"{m} imports {d}" for m, ds in inner.items() for d in ds
           if _layer(m) != "sim" and _layer(d) == "sim"]
    assert not bad, "\n".join(bad)


def test_the_core_needs_no_torch():
    _, outer = _graph()
    bad = [f"{m} imports {x}" for m, xs in outer.items() for x in xs if _layer(m) == "core" and x in TORCH]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_imports():
    """The graph is not empty: the CLI reaches every layer below the simulator, and the
    simulator reaches calibration's simulated cache."""
    inner, _ = _graph()
    assert {"oscar.calib.simcache", "oscar.core.rotfile"} <= inner["oscar.sim.simulate"] | inner["oscar.calib.calibrate"]
    assert {_layer(d) for d in inner["oscar.cli"]} >= {"core", "calib", "eval", "bench"}
