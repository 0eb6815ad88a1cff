"""Fault injection through the real command line: one table of faults, each run as
``python -m gpudoctor ...`` in its own process, with its own environment and files.

Everything is real (files, directories, symlinks, environment variables, signals, the child
processes gpudoctor starts) except what cannot be on this machine: NVML and the frameworks. Those
are fake modules put first on PYTHONPATH, as in tests/helpers_faults.py (the fake pynvml, its
faults chosen by FAKE_NVML_* variables) and tests/test_framework_faults.py (a fake ``cupy``).

Every case asserts the same five things:

(a) no Python traceback on stdout or stderr. The JSON report may carry, as a documented fact
    (docs/report-format.md), the ``traceback_tail`` of a framework whose import raised in its own
    child process; that is data about the framework, not gpudoctor crashing, so those values alone
    are left out of the search, and no line of output may start a traceback either;
(b) it finished before its deadline (the case's ``--timeout`` + 10 s, else DEADLINE_S);
(c) its exact finding codes in the JSON report on stdout, or exactly one non-empty stderr line
    matching the expected error (Click's own usage errors: its three-line "Usage / Try / Error"
    block, the Error line matched exactly);
(d) the exit code README.md documents (0 nothing at --fail-on, 1 findings, 2 bad input, 3 could
    not complete);
(e) no process left behind: the CLI runs in a new session, and afterwards no live process is in
    that session or carries the case's GPUDOCTOR_FAULT_CASE marker in its environment (gpudoctor
    starts its own children in sessions of their own, so the marker is what finds them).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import signal
import stat
import struct
import subprocess
import sys
import textwrap
import time
import uuid
from dataclasses import dataclass
from glob import glob
from pathlib import Path
from typing import Any, Callable, Optional, Union

import psutil
import pytest

from gpudoctor.frameworks_table import NAMES
from helpers_children import default_signals
from helpers_faults import CUPY_ON_OLD_DRIVER, FAKE_ENV, FAKE_PYNVML, HOST_ENV

REPO = Path(__file__).resolve().parents[1]
REAL_REPORT = REPO / "tests" / "fixtures" / "real" / "h200x2-20261121" / "report.json"
MARK = "GPUDOCTOR_FAULT_CASE"
#: Deadline of a case without --timeout: each takes about a second on the 2-core CPU machine.
DEADLINE_S = 30.0
GLIBC = platform.libc_ver()[0] == "glibc"
#: Frameworks really installed here (the test extra installs PyTorch and tensorflow-cpu): their children
#: are real, and a case that judges what frameworks see names them in findings of their own.
REAL_FRAMEWORKS = [n for n in ("torch", "tensorflow", "jax") if importlib.util.find_spec(n) is not None]
#: Environment a case starts from: none of the variables gpudoctor reads or the fakes obey.
CLEARED = set(HOST_ENV) | set(FAKE_ENV) | {"PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "NO_COLOR",
                                           "CONDA_PREFIX", "PYTHONIOENCODING", "FAKE_FW_PIDS"}

Env = Union[str, bytes]


class Run:
    """One case's process to be: its files under ``tmp``, its environment (bytes, so that values
    which are not UTF-8 can be set), its PYTHONPATH (fakes first, the repository last)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.env: dict[bytes, bytes] = {k: v for k, v in os.environb.items() if os.fsdecode(k) not in CLEARED}
        # stdout as on a UTF-8 terminal: strict, so text that is not UTF-8 cannot slip out
        self.env[b"PYTHONIOENCODING"] = b"utf-8"
        self.pythonpath: list[str] = []
        self.pids_file = tmp / "fake-pids"
        self.reports: Optional[Path] = None  # the module's saved reports (bad_reports)

    def setenv(self, name: str, value: Env) -> None:
        self.env[os.fsencode(name)] = os.fsencode(value)

    def fake_nvml(self, **faults: str) -> None:
        """The fake pynvml of helpers_faults (two H100s on driver 580.95.05); ``faults`` as in
        install_fake_pynvml: fail="nvmlInit:9", hang="nvmlDeviceGetName@1", ..."""
        fake_dir = self.tmp / "fake_pynvml"
        fake_dir.mkdir(exist_ok=True)
        (fake_dir / "pynvml.py").write_text(FAKE_PYNVML)
        self.pythonpath.insert(0, str(fake_dir))
        for key, value in faults.items():
            self.setenv(f"FAKE_NVML_{key.upper()}", value)

    def fake_framework(self, source: str, name: str = "cupy") -> None:
        pkg = self.tmp / "fakes" / name
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(textwrap.dedent(source))
        self.pythonpath.insert(0, str(pkg.parent))
        self.setenv("FAKE_FW_PIDS", str(self.pids_file))

    def final_env(self, marker: str) -> dict[bytes, bytes]:
        env = dict(self.env)
        env[b"PYTHONPATH"] = os.fsencode(os.pathsep.join(self.pythonpath + [str(REPO)]))
        env[MARK.encode()] = marker.encode()
        return env

    def fake_pids(self) -> list[int]:
        return [int(p) for p in self.pids_file.read_text().split()] if self.pids_file.exists() else []


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]  # after `python -m gpudoctor`; "{tmp}" is the case's directory
    exit: int
    codes: Optional[tuple[str, ...]] = None  # the report's finding codes, in order (needs --format json)
    error: Optional[str] = None  # regex the one stderr line must match in full ("{tmp}" as above)
    usage_error: bool = False  # error is the Error line of Click's usage block
    setup: Optional[Callable[[Run], None]] = None
    verify: Optional[Callable[[Any, Run], None]] = None  # more on the report (or None) and the run
    about: Optional[str] = None  # codes counts only findings about this framework (see _codes)
    stderr: str = ""  # regex for all of stderr (stripped) alongside a report: empty unless said
    interrupt: Optional[int] = None  # a signal sent once the fake framework hangs, at least 2 s in
    deadline_s: Optional[float] = None
    table: Optional[str] = None  # regex the output must hold beside the one stderr line (merge's refused row)

    def deadline(self) -> float:
        if self.deadline_s is not None:
            return self.deadline_s
        if "--timeout" in self.args:
            return float(self.args[self.args.index("--timeout") + 1]) + 10.0
        return DEADLINE_S


