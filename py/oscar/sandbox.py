"""Run an untrusted Python program (a model's generated code) in a contained subprocess.

Containment, in layers:

- Linux namespaces through util-linux ``unshare``: a network namespace with only a
  loopback that is down (no address is reachable), a PID namespace (every process the
  program starts dies with it), and a mount namespace in which every file system is
  remounted read-only except the program's own fresh temporary folder. ``setpriv`` then
  drops every capability (bounding set included, no_new_privs set), so the program cannot
  remount anything writable again. As root this needs nothing more; as another user it
  needs unprivileged user namespaces (``--map-root-user``).
- Resource limits (``resource``): CPU seconds, address space, size of a written file,
  open files, no core dumps; and a wall-clock timeout after which the process group
  is killed.
- A scrubbed environment (``PATH``, ``HOME`` and ``TMPDIR`` only, the latter two the temporary
  folder) and ``python -I -B`` (no user site, no ``PYTHON*`` variables, no .pyc files).

:func:`check` proves the containment on this machine once (a probe program must find the
network unreachable and the folder above its own read-only) and raises
:class:`SandboxUnavailable`, naming the fix, where it cannot be had. Without namespaces
(``isolate=False``) only the folder, the limits and the timeout apply: the caller must
say so to its user.
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

#: exit status of the namespace set-up script when it could not contain the program
SETUP_FAILED = 97
#: prefix of the set-up script's own messages
TAG = "oscar-sandbox:"

# $1: the program's folder, $2: the Python interpreter. Every mount point but the folder
# (bound onto itself first, so that it is a mount of its own) and the fresh /proc is made
# read-only; a mount that cannot be is an error, never skipped.
_SETUP = f"""
set -u
d=$1; py=$2
mount --bind "$d" "$d" || {{ echo "{TAG} cannot bind $d" >&2; exit {SETUP_FAILED}; }}
for m in $(awk '{{print $5}}' /proc/self/mountinfo | sort -u); do
    case "$m" in "$d"|/proc|/proc/*) continue;; esac
    mount -o remount,bind,ro "$m" 2>/dev/null || {{ echo "{TAG} cannot make $m read-only" >&2; exit {SETUP_FAILED}; }}
done
cd "$d" || exit {SETUP_FAILED}
exec setpriv --no-new-privs --inh-caps=-all --bounding-set=-all -- "$py" -I -B prog.py
"""


class SandboxUnavailable(RuntimeError):
    """This machine cannot contain a program (no namespaces); the message names the fix."""


@dataclass
class Outcome:
    """How one program ended: ``status`` is ``passed`` (exit status 0), ``failed`` (another
    exit status or a signal) or ``timeout``; ``output`` is the tail of stdout and stderr."""
    status: str
    returncode: int | None
    seconds: float
    output: str

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _limits(cpu_s: int, memory_mb: int, file_mb: int):
    """A ``preexec_fn`` setting the resource limits of the child (inherited by its children)."""
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_mb << 20, file_mb << 20))
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def _command(folder: Path, isolate: bool) -> list[str]:
    if not isolate:
        return [sys.executable, "-I", "-B", "prog.py"]
    cmd = ["unshare", "--net", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child",
           "--mount-proc"]
    if os.geteuid() != 0:
        cmd.append("--map-root-user")
    return cmd + ["--", "sh", "-c", _SETUP, "sh", str(folder), sys.executable]


def run(source: str, timeout_s: float = 10.0, *, isolate: bool = True, memory_mb: int = 2048,
        file_mb: int = 16) -> Outcome:
    """Run ``source`` as ``prog.py`` in a fresh temporary folder (removed afterwards).

    ``timeout_s`` bounds the wall-clock time (and, rounded up, the CPU time); ``memory_mb``
    the address space; ``file_mb`` each file written. Raises :class:`SandboxUnavailable`
    when the namespaces could not be set up (the program did not run)."""
    folder = Path(tempfile.mkdtemp(prefix="oscar-sandbox-"))
    try:
        (folder / "prog.py").write_text(source)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "TMPDIR": str(folder), "LANG": "C.UTF-8"}
        t0 = time.monotonic()
        proc = subprocess.Popen(_command(folder, isolate), cwd=folder, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_limits(int(timeout_s) + 1, memory_mb, file_mb))
        try:
            out, _ = proc.communicate(timeout=timeout_s)
            status = "passed" if proc.returncode == 0 else "failed"
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, _ = proc.communicate()
            status = "timeout"
        seconds = time.monotonic() - t0
        text = out.decode(errors="replace")
        if isolate and proc.returncode == SETUP_FAILED and TAG in text:
            raise SandboxUnavailable(text.strip().splitlines()[-1] + _FIX)
        return Outcome(status, proc.returncode, seconds, text[-2000:])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's process group (``unshare --kill-child`` takes the PID namespace with it)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


_FIX = ("; the generated code cannot be contained here: run as root, or enable unprivileged user namespaces "
        "(sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces), or pass --no-sandbox to run it "
        "with only a temporary folder, resource limits and a timeout")

_PROBE = """
import pathlib, socket
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3).close()
    raise SystemExit("network reachable")
except OSError:
    pass
try:
    (pathlib.Path.cwd().parent / "oscar-sandbox-probe").write_text("x")
    raise SystemExit("the folder above the program's own is writable")
except OSError:
    pass
pathlib.Path("inside").write_text("x")
"""

_checked: str | None = None


def check() -> str:
    """Prove the containment here once; returns a one-line description of it, or raises
    :class:`SandboxUnavailable` naming what failed and the fix."""
    global _checked
    if _checked is not None:
        return _checked
    for tool in ("unshare", "setpriv"):
        if shutil.which(tool) is None:
            raise SandboxUnavailable(f"{tool} (util-linux) is not installed" + _FIX)
    try:
        o = run(_PROBE, timeout_s=20)
    except SandboxUnavailable:
        raise
    if not o.passed:
        raise SandboxUnavailable(f"the sandbox probe failed ({o.status}, exit {o.returncode}): "
                                 f"{o.output.strip()[-300:]}" + _FIX)
    how = "root" if os.geteuid() == 0 else "user namespace"
    _checked = (f"unshare ({how}): no network, PID namespace, file systems read-only but the program's "
                f"temporary folder, capabilities dropped; resource limits and a timeout")
    return _checked
