"""`--output FILE` writes like the shell's `>`, only safer.

The file is opened in place (O_WRONLY|O_CREAT|O_TRUNC, mode 0666 less the umask), so that an existing
file keeps its inode, mode and hard links, a bind-mounted file (`docker -v`, a Kubernetes `subPath`,
where renaming over it fails with EBUSY) is written, a symlink is followed as the kernel allows, and
a FIFO never holds gpudoctor past `--timeout`. A closed standard output or error is a one-line error
(exit 3) or is ignored, never a traceback. The extension picks the format unless `--format` is given.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.cli import streams, writing

REAL = Path(__file__).parent / "fixtures" / "real"
REPORT = REAL / "h100x1-20261121" / "report.json"
ROOT = Path(__file__).resolve().parent.parent


def analyze(*args: str) -> "object":
    return CliRunner().invoke(cli, ["analyze", str(REPORT), *args])


def run(command: str, **kwargs) -> subprocess.CompletedProcess:
    """``python -m gpudoctor`` through a real shell, so that redirections such as ``>&-`` are the shell's."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["sh", "-c", f"exec {sys.executable} -m gpudoctor {command}"], capture_output=True,
                          text=True, env=env, timeout=120, **kwargs)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_new_file_honours_the_umask(tmp_path, umask_022):
    target = tmp_path / "report.txt"
    result = analyze("--output", str(target))
    assert result.exit_code == 0, result.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # 0666 & ~022, as `>` makes it, not 0600
    assert target.read_text(encoding="utf-8").startswith("gpudoctor")
    assert [p.name for p in tmp_path.iterdir()] == ["report.txt"]


def test_existing_file_keeps_inode_mode_and_hard_links(tmp_path, umask_022):
    target, link = tmp_path / "report.txt", tmp_path / "hard-link.txt"
    target.write_text("old contents that are longer than nothing\n" * 1000)
    target.chmod(0o664)
    os.link(target, link)
    inode = target.stat().st_ino
    result = analyze("--output", str(target))
    assert result.exit_code == 0, result.stderr
    assert target.stat().st_ino == inode  # written in place: what makes a bind-mounted file work
    assert stat.S_IMODE(target.stat().st_mode) == 0o664
    assert link.read_text(encoding="utf-8") == target.read_text(encoding="utf-8")
    assert "old contents" not in target.read_text(encoding="utf-8")  # truncated, as `>` does


def test_symlink_is_followed_and_kept(tmp_path):
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("{}")
    link.symlink_to(real)
    result = analyze("--output", str(link))
    assert result.exit_code == 0, result.stderr
    assert link.is_symlink()
    assert json.loads(real.read_text(encoding="utf-8"))["schema_version"] == 1


@pytest.mark.skipif(Path("/proc/sys/fs/protected_symlinks").exists()
                    and Path("/proc/sys/fs/protected_symlinks").read_text().strip() != "1",
                    reason="fs.protected_symlinks is off here: the kernel follows the link anyway")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a symlink owned by another user")
def test_other_users_symlink_in_sticky_directory_is_refused(tmp_path):
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    victim, link = tmp_path / "victim", sticky / "report.txt"
    victim.write_text("keep me")
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)  # another user's link, as an attacker would leave in /tmp
    result = analyze("--output", str(link))
    assert result.exit_code == 3
    assert victim.read_text() == "keep me"