# --- fakes and files -------------------------------------------------------------------------

HANGING_IMPORT = """
    import os, subprocess, sys, time
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["FAKE_FW_PIDS"] + ".part", "w") as fh:
        fh.write(f"{os.getpid()} {helper.pid}")
    os.replace(os.environ["FAKE_FW_PIDS"] + ".part", os.environ["FAKE_FW_PIDS"])
    time.sleep(600)
"""
SEGFAULTING_IMPORT = """
    import os, signal
    os.kill(os.getpid(), signal.SIGSEGV)
"""
OOM_KILLED_IMPORT = """
    import os, signal
    os.kill(os.getpid(), signal.SIGKILL)
"""
FLOODING_IMPORT = """
    import sys
    line = "W external/xla/xla/stream_executor/cuda/cuda_dnn.cc:1] " + "x" * 960 + "\\n"
    for _ in range(5 * 1024):  # 5 MB
        sys.stderr.write(line)
    sys.stderr.write("LAST LINE BEFORE THE ERROR\\n")
    sys.stderr.flush()
    raise ImportError("libcudart.so.13: cannot open shared object file: No such file or directory")
"""
CUDA_INIT_FAILS = CUPY_ON_OLD_DRIVER
SILENT_EXIT_IMPORT = """
    import os
    os._exit(0)
"""


def _foreign_architecture_library() -> Optional[Path]:
    """A real shared library of another architecture on this machine (32-bit x86, aarch64), if any."""
    native = {"x86_64": 62, "aarch64": 183}.get(platform.machine())
    for pattern in ("/usr/libexec/valgrind/vgpreload_*-x86-linux.so", "/usr/lib/i386-linux-gnu/lib*.so.*",
                    "/usr/lib32/lib*.so.*", "/usr/lib/aarch64-linux-gnu/lib*.so.*", "/usr/lib/x86_64-linux-gnu/lib*.so.*"):
        for path in sorted(glob(pattern)):
            try:
                with open(path, "rb") as fh:
                    head = fh.read(20)
            except OSError:
                continue
            if len(head) == 20 and head[:4] == b"\x7fELF":
                elf_class, machine = head[4], struct.unpack("<H", head[18:20])[0]
                if elf_class == 1 or machine != native:  # 32-bit, or another CPU
                    return Path(path)
    return None


def _write_foreign_library(path: Path) -> str:
    """Copy a real library of another architecture, else write an ELF64 header for aarch64 (or,
    on aarch64, x86-64) padded to a page. Returns where it came from."""
    real = _foreign_architecture_library()
    if real is not None:
        path.write_bytes(real.read_bytes())
        return str(real)
    machine = 62 if platform.machine() == "aarch64" else 183
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header += struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 64, 0, 0, 64, 56, 0, 64, 0, 0)
    path.write_bytes(header.ljust(4096, b"\0"))
    return "crafted"


def _lib_dir(run: Run, name: str = "badlibs") -> Path:
    directory = run.tmp / name
    directory.mkdir(exist_ok=True)
    return directory


def _prepend_ld_path(run: Run, *dirs: Env) -> None:
    run.env[b"LD_LIBRARY_PATH"] = b":".join(os.fsencode(d) for d in dirs)


def setup_empty_libcuda(run: Run) -> None:
    run.fake_nvml()
    d = _lib_dir(run)
    (d / "libcuda.so.1").write_bytes(b"")
    _prepend_ld_path(run, d)


def setup_text_libcudnn(run: Run) -> None:
    d = _lib_dir(run)
    (d / "libcudnn.so.9").write_text("This is not a library.\n" * 8)  # longer than an ELF header
    _prepend_ld_path(run, d)


def setup_foreign_libnccl(run: Run) -> None:
    d = _lib_dir(run)
    (run.tmp / "foreign-source").write_text(_write_foreign_library(d / "libnccl.so.2"))
    _prepend_ld_path(run, d)


def setup_broken_symlink_libcudart(run: Run) -> None:
    d = _lib_dir(run)
    (d / "libcudart.so.13").symlink_to(run.tmp / "gone" / "libcudart.so.13.0.88")
    _prepend_ld_path(run, d)


def setup_ld_path_entry_not_a_directory(run: Run) -> None:
    # Tests run as root, and chmod 000 does not stop root from listing a directory, so the
    # unreadable entry is a path that is a regular file: listing it fails (ENOTDIR) for anyone.
    not_a_dir = run.tmp / "not-a-directory"
    not_a_dir.write_text("libcudnn.so.9\n")
    d = _lib_dir(run)
    (d / "libcudnn.so.9").write_text("This is not a library.\n" * 8)
    _prepend_ld_path(run, not_a_dir, d)


HUGE_LD_ENTRIES = 3000


def setup_huge_ld_path(run: Run) -> None:
    d = _lib_dir(run)
    (d / "libcudnn.so.9").write_text("This is not a library.\n" * 8)
    # short entries: one environment string may not exceed 128 KiB (MAX_ARG_STRLEN)
    _prepend_ld_path(run, *[f"/nonexistent-{i}" for i in range(HUGE_LD_ENTRIES)], d)


