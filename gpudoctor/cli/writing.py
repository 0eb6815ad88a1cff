"""Writing a report to the file ``--output`` names, as the shell's ``>`` would, and never leaving half of it."""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from pathlib import Path
from typing import Optional

from gpudoctor.cli.errors import Failure
from gpudoctor.cli.streams import ESCAPE_ERRORS


#: Even past the deadline, a FIFO or device gets this long: a reader that is already waiting is served.
SPECIAL_FILE_GRACE_S = 1.0


def write(path: Path, text: str, atomic: bool = False, deadline: Optional[float] = None) -> None:
    """Write the report to ``path`` as the shell's ``>`` would, and say so when it could not; ``atomic``:
    replace the file whole instead (``write_atomic``), for a format read while it may be written.

    The path is opened the normal way (``O_WRONLY | O_CREAT | O_TRUNC``, mode 0666 less the umask): a
    symlink is followed as the kernel allows (``fs.protected_symlinks`` applies), an existing file keeps
    its inode, mode, owner and hard links, a bind-mounted file (``docker -v``, a Kubernetes ``subPath``)
    is written in place, and a file the user may not write is refused. The whole text is encoded in
    memory first, then written, flushed and fsynced; when that fails half-way the file is truncated
    (a regular file is left empty, never holding a partial report) and the error says so, exit 3.
    A FIFO or a device (``/dev/stdout``, a terminal) is opened and written in a helper thread bounded by
    the time left before ``deadline``, the run's --timeout (``time.monotonic()``; at least
    ``SPECIAL_FILE_GRACE_S``), so a FIFO nobody reads never holds gpudoctor past it; without ``--timeout``
    it waits, as ``>`` does."""
    if atomic:
        write_atomic(path, text)
        return
    data = text.encode("utf-8", ESCAPE_ERRORS)
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        special = False  # not there yet (or unreadable): the open below says why, if anything
    if special and deadline is not None:
        _write_bounded(path, data, max(deadline - time.monotonic(), SPECIAL_FILE_GRACE_S))
        return
    _write_file(path, data)


def _write_bounded(path: Path, data: bytes, wait_s: float) -> None:
    """``_write_file`` in a daemon thread, given up on after ``wait_s``: ``open`` of a FIFO with no reader,
    or a write to one whose reader stopped reading, blocks in the kernel where no timer can reach it."""
    outcome: list[BaseException] = []

    def work() -> None:
        try:
            _write_file(path, data)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome.append(exc)
        else:
            outcome.append(SystemExit(0))  # a marker: done

    worker = threading.Thread(target=work, name="gpudoctor-write", daemon=True)
    worker.start()
    worker.join(min(wait_s, threading.TIMEOUT_MAX))
    if not outcome:
        raise Failure(f"could not write the report to {path}: nothing read it before the --timeout deadline "
                      f"(waited {wait_s:.1f} s)")
    if not isinstance(outcome[0], SystemExit):
        raise outcome[0]


def _write_file(path: Path, data: bytes) -> None:
    written = 0
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        raise Failure(f"could not write the report to {path}: {exc.strerror or exc}") from None
    regular = False
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
        view = memoryview(data)
        while written < len(data):
            written += os.write(fd, view[written:])
        if regular:
            try:
                os.fsync(fd)
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EROFS):
                    raise
    except OSError as exc:
        part = ""
        if regular:
            try:
                os.ftruncate(fd, 0)  # an empty file rather than a report that stops half-way
                part = " (the file was left empty)" if written else ""
            except OSError:
                part = f" (the report is incomplete: {written} of {len(data)} bytes written)" if written else ""
        elif written:
            part = f" (the report is incomplete: {written} of {len(data)} bytes written)"
        try:
            os.close(fd)
        except OSError:
            pass
        raise Failure(f"could not write the report to {path}: {exc.strerror or exc}{part}") from None
    try:
        os.close(fd)  # NFS, for one, reports a failed write only here
    except OSError as exc:
        raise Failure(f"could not write the report to {path}: {exc.strerror or exc}") from None


def write_atomic(path: Path, text: str) -> None:
    """Write the report whole or not at all, for a reader that may open the file at any moment (node_exporter's
    textfile collector): into a temporary file beside it, fsynced, then renamed over it. The temporary name
    starts with a dot and ends in ``.tmp``, so a collector that reads ``*.prom`` never reads it. A symlink is
    followed, so the file it points to is replaced and the link kept. Mode 0666 less the umask, as ``>``.

    Where a rename cannot replace the file (a FIFO, a device such as ``/dev/stdout``, a bind-mounted file,
    another file system), it is written in place as ``write`` does."""
    target = Path(os.path.realpath(path))
    try:
        in_place = not stat.S_ISREG(os.stat(target).st_mode)
    except OSError:
        in_place = False  # not there yet: created by the rename
    if in_place:
        write(path, text)
        return
    data = text.encode("utf-8", ESCAPE_ERRORS)
    temporary = _temporary_beside(target)
    try:
        _write_file(temporary, data)
        os.replace(temporary, target)
    except Failure as exc:
        _remove(temporary)
        raise Failure(str(exc).replace(str(temporary), str(path))) from None
    except OSError as exc:
        _remove(temporary)
        if exc.errno in (errno.EBUSY, errno.EXDEV):  # a mount point cannot be renamed over: write into it
            write(path, text)
            return
        raise Failure(f"could not write the report to {path}: {exc.strerror or exc}") from None
    except BaseException:
        _remove(temporary)
        raise
    _sync_folder(target.parent)


def _temporary_beside(target: Path) -> Path:
    """A new, empty file in ``target``'s folder that no other process has (``O_EXCL``), mode 0666 less the umask."""
    import secrets

    for _ in range(100):
        candidate = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666))
        except FileExistsError:
            continue
        except OSError as exc:
            raise Failure(f"could not write the report to {target}: {exc.strerror or exc} "
                          f"(a temporary file in {target.parent} is needed to replace it whole)") from None
        return candidate
    raise Failure(f"could not write the report to {target}: no free temporary name in {target.parent}")


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable; a folder that cannot be opened or synced (some file systems) is left."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
