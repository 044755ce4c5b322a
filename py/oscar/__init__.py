"""OSCAR: calibrated 2-bit KV cache for llama.cpp.

The package drives our patched llama.cpp (``build/bin``) and its Python
bindings (llama-cpp-python loading our ``libllama``). Layers, each importing only
those before it:

- :mod:`oscar.core`   no torch: the ``oscar2`` reference, limits, KV memory, the precision
  plan, GGUF I/O, rotations and their files, atomic writes, paths, the model loader
- :mod:`oscar.calib`  calibration: capture, covariances, clips, rotations, the zoo, the Hub
- :mod:`oscar.eval`   quality: perplexity and KLD, passkey, HumanEval, reports
- :mod:`oscar.bench`  speed and memory, synthetic models
- :mod:`oscar.sim`    the research simulator (``oscar-sim``), which the product does not import
- :mod:`oscar.cli`    command-line entry points
"""
from .core.quant import GGML_TYPE_OSCAR2

__all__ = ["GGML_TYPE_OSCAR2", "load", "kv_type", "describe"]


def __getattr__(name):  # keep `import oscar` light: the bindings load libllama
    if name in ("load", "kv_type", "describe"):
        from .core import llama
        return getattr(llama, name)
    raise AttributeError(name)
