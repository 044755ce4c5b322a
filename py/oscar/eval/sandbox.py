"""Run an untrusted Python program (a model's generated code) in a contained subprocess.

The program runs under bubblewrap (``bwrap``, Debian package ``bubblewrap``) as an
unprivileged user in namespaces of its own:

- **Who it runs as.** Started as root, ``setpriv`` first drops to :data:`SANDBOX_UID` (a user
  id nothing else uses, no supplementary groups), and bwrap then runs unprivileged: the
  program never holds uid 0 or a capability in any namespace that owns a host resource. As
  another user, bwrap runs as that user. Either way the program has no capabilities, no
  new privileges (``no_new_privs``), and cannot create further user namespaces.
- **What it sees.** A fresh root holding only ``/usr`` of the host (read-only; the Python
  interpreter and its standard library; plus the interpreter's prefix where it lies
  elsewhere), a fresh ``/proc`` of its own PID namespace (read-only), a minimal ``/dev``
  (read-only: null, zero, random, urandom, tty) and its working folder ``/box``, a tmpfs of
  ``disk_mb``. No ``/sys``, ``/etc``, ``/home``, ``/root``, ``/tmp`` or project files exist in it.
- **What it reaches.** Its own network namespace (only a loopback of its own), IPC, UTS,
  PID and cgroup namespaces, a new session (no terminal to inject input into).
- **What it may use, as a whole tree.** Where a cgroup can be made below this process's own
  (v1 ``memory`` and ``pids`` controllers, or v2 with both enabled; as root in most
  containers and CI): at most ``processes`` tasks, ``memory_mb`` of memory (the tmpfs
  included) and one CPU for the whole tree. Elsewhere: ``RLIMIT_NPROC`` bounds the tasks
  (``processes`` more than the user already runs) and ``RLIMIT_AS`` each one, so the tree
  holds at most ``processes x memory_mb`` plus the tmpfs. Always: ``RLIMIT_AS`` (a
  ``MemoryError`` rather than a kill for one large allocation), ``RLIMIT_CPU`` per task, the
  wall-clock ``timeout_s``, and ``output_kb`` of stdout and stderr together, read as they come
  and the tree killed once exceeded.

:func:`check` proves these properties on this machine once (a probe program reports what it
can reach) and raises :class:`SandboxUnavailable`, naming the fix, where they cannot be had;
:func:`run` calls it first, so that nothing ever runs uncontained.
"""
from __future__ import annotations

import json
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

#: the user id the program runs as when the sandbox is started by root (no user, file or
#: process on a normal system has it; RLIMIT_NPROC counts the tasks of this uid alone)
SANDBOX_UID = 1_999_999_000
#: where the program's tmpfs is mounted inside the sandbox (its working folder)
BOX = "/box"
#: how much of a failing program's output an :class:`Outcome` keeps (its end), in characters
KEEP_CHARS = 4000

INSTALL_BWRAP = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
USERNS_FIX = ("enable unprivileged user namespaces (sysctl -w user.max_user_namespaces=15000, and on Debian "
              "kernels sysctl -w kernel.unprivileged_userns_clone=1; on Ubuntu 23.10 and later also "
              "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap), "
              "or run as root")


class SandboxUnavailable(RuntimeError):
    """This machine cannot contain a program as described above; the message names the fix.
    Nothing was run uncontained."""


@dataclass
class Outcome:
    """How one program ended: ``status`` is ``passed`` (exit status 0), ``failed`` (another
    exit status, a signal, or killed for exceeding a limit other than time) or ``timeout``;
    ``returncode`` is bwrap's: the program's exit status, 128 + N where signal N ended it, or
    negative where the sandbox killed bwrap (see ``killed``);
    ``output`` is the end of its stdout and stderr (at most :data:`KEEP_CHARS` characters);
    ``killed`` names the limit the sandbox killed it for (empty when it ended by itself);
    ``output_bytes`` counts what it printed up to the kill (at most the cap plus one read)."""
    status: str
    returncode: int | None
    seconds: float
    output: str
    killed: str = ""
    output_bytes: int = 0

    @property
    def passed(self) -> bool:
        return self.status == "passed"


# ----------------------------------------------------------------------------- cgroups

