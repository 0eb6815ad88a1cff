"""Which Python is diagnosed (probes/interpreter.py), and children that run under it (childpath.py).

The "tool venv" here is how pipx installs gpudoctor: a venv holding gpudoctor and its dependencies
only. It is a bare venv (no pip) whose .pth file reaches a folder of links to gpudoctor's own
dependencies in this test venv, so it holds no framework; the "project venv" is this test venv,
which holds the real torch and tensorflow-cpu that `.[test]` installs (whichever torch build the index served).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import sysconfig
from typing import Optional
from pathlib import Path

import pytest

from gpudoctor.frameworks_table import FRAMEWORKS
from gpudoctor.probes import interpreter
from gpudoctor.procs.child import child_env, run_module
from helpers_stdlib import stdlib_module_names

ROOT = Path(__file__).resolve().parents[1]
#: Modules that run inside children under the diagnosed interpreter: Python 3.9 and the standard library.
#: All of procs/ is held to it: children import its child, childpath, ending, pids, processes, protocol and warden.
CHILD_MODULES = ("gpudoctor/__init__.py", "gpudoctor/probes/__init__.py",
                 *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "gpudoctor" / "procs").glob("*.py")),
                 "gpudoctor/probes/interpreter.py",
                 "gpudoctor/trace.py", "gpudoctor/versions.py", "gpudoctor/probes/libnames.py",
                 "gpudoctor/frameworks_table.py", "gpudoctor/probes/frameworks/__init__.py",
                 "gpudoctor/probes/frameworks/children.py", "gpudoctor/probes/frameworks/asking.py",
                 "gpudoctor/probes/frameworks/metadata.py",
                 "gpudoctor/probes/frameworks/worker.py", "gpudoctor/probes/workload/__init__.py",
                 "gpudoctor/probes/workload/worker.py", "gpudoctor/probes/workload/sharing.py",
                 "gpudoctor/probes/workload/locks.py", "gpudoctor/probes/workload/common.py",
                 *(fw.child.replace(".", "/") + ".py" for fw in FRAMEWORKS),  # each framework's own module
                 "gpudoctor/probes/smoke/__init__.py", "gpudoctor/probes/multigpu/__init__.py",
                 "gpudoctor/probes/multigpu/worker.py")


def _has_frameworks() -> bool:
    return interpreter.installed("torch", sys.path)


@pytest.fixture
def tool_venv(tmp_path: Path) -> Path:
    """A venv with gpudoctor's dependencies and no framework, as `pipx install gpudoctor` makes one."""
    venv = tmp_path / "tool"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    deps = tmp_path / "deps"
    deps.mkdir()
    purelib = Path(sysconfig.get_paths()["purelib"])
    for name in ("click", "pynvml.py", "packaging", "psutil"):
        if (purelib / name).exists():
            (deps / name).symlink_to(purelib / name)
    (deps / "gpudoctor").symlink_to(ROOT / "gpudoctor")
    (deps / "compat_matrix").symlink_to(ROOT / "compat_matrix")
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "deps.pth").write_text(str(deps) + "\n")
    return venv


def test_child_modules_need_only_python_3_9_and_the_standard_library():
    stdlib = set(stdlib_module_names())
    for rel in CHILD_MODULES:
        tree = ast.parse((ROOT / rel).read_text(), rel, feature_version=(3, 9))
        for node in tree.body:  # module level: a framework is imported inside the functions that ask it
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in stdlib or top == "gpudoctor", f"{rel} imports {name} at module level"


def test_python_option_takes_an_interpreter_or_a_venv_folder(tmp_path):
    venv = Path(sys.prefix)
    by_folder = interpreter.choose(str(venv))
    assert by_folder.executable.startswith(str(venv / "bin" / "python"))
    assert by_folder.reason == "--python names it"
    assert interpreter.choose(sys.executable).own
    with pytest.raises(interpreter.BadPython, match="not a Python interpreter"):
        interpreter.choose(str(tmp_path / "nope"))


def test_own_interpreter_with_frameworks_is_diagnosed():
    assert _has_frameworks()  # `.[test]` installs torch here
    target = interpreter.choose(None, {"VIRTUAL_ENV": "/elsewhere", "PATH": os.environ.get("PATH", "")})
    assert target.own and "holds a framework" in target.reason