NON_UTF8_DIR = b"lib-\xff\xfe"


def setup_non_utf8_ld_path(run: Run) -> None:
    d = os.path.join(os.fsencode(run.tmp), NON_UTF8_DIR)
    os.mkdir(d)
    with open(os.path.join(d, b"libcudnn.so.9"), "w") as fh:
        fh.write("This is not a library.\n" * 8)
    _prepend_ld_path(run, d, os.fsencode(run.tmp) + b"/missing-\xff")


def setup_non_utf8_cuda_home(run: Run) -> None:
    run.setenv("CUDA_HOME", os.fsencode(run.tmp) + b"/cuda-\xff\xfe")


def with_mask(value: Env) -> Callable[[Run], None]:
    def setup(run: Run) -> None:
        run.fake_nvml()
        run.setenv("CUDA_VISIBLE_DEVICES", value)
    return setup


def with_nvml(**faults: str) -> Callable[[Run], None]:
    return lambda run: run.fake_nvml(**faults)


def with_framework(source: str, nvml: bool = False) -> Callable[[Run], None]:
    def setup(run: Run) -> None:
        if nvml:
            run.fake_nvml()
        run.fake_framework(source)
    return setup


@pytest.fixture(scope="module")
def bad_reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Reports derived from the real 2 x H200 recording: truncated, 50 MB, a newer schema; and malformed."""
    d = tmp_path_factory.mktemp("reports")
    text = REAL_REPORT.read_text()
    saved = json.loads(text)
    (d / "good.json").write_text(text)
    (d / "malformed.json").write_text('{"schema_version": 1, "facts": {"host": {,}}')
    (d / "truncated.json").write_text(text[: len(text) // 2])
    (d / "newer.json").write_text(json.dumps({**saved, "schema_version": 2}))
    with open(d / "huge.json", "w") as fh:  # valid JSON and a valid report, but for 50 MB of padding
        fh.write(json.dumps({**saved, "padding": "x" * (50 * 1024 * 1024)}))
    # lone surrogates, as JSON escapes: no UTF-8 output can carry them as they are
    saved["facts"]["host"]["distro"] = "Ubuntu \ud800 24.04 \udcff"
    (d / "surrogates.json").write_text(json.dumps(saved))
    (d / "matrix.json").write_text('{"gpus": [{"name": "NVIDIA H100", "compute_capability": ')
    return d


def setup_reports(run: Run) -> None:
    """Symlink the module's reports into the case's directory, so a case names them {tmp}/reports/X."""
    assert run.reports is not None
    (run.tmp / "reports").symlink_to(run.reports)


def setup_output_under_a_file(run: Run) -> None:
    (run.tmp / "a-file").write_text("a regular file, not a directory\n")


# --- what the report must say, beyond its codes ------------------------------------------------

def _copy(report: dict[str, Any], path: Union[str, Path]) -> dict[str, Any]:
    copies = report["facts"]["libraries"]["copies"]
    found = [c for c in copies if c["path"] == str(path)]
    assert len(found) == 1, [c["path"] for c in copies]
    return found[0]


def _unreadable(copy: dict[str, Any], *reasons: str) -> None:
    """The copy is listed, its version unavailable with the loader's own reason; never "crashed"."""
    version = copy["version"]
    assert isinstance(version, dict) and version["unavailable"] == "unknown", copy
    assert "crashed" not in version.get("error", ""), copy
    if GLIBC and reasons:
        assert any(r in version["error"] for r in reasons), copy


def verify_empty_libcuda(report: dict[str, Any], run: Run) -> None:
    copy = _copy(report, run.tmp / "badlibs" / "libcuda.so.1")
    assert copy["family"] == "libcuda" and copy["origins"] == ["LD_LIBRARY_PATH"] and copy["stub"] is False
    _unreadable(copy, "file too short")
    smoke = report["facts"]["smoke"]["count"]
    assert smoke["step"] == "load libcuda.so.1" and str(run.tmp / "badlibs" / "libcuda.so.1") in smoke["message"]


def verify_text_libcudnn(report: dict[str, Any], run: Run) -> None:
    copy = _copy(report, run.tmp / "badlibs" / "libcudnn.so.9")
    assert copy["family"] == "libcudnn" and copy["origins"] == ["LD_LIBRARY_PATH"]
    assert copy["version_from_name"] == "9"
    _unreadable(copy, "invalid ELF header")


def verify_foreign_libnccl(report: dict[str, Any], run: Run) -> None:
    copy = _copy(report, run.tmp / "badlibs" / "libnccl.so.2")
    assert copy["family"] == "libnccl" and copy["origins"] == ["LD_LIBRARY_PATH"]
    crafted = (run.tmp / "foreign-source").read_text() == "crafted"
    _unreadable(copy, *(() if crafted else ("wrong ELF class", "ELF file", "cannot open shared object")))


def verify_broken_symlink(report: dict[str, Any], run: Run) -> None:
    copy = _copy(report, run.tmp / "badlibs" / "libcudart.so.13")
    assert copy["real_path"] == str(run.tmp / "gone" / "libcudart.so.13.0.88")
    assert copy["version_from_name"] == "13.0.88"
    _unreadable(copy, "cannot open shared object file")


def verify_not_a_directory(report: dict[str, Any], run: Run) -> None:
    libs = report["facts"]["libraries"]
    not_a_dir = str(run.tmp / "not-a-directory")
    assert libs["ld_library_path"] == [not_a_dir, str(run.tmp / "badlibs")]
    assert not [c for c in libs["copies"] if c["path"].startswith(not_a_dir)]
    _unreadable(_copy(report, run.tmp / "badlibs" / "libcudnn.so.9"), "invalid ELF header")
    assert report["facts"]["probes"]["cuda_stack"]["status"] == "ok"