def _cgroup_dirs() -> dict[str, Path]:
    """This process's own cgroup folder per controller (``memory``, ``pids``, ``cpu``; ``v2``
    for the unified hierarchy), where its file system is mounted; empty where none is."""
    mounts: dict[str, tuple[str, str]] = {}  # controller -> (mount point, mount root)
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            pre, _, post = line.partition(" - ")
            fields, rest = pre.split(), post.split()
            if len(fields) < 5 or len(rest) < 3:
                continue
            root, point = fields[3], fields[4].replace("\\040", " ")
            if rest[0] == "cgroup2":
                mounts.setdefault("v2", (point, root))
            elif rest[0] == "cgroup":
                for opt in rest[2].split(","):
                    if opt in ("memory", "pids", "cpu"):
                        mounts.setdefault(opt, (point, root))
        own = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return {}
    dirs: dict[str, Path] = {}
    for line in own:
        _, ctrls, path = line.split(":", 2)
        for c in (ctrls.split(",") if ctrls else ["v2"]):
            if c in mounts:
                point, root = mounts[c]
                rel = path[len(root):] if root != "/" and path.startswith(root) else path
                dirs[c] = Path(point + rel.rstrip("/"))
    return dirs


class _Cgroup:
    """A cgroup below this process's own for one program's tree: at most ``processes`` tasks,
    ``memory_mb`` of memory (page cache and tmpfs included, no swap beyond it) and, where the
    cpu controller is there, one CPU. :meth:`make` returns None where none can be made."""

    def __init__(self, dirs: list[Path], procs: Path, memory: Path):
        self.dirs, self.procs, self.memory = dirs, procs, memory

    @staticmethod
    def make(memory_mb: int, processes: int) -> _Cgroup | None:
        own = _cgroup_dirs()
        name = f"oscar-sandbox-{os.getpid()}-{time.monotonic_ns()}"
        made: list[Path] = []
        try:
            if "memory" in own and "pids" in own:  # cgroup v1
                mem, pids = own["memory"] / name, own["pids"] / name
                for d in (mem, pids):
                    d.mkdir()
                    made.append(d)
                (mem / "memory.limit_in_bytes").write_text(str(memory_mb << 20))
                if (mem / "memory.memsw.limit_in_bytes").exists():
                    (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_mb << 20))
                (pids / "pids.max").write_text(str(processes))
                if "cpu" in own and (own["cpu"] / "cpu.cfs_quota_us").exists():
                    cpu = own["cpu"] / name
                    cpu.mkdir()
                    made.append(cpu)
                    (cpu / "cpu.cfs_quota_us").write_text(str(int((cpu / "cpu.cfs_period_us").read_text())))
                return _Cgroup(made, pids / "cgroup.procs", mem)
            if "v2" in own:
                d = own["v2"] / name
                d.mkdir()
                made.append(d)
                ctrls = (d / "cgroup.controllers").read_text().split()
                if "memory" not in ctrls or "pids" not in ctrls:
                    raise OSError("the memory and pids controllers are not enabled for cgroups below this one")
                (d / "memory.max").write_text(str(memory_mb << 20))
                if (d / "memory.swap.max").exists():
                    (d / "memory.swap.max").write_text("0")
                (d / "pids.max").write_text(str(processes))
                if "cpu" in ctrls:
                    (d / "cpu.max").write_text("100000 100000")
                return _Cgroup(made, d / "cgroup.procs", d)
        except OSError:
            for d in reversed(made):
                try:
                    d.rmdir()
                except OSError:
                    pass
        return None

    def enter(self) -> None:
        """Move the calling process into every controller's cgroup (run in the child before exec)."""
        for d in self.dirs:
            (d / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in self.procs.read_text().split()]
        except OSError:
            return []

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a task of the tree for its memory limit."""
        for f, key in (("memory.oom_control", "oom_kill"), ("memory.events", "oom_kill")):
            try:
                for line in (self.memory / f).read_text().splitlines():
                    k, _, v = line.partition(" ")
                    if k == key and int(v) > 0:
                        return True
            except (OSError, ValueError):
                pass
        return False

    def remove(self) -> None:
        """Kill every task left and remove the cgroups (retried while the tasks exit)."""
        for _ in range(200):
            left = self.pids()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if not left:
                break
            time.sleep(0.01)
        for d in self.dirs:
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


# ----------------------------------------------------------------------------- running

def _interpreter() -> tuple[str, list[str]]:
    """The Python interpreter the program runs with and the host folders bound read-only for it.
    The system's ``/usr/bin/python3.X`` (this version) or ``/usr/bin/python3`` is preferred, so
    that only ``/usr`` is visible; a virtual environment's or a user's own installation (pyenv
    under a home folder) is never exposed. Only where ``/usr`` has no Python 3 is this
    interpreter's own prefix bound as well, and refused where it would expose this user's files."""
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for exe in (f"/usr/bin/{ver}", "/usr/bin/python3"):
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return exe, ["/usr"]
    prefix = os.path.realpath(sys.base_prefix)
    exe = os.path.join(prefix, "bin", ver)
    home = os.path.realpath(os.path.expanduser("~"))
    if not os.path.isfile(exe):
        raise SandboxUnavailable(f"no Python 3 interpreter in /usr/bin for the sandboxed program: install python3 "
                                 "(apt-get install python3)")
    if prefix in ("/", home) or (prefix + "/").startswith(home + "/") or os.getcwd().startswith(prefix + "/"):
        raise SandboxUnavailable(f"the only Python found for the sandboxed program is under {prefix}, which would "
                                 "expose this user's or project's files to it: install python3 under /usr "
                                 "(apt-get install python3)")
    return exe, ["/usr", prefix]


def _bwrap() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed, so generated code cannot be contained: "
                                 + INSTALL_BWRAP)
    return path


def _command(ready_fd: int, src_fd: int, disk_mb: int) -> list[str]:
    """setpriv (as root) and bwrap's command line; the program's source is copied from
    ``src_fd`` into the tmpfs; a bootstrap writes one byte to ``ready_fd`` once inside (so that
    bwrap's own failures are told from the program's) and runs it as ``__main__``."""
    bwrap = _bwrap()
    exe, binds = _interpreter()
    cmd: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise SandboxUnavailable("setpriv (util-linux) is not installed; as root it drops to an unprivileged "
                                     "user before bwrap starts: apt-get install util-linux")
        cmd = [setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--inh-caps=-all",
               "--"]
    cmd += [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
            "--hostname", "sandbox", "--clearenv", "--setenv", "PATH", "/usr/bin", "--setenv", "HOME", BOX,
            "--setenv", "TMPDIR", BOX, "--setenv", "LANG", "C.UTF-8"]
    for b in binds:
        cmd += ["--ro-bind", b, b]
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{link}") and os.readlink(f"/{link}").lstrip("/").startswith("usr/"):
            cmd += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
    cmd += ["--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
            "--size", str(disk_mb << 20), "--tmpfs", BOX, "--file", str(src_fd), f"{BOX}/prog.py",
            "--chdir", BOX, "--remount-ro", "/", "--",
            exe, "-I", "-B", "-u", "-c",
            f"import os, runpy; os.write({ready_fd}, b'1'); os.close({ready_fd}); "
            "runpy.run_path('prog.py', run_name='__main__')"]
    return cmd


def _user_tasks(uid: int) -> int:
    """How many tasks (threads included) of real user ``uid`` run now, as RLIMIT_NPROC counts them."""
    n = 0
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                st = (d / "status").read_text()
            except OSError:
                continue
            uids = re.search(r"^Uid:\s+(\d+)", st, re.M)
            threads = re.search(r"^Threads:\s+(\d+)", st, re.M)
            if uids and int(uids.group(1)) == uid:
                n += int(threads.group(1)) if threads else 1
    return n


def _limits(cgroup: _Cgroup | None, cpu_s: int, memory_mb: int, nproc: int, file_mb: int):
    """A ``preexec_fn``: into the cgroup, then the resource limits (inherited by every task;
    RLIMIT_FSIZE repeats the tmpfs's bound for any file the program could reach)."""
    def apply() -> None:
        if cgroup is not None:
            cgroup.enter()
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_mb << 20, file_mb << 20))
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def _kill(proc: subprocess.Popen, cgroup: _Cgroup | None) -> None:
    """SIGKILL the tree: bwrap's process group (its PID namespace dies with it) and every task
    left in the cgroup."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if cgroup is not None:
        for pid in cgroup.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _run(source: str, timeout_s: float, memory_mb: int, processes: int, output_kb: int,
         disk_mb: int) -> tuple[Outcome, bool]:
    """Run ``source`` contained (without :func:`check`); also returns whether a cgroup bounded the tree."""
    cgroup = _Cgroup.make(memory_mb, processes + 2)  # bwrap's two processes are in the tree too
    uid = SANDBOX_UID if os.geteuid() == 0 else os.getuid()
    nproc = processes + 2 + _user_tasks(uid)  # RLIMIT_NPROC counts every task of the real uid
    ready_r, ready_w = os.pipe()
    cap = output_kb << 10
    chunks: list[bytes] = []
    got = 0
    killed = ""
    with tempfile.TemporaryFile() as tmp:
        tmp.write(source.encode())
        tmp.flush()
        src = os.open(f"/proc/self/fd/{tmp.fileno()}", os.O_RDONLY)  # bwrap copies it in, then closes it
        try:
            cmd = _command(ready_w, src, disk_mb)
            t0 = time.monotonic()
            proc = subprocess.Popen(cmd, cwd="/", env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True, pass_fds=(ready_w, src),
                                    preexec_fn=_limits(cgroup, int(timeout_s) + 1, memory_mb, nproc, disk_mb))
        except BaseException:
            os.close(ready_r)
            os.close(ready_w)
            if cgroup is not None:
                cgroup.remove()
            raise
        finally:
            os.close(src)
    os.close(ready_w)
    status = ""
    try:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = t0 + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                _kill(proc, cgroup)
                status, killed = "timeout", f"timeout ({timeout_s:g} s)"
                break
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            data = os.read(fd, 65536)
            if not data:
                break
            got += len(data)
            chunks.append(data)
            if got > cap:
                _kill(proc, cgroup)
                killed = f"output over {output_kb} KiB"
                break
            if sum(len(c) for c in chunks) > 2 * KEEP_CHARS * 4:
                tail = b"".join(chunks)[-KEEP_CHARS * 4:]
                chunks = [tail]
        proc.stdout.close()
        try:  # a program that closed its output may still run
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill(proc, cgroup)
            proc.wait()
            status, killed = "timeout", f"timeout ({timeout_s:g} s)"
        seconds = time.monotonic() - t0
        ready = select.select([ready_r], [], [], 0)[0] and os.read(ready_r, 1) == b"1"
    finally:
        os.close(ready_r)
        if proc.poll() is None:
            _kill(proc, cgroup)
            proc.wait()
        if cgroup is not None:
            oom = cgroup.out_of_memory()
            cgroup.remove()
        else:
            oom = False
    text = b"".join(chunks).decode(errors="replace")
    if not ready and not killed:
        said = text.strip()[-400:]
        fix = USERNS_FIX if re.search(r"namespace|uid map|setting up uid|No permissions|Operation not permitted",
                                      said) else INSTALL_BWRAP + " (0.8.0 or later)"
        raise SandboxUnavailable(f"bubblewrap could not start the program (exit {proc.returncode}): {said}; {fix}")
    if oom and not killed:
        killed = f"memory over {memory_mb} MiB (the whole tree)"
    if not status:
        status = "passed" if proc.returncode == 0 and not killed else "failed"
    return Outcome(status, proc.returncode, seconds, text[-KEEP_CHARS:], killed, got), cgroup is not None


def run(source: str, timeout_s: float = 10.0, *, memory_mb: int = 2048, processes: int = 32,
        output_kb: int = 1024, disk_mb: int = 16) -> Outcome:
    """Run ``source`` as ``/box/prog.py`` in the sandbox and return how it ended.

    ``timeout_s`` bounds the wall-clock time of the tree (and, rounded up, the CPU time of each
    task); ``memory_mb`` the memory of the tree (where a cgroup can be had, else of each task);
    ``processes`` its tasks; ``output_kb`` what it may print; ``disk_mb`` its folder's tmpfs.
    Nothing is left on the host: the folder is a tmpfs that goes with the namespace, and every
    task is killed. Raises :class:`SandboxUnavailable` (nothing ran) when :func:`check` fails
    here or bwrap cannot start."""
    check()
    return _run(source, timeout_s, memory_mb, processes, output_kb, disk_mb)[0]


# ----------------------------------------------------------------------------- the proof

#: what the probe reports; :func:`check` requires each of these values
_PROBE = r"""
import ctypes, json, os, resource, socket
r = {}
r["uid"] = os.getuid()
st = open("/proc/self/status").read()
r["caps"] = sorted({ln.split()[1] for ln in st.splitlines() if ln.startswith(("CapEff", "CapPrm", "CapBnd", "CapAmb"))})
r["no_new_privs"] = "NoNewPrivs:\t1" in st
def opens_for_writing(p):
    try:
        fd = os.open(p, os.O_WRONLY)  # probe only: closed again without writing
    except OSError:
        return False
    os.close(fd)
    return True
