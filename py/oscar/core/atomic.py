"""Writing outputs atomically: temporary files that say what they are, removed on every way out.

A file is written to a temporary beside it, ``.OUT.<tool>-<pid>-<random>.part`` (a folder:
``... .d``), created exclusively (an existing file of that name is never opened), and renamed
over ``OUT`` with ``os.replace`` only once it is complete, so ``OUT`` is either the old file or
the whole new one. :class:`Cleanup` removes the temporaries it was given when the block exits
by an exception and on SIGINT, SIGTERM and SIGHUP (its handlers are installed for the block
only and the previous ones restored after; the signal is then passed on, so the exit status
still says which signal ended the process). SIGKILL cannot be caught: its leftover is
recognised by the next run by name (this output's, this tool's) and by its owner process
being gone, and :func:`remove_stale` removes it with a one-line note. Nothing else is ever
removed: a user's ``OUT.tmp`` or any other file stays as it is.

Only a regular file is ever replaced: an existing ``OUT`` that is a symbolic link (to a file,
dangling or not), a folder, a device such as ``/dev/null``, a FIFO or a socket is refused
(:class:`NotRegularOutput`), with or without ``--force``, both before anything is written and
again right before the rename (:func:`check_file_output`, :func:`replace`). A folder output
(:func:`check_dir_output`) must be a folder, never a link to one.
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import stat
import sys
import threading
from pathlib import Path

#: the signals :class:`Cleanup` handles (SIGHUP where the platform has it)
SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None)

_NAME = re.compile(r"^\.(?P<base>.+)\.(?P<tool>[a-z][a-z0-9-]*)-(?P<pid>[0-9]+)-(?P<rand>[0-9a-f]{8})\.(?P<kind>part|d)$")


class WriteError(OSError):
    """Creating or renaming an output's temporary failed (a folder that cannot hold files, no
    permission, disk full): the OS's reason and the path. Not a refusal of the input: the
    commands exit with 1 on it."""


class NotRegularOutput(FileExistsError):
    """An existing output that is not a regular file (or, for a folder output, not a folder):
    it is never replaced or written through, ``--force`` or not."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISREG, "a regular file"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "of an unknown kind"


def _lstat(p: Path) -> os.stat_result | None:
    try:
        return p.lstat()
    except FileNotFoundError:
        return None


