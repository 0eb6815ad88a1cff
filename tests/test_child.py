"""procs/child.py: real child processes that hang, crash, flood stderr or never start."""

from __future__ import annotations

import os
import sys
import textwrap
import time

import psutil
import pytest

from gpudoctor.procs.child import STDERR_TAIL_BYTES, child_env, run_json_lines, run_module
from gpudoctor.probes.system import probe_driver_files
from helpers_children import children_left


@pytest.fixture(autouse=True)
def no_leftover_children():
    assert children_left() == []
    yield
    assert children_left() == []


def py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_lines_then_hang_times_out_and_keeps_lines():
    limit = 1.0
    start = time.monotonic()
    result = run_json_lines(py("""
        import json, sys, time
        for i in range(3):
            print(json.dumps({"section": "progress", "data": i}), flush=True)
        time.sleep(60)
    """), timeout_s=limit)
    elapsed = time.monotonic() - start
    assert result.timed_out is True
    assert result.lines == [{"section": "progress", "data": i} for i in range(3)]
    assert result.signal_name == "SIGKILL"
    assert result.start_error == ""
    assert limit <= elapsed < limit + 3.0
    assert limit <= result.duration_s < limit + 3.0


def test_hang_kills_grandchildren_too(tmp_path):
    """A child that started its own process and hangs: the whole group goes at the deadline."""
    result = run_json_lines(py("""
        import json, subprocess, sys, time
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(json.dumps({"grandchild": grandchild.pid}), flush=True)
        time.sleep(60)
    """), timeout_s=1.0)
    assert result.timed_out is True
    [line] = result.lines
    pid = line["grandchild"]
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break  # killed, waiting for whoever adopted it to reap it
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"grandchild {pid} still running after its group was killed")


def test_segfault():
    result = run_json_lines(py("""
        import ctypes, json
        print(json.dumps({"before": "crash"}), flush=True)
        ctypes.string_at(0)
    """), timeout_s=10)
    assert result.signal_name == "SIGSEGV"
    assert result.returncode == -11
    assert result.timed_out is False
    assert result.lines == [{"before": "crash"}]


def test_killed_like_the_oom_killer():
    result = run_json_lines(py("""
        import json, os, signal
        print(json.dumps({"section": "progress", "data": "GPU 0"}), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """), timeout_s=10)
    assert result.signal_name == "SIGKILL"
    assert result.timed_out is False
    assert result.lines == [{"section": "progress", "data": "GPU 0"}]


def test_clean_exit_has_no_signal():
    result = run_json_lines(py("import sys; print('{\"ok\": true}'); sys.exit(3)"), timeout_s=10)
    assert (result.returncode, result.signal_name, result.timed_out) == (3, "", False)
    assert result.lines == [{"ok": True}]


def test_end_child_says_its_status_and_leaves_no_exit_line():
    result = run_json_lines(py("""
        import sys
        from gpudoctor.procs.ending import end_child
        print('{"section": "workload", "data": 1}')
        sys.stderr.write("last words\\n")
        end_child(3)
        print('{"never": true}')
    """), timeout_s=10, env=child_env())
    assert (result.returncode, result.timed_out) == (3, False)
    assert result.lines == [{"section": "workload", "data": 1}]
    assert result.stderr_tail == "last words\n"


def test_the_run_does_not_wait_for_a_child_that_said_its_status_to_be_gone(tmp_path):
    """What follows the status (the driver freeing GPU contexts) is not the run's to wait for; the child
    is still reaped once it has gone."""
    release = tmp_path / "release"
    result = run_json_lines(py(f"""
        import json, os, sys, time
        print(json.dumps({{"section": "pid", "data": os.getpid()}}))
        print(json.dumps({{"section": "exit", "data": 0}}), flush=True)
        os.close(1); os.close(2)
        while not os.path.exists({str(release)!r}):
            time.sleep(0.01)
        os._exit(0)
    """), timeout_s=30)
    pid = result.section("pid")
    assert (result.returncode, result.timed_out) == (0, False)
    assert psutil.Process(pid).status() != psutil.STATUS_ZOMBIE  # returned while the child was still there
    release.touch()
    deadline = time.monotonic() + 10
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not psutil.pid_exists(pid)  # gone and reaped: no zombie left