def verify_huge_ld_path(report: dict[str, Any], run: Run) -> None:
    libs = report["facts"]["libraries"]
    assert len(libs["ld_library_path"]) == HUGE_LD_ENTRIES + 1
    _unreadable(_copy(report, run.tmp / "badlibs" / "libcudnn.so.9"), "invalid ELF header")


def verify_non_utf8_ld_path(report: dict[str, Any], run: Run) -> None:
    shown = f"{run.tmp}/lib-\\xff\\xfe"  # bytes that are not UTF-8 are written as \xNN escapes
    libs = report["facts"]["libraries"]
    assert libs["ld_library_path"] == [shown, f"{run.tmp}/missing-\\xff"]
    assert report["facts"]["host"]["env"]["LD_LIBRARY_PATH"] == f"{shown}:{run.tmp}/missing-\\xff"
    copy = _copy(report, f"{shown}/libcudnn.so.9")
    _unreadable(copy, "invalid ELF header")
    assert copy["version"]["error"].startswith(f"{shown}/libcudnn.so.9: ")


def verify_non_utf8_cuda_home(report: dict[str, Any], run: Run) -> None:
    home = report["facts"]["toolkit"]["env"]["CUDA_HOME"]
    assert home["path"] == f"{run.tmp}/cuda-\\xff\\xfe" and home["exists"] is False
    assert report["findings"][0]["title"] == f"CUDA_HOME={run.tmp}/cuda-\\xff\\xfe does not exist"


def verify_mask(value: str) -> Callable[[dict[str, Any], Run], None]:
    def verify(report: dict[str, Any], run: Run) -> None:
        assert report["facts"]["host"]["env"]["CUDA_VISIBLE_DEVICES"] == value
        assert report["findings"][0]["severity"] == "error"
        assert report["facts"]["nvml"]["device_count"] == 2
    return verify


def verify_init_error(reason: str, code: int) -> Callable[[dict[str, Any], Run], None]:
    def verify(report: dict[str, Any], run: Run) -> None:
        init = report["facts"]["nvml"]["init"]
        assert (init["ok"], init["reason"], init["code"]) == (False, reason, code)
        assert report["facts"]["gpus"] == []
    return verify


def verify_gpu_fact(gpu: int, path: str, value: Any) -> Callable[[dict[str, Any], Run], None]:
    def verify(report: dict[str, Any], run: Run) -> None:
        node = report["facts"]["gpus"][gpu]
        for key in path.split("."):
            node = node[key]
        assert node == value
        other = report["facts"]["gpus"][1 - gpu]
        assert other["name"] == "NVIDIA H100 80GB HBM3"  # the other GPU is read in full
    return verify


def verify_every_query_not_supported(report: dict[str, Any], run: Run) -> None:
    gpus = report["facts"]["gpus"]
    assert [g["name"] for g in gpus] == [{"unavailable": "not_supported"}] * 2
    assert gpus[1]["temperature"]["current_c"] == {"unavailable": "not_supported"}
    assert report["facts"]["nvml"]["missing_functions"] == []


def verify_function_not_found(report: dict[str, Any], run: Run) -> None:
    assert report["facts"]["nvml"]["missing_functions"] == ["nvmlDeviceGetGpuMaxPcieLinkGeneration"]
    assert report["facts"]["gpus"][0]["pcie"]["gen_gpu_max"] == {"unavailable": "function_not_found"}


