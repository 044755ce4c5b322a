"""The Metal backend's host code compiled on Linux, without Apple's SDK.

The host files of ggml-metal (the Objective-C ggml-metal-device.m, ggml-metal-context.m and our
ggml-metal-oscar-device.m, the C++ ggml-metal*.cpp) are what turn our kernels into pipelines,
dispatch them, compile our own MTLLibrary and run its start-up self-check. A syntax or type error there breaks every Mac build,
and the fail-safe of the separate library cannot catch it. So:

1. Objective-C: `clang -x objective-c -fsyntax-only` against metal-emu/objc/, our own
   declarations of the Foundation, Metal, dispatch, Mach and blocks API the files use (from
   Apple's public reference), with every warning an error: a misspelt selector
   (-Wobjc-method-access), a wrong argument or protocol type, an undeclared function
   (-Wimplicit-function-declaration), a missing semicolon all fail. Both branches of
   GGML_METAL_EMBED_LIBRARY are compiled.
   - upstream's pristine files (tag `upstream` of llama.cpp/) must pass: the stubs model the API
     as upstream's known-good code uses it;
   - the fork's files (llama.cpp/ working tree, with patch 0014) must pass;
   - copies with one deliberate error in OUR added code must fail, at that line.
2. C++: the same for ggml-metal*.cpp with `clang++ -fsyntax-only` (they include no Apple header).
3. The static analyzer's retain-count checker (the .m files are manual retain/release) finds no
   leak or over-release in our code beyond upstream's own reports, and does find a deliberate
   leak in a copy.

What this is not: a build against Apple's SDK (our headers model the API; a method whose
signature we model wrongly on both sides would pass), nor a link, nor a run on Apple hardware.
scripts/mac-check.sh on a Mac is the real test.
"""
from __future__ import annotations

import collections
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORK = ROOT / "llama.cpp"
STUBS = ROOT / "metal-emu" / "objc"
METAL_DIR = "ggml/src/ggml-metal"

OBJC_SOURCES = ["ggml-metal-device.m", "ggml-metal-context.m", "ggml-metal-oscar-device.m"]
CXX_SOURCES = ["ggml-metal-common.cpp", "ggml-metal-device.cpp", "ggml-metal-fusion.cpp",
               "ggml-metal-ops.cpp", "ggml-metal-tuning.cpp", "ggml-metal.cpp",
               "ggml-metal-oscar-device.cpp", "ggml-metal-oscar-ops.cpp"]
# ours alone (upstream has no such file): not in the pristine runs
OURS_ONLY = {"ggml-metal-oscar-device.m", "ggml-metal-oscar-device.cpp", "ggml-metal-oscar-ops.cpp"}

# Objective-C as the Mac build compiles it: C11 with blocks, Apple's (NeXT) runtime, manual
# retain/release (upstream does not use ARC). -Werror makes every default warning an error: among
# them -Wobjc-method-access (a selector no class or protocol declares), incompatible pointer and
# protocol types, -Wint-conversion, -Wimplicit-function-declaration, -Wenum-conversion (an
# MTLStorageMode where MTLResourceOptions is wanted); -Wall -Wextra add the rest that upstream's
# files are clean of (-Wunused-function aside: ggml-impl.h's static helpers in every unit).
# clang 14 (Debian 12) predates the visionOS platform name of upstream's @available checks:
# -DvisionOS=watchOS gives it a name it knows (nothing else in the files is spelt so).
OBJC_FLAGS = ["-x", "objective-c", "-std=gnu11", "-fblocks", "-fobjc-runtime=macosx-15.0",
              "-fno-objc-arc", "-DvisionOS=watchOS"]
WARN_FLAGS = ["-Werror", "-Wall", "-Wextra", "-Wno-unused-function"]
OBJC_CONFIGS = {"source": [], "embedded": ["-DGGML_METAL_EMBED_LIBRARY=1"]}

# C++17 as ggml builds it. -include memory: Apple's libc++ brings <memory> in through other
# standard headers and ggml-metal.cpp relies on it (upstream's file fails here without it).
# -Wno-format: int64_t is long on Linux and long long on macOS, so upstream's %lld is right
# there and a warning here.
CXX_FLAGS = ["-x", "c++", "-std=c++17", "-include", "memory", "-Wno-format"]


