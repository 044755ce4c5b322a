SRC_TAR=.dC/gguf-py.tar.xz bash docs/data/stop24/next/run-next-b.sh