def verify_nvml_unfinished_at_deadline(report: dict[str, Any], run: Run) -> None:
    facts = report["facts"]
    assert facts["probes"]["nvml"]["status"] == "timeout"
    assert facts["probes"]["nvml"]["error"] == "unfinished when the --timeout deadline passed"
    from gpudoctor.checks.messages import PASTE_ONLY  # judge what a ticket quotes: nothing on a live run

    # every gpus check that reads NVML timed out; gpus.xid reads the kernel log, which still answers
    assert {c["status"] for c in report["checks"] if c["id"].startswith("gpus.") and c["id"] not in PASTE_ONLY
            and c["id"] != "gpus.xid"} == {"timeout"}
    # what NVML had answered before the deadline is kept, and the finding names where it hung
    assert facts["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert facts["gpus"][1] == {"index": 1, "handle": {"unavailable": "timeout"}}
    assert facts["nvml"]["incomplete"]["while"] == "GPU 1" and facts["nvml"]["incomplete"]["reason"] == "timeout"
    finding = report["findings"][0]
    assert finding["title"].startswith("NVML had not answered while reading GPU 1 when the --timeout deadline passed")
    assert finding["severity"] == "error"  # 8 s: far beyond NVML's normal second


def verify_nvml_own_limit(report: dict[str, Any], run: Run) -> None:
    facts = report["facts"]
    assert facts["nvml"]["incomplete"]["while"] == "GPU 1" and facts["nvml"]["incomplete"]["reason"] == "timeout"
    assert facts["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"  # read before the hang: kept
    assert facts["gpus"][1] == {"index": 1, "handle": {"unavailable": "timeout"}}
    subject = report["findings"][0]["subject"]
    assert (subject["kind"], subject["gpu_index"]) == ("gpu", 1)


def verify_bindings_import_error(report: dict[str, Any], run: Run) -> None:
    assert report["facts"]["nvml"]["bindings"]["import_error"] == "ImportError: the bindings are broken"


def _cupy(report: dict[str, Any]) -> dict[str, Any]:
    return report["facts"]["frameworks"]["cupy"]


def verify_crash(signal_name: str) -> Callable[[dict[str, Any], Run], None]:
    how = signal_name if signal_name.startswith("exit status") else f"killed by {signal_name}"

    def verify(report: dict[str, Any], run: Run) -> None:
        assert _cupy(report)["status"] == "crashed"
        assert _cupy(report)["error"] == f"its process ended ({how}) while importing it"
        assert signal_name in report["findings"][0]["title"]
    return verify


def verify_hang_killed(report: dict[str, Any], run: Run) -> None:
    assert report["facts"]["probes"]["frameworks"]["status"] == "timeout"
    assert report["findings"][0]["title"].endswith("unfinished when the --timeout deadline passed")
    assert len(run.fake_pids()) == 2, "the fake framework never started: the case tested nothing"


def verify_flood(report: dict[str, Any], run: Run) -> None:
    cupy = _cupy(report)
    assert cupy["status"] == "import_error"
    assert 0 < len(cupy["stderr_tail"]) <= 2000
    assert cupy["stderr_tail"].rstrip().endswith("LAST LINE BEFORE THE ERROR")
    assert "LAST LINE BEFORE THE ERROR" in report["findings"][0]["detail"]
    assert len(json.dumps(report)) < 1_000_000, "5 MB of stderr must not reach the report"


def verify_cuda_init(report: dict[str, Any], run: Run) -> None:
    info = _cupy(report)["info"]
    assert info["devices"] == [] and info["cuda_available"] is False
    assert info["init_error"].startswith("CUDARuntimeError: cudaErrorInsufficientDriver")


def verify_output_device_intact(report: Any, run: Run) -> None:
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode), "/dev/full was replaced by a regular file"
    assert not list(Path("/dev").glob(".full.*")), "a temporary report was left in /dev"


def verify_nothing_written(report: Any, run: Run) -> None:
    assert not (run.tmp / "a-file" / "report.json").exists()
    assert (run.tmp / "a-file").read_text() == "a regular file, not a directory\n"


def verify_surrogates_escaped(report: dict[str, Any], run: Run) -> None:
    assert report["facts"]["host"]["distro"] == "Ubuntu \\ud800 24.04 \\udcff"


def verify_interrupted(report: Any, run: Run) -> None:
    assert len(run.fake_pids()) == 2, "the fake framework never started: nothing was interrupted"


CASES: list[Case] = [
    # --- NVML: every nvmlInit error, mapped to its cause -------------------------------------------
    Case("nvml-init-driver-not-loaded", ("check", "--only", "driver", "--format", "json"), 1, codes=("DRV002",),
         setup=with_nvml(fail="nvmlInit:9"), verify=verify_init_error("driver_not_loaded", 9)),
    Case("nvml-init-library-not-found", ("check", "--only", "driver", "--format", "json"), 1, codes=("CTR001",),
         setup=with_nvml(fail="nvmlInit:12"), verify=verify_init_error("library_not_found", 12)),
    Case("nvml-init-lib-rm-mismatch", ("check", "--only", "driver", "--format", "json"), 1, codes=("DRV003",),
         setup=with_nvml(fail="nvmlInit:18"), verify=verify_init_error("driver_library_mismatch", 18)),
    Case("nvml-init-no-permission", ("check", "--only", "driver", "--format", "json"), 1, codes=("DRV004",),
         setup=with_nvml(fail="nvmlInit:4"), verify=verify_init_error("no_permission", 4)),
    Case("nvml-init-gpu-lost", ("check", "--only", "driver", "--format", "json"), 1, codes=("DRV005",),
         setup=with_nvml(fail="nvmlInit:15"), verify=verify_init_error("gpu_lost", 15)),
    Case("nvml-init-unknown", ("check", "--only", "driver", "--format", "json"), 1, codes=("DRV006",),
         setup=with_nvml(fail="nvmlInit:999"), verify=verify_init_error("unknown", 999)),
    Case("nvml-bindings-import-error", ("check", "--only", "driver", "--format", "json"), 1, codes=("DRV010",),
         setup=with_nvml(import_error="the bindings are broken"), verify=verify_bindings_import_error),
    # --- NVML: a per-device query that fails ----------------------------------------------------
    # NOT_SUPPORTED on every query of both GPUs is normal on many boards: facts absent, no finding
    Case("nvml-query-not-supported", ("check", "--only", "gpus", "--format", "json"), 0, codes=(),
         setup=with_nvml(fail="*:3"), verify=verify_every_query_not_supported),
    # NO_PERMISSION / UNKNOWN on every query of one GPU: its facts absent; it is no "other GPU model"
    Case("nvml-query-no-permission", ("check", "--only", "gpus", "--format", "json"), 0, codes=(),
         setup=with_nvml(fail="*@1:4"), verify=verify_gpu_fact(1, "name", {"unavailable": "no_permission"})),
    Case("nvml-query-unknown", ("check", "--only", "gpus", "--format", "json"), 0, codes=(),
         setup=with_nvml(fail="*@0:999"), verify=verify_gpu_fact(0, "name", {"unavailable": "unknown"})),
    Case("nvml-query-gpu-lost", ("check", "--only", "gpus", "--format", "json"), 1, codes=("GPU101",),
         setup=with_nvml(fail="nvmlDeviceGetTemperature@1:15"),
         verify=verify_gpu_fact(1, "temperature.current_c", {"unavailable": "gpu_lost"})),
    Case("nvml-query-function-not-found", ("check", "--only", "driver.bindings,gpus", "--format", "json"), 0,
         codes=("DRV018",), setup=with_nvml(fail="nvmlDeviceGetGpuMaxPcieLinkGeneration:13"),
         verify=verify_function_not_found),
    Case("nvml-open-no-permission", ("check", "--only", "gpus", "--format", "json"), 1, codes=("GPU103",),
         setup=with_nvml(fail="nvmlDeviceGetHandleByIndex@1:4"),
         verify=verify_gpu_fact(1, "handle", {"unavailable": "no_permission"})),
    Case("nvml-open-unknown", ("check", "--only", "gpus", "--format", "json"), 1, codes=("GPU103",),
         setup=with_nvml(fail="nvmlDeviceGetHandleByIndex@0:999"),
         verify=verify_gpu_fact(0, "handle", {"unavailable": "unknown"})),
    # --- NVML: a query that blocks in the "driver" -------------------------------------------------
    # under --timeout 8 (before NVML's own 20 s limit): the whole NVML probe is unfinished
    Case("nvml-query-blocks-until-deadline", ("check", "--timeout", "8", "--only", "driver,gpus", "--format", "json"), 1,
         codes=("DRV009", "INT004", "INT005"), setup=with_nvml(hang="nvmlDeviceGetTemperature@1"), verify=verify_nvml_unfinished_at_deadline),
    # without --timeout: NVML's own limit (runner.NVML_TIMEOUT_S, 20 s) keeps GPU 0 and marks GPU 1
    Case("nvml-query-blocks-own-limit", ("check", "--only", "gpus", "--format", "json"), 1, codes=("GPU102",),
         setup=with_nvml(hang="nvmlDeviceGetTemperature@1"), verify=verify_nvml_own_limit, deadline_s=20.0 + 10.0),
    # --- the loader and the CUDA libraries ---------------------------------------------------------
    Case("libcuda-empty-file-first", ("check", "--only", "libraries,acceleration.smoke", "--format", "json"), 1,
         codes=("LIB005", "RUN001"), setup=setup_empty_libcuda, verify=verify_empty_libcuda),
    Case("libcudnn-not-elf", ("check", "--only", "libraries", "--format", "json"), 0, codes=("LIB005",),
         setup=setup_text_libcudnn, verify=verify_text_libcudnn),
    Case("libnccl-wrong-architecture", ("check", "--only", "libraries", "--format", "json"), 0, codes=("LIB005",),
         setup=setup_foreign_libnccl, verify=verify_foreign_libnccl),
    Case("libcudart-broken-symlink", ("check", "--only", "libraries", "--format", "json"), 0, codes=("LIB005",),
         setup=setup_broken_symlink_libcudart, verify=verify_broken_symlink),
    Case("ld-path-entry-not-a-directory", ("check", "--only", "libraries", "--format", "json"), 0, codes=("LIB005",),
         setup=setup_ld_path_entry_not_a_directory, verify=verify_not_a_directory),
    # --- frameworks: a fake cupy imported in gpudoctor's real worker child -------------------------
    Case("framework-import-segfaults", ("check", "--only", "frameworks.import", "--format", "json"), 1,
         codes=("FWK004",), setup=with_framework(SEGFAULTING_IMPORT), verify=verify_crash("SIGSEGV")),
    Case("framework-import-oom-killed", ("check", "--only", "frameworks.import", "--format", "json"), 1,
         codes=("FWK004",), setup=with_framework(OOM_KILLED_IMPORT), verify=verify_crash("SIGKILL")),
    Case("framework-import-exits-silently", ("check", "--only", "frameworks.import", "--format", "json"), 1,
         codes=("FWK004",), setup=with_framework(SILENT_EXIT_IMPORT), verify=verify_crash("exit status 0")),
    # the import did not finish: frameworks.import checked nothing, so the gate fails (INT004, INT005)
    Case("framework-import-hangs", ("check", "--timeout", "5", "--only", "frameworks.import", "--format", "json"), 1,
         codes=("INT002", "INT004", "INT005"), setup=with_framework(HANGING_IMPORT), verify=verify_hang_killed),
    Case("framework-import-floods-stderr", ("check", "--only", "frameworks.import", "--format", "json"), 1,
         codes=("FWK004",), setup=with_framework(FLOODING_IMPORT), verify=verify_flood),
    Case("framework-cuda-init-fails", ("check", "--only", "frameworks.gpu", "--format", "json"), 1,
         codes=("FWK002",), about="cupy", setup=with_framework(CUDA_INIT_FAILS, nvml=True), verify=verify_cuda_init),
    # --- the environment -----------------------------------------------------------------------
    *[Case(f"cuda-visible-devices-{name}", ("check", "--only", "visibility", "--format", "json"), 1, codes=("VIS001",),
           setup=with_mask(value), verify=verify_mask(value))
      for name, value in (("empty", ""), ("minus-one", "-1"), ("duplicate", "0,0"), ("bare-gpu-prefix", "GPU-"),
                          ("unknown-mig", "MIG-xyz"), ("100kB", "0," * 50_000))],
    Case("cuda-visible-devices-not-utf8", ("check", "--only", "visibility", "--format", "json"), 1, codes=("VIS001",),
         setup=with_mask(b"\xff\xfe0"), verify=verify_mask("\\xff\\xfe0")),
    Case("ld-library-path-thousands-of-entries", ("check", "--only", "libraries", "--format", "json"), 0, codes=("LIB005",),
         setup=setup_huge_ld_path, verify=verify_huge_ld_path),
    Case("ld-library-path-not-utf8", ("check", "--only", "libraries", "--format", "json"), 0, codes=("LIB005",),
         setup=setup_non_utf8_ld_path, verify=verify_non_utf8_ld_path),
    Case("cuda-home-not-utf8", ("check", "--only", "toolkit", "--format", "json"), 0, codes=("CUDA002",),
         setup=setup_non_utf8_cuda_home, verify=verify_non_utf8_cuda_home),
    # root may write into a read-only directory, so "cannot be written" is a path under a regular file
    Case("output-under-a-regular-file", ("check", "--quick", "--format", "json", "--output", "{tmp}/a-file/report.json"), 3,
         error=r"Error: could not write the report to {tmp}/a-file/report\.json: Not a directory",
         setup=setup_output_under_a_file, verify=verify_nothing_written),
    Case("output-disk-full", ("check", "--quick", "--format", "json", "--output", "/dev/full"), 3,
         error=r"Error: could not write the report to /dev/full: No space left on device", verify=verify_output_device_intact),
    Case("sigint-mid-run", ("check", "--only", "frameworks.import", "--format", "json"), 3, error="gpudoctor: interrupted",
         setup=with_framework(HANGING_IMPORT), interrupt=signal.SIGINT, verify=verify_interrupted),
    Case("sigterm-mid-run", ("check", "--only", "frameworks.import", "--format", "json"), 3, error="gpudoctor: interrupted",
         setup=with_framework(HANGING_IMPORT), interrupt=signal.SIGTERM, verify=verify_interrupted),
    # --- input: saved reports, the matrix overlay, the command line --------------------------------
    Case("analyze-malformed", ("analyze", "{tmp}/reports/malformed.json"), 2,
         error=r"Error: {tmp}/reports/malformed\.json is not valid JSON \(Expecting property name .*\)", setup=setup_reports),
    Case("analyze-truncated", ("analyze", "{tmp}/reports/truncated.json"), 2,
         error=r"Error: {tmp}/reports/truncated\.json is not valid JSON \(.+\)", setup=setup_reports),
    Case("analyze-huge", ("analyze", "{tmp}/reports/huge.json"), 2,
         error=r"Error: {tmp}/reports/huge\.json is not a gpudoctor report \(larger than 16 MiB\)", setup=setup_reports),
    Case("analyze-newer-schema", ("analyze", "{tmp}/reports/newer.json"), 2,
         error=r"Error: {tmp}/reports/newer\.json uses report schema 2, newer than this gpudoctor understands \(1\); "
               r"upgrade gpudoctor", setup=setup_reports),
    Case("analyze-lone-surrogates", ("analyze", "{tmp}/reports/surrogates.json", "--format", "json"), 0, codes=(),
         stderr=r"gpudoctor: compared with the verdict saved by gpudoctor 0\.1\.0: 0 new, 0 no longer reported, 0 unchanged",
         setup=setup_reports, verify=verify_surrogates_escaped),
    Case("analyze-endless-input", ("analyze", "/dev/zero"), 2,
         error=r"Error: /dev/zero is too large to analyze \(larger than 16 MiB\)"),
    # merge: the file that is not a readable report is a row of its own (INT007), the rest is merged, exit 2
    Case("merge-malformed", ("merge", "{tmp}/reports/good.json", "{tmp}/reports/malformed.json"), 2,
         error=r"gpudoctor: 1 file\(s\) refused, not readable reports: {tmp}/reports/malformed\.json",
         table=r"INT007 \[file\] {tmp}/reports/malformed\.json is not valid JSON \(.+\)", setup=setup_reports),
    Case("merge-truncated", ("merge", "{tmp}/reports/good.json", "{tmp}/reports/truncated.json"), 2,
         error=r"gpudoctor: 1 file\(s\) refused, not readable reports: {tmp}/reports/truncated\.json",
         table=r"INT007 \[file\] {tmp}/reports/truncated\.json is not valid JSON \(.+\)", setup=setup_reports),
    Case("merge-huge", ("merge", "{tmp}/reports/huge.json", "{tmp}/reports/good.json"), 2,
         error=r"gpudoctor: 1 file\(s\) refused, not readable reports: {tmp}/reports/huge\.json",
         table=r"INT007 \[file\] {tmp}/reports/huge\.json is not a gpudoctor report \(larger than 16 MiB\)",
         setup=setup_reports),
    Case("merge-newer-schema", ("merge", "{tmp}/reports/good.json", "{tmp}/reports/newer.json"), 2,
         error=r"gpudoctor: 1 file\(s\) refused, not readable reports: {tmp}/reports/newer\.json",
         table=r"INT007 \[file\] {tmp}/reports/newer\.json uses report schema 2, ", setup=setup_reports),
    Case("matrix-malformed", ("check", "--quick", "--matrix", "{tmp}/reports/matrix.json"), 2,
         error=r"Error: --matrix: {tmp}/reports/matrix\.json: not valid JSON \(.+\)", setup=setup_reports),
    Case("unknown-option", ("check", "--no-such-option"), 2, usage_error=True,
         error=r"Error: No such option(?: '--no-such-option'|: --no-such-option).*"),  # Click 8.2 / 8.1 (Python 3.9)
    Case("unknown-format", ("check", "--format", "yaml"), 2, usage_error=True,
         error=r"Error: Invalid value for '-f' / '--format': 'yaml' is not one of 'text', 'json', 'markdown', 'junit', 'prometheus'\."),
    Case("negative-timeout", ("check", "--timeout", "-1"), 2, usage_error=True,
         error=r"Error: Invalid value for '--timeout': -1\.0 is not in the range x>=0\.1\.", deadline_s=DEADLINE_S),
    Case("unknown-area", ("check", "--only", "nope"), 2, error=r"Error: unknown area or check: nope \(see `gpudoctor checks`\)"),
    Case("unknown-command", ("frobnicate",), 2, usage_error=True, error=r"Error: No such command 'frobnicate'\."),
]


def test_the_table_is_large_and_distinct():
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


# --- running one case --------------------------------------------------------------------------

def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _leftovers(marker: str, session: int) -> list[str]:
    """Live processes in the CLI's session or with the case's marker in their environment."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid == os.getpid() or not _alive(proc):
                continue
            in_session = os.getsid(proc.pid) == session
            if in_session or proc.environ().get(MARK) == marker:
                found.append(f"{proc.pid} {' '.join(proc.cmdline())[:200]}")
        except (psutil.Error, OSError):
            continue
    return found


def _wait_for_leftovers(marker: str, session: int, pids: list[int], within_s: float = 5.0) -> list[str]:
    """Processes still there ``within_s`` after the CLI exited (SIGKILL is delivered at once, but a
    dying process may still be listed for a moment)."""
    end = time.monotonic() + within_s
    while True:
        left = _leftovers(marker, session)
        left += [f"{p} (a process the fake framework started)" for p in pids if _alive_pid(p)]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.1)


def _alive_pid(pid: int) -> bool:
    try:
        return _alive(psutil.Process(pid))
    except psutil.Error:
        return False


def _interrupt_when_hanging(proc: subprocess.Popen, run: Run, sig: int, started: float) -> None:
    """Send ``sig`` once the fake framework is hanging in its import (and at least 2 s in)."""
    end = started + 30.0
    while len(run.fake_pids()) < 2 and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(max(0.0, started + 2.0 - time.monotonic()))
    assert proc.poll() is None, "gpudoctor ended before it could be interrupted"
    proc.send_signal(sig)


def _no_traceback(stdout: str, stderr: str) -> None:
    assert "Traceback" not in stderr, stderr[-3000:]
    assert not re.search(r"^\s*Traceback \(most recent call last\)", stdout, re.M), stdout[-3000:]
    if "Traceback" in stdout:  # only inside a documented traceback_tail fact of a framework's own child
        report = json.loads(stdout)

        def without_tails(node: Any) -> Any:
            if isinstance(node, dict):
                return {k: without_tails(v) for k, v in node.items() if k != "traceback_tail"}
            if isinstance(node, list):
                return [without_tails(v) for v in node]
            return node

        assert "Traceback" not in json.dumps(without_tails(report), ensure_ascii=False)
        assert [k for k in report["facts"] if "Traceback" in json.dumps(report["facts"][k])] == ["frameworks"]


def _codes(report: dict[str, Any], about: Optional[str]) -> list[str]:
    """The report's finding codes. With ``about``, only that framework's findings: the others must all
    be about frameworks really installed here, which a case judging framework builds also judges."""
    findings = report["findings"]
    if about is None:
        return [f["code"] for f in findings]
    name = NAMES[about]
    others = [f for f in findings if not f["title"].startswith(name)]
    real = tuple(NAMES[n] for n in REAL_FRAMEWORKS)
    assert all(real and f["title"].startswith(real) for f in others), others
    return [f["code"] for f in findings if f["title"].startswith(name)]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fault(case: Case, tmp_path: Path, bad_reports: Path) -> None:
    run = Run(tmp_path)
    run.reports = bad_reports
    if case.id == "output-disk-full" and not (os.path.exists("/dev/full") and stat.S_ISCHR(os.stat("/dev/full").st_mode)):
        pytest.skip("/dev/full is not the full device here")
    if case.setup:
        case.setup(run)
    marker = f"{case.id}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    args = [a.replace("{tmp}", str(tmp_path)) for a in case.args]
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "gpudoctor", *args], cwd=tmp_path, env=run.final_env(marker),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=default_signals)
    try:
        if case.interrupt is not None:
            _interrupt_when_hanging(proc, run, case.interrupt, started)
        out, err = proc.communicate(timeout=case.deadline() + 30.0)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    finally:
        elapsed = time.monotonic() - started
    # (e) nothing left behind: the CLI's session, anything with its marker, what the fakes started
    left = _wait_for_leftovers(marker, proc.pid, run.fake_pids())
    assert left == [], f"processes left behind: {left}"
    stdout = out.decode("utf-8")  # raises if gpudoctor wrote bytes that are not UTF-8
    stderr = err.decode("utf-8", "backslashreplace")
    # (a) no traceback
    _no_traceback(stdout, stderr)
    # (b) within its deadline
    assert elapsed < case.deadline(), f"took {elapsed:.1f} s, deadline {case.deadline():g} s"
    # (d) the documented exit code
    assert proc.returncode == case.exit, f"exit {proc.returncode}\nstderr: {stderr[-2000:]}\nstdout: {stdout[-2000:]}"
    # (c) the finding codes or the one-line error
    report = None
    if case.codes is not None:
        report = json.loads(stdout)
        assert _codes(report, case.about) == list(case.codes), [(f["code"], f["title"][:200]) for f in report["findings"]]
        assert re.fullmatch(case.stderr, stderr.strip()), stderr[-2000:]
    else:
        assert stdout == "" if case.table is None else re.search(case.table.replace("{tmp}", re.escape(str(tmp_path))),
                                                                 stdout), stdout[-2000:]
        lines = [line for line in stderr.splitlines() if line.strip()]
        expected = case.error.replace("{tmp}", re.escape(str(tmp_path)))
        if case.usage_error:
            assert len(lines) == 3, lines
            assert lines[0].startswith("Usage: gpudoctor") and lines[1].startswith("Try 'gpudoctor")
        else:
            assert len(lines) == 1, lines
        assert re.fullmatch(expected, lines[-1]), (expected, lines[-1])
    if case.verify:
        case.verify(report, run)
