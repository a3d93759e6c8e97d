"""Atomic file output: write beside the target, then rename over it, so a reader
never sees a half-written file and a failed run leaves the old file intact."""
from __future__ import annotations

import os
from pathlib import Path


def _default_mode() -> int:
    """The mode a plain open() would give a new file (0666 less the umask);
    mkstemp's private 0600 is not what a user expects of an output file."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    import tempfile  # on first use: the command line starts without it
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _default_mode())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