def test_without_frameworks_the_active_venv_is_diagnosed(tool_venv, monkeypatch):
    monkeypatch.setattr(interpreter, "holds_frameworks", lambda path: False)
    target = interpreter.choose(None, {"VIRTUAL_ENV": sys.prefix, "PATH": ""})
    assert not target.own or os.path.realpath(sys.prefix) == os.path.realpath(os.path.dirname(os.path.dirname(sys.executable)))
    conda = interpreter.choose(None, {"CONDA_PREFIX": str(tool_venv), "PATH": ""})
    assert conda.executable == str(tool_venv / "bin" / "python") and "$CONDA_PREFIX" in conda.reason


def test_other_environments_are_facts(tool_venv):
    found = interpreter.environments({"VIRTUAL_ENV": str(tool_venv), "PATH": ""})
    own = next(e for e in found if "gpudoctor's own" in e["as"])
    tool = next(e for e in found if "$VIRTUAL_ENV" in e["as"])
    assert {"torch", "tensorflow"} <= set(own["frameworks"])
    assert tool["frameworks"] == []


def _check(venv: Path, *args: str, cwd: Path, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH")}
    environ.update(env)
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "gpudoctor", "check", "--format", "json", *args],
                         capture_output=True, text=True, env=environ, cwd=cwd, timeout=240)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def test_a_tool_venv_diagnoses_the_active_venv_quick(tool_venv, tmp_path):
    report = _check(tool_venv, "--quick", "--no-redact", cwd=tmp_path, VIRTUAL_ENV=sys.prefix)
    py = report["facts"]["python"]
    assert py["diagnosed"]["own"] is False and py["diagnosed"]["reason"].startswith("$VIRTUAL_ENV")
    assert os.path.realpath(py["executable"]).startswith(os.path.realpath(sys.prefix)) or py["prefix"] == sys.prefix
    frameworks = report["facts"]["frameworks"]
    assert frameworks["torch"]["installed"] and frameworks["tensorflow"]["installed"]
    assert {d["name"] for d in py["distributions"]} >= {"torch", "tensorflow-cpu"}


def test_a_tool_venv_imports_the_frameworks_under_the_diagnosed_python(tool_venv, tmp_path):
    """The framework children run under --python's interpreter, where gpudoctor is not installed."""
    report = _check(tool_venv, "--only", "frameworks", "--python", sys.prefix, "--no-redact", cwd=tmp_path)
    torch = report["facts"]["frameworks"]["torch"]
    assert torch["status"] == "ok", torch
    assert torch["info"]["version"].startswith("2.")
    assert report["facts"]["python"]["diagnosed"]["reason"] == "--python names it"


def test_without_frameworks_anywhere_the_own_interpreter_stays(tool_venv, tmp_path):
    report = _check(tool_venv, "--quick", cwd=tmp_path, PATH="/usr/bin:/bin")
    assert report["facts"]["python"]["diagnosed"]["own"] is True
    assert not any(fw.get("installed") for fw in report["facts"]["frameworks"].values())


STDLIB_SHADOWS = ("random", "types", "logging", "signal", "string", "enum", "inspect", "json", "re", "os")


def test_a_project_folder_that_shadows_the_standard_library_cannot_confuse_children(tmp_path, monkeypatch):
    """Children run with -I from /: a random.py in the user's working directory is not imported."""
    for name in STDLIB_SHADOWS:
        (tmp_path / f"{name}.py").write_text("raise SystemExit('shadowed')\n")
    monkeypatch.chdir(tmp_path)
    result = run_module("gpudoctor.probes.frameworks.worker", ["torch"], timeout_s=60, env=child_env())
    assert result.section("framework")["version"].startswith("2."), result.stderr_tail
    assert "shadowed" not in result.stderr_tail


def test_pythonpath_comes_first_as_in_the_users_own_import(tmp_path, monkeypatch):
    """A torch on PYTHONPATH is the one `import torch` gets, so it is the one diagnosed."""
    fake = tmp_path / "pp" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('the PYTHONPATH torch')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "pp"))
    result = run_module("gpudoctor.probes.frameworks.worker", ["torch"], timeout_s=30, env=child_env(),
                        python=sys.executable)
    assert "the PYTHONPATH torch" in result.section("framework")["import_error"]


def test_user_path_keeps_relative_pythonpath_entries_from_the_users_folder(monkeypatch):
    from gpudoctor.procs.childpath import user_path

    monkeypatch.setenv("PYTHONPATH", "lib:/abs")
    path = user_path("/home/u/proj")
    assert path[:2] == ["/home/u/proj/lib", "/abs"]
    assert "" not in path and "/home/u/proj" not in path