def check_file_output(dst: str | Path, what: str = "output") -> bool:
    """Whether ``dst`` exists (as a regular file); raises :class:`NotRegularOutput` where it
    exists as anything else. Symbolic links are not followed: a link, dangling or not, is refused."""
    dst = Path(dst)
    st = _lstat(dst)
    if st is None:
        return False
    if stat.S_ISREG(st.st_mode):
        return True
    kind = _kind(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(dst)
        except OSError:
            target = "?"
        fix = (f"give the path of a regular file instead (the link points to {target}), or remove the link "
               "yourself first")
    elif stat.S_ISDIR(st.st_mode):
        fix = f"give a file name, e.g. {dst / 'out'}, or another path"
    else:
        fix = "choose another path (a regular file that does not exist yet, or one to overwrite)"
    raise NotRegularOutput(f"{what} {dst} exists and is {kind}, not a regular file: only a regular file is ever "
                           f"replaced (with or without --force), and a link is never written through; {fix}")


def check_dir_output(dst: str | Path, what: str = "output folder") -> bool:
    """Whether ``dst`` exists (as a folder); raises :class:`NotRegularOutput` where it exists as
    anything else, a symbolic link to a folder included."""
    dst = Path(dst)
    st = _lstat(dst)
    if st is None:
        return False
    if stat.S_ISDIR(st.st_mode):
        return True
    kind = _kind(st.st_mode)
    fix = ("give the folder's own path, or remove the link yourself first" if stat.S_ISLNK(st.st_mode)
           else "choose another path for the folder")
    raise NotRegularOutput(f"{what} {dst} exists and is {kind}, not a folder: it is never replaced or written "
                           f"through; {fix}")


def replace(tmp: str | Path, dst: str | Path, what: str = "output") -> None:
    """``os.replace(tmp, dst)`` once :func:`check_file_output` accepts ``dst`` again (it may have
    changed while ``tmp`` was written)."""
    check_file_output(dst, what)
    try:
        os.replace(tmp, dst)
    except OSError as e:
        raise WriteError(f"cannot rename {tmp} to {dst}: {e.strerror or e}") from e


def write_text(dst: str | Path, text: str, tool: str = "oscar", what: str = "output") -> None:
    """Write ``text`` to ``dst`` atomically (a temporary beside it, renamed over it), refusing an
    existing ``dst`` that is not a regular file."""
    dst = Path(dst)
    check_file_output(dst, what)
    with Cleanup() as cleanup:
        tmp = cleanup.add(create_temp_file(dst, tool))
        tmp.write_text(text, encoding="utf-8")
        replace(tmp, dst, what)
        cleanup.discard(tmp)


class Interrupted(BaseException):
    """Raised where a signal's previous handler returned instead of ending the process: the
    write stops (its temporaries are already removed)."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


def temp_name(dst: str | Path, tool: str, kind: str = "part") -> Path:
    """A fresh temporary name beside ``dst``: ``.<dst name>.<tool>-<pid>-<8 hex>.<kind>``."""
    dst = Path(dst)
    return dst.parent / f".{dst.name}.{tool}-{os.getpid()}-{secrets.token_hex(4)}.{kind}"


def create_temp_file(dst: str | Path, tool: str) -> Path:
    """Create (exclusively, empty) and return a temporary file for ``dst`` (see :func:`temp_name`)."""
    while True:
        p = temp_name(dst, tool, "part")
        try:
            os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            return p
        except FileExistsError:
            continue
        except OSError as e:
            raise WriteError(f"cannot create {p} (the temporary of {dst}): {e.strerror or e}") from e


def create_temp_dir(dst: str | Path, tool: str) -> Path:
    """Create (exclusively) and return a temporary folder beside ``dst`` (``... .d``)."""
    while True:
        p = temp_name(dst, tool, "d")
        try:
            p.mkdir(mode=0o700)
            return p
        except FileExistsError:
            continue
        except OSError as e:
            raise WriteError(f"cannot create {p} (the temporary folder of {dst}): {e.strerror or e}") from e


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return True  # when in doubt, the file is not ours to remove
    return True


def stale(dst: str | Path, tool: str) -> list[Path]:
    """Temporaries of ``dst`` left by ``tool`` runs that are gone (SIGKILL, power loss): named by
    :func:`temp_name` for this output and tool, owner pid not alive, owned by this user, a plain
    file (``.part``) or a folder (``.d``), not a symbolic link."""
    dst = Path(dst)
    folder = dst.parent if str(dst.parent) else Path(".")
    out = []
    try:
        names = os.listdir(folder)
    except OSError:
        return out
    for name in names:
        m = _NAME.match(name)
        if not m or m["base"] != dst.name or m["tool"] != tool or int(m["pid"]) == os.getpid():
            continue
        p = folder / name
        try:
            st = p.lstat()
        except OSError:
            continue
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            continue
        if not (stat.S_ISREG(st.st_mode) if m["kind"] == "part" else stat.S_ISDIR(st.st_mode)):
            continue
        if pid_alive(int(m["pid"])):
            continue
        out.append(p)
    return sorted(out)


def remove_stale(dst: str | Path, tool: str, prog: str | None = None) -> list[Path]:
    """Remove what :func:`stale` finds, with a one-line note each on stderr; returns them."""
    removed = []
    for p in stale(dst, tool):
        pid = _NAME.match(p.name)["pid"]
        try:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        except OSError as e:
            print(f"{prog or tool}: note: could not remove {p}, left by an interrupted run (process {pid} is gone): {e}",
                  file=sys.stderr)
            continue
        print(f"{prog or tool}: note: removed {p}, left by an interrupted run (process {pid} is gone)", file=sys.stderr)
        removed.append(p)
    return removed


def _remove(p: Path) -> None:
    try:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    except OSError:
        pass


class Cleanup:
    """``with Cleanup() as c: p = c.add(create_temp_file(...)) ...``: the paths added are
    removed when the block exits by an exception, and on SIGINT/SIGTERM/SIGHUP while it runs;
    ``c.discard(p)`` once ``p`` has been renamed into place. On a signal the previous handler
    is restored and the signal passed on: the default action ends the process by that signal
    (exit status -15 for SIGTERM), Python's SIGINT handler raises KeyboardInterrupt, an outer
    :class:`Cleanup` removes its own paths and passes it on in turn. Signals that were ignored
    stay ignored. Handlers are only installed from the main thread."""

    def __init__(self) -> None:
        self.paths: list[Path] = []
        self.procs: list = []
        self._old: dict[int, object] = {}

    def add_process(self, proc) -> None:
        """A child (``subprocess.Popen``) writing into one of the paths: terminated before they are removed."""
        self.procs.append(proc)

    def add(self, p: str | Path) -> Path:
        p = Path(p)
        self.paths.append(p)
        return p

    def discard(self, p: str | Path) -> None:
        p = Path(p)
        self.paths = [q for q in self.paths if q != p]

    def remove_all(self) -> None:
        while self.procs:
            proc = self.procs.pop()
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except Exception:
                    proc.kill()
        while self.paths:
            _remove(self.paths.pop())

    def __enter__(self) -> "Cleanup":
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                old = signal.getsignal(s)
                if old is None or old == signal.SIG_IGN:
                    continue  # installed outside Python, or ignored (nohup, background job): leave it
                self._old[s] = old
                signal.signal(s, self._handle)
        return self

    def _restore(self) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old = {}

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc_type is not None:
                self.remove_all()
        finally:
            self._restore()
        return False

    def _handle(self, signum: int, frame) -> None:
        self.remove_all()
        old = self._old.get(signum, signal.SIG_DFL)
        self._restore()
        if callable(old):
            old(signum, frame)  # Python's SIGINT handler raises KeyboardInterrupt; an outer Cleanup passes it on
        else:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)  # the default action: the process ends by this signal
        raise Interrupted(signum)  # the previous handler returned: stop what was being written all the same