r["kernel_writable"] = [p for p in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
                                     "/proc/sysrq-trigger", "/proc/sys/vm/drop_caches", "/proc/self/oom_score_adj")
                        if opens_for_writing(p)]
mounts = [ln.split() for ln in open("/proc/self/mountinfo")]
# the device nodes null, zero, full, random, urandom, tty are mounts of their own (writing them
# stores nothing) and /dev/pts is a devpts of this namespace's own
r["writable_mounts"] = [m[4] for m in mounts if "rw" in m[5].split(",") and m[4] != "/box"
                        and not (m[4].startswith("/dev/") and (m[4] == "/dev/pts" or m[4][5:] in DEVICES))]
r["visible"] = [p for p in ("/etc/shadow", "/etc/passwd", "/etc", "/sys", "/root", "/home", "/work", "/tmp",
                            "/var", "/run", "/mnt", "/opt", "/srv")
                + tuple(SECRET_PATHS) if os.path.lexists(p)]
libc = ctypes.CDLL(None, use_errno=True)
r["new_userns"] = libc.unshare(0x10000000) == 0
r["interfaces"] = [n for _, n in socket.if_nameindex()]
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2).close()
    r["network"] = True
except OSError:
    r["network"] = False
r["nproc"] = resource.getrlimit(resource.RLIMIT_NPROC)[0]
v = os.statvfs("/box")
r["box_mb"] = v.f_blocks * v.f_frsize / (1 << 20)
kids = []
for _ in range(FORKS):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        import time
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
r["forked"] = len(kids)
for k in kids:
    os.kill(k, 9)