@pytest.fixture(scope="module")
def clang() -> dict:
    tools = {name: shutil.which(name) for name in ("clang", "clang++")}
    missing = [name for name, path in tools.items() if not path]
    if missing:
        pytest.fail(f"{' and '.join(missing)} missing: apt install clang (scripts/test-deps.sh installs it)")
    if not (FORK / ".git").exists():
        pytest.fail(f"{FORK} is not the fork's git repo: run scripts/fetch-llama.sh first")
    return tools


@pytest.fixture(scope="module")
def pristine(clang, tmp_path_factory) -> Path:
    """Upstream's ggml headers and Metal host files (tag `upstream`), extracted to a folder."""
    root = tmp_path_factory.mktemp("pristine")
    paths = ["ggml/include", ":(glob)ggml/src/*.h", METAL_DIR]
    archive = subprocess.run(["git", "-C", str(FORK), "archive", "upstream", *paths], capture_output=True)
    if archive.returncode != 0:
        pytest.fail(f"git archive upstream failed: {archive.stderr.decode()} (the fork needs its `upstream` tag)")
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    return root


def includes(tree: Path) -> list[str]:
    return [f"-I{STUBS}", f"-I{tree / 'ggml/include'}", f"-I{tree / 'ggml/src'}", f"-I{tree / METAL_DIR}"]


def compile_objc(clang: dict, tree: Path, src: Path, config: list[str]) -> subprocess.CompletedProcess:
    cmd = [clang["clang"], "-fsyntax-only", *OBJC_FLAGS, *WARN_FLAGS, *config, *includes(tree), str(src)]
    return subprocess.run(cmd, capture_output=True, text=True)


def compile_cxx(clang: dict, tree: Path, src: Path) -> subprocess.CompletedProcess:
    cmd = [clang["clang++"], "-fsyntax-only", *WARN_FLAGS, *CXX_FLAGS, *includes(tree), str(src)]  # -Wno-format after -Wall
    return subprocess.run(cmd, capture_output=True, text=True)


def test_every_host_file_is_checked(clang) -> None:
    """A host file added to ggml-metal later must join the lists (or it goes unchecked)."""
    here = sorted(p.name for p in (FORK / METAL_DIR).iterdir() if p.suffix in (".m", ".cpp"))
    assert here == sorted(OBJC_SOURCES + CXX_SOURCES)


# ---------------------------------------------------------------------------------------------
# 1, 2. pristine passes, ours passes


@pytest.mark.parametrize("config", OBJC_CONFIGS)
@pytest.mark.parametrize("name", [n for n in OBJC_SOURCES if n not in OURS_ONLY])
def test_upstream_objc_compiles_against_the_stubs(clang, pristine: Path, name: str, config: str) -> None:
    r = compile_objc(clang, pristine, pristine / METAL_DIR / name, OBJC_CONFIGS[config])
    assert r.returncode == 0, f"upstream's own {name} fails: the stubs in {STUBS} model the API wrongly\n{r.stderr}"


@pytest.mark.parametrize("config", OBJC_CONFIGS)
@pytest.mark.parametrize("name", OBJC_SOURCES)
def test_our_objc_compiles(clang, name: str, config: str) -> None:
    r = compile_objc(clang, FORK, FORK / METAL_DIR / name, OBJC_CONFIGS[config])
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", [n for n in CXX_SOURCES if n not in OURS_ONLY])
def test_upstream_cxx_compiles(clang, pristine: Path, name: str) -> None:
    r = compile_cxx(clang, pristine, pristine / METAL_DIR / name)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", CXX_SOURCES)
def test_our_cxx_compiles(clang, name: str) -> None:
    r = compile_cxx(clang, FORK, FORK / METAL_DIR / name)
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------------------------
# 3. a broken copy fails, at the broken line
#
# (file, what is broken, our line, its broken form, what clang must say). Each line is in the
# code patch 0014 adds (checked against upstream's file, where upstream has one); the first line
# of `ours` is where the error is. The copy is compiled in a folder of its own, the fork's headers from -I.

