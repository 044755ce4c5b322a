"""Benchmarks: speed and memory of KV cache types (llama-bench), equal-memory comparisons, and
synthetic models to run them on. Imports the core and evaluation's reports."""
