"""Files the toolkit writes and reads back: atomic JSON, corrupt-file detection, advisory locks,
and the up-front checks that an output or cache directory can take what a cell writes.

Every writer in compilekit goes through `write_json`; every reader of a file another process
wrote goes through `read_json`, which names the file when it cannot be read.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import io
import json
import os
import shutil
import tempfile
import threading

# What one cell may write (trace, dump, kernels, logs) with room to spare; checked up front.
FREE_SPACE_MARGIN_BYTES = 512 * 2**20


class CorruptFile(Exception):
    """A file another run wrote cannot be read: the message names it and why."""


def json_fits(value, types: tuple) -> bool:
    """Whether a value read from JSON is of one of `types`, where a bool is no number (Python
    counts True as an int; a record's figure of `true` is corrupt, not 1)."""
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def write_json(path: str, data) -> None:
    """Write JSON atomically (a temp file renamed into place); no temp file survives a failure."""
    write_text(path, json.dumps(data, indent=2, default=str))


def write_text(path: str, text: str) -> None:
    """Write a text file atomically: a temp file of this process and thread (a sweep writes
    from several threads), renamed into place; no temp file survives a failure."""
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


def kept(path: str) -> str:
    """`path`, or its gzipped copy `path.gz` where only that exists: published results keep
    their large files (a model's kernel map) gzipped."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        return path + ".gz"
    return path


def write_json_gz(path: str, data) -> None:
    """`path`.gz: compact JSON, gzipped, written atomically; `path` itself removed. The same
    data gives the same bytes (no name or time in the gzip header): republished results that
    did not change leave git's tree as it was."""
    tmp = f"{path}.gz.tmp-{os.getpid()}-{threading.get_ident()}"
    try:
        with (
            open(tmp, "wb") as raw,
            gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as packed,
            io.TextIOWrapper(packed, encoding="utf-8") as f,
        ):
            json.dump(data, f, separators=(",", ":"), default=str)
        os.replace(tmp, path + ".gz")
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def read_json(path: str):
    """Parse a JSON file (or its `.gz` where only that exists: kept); CorruptFile (naming the
    file) if it is empty, truncated or unreadable."""
    path = kept(path)
    try:
        with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise CorruptFile(f"{path} is corrupt ({type(exc).__name__}: {exc})") from None
    except OSError as exc:
        raise CorruptFile(f"{path} cannot be read ({exc.strerror or exc})") from None


def check_writable(directory: str, what: str, fix: str) -> None:
    """Create `directory` if needed and prove a file can be written there, with disk to spare.

    Any failure is a UserError naming `what` and `fix` (never an OSError traceback).
    """
    import errno

    from compilekit.model.errors import UserError

    probe = None
    try:
        os.makedirs(directory, exist_ok=True)
        # a name of its own per check: a sweep's cells run this from threads of one process
        fd, probe = tempfile.mkstemp(prefix=".compilekit-probe-", dir=directory)
        with os.fdopen(fd, "w") as f:
            f.write("x")
    except OSError as exc:
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        raise UserError(
            f"{what} {directory!r} is not writable ({exc.strerror or exc}): "
            + (f"free space on its disk, or {fix}" if full else fix)
        ) from None
    finally:
        if probe is not None:  # a full disk fails the write, after the probe was made
            with contextlib.suppress(OSError):
                os.remove(probe)
    free = free_bytes(directory)
    if free < FREE_SPACE_MARGIN_BYTES:
        raise UserError(
            f"{what} {directory!r} has {free / 2**20:.0f} MiB free, under the "
            f"{FREE_SPACE_MARGIN_BYTES / 2**20:.0f} MiB one cell may need: free space or {fix}"
        )


def free_bytes(directory: str) -> int:
    return shutil.disk_usage(directory).free


class Busy(Exception):
    """Another process holds the lock; `pid` is the holder's, when it wrote one."""

    def __init__(self, path: str, pid: str):
        super().__init__(path)
        self.path, self.pid = path, pid


def open_lock(path: str) -> int:
    """A descriptor on the lock file `path`, created if missing; never through a symbolic link
    (O_NOFOLLOW): a link planted there would have compilekit write into, or create, its
    target. A link is a UserError naming it."""
    import errno

    from compilekit.model.errors import UserError

    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise UserError(
            f"lock file {path!r} is a symbolic link: remove it (compilekit creates its own)"
        ) from None


@contextlib.contextmanager
def exclusive_lock(path: str, wait: bool = False):
    """An advisory lock on `path` (fcntl.flock) held for the block; the holder's PID is written
    into the file. Raises Busy at once if another process holds it and `wait` is False."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    handle = os.fdopen(open_lock(path), "r+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            handle.seek(0)
            raise Busy(path, handle.read().strip() or "?") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()  # closing the descriptor releases the lock


def cap_log(path: str, head_bytes: int = 256 * 1024, tail_bytes: int = 768 * 1024) -> None:
    """Keep a log readable: past head+tail bytes, keep its start and end with a note between."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return
    if size <= head_bytes + tail_bytes:
        return
    with open(path, "rb") as f:
        head = f.read(head_bytes)
        f.seek(size - tail_bytes)
        tail = f.read()
    note = f"\n[... {size - head_bytes - tail_bytes} bytes cut by compilekit ...]\n".encode()
    with open(path, "wb") as f:
        f.write(head + note + tail)
