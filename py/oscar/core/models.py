"""The bundled models: ``py/oscar/models.tsv``, the one list that ``oscar-convert``'s MODEL
aliases, ``scripts/fetch-models.sh`` and the bundled zoo's entry names follow."""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Model:
    """One bundled model: its alias (``oscar-convert smollm2-135m``, the zoo entry's name), the
    name ``scripts/fetch-models.sh`` takes, its file in ``models/`` and the dequantised Hugging
    Face folder in ``models/`` that calibration loads instead of the GGUF when present."""
    alias: str
    fetch: str
    file: str
    torch_folder: str


def _read() -> dict[str, Model]:
    text = resources.files("oscar").joinpath("models.tsv").read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return {r[0]: Model(*r) for r in rows}


#: alias -> model, in the list's order
BUNDLED: dict[str, Model] = _read()