def _as_nobody(action) -> tuple[int, str]:
    """Run ``action`` in a forked child as user 65534 (root writes read-only files with ``>`` too);
    returns its exit status and what it said."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        try:
            os.setuid(65534)
            code, said = action()
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            code, said = 99, repr(exc)
        os.write(write, said.encode())
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        said = fh.read().decode()
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), said


def test_read_only_file_is_refused_like_the_shell():
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="gpudoctor-ro-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        target = folder / "report.txt"
        target.write_text("keep me")
        target.chmod(0o444)

        def shell():
            return subprocess.run(["/bin/sh", "-c", f"echo x > {target}"], capture_output=True).returncode, ""

        def ours():
            try:
                writing.write(target, "report\n")
            except writing.Failure as exc:
                return 3, exc.message
            return 0, ""

        if os.geteuid() == 0:
            assert _as_nobody(shell)[0] != 0  # the shell refuses it ...
            code, said = _as_nobody(ours)
        else:
            assert shell()[0] != 0
            code, said = ours()
        assert (code, said) == (3, f"could not write the report to {target}: Permission denied")  # ... and so do we
        assert target.read_text() == "keep me"
    finally:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


def test_format_follows_the_extension(tmp_path):
    for name, check in (("r.json", lambda t: json.loads(t)["schema_version"] == 1),
                        ("r.md", lambda t: t.startswith("## gpudoctor report")),
                        ("r.xml", lambda t: t.startswith("<?xml") and "<testsuite" in t),
                        ("r.txt", lambda t: t.startswith("gpudoctor ")),
                        ("r.JSON", lambda t: json.loads(t)["schema_version"] == 1)):
        target = tmp_path / name
        result = analyze("-o", str(target))
        assert result.exit_code == 0, result.stderr
        assert check(target.read_text(encoding="utf-8")), name
    explicit = tmp_path / "explicit.json"
    assert analyze("-o", str(explicit), "--format", "text").exit_code == 0
    assert explicit.read_text(encoding="utf-8").startswith("gpudoctor ")  # --format wins


def test_fifo_without_reader_is_bounded_by_the_deadline(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(writing.Failure) as failed:
        writing.write(fifo, "report\n", deadline=time.monotonic() + 0.3)
    took = time.monotonic() - started
    assert took < writing.SPECIAL_FILE_GRACE_S + 2
    assert "nothing read it before the --timeout deadline" in str(failed.value.message)


def test_fifo_with_a_reader_gets_the_report(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    writing.write(fifo, "report – ✅\n" * 20000, deadline=time.monotonic() + 5)  # more than a pipe holds at once
    reader.join(10)
    assert got == [("report – ✅\n" * 20000).encode("utf-8")]


def test_check_timeout_bounds_a_fifo_end_to_end(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = run(f"check --quick --only driver --timeout 3 -o {fifo}")
    assert time.monotonic() - started < 20  # before the fix: over 40 s, whatever --timeout said
    assert result.returncode == 3
    assert result.stderr.strip().splitlines()[-1].startswith(f"Error: could not write the report to {fifo}: "
                                                             "nothing read it before the --timeout deadline")


def test_full_disk_is_exit_3(tmp_path):
    result = analyze("-o", "/dev/full")
    assert result.exit_code == 3
    assert result.stderr.strip() == "Error: could not write the report to /dev/full: No space left on device"


def test_stdout_closed_is_one_line_exit_3():
    result = run(f"analyze {REPORT} >&-")
    assert result.returncode == 3
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert "Error: standard output is closed: the report could not be delivered" in result.stderr


def test_stderr_closed_still_writes_the_file(tmp_path):
    target = tmp_path / "r.json"
    result = run(f"analyze {REPORT} -o {target} 2>&-")
    assert result.returncode == 0
    assert json.loads(target.read_text(encoding="utf-8"))["schema_version"] == 1


def test_both_closed_with_output_file(tmp_path):
    target = tmp_path / "r.md"
    result = run(f"analyze {REPORT} -o {target} >&- 2>&-")
    assert result.returncode == 0
    assert target.read_text(encoding="utf-8").startswith("## gpudoctor report")


def test_closed_stdin_stdout_stderr_do_not_capture_the_report(tmp_path):
    """With descriptors 0-2 closed, the report file would otherwise be opened as one of them."""
    target = tmp_path / "r.json"
    result = run(f"analyze {REPORT} -o {target} <&- >&- 2>&-")
    assert result.returncode == 0
    assert json.loads(target.read_text(encoding="utf-8"))["schema_version"] == 1


def test_escape_handler_writes_json_escapes():
    assert "a–✅😀\ud800".encode("latin-1", streams.ESCAPE_ERRORS) == b"a\\u2013\\u2705\\ud83d\\ude00\\ud800"
    assert json.loads('"' + "–✅😀".encode("ascii", streams.ESCAPE_ERRORS).decode("ascii") + '"') == "–✅😀"


def test_merge_output_format_follows_the_extension(tmp_path):
    """`merge ... -o fleet.json` writes strict JSON, as `check -o report.json` does."""
    import json

    from click.testing import CliRunner

    from gpudoctor.cli import cli

    source = Path(__file__).parent / "fixtures/real/h100x1-20261123/full.json"
    out = tmp_path / "fleet.json"
    result = CliRunner().invoke(cli, ["merge", str(source), "-o", str(out)])
    assert result.exit_code in (0, 1), result.output
    merged = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert merged["nodes"] and "drift" in merged
