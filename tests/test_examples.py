"""The files in examples/ are well-formed, and every gpudoctor command they run is one the real CLI accepts.

How a command is validated: each ``gpudoctor ...`` invocation is cut out of the file (a Kubernetes
container's ``command``/``args`` list as it stands; a shell line, a CI ``run``/``script`` entry or
a ``bash -c`` script through shlex, up to the next ``|``, ``&&``, ``||`` or ``;``) and given to the
subcommand's own ``make_context``: that runs Click's real parser, the option types (``--format``
choices, ``--fail-on``, paths) and callbacks, and raises UsageError on anything the CLI would
refuse, without running the command. Appending ``--help`` instead would prove less: ``--help`` is
eager, so Click prints the help and exits before it converts the other options, and a bad
``--format`` value would pass.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path, PurePath

import click
import pytest
import yaml

from conftest import REAL_DIRS
from gpudoctor.cli import cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
YAML_FILES = sorted([*EXAMPLES.rglob("*.yaml"), *EXAMPLES.rglob("*.yml")])
SHELL_SCRIPTS = sorted(p for p in EXAMPLES.rglob("*") if p.is_file() and p.read_bytes().startswith(b"#!/usr/bin/env bash"))
DOCKERFILE = EXAMPLES / "docker" / "Dockerfile"
ENTRYPOINT = EXAMPLES / "docker" / "entrypoint.sh"
SBATCH = EXAMPLES / "slurm" / "gpudoctor-fleet.sbatch"
DOCKER_KEYWORDS = {"FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
                   "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


# Finding the gpudoctor invocations ---------------------------------------------------------------------

def _is_gpudoctor(token: str) -> bool:
    return PurePath(token).name == "gpudoctor"


def shell_invocations(script: str) -> list[list[str]]:
    """The argument lists after each ``gpudoctor`` (or ``.venv/bin/gpudoctor``, ``python -m gpudoctor``) in a shell script."""
    found: list[list[str]] = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
        lexer.whitespace_split = True
        tokens = list(lexer)
        for i, token in enumerate(tokens):
            if " " in token and "gpudoctor" in token:  # a script given to bash -c / sh -c
                found += shell_invocations(token)
            elif _is_gpudoctor(token):
                argv = []
                for arg in tokens[i + 1:]:
                    if set(arg) <= set("|&;"):
                        break
                    argv.append(arg)
                found.append(argv)
    return found


def _containers(node):
    if isinstance(node, dict):
        for key in ("containers", "initContainers"):
            for c in node.get(key) or []:
                yield c
        for value in node.values():
            yield from _containers(value)
    elif isinstance(node, list):
        for value in node:
            yield from _containers(value)


def kubernetes_invocations(doc: dict) -> list[list[str]]:
    found = []
    for c in _containers(doc):
        argv = [*(c.get("command") or []), *(c.get("args") or [])]
        if argv and _is_gpudoctor(argv[0]):
            found.append(argv[1:])
        elif argv[:1] and PurePath(argv[0]).name in ("sh", "bash") and "-c" in argv:
            found += shell_invocations(argv[argv.index("-c") + 1])
    return found


def ci_scripts(doc: dict) -> list[str]:
    """GitHub Actions steps' ``run`` and GitLab jobs' ``script`` lines."""
    scripts = []
    for job in (doc.get("jobs") or {}).values():
        scripts += [step["run"] for step in job.get("steps", []) if "run" in step]
    for name, job in doc.items():
        if isinstance(job, dict) and "script" in job:
            scripts += job["script"]
    return scripts


def file_invocations(path: Path) -> list[list[str]]:
    if path in YAML_FILES:
        found = []
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            found += kubernetes_invocations(doc)
            for script in ci_scripts(doc):
                found += shell_invocations(script)
        return found
    return shell_invocations(path.read_text(encoding="utf-8"))


def validate(argv: list[str]) -> click.Context:
    """Parse ``gpudoctor ARGV`` with the real CLI, as far as the point where it would run; UsageError if refused."""
    assert argv, "gpudoctor with no subcommand"
    command = cli.commands.get(argv[0])
    if command is None:
        raise click.UsageError(f"no such command {argv[0]!r}")
    parent = click.Context(cli, info_name="gpudoctor")
    return command.make_context(argv[0], list(argv[1:]), parent=parent)


EXPECTED = {
    "ci/github-actions.yml": [["check", "--format", "junit", "--output", "gpudoctor.xml"]],
    "ci/gitlab-ci.yml": [["check", "--format", "junit", "--output", "gpudoctor.xml"]],
    "docker/entrypoint.sh": [["check", "--fail-on", "error", "--quiet"]],
    "kubernetes/daemonset.yaml": [["check", "--format", "json", "--output", "/reports/$(NODE_NAME).json"]],
    "kubernetes/daemonset-prometheus.yaml": [["check", "--quick", "--timeout", "60", "--format", "prometheus",
                                              "--output", "/textfile/gpudoctor.prom"]],
    "kubernetes/job.yaml": [["check", "--fail-on", "error"]],
    "kubernetes/pod-initcontainer.yaml": [["check", "--fail-on", "error", "--quiet"]],
    "slurm/gpudoctor-fleet.sbatch": [["check", "--format", "json", "--output", "$0/${SLURMD_NODENAME}.json"],
                                     ["merge", "$reports/*.json"]],
    "slurm/gpudoctor-torchrun.sbatch": [["check", "--deep", "--format", "json", "--output", "$report"],
                                        ["merge", "$report"]],
    "slurm/gpudoctor-healthcheck.sh": [["check", "--quick", "--fail-on", "error", "--quiet", "--timeout", "20"]],
}


def test_every_example_is_covered():
    files = sorted(str(p.relative_to(EXAMPLES)) for p in [*YAML_FILES, *SHELL_SCRIPTS])
    assert files == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_commands_each_example_runs(name):
    assert file_invocations(EXAMPLES / name) == EXPECTED[name]


@pytest.mark.parametrize("argv", [argv for cmds in EXPECTED.values() for argv in cmds], ids=" ".join)
def test_every_gpudoctor_command_is_valid(argv):
    ctx = validate(argv)
    assert ctx.command.name == argv[0]


@pytest.mark.parametrize("argv", [
    ["check", "--format", "yaml"],
    ["check", "--fail-on", "sometimes"],
    ["check", "--no-such-option"],
    ["merge"],
    ["merge", "a.json", "--format", "junit"],
    ["chek"],
])
def test_the_validator_refuses_what_the_cli_refuses(argv):
    with pytest.raises(click.UsageError):
        validate(argv)


# YAML, shell, Dockerfile --------------------------------------------------------------------------------

@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_yaml_loads(path):
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    assert docs and all(isinstance(d, dict) for d in docs)


def test_kubernetes_objects_request_gpus_where_they_check_them():
    job = yaml.safe_load((EXAMPLES / "kubernetes" / "job.yaml").read_text())
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    pod = yaml.safe_load((EXAMPLES / "kubernetes" / "pod-initcontainer.yaml").read_text())
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    init, app = pod["spec"]["initContainers"][0], pod["spec"]["containers"][0]
    assert init["resources"]["limits"]["nvidia.com/gpu"] == app["resources"]["limits"]["nvidia.com/gpu"] == 1
    ds = yaml.safe_load((EXAMPLES / "kubernetes" / "daemonset.yaml").read_text())
    assert (ds["apiVersion"], ds["kind"]) == ("apps/v1", "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    container = spec["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"  # what $(NODE_NAME) expands to
    mount = container["volumeMounts"][0]
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert mount["mountPath"] == "/reports" and volume["hostPath"]["type"] == "DirectoryOrCreate"
    assert "sh" in container["command"][0]
    subprocess.run(["sh", "-n", "-c", container["args"][0]], check=True)


def test_ci_publishes_the_junit_report():
    gha = yaml.safe_load((EXAMPLES / "ci" / "github-actions.yml").read_text())
    assert True in gha  # YAML 1.1 reads the key `on` as true; GitHub reads it as "on"
    job = gha["jobs"]["gpudoctor"]
    assert "self-hosted" in job["runs-on"]
    published = [s for s in job["steps"] if "gpudoctor.xml" in json.dumps(s.get("with", {}))]
    assert published and all(s.get("if") == "always()" for s in published)
    gitlab = yaml.safe_load((EXAMPLES / "ci" / "gitlab-ci.yml").read_text())["gpudoctor"]
    assert gitlab["artifacts"]["reports"]["junit"] == "gpudoctor.xml"
    assert gitlab["artifacts"]["when"] == "always"
    for script in ci_scripts(gha) + ci_scripts({"gpudoctor": gitlab}):
        subprocess.run(["bash", "-n", "-c", script], check=True)


@pytest.mark.parametrize("path", SHELL_SCRIPTS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_shell_script_parses_and_is_executable(path):
    subprocess.run(["bash", "-n", str(path)], check=True)
    assert path.stat().st_mode & stat.S_IXUSR, f"{path} is not executable (COPY and sbatch keep the mode)"


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction: comments and blank lines dropped, backslash continuations joined."""
    instructions, current = [], ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if current and line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        keyword, _, args = current.strip().partition(" ")
        instructions.append((keyword, args.strip()))
        current = ""
    assert not current, "the Dockerfile ends inside a continued instruction"
    return instructions