MUTANTS = [
    ("ggml-metal-oscar-device.m", "misspelt selector",
     "[enc setComputePipelineState:pso];", "[enc setComputePipelinState:pso];",
     "instance method '-setComputePipelinState:' not found"),
    ("ggml-metal-oscar-device.m", "misspelt class method",
     "[NSMutableDictionary dictionary];\n        if (ggml_metal_device_get_props(dev)->has_bfloat)",
     "[NSMutableDictionary dictionaryy];\n        if (ggml_metal_device_get_props(dev)->has_bfloat)",
     "class method '+dictionaryy' not found"),
    ("ggml-metal-oscar-device.m", "misspelt property",
     "options.preprocessorMacros = prep;\n\n        const int64_t t0",
     "options.preprocessorMacro = prep;\n\n        const int64_t t0",
     "property 'preprocessorMacro' not found"),
    ("ggml-metal-oscar-device.m", "missing semicolon",
     "[enc endEncoding];\n\n            [cmd_buf commit];", "[enc endEncoding]\n\n            [cmd_buf commit];",
     "expected ';'"),
    ("ggml-metal-oscar-device.m", "a struct where a pointer goes",
     "[enc setBytes:&args length:sizeof(args) atIndex:0];", "[enc setBytes:args length:sizeof(args) atIndex:0];",
     "incompatible type"),
    ("ggml-metal-oscar-device.m", "the wrong protocol",
     "id<MTLBuffer> buf_dst = [device newBufferWithLength:sizeof(ref) options:MTLResourceStorageModeShared];",
     "id<MTLBuffer> buf_dst = [queue commandBuffer];",
     "incompatible type 'id<MTLCommandBuffer>"),
    ("ggml-metal-oscar-device.m", "the wrong enum",
     "id<MTLBuffer> buf_dst = [device newBufferWithLength:sizeof(ref) options:MTLResourceStorageModeShared];",
     "id<MTLBuffer> buf_dst = [device newBufferWithLength:sizeof(ref) options:MTLStorageModeShared];",
     "different enumeration type 'MTLResourceOptions'"),
    ("ggml-metal-oscar-device.m", "a C string for an NSString",
     '[mtl_lib newFunctionWithName:@"kernel_set_rows_oscar2_i64"]', '[mtl_lib newFunctionWithName:"kernel_set_rows_oscar2_i64"]',
     "string literal must be prefixed by '@'"),
    ("ggml-metal-oscar-device.m", "an undeclared function",
     "id<MTLCommandQueue> queue  = ggml_metal_device_get_queue(dev);",
     "id<MTLCommandQueue> queue  = ggml_metal_device_queue(dev);",
     "implicit declaration of function 'ggml_metal_device_queue'"),
    ("ggml-metal-ops.cpp", "an undeclared function",
     "return ggml_metal_op_set_rows_oscar2(ctx->dev, ctx->enc, op);",
     "return ggml_metal_op_set_rows_oscr2(ctx->dev, ctx->enc, op);",
     "ggml_metal_op_set_rows_oscr2"),
    ("ggml-metal-device.m", "an undeclared function",
     "ggml_metal_oscar2_library_compile(dev, ggml_metal_library_flatten_source);",
     "ggml_metal_oscar2_library_compil(dev, ggml_metal_library_flatten_source);",
     "implicit declaration of function 'ggml_metal_oscar2_library_compil'"),
    ("ggml-metal-oscar-ops.cpp", "a wrong argument type",
     "auto pipeline = ggml_metal_library_get_pipeline_set_rows_oscar2(lib, op);",
     "auto pipeline = ggml_metal_library_get_pipeline_set_rows_oscar2(lib, enc);",
     "no matching function"),
    ("ggml-metal-oscar-ops.cpp", "missing semicolon",
     "const int32_t clip_k = n_seg > 0 ? (int32_t) oscar_clip_index(r, n_seg) : 0;",
     "const int32_t clip_k = n_seg > 0 ? (int32_t) oscar_clip_index(r, n_seg) : 0",
     "expected ';'"),
]