print("PROBE " + json.dumps(r))
"""

_checked: str | None = None


def check() -> str:
    """Prove the containment here once (cached); returns a one-line description of it, or
    raises :class:`SandboxUnavailable` naming what failed and the fix. The probe runs as a
    sandboxed program and must find: a non-zero uid with no capabilities and no_new_privs; no
    kernel interface it can open for writing (``/proc/sys``, ``/proc/sysrq-trigger``) and
    every mount but ``/box`` read-only; none of the host's ``/etc``, ``/sys``, home, project
    or temporary folders; no new user namespace; no network; a tmpfs of ``disk_mb``; and at
    most ``processes`` tasks when it forks more."""
    global _checked
    if _checked is not None:
        return _checked
    processes, disk_mb = 32, 16
    hidden = sorted({os.path.realpath(p) for p in (os.getcwd(), os.path.expanduser("~"), tempfile.gettempdir(),
                                                   os.path.dirname(os.path.abspath(__file__)))}
                    - {"/", "/usr"})
    src = _PROBE.replace("SECRET_PATHS", repr(hidden)).replace("FORKS", str(processes + 16))
    src = src.replace("DEVICES", repr(("null", "zero", "full", "random", "urandom", "tty")))
    out, tree = _run(src, 30.0, 2048, processes, 64, disk_mb)
    line = next((ln for ln in out.output.splitlines() if ln.startswith("PROBE ")), None)
    if not out.passed or line is None:
        raise SandboxUnavailable(f"the sandbox probe failed ({out.status}, exit {out.returncode}): "
                                 f"{out.output.strip()[-400:]}")
    r = json.loads(line[6:])
    wrong = []
    if r["uid"] == 0 or r["caps"] != ["0000000000000000"] or not r["no_new_privs"]:
        wrong.append(f"it runs as uid {r['uid']} with capabilities {r['caps']}, no_new_privs {r['no_new_privs']}")
    if r["kernel_writable"]:
        wrong.append(f"it can open {', '.join(r['kernel_writable'])} for writing")
    if r["writable_mounts"]:
        wrong.append(f"{', '.join(r['writable_mounts'])} are writable")
    if r["visible"]:
        wrong.append(f"it sees {', '.join(r['visible'])}")
    if r["new_userns"]:
        wrong.append("it can create a user namespace")
    if r["network"] or r["interfaces"] != ["lo"]:
        wrong.append(f"it reaches a network (interfaces {r['interfaces']})")
    if not 0 < r["box_mb"] <= disk_mb:
        wrong.append(f"its folder holds {r['box_mb']:.0f} MiB, not {disk_mb}")
    if r["forked"] > processes:
        wrong.append(f"it started {r['forked']} processes, more than {processes}")
    if wrong:
        raise SandboxUnavailable("the sandbox does not contain programs here: " + "; ".join(wrong)
                                 + f". bubblewrap {_bwrap_version()} may be too old or patched: " + INSTALL_BWRAP
                                 + " from a current release")
    who = f"as uid {SANDBOX_UID} (dropped from root)" if os.geteuid() == 0 else f"as uid {os.getuid()}"
    tree_how = ("tasks, memory (tmpfs included) and one CPU for the whole tree by a cgroup" if tree else
                "tasks by RLIMIT_NPROC, memory per task by RLIMIT_AS (no cgroup here)")
    _checked = (f"bubblewrap {_bwrap_version()} {who}: own user/PID/network/IPC/UTS/cgroup namespaces, no "
                f"capabilities, no network, only /usr visible, every mount read-only but a {disk_mb} MiB tmpfs; "
                f"{tree_how}; CPU time, wall time and output bytes capped")
    return _checked


def _bwrap_version() -> str:
    try:
        v = subprocess.run([_bwrap(), "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "(version unknown)"
    return v.split()[-1] if v.split() else "(version unknown)"