def test_dockerfile_parses():
    instructions = dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8"))
    assert [k for k, _ in instructions if k not in DOCKER_KEYWORDS] == []
    assert all(k == k.upper() for k, _ in instructions)
    assert instructions[0][0] == "FROM"
    entrypoints = [json.loads(args) for k, args in instructions if k == "ENTRYPOINT"]
    assert entrypoints == [["/usr/local/bin/gpudoctor-entrypoint"]]  # exec form, so "$@" gets CMD's words
    copies = [args.split() for k, args in instructions if k == "COPY"]
    for *sources, _ in copies:  # the build context is the repository root
        for source in sources:
            assert (ROOT / source).exists(), source
    assert ["examples/docker/entrypoint.sh", "/usr/local/bin/gpudoctor-entrypoint"] in copies
    json.loads(next(args for k, args in instructions if k == "CMD"))


def test_dockerfile_installs_every_package():
    """`pip install` of the copied sources must carry every gpudoctor package (non-editable installs use this list)."""
    try:
        import tomllib
    except ImportError:  # Python before 3.11: tomli, the package tomllib was made from (the test extra installs it)
        import tomli as tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "gpudoctor").rglob("__init__.py")}
    assert on_disk - listed == set()


# The scripts do what they say ---------------------------------------------------------------------------