def mutate(name: str, ours: str, broken: str, pristine: Path, dst: Path) -> tuple[Path, int]:
    """A copy of the fork's `name` with `ours` replaced by `broken`; the line of the change."""
    src = (FORK / METAL_DIR / name).read_text()
    assert src.count(ours) == 1, f"{ours!r} is not (once) in the fork's {name}: update MUTANTS"
    if name not in OURS_ONLY:
        assert ours not in (pristine / METAL_DIR / name).read_text(), f"{ours!r} is upstream's, not ours"
    line = src[: src.index(ours)].count("\n") + 1
    dst.mkdir(parents=True, exist_ok=True)
    out = dst / name
    out.write_text(src.replace(ours, broken))
    return out, line


@pytest.mark.parametrize("name,what,ours,broken,says", MUTANTS, ids=[f"{m[0]}: {m[1]}" for m in MUTANTS])
def test_a_broken_copy_fails(clang, pristine: Path, tmp_path: Path, name: str, what: str, ours: str,
                             broken: str, says: str) -> None:
    path, line = mutate(name, ours, broken, pristine, tmp_path)
    if name.endswith(".m"):
        r = compile_objc(clang, FORK, path, OBJC_CONFIGS["source"])
    else:
        r = compile_cxx(clang, FORK, path)
    assert r.returncode != 0, f"{what} in {name} line {line} compiled"
    errors = [l for l in r.stderr.splitlines() if ": error: " in l]
    assert errors and errors[0].startswith(f"{path}:{line}:"), r.stderr
    assert says in r.stderr, r.stderr


# ---------------------------------------------------------------------------------------------
# 4. retain counts (manual retain/release): the analyzer, widened loops so that it gets past the
#    self-check's 256-value loop to the releases after it


def retain_count_reports(clang: dict, tree: Path, src: Path) -> list[tuple[int, str]]:
    cmd = [clang["clang"], "--analyze", "-Xanalyzer", "-analyzer-checker=osx.cocoa.RetainCount",
           "-Xanalyzer", "-analyzer-config", "-Xanalyzer", "widen-loops=true",
           *OBJC_FLAGS, *includes(tree), "-o", "/dev/null", str(src)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    found = re.findall(rf"^{re.escape(str(src))}:(\d+):\d+: warning: (.*) \[osx\.cocoa\.RetainCount\]$",
                       r.stderr, re.M)
    return [(int(line), msg) for line, msg in found]


def added_lines(name: str) -> set[int]:
    """The lines of the fork's file that are not upstream's (git diff -U0 upstream)."""
    diff = subprocess.run(["git", "-C", str(FORK), "diff", "-U0", "upstream", "--", f"{METAL_DIR}/{name}"],
                          capture_output=True, text=True, check=True).stdout
    lines: set[int] = set()
    for start, count in re.findall(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", diff, re.M):
        n = 1 if count == "" else int(count)
        lines.update(range(int(start), int(start) + n))
    return lines


def test_no_retain_count_error_in_our_objc(clang, pristine: Path) -> None:
    name = "ggml-metal-device.m"
    ours = retain_count_reports(clang, FORK, FORK / METAL_DIR / name)
    theirs = retain_count_reports(clang, pristine, pristine / METAL_DIR / name)
    ours_added = [(line, msg) for line, msg in ours if line in added_lines(name)]
    assert not ours_added, ours_added
    # and nothing new elsewhere (upstream's own reports, on its buffers freed in handlers, stay)
    assert collections.Counter(m for _, m in ours) == collections.Counter(m for _, m in theirs)


def test_no_retain_count_error_in_our_own_objc(clang) -> None:
    name = "ggml-metal-oscar-device.m"
    assert not retain_count_reports(clang, FORK, FORK / METAL_DIR / name)


def test_retain_count_check_catches_a_leak(clang, pristine: Path, tmp_path: Path) -> None:
    name = "ggml-metal-oscar-device.m"
    path, _ = mutate(name, "        [buf_src release];\n        [buf_idx release];", "        [buf_idx release];",
                     pristine, tmp_path)
    text = path.read_text()
    line = text[: text.index("id<MTLBuffer> buf_src = [device newBufferWithBytes:src")].count("\n") + 1
    reports = retain_count_reports(clang, FORK, path)
    assert (line, "Potential leak of an object stored into 'buf_src'") in reports, reports
