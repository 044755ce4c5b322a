"""Progress bars: tqdm's, or where tqdm is not installed (a bare GPU machine runs
``python3 -m oscar.bench.bench`` with numpy and gguf-py only) a line per step on stderr.

Every module of the package takes its bars from here: ``from ..core.progress import tqdm``.
"""
from __future__ import annotations

import sys

try:
    from tqdm import tqdm
except ImportError:
    class tqdm:  # noqa: N801 (same name as the library it stands in for)
        """The part of tqdm's interface the package uses: ``tqdm(iterable)``, ``total``,
        ``desc``, ``unit``, ``disable``, ``update``, ``set_postfix_str``, ``close``, ``with``."""

        def __init__(self, iterable=None, total=None, desc="", unit="", disable=False, **_):
            self.iterable, self.n, self.desc, self.disable = iterable, 0, desc, disable
            self.total = len(iterable) if total is None and hasattr(iterable, "__len__") else total

        def __iter__(self):
            for x in self.iterable:
                yield x
                self.update()

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.close()

        def update(self, k: int = 1) -> None:
            self.n += k
            if not self.disable:
                print(f"{self.desc}: {self.n}/{self.total}", file=sys.stderr, flush=True)

        def set_postfix_str(self, s: str) -> None:
            pass

        def close(self) -> None:
            pass

__all__ = ["tqdm"]