def _fake_gpudoctor(bin_dir: Path, body: str) -> dict[str, str]:
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "gpudoctor"
    fake.write_text("#!/usr/bin/env bash\n" + body)
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize("status", [0, 1, 3])
def test_entrypoint_runs_the_check_then_the_command(tmp_path, status):
    env = _fake_gpudoctor(tmp_path / "bin", f'echo "$@" > "{tmp_path}/args"\n'
                                           f'[ {status} = 0 ] || echo "gpudoctor: error VIS001 [host] ..."\nexit {status}\n')
    result = subprocess.run(["bash", str(ENTRYPOINT), "sh", "-c", 'echo "workload $1"', "sh", "with args"],
                            capture_output=True, text=True, env=env)
    assert (tmp_path / "args").read_text() == "check --fail-on error --quiet\n"
    assert result.returncode == status
    if status == 0:
        assert result.stdout == "workload with args\n"
    else:
        assert result.stdout == "gpudoctor: error VIS001 [host] ...\n"
        assert result.stderr == (f"gpudoctor: the GPU check failed (exit status {status}); "
                                 "not starting: sh -c echo \"workload $1\" sh with args\n")


def test_slurm_script_writes_one_report_per_node_and_merges_them(tmp_path):
    """The batch script under a stand-in srun (three nodes, SLURMD_NODENAME set per task) and the real merge."""
    real = {p.name.split("-")[0]: p / "report.json" for p in REAL_DIRS}
    nodes = {"gpu-a": "h100x1", "gpu-b": "h200x2", "gpu-c": "h200x4"}
    srun = tmp_path / "bin" / "srun"
    env = _fake_gpudoctor(tmp_path / "bin", (
        'if [ "$1" = check ]; then\n'
        '  while [ "$1" != --output ]; do shift; done\n'
        '  case "$SLURMD_NODENAME" in\n'
        + "".join(f'    {n}) cp "{real[r]}" "$2";;\n' for n, r in nodes.items())
        + '  esac\n  exit 0\nfi\n'
        f'exec "{sys.executable}" -m gpudoctor "$@"\n'))
    srun.write_text("#!/usr/bin/env bash\nwhile [[ $1 == --* ]]; do shift; done\nstatus=0\n"
                    f"for node in {' '.join(nodes)}; do SLURMD_NODENAME=$node \"$@\" || status=$?; done\nexit $status\n")
    srun.chmod(0o755)
    env.update(SLURM_JOB_ID="4242", PYTHONPATH=str(ROOT))
    result = subprocess.run(["bash", str(SBATCH)], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "reports" / "4242").iterdir()) == ["gpu-a.json", "gpu-b.json", "gpu-c.json"]
    lines = result.stdout.splitlines()
    assert lines[0] == "gpudoctor merge: 3 node(s), none with findings at or above --fail-on error"
    assert [line.split()[:2] for line in lines[3:6]] == [["gpu-a", "ok"], ["gpu-b", "ok"], ["gpu-c", "ok"]]
    assert "  GPU count: 1 (gpu-a); 2 (gpu-b); 4 (gpu-c)" in lines


