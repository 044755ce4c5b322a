"""The core: no torch. The ``oscar2`` type's numpy reference, the limits shared with llama.cpp,
the KV memory model, the precision plan, GGUF reading and writing, rotation maths and the
rotation file format, atomic writes, paths, and the model loader of the bindings.
Imports nothing else of the package."""
