#!/usr/bin/env python3
"""mslcc: compile Metal kernel sources as C++ against the MSL-subset header.

Usage:
    mslcc.py check KERNELS_DIR FILE.metal [FILE.metal ...]
        syntax and type check (clang++ -fsyntax-only) of each file, every kernel
        instantiation included; exit status 1 and the compiler's messages on an error
    mslcc.py build KERNELS_DIR OUT.exe LAUNCHER.cpp [-O2] [-DNAME=VALUE ...]
        build an emulator executable: LAUNCHER.cpp (which #includes the .metal files it
        runs) and metal-emu/runtime.cpp

KERNELS_DIR is ggml's `ggml/src/ggml-metal/kernels`; its parent (ggml-metal-impl.h) and
`ggml/src` (ggml-common.h) are found from it.

Three things in MSL are not C++ and are rewritten, in a copy of the sources, before the
compiler sees them (nothing else is changed):
    template [[host_name("x")]] ...    -> template /* host_name("x") */ ...
                                         (C++ allows no attribute after `template`)
    [[threadgroup(n)]]                -> [[msl_threadgroup(n)]]
                                         (`threadgroup` is an empty macro here)
    constant T NAME [[function_constant(n)]];  -> T NAME;
                                         (a global the launcher sets before a run)
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
INCLUDE = HERE / "include"

RE_HOST_NAME = re.compile(r'template\s*\[\[\s*host_name\(\s*("[^"]*")\s*\)\s*\]\]')
RE_TG_ATTR = re.compile(r"\[\[\s*threadgroup\(")
RE_FC = re.compile(r"^(\s*)constant\s+([A-Za-z_][A-Za-z0-9_]*)\s+([A-Za-z_][A-Za-z0-9_]*)\s*"
                   r"\[\[\s*function_constant\(([^\]]*)\)\s*\]\]\s*;", re.M)

# clang's thread-sanitizer instrumentation without its runtime: the emulator's runtime defines
# the __tsan_* hooks and uses them to run a simd-group's threadgroup-memory accesses in lockstep
LOCKSTEP = ["-fsanitize=thread", "-mllvm", "-tsan-instrument-func-entry-exit=0",
            "-mllvm", "-tsan-instrument-atomics=0", "-mllvm", "-tsan-instrument-memintrinsics=0",
            "-mllvm", "-tsan-distinguish-volatile=0"]

WARN_OFF = ["-Wno-unknown-attributes", "-Wno-attributes", "-Wno-user-defined-literals",
            "-Wno-literal-suffix", "-Wno-unknown-pragmas", "-Wno-duplicate-decl-specifier"]


def rewrite(text: str) -> str:
    """The three MSL-to-C++ rewrites above, on one source file's text."""
    text = RE_HOST_NAME.sub(r"template /* host_name(\1) */", text)
    text = RE_TG_ATTR.sub("[[msl_threadgroup(", text)
    text = RE_FC.sub(r"\1\2 \3; /* function_constant(\4) */", text)
    return text


def host_names(text: str) -> list[str]:
    """Kernel names a source instantiates (its host_name attributes)."""
    return [m.group(1).strip('"') for m in RE_HOST_NAME.finditer(text)]


def stage(kernels: Path, extra: list[Path] | None = None) -> Path:
    """Copy the kernel sources with the rewrites applied into a temporary folder."""
    kernels = kernels.resolve()
    impl = kernels.parent / "ggml-metal-impl.h"
    common = kernels.parent.parent / "ggml-common.h"
    for p in (impl, common):
        if not p.exists():
            raise SystemExit(f"mslcc: {p} not found; KERNELS_DIR must be ggml/src/ggml-metal/kernels")
    out = Path(tempfile.mkdtemp(prefix="mslcc-"))
    files = [f for f in kernels.iterdir() if f.suffix in (".metal", ".h")] + [impl, common] + (extra or [])
    for f in files:
        (out / f.name).write_text(rewrite(f.read_text()))
    return out


def compiler(prefer: str = "clang++") -> str:
    for c in (os.environ.get("MSLCC_CXX"), prefer, "clang++", "g++"):
        if c and shutil.which(c):
            return c
    raise SystemExit("mslcc: no C++ compiler found (install clang: apt-get install clang)")


def base_flags() -> list[str]:
    return ["-std=c++17", "-fdelayed-template-parsing", "-x", "c++", "-I", str(INCLUDE), "-include", "metal_stdlib"] + WARN_OFF


def check(kernels: Path, sources: list[str]) -> int:
    """Syntax/type check each source; returns the number of files that failed."""
    st = stage(kernels)
    cxx = compiler("clang++")
    failed = 0
    try:
        for src in sources:
            name = Path(src).name
            path = st / name
            if not path.exists():
                (st / name).write_text(rewrite(Path(src).read_text()))
            n = len(host_names(Path(src).read_text() if Path(src).exists() else (kernels / name).read_text()))
            r = subprocess.run([cxx, "-fsyntax-only", *base_flags(),
                                "-I", str(st), str(path)], capture_output=True, text=True)
            msgs = r.stderr.replace(str(st) + "/", "")
            if r.returncode != 0:
                failed += 1
                print(f"FAIL {name}: {cxx} found errors\n{msgs}")
            else:
                print(f"ok   {name}: {n} kernel instantiations type-checked ({cxx})")
    finally:
        shutil.rmtree(st, ignore_errors=True)
    return failed


def build(kernels: Path, out: str, launcher: str, flags: list[str]) -> int:
    st = stage(kernels, [Path(launcher)])
    cxx = compiler("clang++")
    try:
        rt = st / "runtime.o"
        cmds = [[cxx, "-std=c++17", "-c", "-I", str(INCLUDE), str(HERE / "runtime.cpp"), "-o", str(rt), *flags],
                [cxx, *base_flags(), *LOCKSTEP, "-I", str(st), "-c", str(st / Path(launcher).name),
                 "-o", str(st / "launcher.o"), *flags],
                [cxx, str(st / "launcher.o"), str(rt), "-o", out]]
        for cmd in cmds:
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.stderr.write(r.stderr.replace(str(st) + "/", ""))
                return r.returncode
        return r.returncode
    finally:
        shutil.rmtree(st, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in ("check", "build") or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    if argv[0] == "check":
        return 1 if check(Path(argv[1]), argv[2:]) else 0
    if len(argv) < 4:
        print(__doc__)
        return 2
    return build(Path(argv[1]), argv[2], argv[3], argv[4:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