def test_deployment_guide_documents_every_example():
    """The deployment guide, or the monitoring guide it links for the node-gate recipes, names every example."""
    section = "".join((ROOT / "docs" / name).read_text(encoding="utf-8") for name in ("deployment.md", "monitoring.md"))
    for name in EXPECTED:
        assert f"examples/{name}" in section, name
    assert "examples/docker/Dockerfile" in section
    for block in re.findall(r"```sh\n(.*?)\n```", section, re.S):
        for argv in shell_invocations(block):
            validate(argv)


def test_prometheus_daemonset_writes_where_node_exporter_reads():
    ds = yaml.safe_load((EXAMPLES / "kubernetes" / "daemonset-prometheus.yaml").read_text())
    assert (ds["apiVersion"], ds["kind"]) == ("apps/v1", "DaemonSet")
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    spec = ds["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert "nvidia.com/gpu" not in json.dumps(container.get("resources", {}))  # it would take a GPU from the jobs
    (argv,) = kubernetes_invocations(ds)
    output = PurePath(argv[argv.index("--output") + 1])
    assert output.suffix == ".prom" and "--quick" in argv and "--timeout" in argv
    mount = next(m for m in container["volumeMounts"] if PurePath(m["mountPath"]) == output.parent)
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert volume["hostPath"]["type"] == "DirectoryOrCreate"
    subprocess.run(["sh", "-n", "-c", container["args"][0]], check=True)


HEALTHCHECK = EXAMPLES / "slurm" / "gpudoctor-healthcheck.sh"


@pytest.mark.parametrize("prolog", [False, True], ids=["HealthCheckProgram", "Prolog"])
@pytest.mark.parametrize("status", [0, 1, 3])
def test_slurm_healthcheck_drains_only_on_an_error_found(tmp_path, status, prolog):
    """Under a stand-in gpudoctor, scontrol and logger: exit 1 drains the node (itself as HealthCheckProgram,
    through slurmd as Prolog), with gpudoctor's first error line as the reason; 0 and 3 leave it in service."""
    env = _fake_gpudoctor(tmp_path / "bin", f'echo "$@" > "{tmp_path}/args"\n'
                                           f'[ {status} = 1 ] && echo "gpudoctor: warning GPU120 [gpu0] slow" '
                                           f'&& echo "gpudoctor: error GPU107 [gpu0] fell off the bus"\nexit {status}\n')
    for tool in ("scontrol", "logger"):
        (tmp_path / "bin" / tool).write_text(f'#!/usr/bin/env bash\nprintf "%s|" "$@" >> "{tmp_path}/{tool}"\n')
        (tmp_path / "bin" / tool).chmod(0o755)
    env.pop("SLURM_JOB_ID", None)
    env.update(SLURMD_NODENAME="gpu-a", **({"SLURM_JOB_ID": "4242"} if prolog else {}))
    result = subprocess.run(["bash", str(HEALTHCHECK)], capture_output=True, text=True, env=env)
    assert (tmp_path / "args").read_text() == "check --quick --fail-on error --quiet --timeout 20\n"
    drained = (tmp_path / "scontrol").read_text() if (tmp_path / "scontrol").exists() else ""
    reason = "gpudoctor: error GPU107 [gpu0] fell off the bus"
    if status == 1 and prolog:
        assert (result.returncode, result.stderr, drained) == (1, reason + "\n", "")
    elif status == 1:
        assert result.returncode == 0 and drained == f"update|NodeName=gpu-a|State=DRAIN|Reason={reason}|"
    else:
        assert (result.returncode, drained) == (0, "")
        assert (tmp_path / "logger").exists() == (status == 3)