def test_a_child_that_said_its_status_but_keeps_an_output_open_is_waited_for():
    """Its work is not over (or a grandchild of it still writes): the run's time limit applies."""
    result = run_json_lines(py("""
        import os, time
        print('{"section": "exit", "data": 0}', flush=True)
        os.close(1)  # stderr stays open
        time.sleep(60)
    """), timeout_s=1.0)
    assert result.timed_out is True
    assert result.signal_name == "SIGKILL"


def test_a_child_that_said_its_status_can_still_be_killed_until_it_is_gone(tmp_path):
    from gpudoctor.procs.child import kill_all

    result = run_json_lines(py("""
        import json, os, time
        print(json.dumps({"section": "pid", "data": os.getpid()}))
        print(json.dumps({"section": "exit", "data": 0}), flush=True)
        os.close(1); os.close(2)
        time.sleep(60)  # an exit stuck in the driver
    """), timeout_s=30)
    assert (result.returncode, result.timed_out) == (0, False)
    assert kill_all() == 1  # the deadline of the run, or Ctrl-C, still reaches it
    assert children_left() == []


def test_megabytes_of_stderr_are_cut_to_the_tail():
    result = run_json_lines(py("""
        import json, sys
        block = "w" * 1023 + "\\n"
        for i in range(6 * 1024):  # 6 MiB of warnings
            sys.stderr.write(block)
            if i % 1024 == 0:
                print(json.dumps({"i": i}), flush=True)
        sys.stderr.write("LAST-WARNING\\n")
        sys.stderr.flush()
    """), timeout_s=20)
    assert result.returncode == 0
    assert result.timed_out is False
    assert result.lines == [{"i": i} for i in range(0, 6 * 1024, 1024)]
    assert len(result.stderr_tail) == STDERR_TAIL_BYTES
    assert result.stderr_tail.endswith("LAST-WARNING\n")


def test_non_json_stdout_is_ignored():
    result = run_json_lines(py("""
        print("Loading libnvidia-ml...")
        print('{"section": "gpu", "data": {"index": 0}}')
        print("[1, 2, 3]")
        print('{"truncated": ')
        print("42")
        print("")
        print('{"section": "end", "data": {}}')
    """), timeout_s=10)
    assert result.lines == [{"section": "gpu", "data": {"index": 0}}, {"section": "end", "data": {}}]
    assert result.returncode == 0


def test_command_that_does_not_exist(tmp_path):
    missing = str(tmp_path / "no-such-program")
    result = run_json_lines([missing, "--flag"], timeout_s=5)
    assert result.start_error.startswith("FileNotFoundError:")
    assert missing in result.start_error
    assert result.lines == []
    assert result.returncode is None
    assert result.signal_name == ""
    assert result.timed_out is False


def test_run_module_uses_the_package_and_the_env(tmp_path):
    (tmp_path / "probe_mod.py").write_text(textwrap.dedent("""
        import os, gpudoctor
        from gpudoctor.procs import protocol
        protocol.emit("probe", {"pkg": os.path.dirname(gpudoctor.__file__), "extra": os.environ.get("EXTRA_VAR"),
                                "channel_name_kept": protocol.ENV in os.environ,
                                "lifeline_name_kept": "GPUDOCTOR_LIFELINE_FD" in os.environ})
    """))
    env = child_env({"PYTHONPATH": str(tmp_path), "EXTRA_VAR": "yes"})
    result = run_module("probe_mod", timeout_s=10, env=env)
    import gpudoctor

    assert result.lines == [{"section": "probe", "data": {"pkg": os.path.dirname(gpudoctor.__file__), "extra": "yes",
                                                          "channel_name_kept": False, "lifeline_name_kept": False}}]
    assert result.returncode == 0


