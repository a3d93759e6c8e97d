"""The one writer of output directories: a run directory is whole or absent.

Everything a command writes goes into a fresh temporary directory beside the target,
created before any simulation (so an unwritable --out fails at once), and is renamed
into place when complete. A target holding an earlier run is replaced whole, and only
when asked (--force); a kill at any moment leaves the old directory, the new one, or
(between the two renames of a non-Linux fallback) none, never a mixture."""
from __future__ import annotations

import atexit
import contextlib
import errno
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path

from .errors import UserError

# Files that mark a directory as written by `vmsched run` or `vmsched compare`.
RUN_MARKERS = ("summary.json", "run.json", "compare.parquet", "compare.json")
_TEMP_SUFFIX = ".tmp"
_OLD_SUFFIX = ".old"
# tempfile.mkdtemp's eight random characters are drawn from [a-z0-9_].
_STAGING = re.compile(r"^\..+\.(?P<pid>[0-9]+)\.(?:[a-z0-9_]{8}" + re.escape(_TEMP_SUFFIX) + "|" + re.escape(_OLD_SUFFIX[1:]) + ")$")
_RENAME_EXCHANGE = 2  # renameat2 flag, include/uapi/linux/fs.h
_AT_FDCWD = -100


def _default_dir_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o777 & ~mask


@contextlib.contextmanager
def _signals_held():
    """SIGINT and SIGTERM wait (blocked, then delivered on leaving) while a staging
    directory is made and registered, so that no interruption falls between the two."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _exchange(first: Path, second: Path) -> bool:
    """Swaps two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where the
    system does not offer it."""
    import ctypes  # here: only --force over an earlier run needs it
    # The symbols already loaded into this process, the C library's among them:
    # looking the library up by name (ctypes.util.find_library) runs ldconfig.
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(second))


class OutputDir:
    """`with OutputDir(target, force) as tmp:` write into `tmp`; on success it becomes
    `target`, on any exception (including Ctrl-C) it is removed."""

    def __init__(self, target: str | os.PathLike, force: bool = False, option: str = "--out"):
        text = os.fspath(target)
        if not text.strip():
            raise UserError(f"{option}: must not be empty")
        self.target = Path(text)
        self.force = force
        self.option = option
        self.temp: Path | None = None
        self._check_target()
        self._make_temp()

    def _check_target(self) -> None:
        target = self.target
        if not target.exists() and not target.is_symlink():
            return
        if not target.is_dir() or target.is_symlink():
            raise UserError(f"{target}: exists and is not a directory; choose another {self.option}")
        entries = list(target.iterdir())
        if not entries:
            return
        if not any((target / marker).exists() for marker in RUN_MARKERS):
            raise UserError(f"{target}: is a directory with other files, not an earlier run; "
                            f"choose another {self.option}")
        if not self.force:
            raise UserError(f"{target}: holds an earlier run; pass --force to replace it")

    def _make_temp(self) -> None:
        parent = self.target.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            self._remove_stale(parent)
            # Discarded at the process's exit unless committed or discarded before: an
            # interruption (Ctrl-C, SIGTERM) that comes after this but before the
            # caller's `with` (while a command estimates, probes or prints) leaves
            # nothing behind either.
            with _signals_held():
                self.temp = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.{os.getpid()}.",
                                                  suffix=_TEMP_SUFFIX, dir=parent))
                atexit.register(self.discard)
            os.chmod(self.temp, _default_dir_mode())
        except OSError as err:
            raise UserError(f"{self.target}: cannot write there ({err.strerror or err})") from err

    def _remove_stale(self, parent: Path) -> None:
        """Staging directories in `parent` of writers that were killed (their process is
        gone), whatever target they were for: `.NAME.PID.XXXXXXXX.tmp` as _make_temp
        names them and `.NAME.PID.old` as commit does."""
        # By name first: the parent may be a large shared directory (/tmp), whose every
        # entry made a Path would cost a run's start-up milliseconds.
        with os.scandir(parent) as entries:
            stale = [entry.path for entry in entries if (match := _STAGING.match(entry.name))
                     and entry.is_dir(follow_symlinks=False) and not _pid_alive(int(match["pid"]))]
        for path in stale:
            shutil.rmtree(path, ignore_errors=True)

    def commit(self) -> Path:
        assert self.temp is not None
        target, temp = self.target, self.temp
        _fsync_dir(temp)
        if target.exists():
            if _exchange(temp, target):
                shutil.rmtree(temp)
            else:
                old = target.parent / f".{target.name}.{os.getpid()}{_OLD_SUFFIX}"
                os.rename(target, old)
                os.rename(temp, target)
                shutil.rmtree(old)
        else:
            os.rename(temp, target)
        _fsync_dir(target.parent)
        self.temp = None
        atexit.unregister(self.discard)
        return target

    def discard(self) -> None:
        if self.temp is not None:
            shutil.rmtree(self.temp, ignore_errors=True)
            self.temp = None
        atexit.unregister(self.discard)

    def __enter__(self) -> Path:
        assert self.temp is not None
        return self.temp

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


def _fsync_dir(path: Path) -> None:
    """The renames are durable only once the directories' entries are on disk."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
