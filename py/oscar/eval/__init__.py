"""Evaluation of a KV cache type: perplexity and KL divergence through llama-perplexity, passkey
retrieval, HumanEval through llama-server in a sandbox, reports and plots. Imports the core."""
