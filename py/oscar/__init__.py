"""OSCAR: calibrated 2-bit KV cache for llama.cpp.

The package drives our patched llama.cpp (``build/bin``) and its Python
bindings (llama-cpp-python loading our ``libllama``). Small modules, one job each:

- :mod:`oscar.quant`   bit-exact numpy reference of the ``oscar2`` type
- :mod:`oscar.llama`   load a model with an ``oscar2`` cache through the bindings
- :mod:`oscar.paths`   where builds, models and data live
- :mod:`oscar.cli`     command-line entry points
"""
from .quant import GGML_TYPE_OSCAR2

__all__ = ["GGML_TYPE_OSCAR2", "load", "kv_type", "describe"]


def __getattr__(name):  # keep `import oscar` light: the bindings load libllama
    if name in ("load", "kv_type", "describe"):
        from . import llama
        return getattr(llama, name)
    raise AttributeError(name)
