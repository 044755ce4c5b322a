# OSCAR: 2-bit KV cache for llama.cpp
#   make build   fetch + patch llama.cpp, build build/bin/*, set up .venv (CUDA=1 for the GPU backend)
#   make test    install the test tools (scripts/test-deps.sh), build, then run the whole test suite
#   make demo    build, fetch SmolLM2-135M, generate text with an oscar2 KV cache
.PHONY: build test demo results clean

build:
	scripts/build.sh

test:
	scripts/test-deps.sh
	$(MAKE) build
	.venv/bin/python -m pytest -v tests

demo: build
	scripts/demo.sh

clean:
	rm -rf build build-aarch64 .venv