WORKERS = (("gpudoctor.probes.frameworks.worker", ["torch"]), ("gpudoctor.probes.workload.worker", ["torch", "cpu"]),
           ("gpudoctor.probes.smoke.worker", ["count"]), ("gpudoctor.probes.multigpu.worker", ["--help"]))


@pytest.mark.parametrize("module,args", WORKERS)
def test_workers_start_under_a_venv_without_gpudoctors_dependencies(tmp_path: Path, module: str, args: list[str]):
    """A venv of the user's with nothing in it (no psutil, click, packaging or pynvml), as gpudoctor installed
    with pipx diagnoses it: every worker that runs under the diagnosed interpreter must start there and say
    what it found, not die importing gpudoctor's own dependencies on its way in (a package's __init__ that
    reaches procs/child.py, which reaches procs/processes.py)."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    missing = subprocess.run([python, "-c", "import psutil"], capture_output=True).returncode
    assert missing != 0  # the venv really lacks it
    result = run_module(module, args=args, timeout_s=60, python=python)
    assert "ModuleNotFoundError: No module named 'psutil'" not in result.stderr_tail
    assert "Traceback" not in result.stderr_tail, result.stderr_tail[-800:]
    if module.endswith("multigpu.worker"):
        assert result.returncode == 2  # its usage, printed by the module itself
    else:
        assert result.returncode == 0 and result.lines, result.stderr_tail[-800:]


def _python_before_3_7() -> Optional[str]:
    """A real Python older than gpudoctor's child code accepts (pyenv's 3.6 on the CPU machine), if any."""
    import glob
    import shutil

    found = [shutil.which(n) for n in ("python3.6", "python3.5")] + sorted(glob.glob("/root/.pyenv/versions/3.6*/bin/python"))
    for exe in filter(None, found):
        ran = subprocess.run([exe, "-c", "import sys; print(sys.version_info < (3, 7))"], capture_output=True, text=True)
        if ran.returncode == 0 and ran.stdout.strip() == "True":
            return exe
    return None


OLD_PYTHON = _python_before_3_7()
needs_old_python = pytest.mark.skipif(OLD_PYTHON is None, reason="no Python older than 3.7 on this machine")


@needs_old_python
def test_a_framework_child_that_dies_before_its_first_line_is_recorded_as_not_started(tmp_path: Path):
    """Under a Python 3.6 the child's own start fails (gpudoctor's modules need 3.7 syntax): the record says
    it never started, so the check reports FWK009 (gpudoctor could not look), never FWK004 on the framework."""
    from gpudoctor.probes.frameworks import WORKER, summarise

    venv = tmp_path / "py36"
    subprocess.run([OLD_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    child = run_module(WORKER, ["torch"], timeout_s=60, python=str(venv / "bin" / "python"))
    record = summarise(child, 60)
    assert record["status"] == "crashed" and record["started"] is False and record["stage"] is None
    assert record["last_error"].startswith("SyntaxError"), record
    ok = summarise(run_module(WORKER, ["torch"], timeout_s=120), 120)  # this venv's own: it starts, so no such key
    assert "started" not in ok


@needs_old_python
def test_a_python_gpudoctor_cannot_read_is_a_finding_not_a_clean_report(tmp_path: Path):
    """--python naming a Python 3.6 venv that holds a torch: its facts cannot be read, so its frameworks are
    unknown. Before PY002 the report said nothing at all about it; now PY002 says so and names the interpreter."""
    venv = tmp_path / "py36"
    subprocess.run([OLD_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("raise SystemExit('never imported by gpudoctor here')\n")
    ran = subprocess.run([sys.executable, "-m", "gpudoctor", "check", "--quick", "--only", "python", "--python",
                          str(venv / "bin" / "python"), "--format", "json"], capture_output=True, text=True, cwd=ROOT)
    report = json.loads(ran.stdout)
    assert ran.returncode == 0  # a warning: the gate fails only under --fail-on warning
    found = [f for f in report["findings"] if f["code"] == "PY002"]
    assert len(found) == 1 and found[0]["severity"] == "warning", report["findings"]
    assert found[0]["title"].endswith("SyntaxError: future feature annotations is not defined")
    assert str(venv / "bin" / "python") in found[0]["title"]