def test_child_env_keeps_pythonpath_as_it_is_and_marks_the_run(monkeypatch, tmp_path):
    """PYTHONPATH decides which framework the user's import gets: children keep it untouched (they find
    gpudoctor through their start, childpath.BOOT) and carry the run's token (workload/sharing.py)."""
    from gpudoctor.procs.warden import RUN_ENV, run_mark

    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv(RUN_ENV, "an outer run's mark")
    env = child_env()
    assert env["PYTHONPATH"] == str(tmp_path)
    assert env[RUN_ENV] == run_mark()


@pytest.mark.skipif(bool(probe_driver_files()["nvml_library_files"]), reason="this machine has an NVIDIA driver")
def test_real_nvml_worker_on_this_machine(monkeypatch):
    """The real worker with the real nvidia-ml-py: no driver here, so NVML reports library not found."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    result = run_module("gpudoctor.probes.nvml.worker", timeout_s=15)
    assert result.returncode == 0
    sections = [line["section"] for line in result.lines]
    assert sections == ["bindings", "progress", "init", "end"]
    init = result.lines[2]["data"]
    assert (init["ok"], init["reason"], init["code"]) == (False, "library_not_found", 12)
    assert result.lines[0]["data"]["import_error"] is None


def test_the_end_of_a_run_does_not_wait_for_an_exit_under_way(monkeypatch):
    """pipeline.run calls kill_all() when its probes are done: a child that said its status is signalled,
    not waited for. Here the signal is held back, so a wait would last kill_all's whole 2 s."""
    import signal

    from gpudoctor.procs import child
    from gpudoctor.procs.child import kill_all

    result = run_json_lines(py("""
        import json, os, time
        print(json.dumps({"section": "pid", "data": os.getpid()}))
        print(json.dumps({"section": "exit", "data": 0}), flush=True)
        os.close(1); os.close(2)
        time.sleep(60)  # an exit that takes long in the driver
    """), timeout_s=30)
    monkeypatch.setattr(child, "_signal_group", lambda proc: None)
    begun = time.monotonic()
    assert kill_all() == 1
    waited = time.monotonic() - begun
    os.kill(result.section("pid"), signal.SIGKILL)
    assert waited < 1.0
    assert children_left() == []


# --- the channel is the child's own: what a framework prints cannot be taken for it -----------------------

HOSTILE_OUTPUT = {
    "no newline": 'import sys; sys.stdout.write("loading extensions... "); sys.stdout.flush()',
    "forged line": 'print(\'{"section": "framework", "data": {"version": "6.6.6", "devices": [1,2,3,4,5,6,7,8]}}\')',
    "deep nesting": 'print("[" * 200000 + "]" * 200000)',
    "huge line": 'import sys; sys.stdout.write("x" * (64 << 20) + "\\n"); sys.stdout.flush()',
}


@pytest.mark.parametrize("case", sorted(HOSTILE_OUTPUT))
def test_what_a_child_prints_on_stdout_is_not_its_word(tmp_path, case):
    (tmp_path / "noisy.py").write_text(HOSTILE_OUTPUT[case] + "\nfrom gpudoctor.procs import protocol\n"
                                       "protocol.emit('real', {'ok': True})\n")
    start = time.monotonic()
    result = run_module("noisy", timeout_s=60, env=child_env({"PYTHONPATH": str(tmp_path)}))
    assert time.monotonic() - start < 30
    assert result.lines == [{"section": "real", "data": {"ok": True}}]
    assert result.returncode == 0 and not result.timed_out


def test_an_oversized_or_nested_line_on_the_channel_is_dropped_not_fatal(tmp_path):
    (tmp_path / "loud.py").write_text(textwrap.dedent("""
        from gpudoctor.procs import protocol
        out = protocol._stream
        out.write("[" * 100000 + "]" * 100000 + "\\n")
        out.write("y" * (protocol.MAX_LINE_BYTES + 10) + "\\n")
        out.flush()
        protocol.emit("after", 1)
    """))
    result = run_module("loud", timeout_s=60, env=child_env({"PYTHONPATH": str(tmp_path)}))
    assert result.lines == [{"section": "after", "data": 1}]
