"""`-v` shows the facts as a person reads them, on the real recordings.

The reports are those of tests/fixtures/real (see its README.md): a full `check` on 1 x H100
(h100x1-20261123/full.json) and `check --deep` on 4 x H200 (h200x4-20261121/deep-report-1709.json),
run through the command line as a user would (`analyze REPORT -v`, redacted by default). The layout is
modelled on `nvidia-smi -q` (https://docs.nvidia.com/deploy/nvidia-smi/index.html, "-q, --query") and
PyTorch's `python -m torch.utils.collect_env`
(https://github.com/pytorch/pytorch/blob/main/torch/utils/collect_env.py): named sections of aligned
`Key : value` lines. Every value shown is compared with the JSON report of the same run.

Also here: `TERM=dumb` prints no colour codes on a terminal (a pseudo-terminal, as a user's shell
gives; https://no-color.org/ and terminfo's "dumb" terminal, which has no colour capability:
https://invisible-island.net/ncurses/terminfo.src.html#toc-_Specials), and a Latin-1 output encoding
degrades gracefully in `-v` and Markdown.
"""

from __future__ import annotations

import copy
import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.cli import output
from gpudoctor.render.facts_view import facts_view
from gpudoctor.compat.data import BUNDLED
from helpers_faults import HOST_ENV

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests" / "fixtures" / "real"
FULL = REAL / "h100x1-20261123" / "full.json"
DEEP = REAL / "h200x4-20261121" / "deep-report-1709.json"
COMMON = ["Host", "Driver", "Topology", "CUDA toolkit", "CUDA libraries", "Python", "Framework: PyTorch (torch)",
          "Framework: TensorFlow (tensorflow)", "Framework: JAX (jax)", "Framework: CuPy (cupy)", "Smoke",
          "Workloads", "Probes"]


@pytest.fixture(autouse=True)
def plain_env(monkeypatch):
    """No CUDA/NVIDIA variables and no NO_COLOR from the caller's shell (as tests/test_cli.py)."""
    for name in HOST_ENV + ("PYTHONPATH", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def verbose_and_json(path: Path) -> tuple[str, dict[str, Any]]:
    """`analyze -v`'s facts part, and the facts of `analyze --format json` (redacted the same way)."""
    shown = run("analyze", str(path), "-v")
    assert shown.exit_code == 0, shown.output
    data = json.loads(run("analyze", str(path), "--format", "json").stdout)
    head, facts = shown.stdout.split("\nFacts\n-----\n", 1)
    return facts, data["facts"]


def sections(text: str) -> dict[str, list[str]]:
    """Top-level sections: a line at the margin starts one; the lines under it are its body."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            current = line
            assert current not in out, f"section {current!r} twice"
            out[current] = []
        elif current is not None and line:
            out[current].append(line)
    return out


def value(body: list[str], key: str, after: str = "") -> str:
    """The value of the first ``key : value`` line in ``body`` (after the line ``after``, if given)."""
    start = next(i for i, line in enumerate(body) if line.strip() == after) + 1 if after else 0
    for line in body[start:]:
        match = re.match(r"^\s+(.+?)\s+: (.*)$", line)
        if match and match.group(1) == key:
            return match.group(2)
    raise AssertionError(f"no {key!r} in {body[start:start + 40]}")


def assert_no_json_dump(text: str) -> None:
    """No line is JSON: no `"key": value` line, no brace or bracket alone, no value that parses as an
    object or array."""
    for line in text.splitlines():
        stripped = line.strip()
        assert not re.match(r'^"[^"]*"\s*:', stripped), line
        assert stripped not in ("{", "}", "[", "]", "},", "],"), line
        shown = stripped.split(" : ", 1)[-1]
        if shown[:1] in "{[":
            try:
                parsed = json.loads(shown)
            except ValueError:
                continue
            assert not isinstance(parsed, (dict, list)), line


@pytest.mark.parametrize("path,gpus,extra", [(FULL, 1, []), (DEEP, 4, ["Multi-GPU"])], ids=["h100x1-full", "h200x4-deep"])
def test_every_section_is_there_with_the_facts_of_the_report(path, gpus, extra):
    text, facts = verbose_and_json(path)
    found = sections(text)
    expected = COMMON[:1] + ["Driver"] + [f"GPU {i}" for i in range(gpus)] + COMMON[2:]
    for title in expected + extra:
        assert title in found, (title, list(found))
    assert [t for t in found if t.startswith("GPU ")] == [f"GPU {i}" for i in range(gpus)]
    assert_no_json_dump(text)

    # driver: NVML's version, the kernel module's, and the CUDA version the driver supports (13000 -> 13.0)
    driver = found["Driver"]
    assert value(driver, "Driver version") == facts["nvml"]["driver_version"] == "580.159.04"
    assert value(driver, "Version", after="Kernel module") == facts["driver"]["kernel_module"]["version"]
    cuda = facts["nvml"]["cuda_driver_version"]
    assert value(driver, "CUDA driver version") == f"{cuda // 1000}.{cuda % 1000 // 10}" == "13.0"
    # each GPU: name, UUID (redacted, as in the JSON of the same run), memory in MiB, compute capability
    for gpu in facts["gpus"]:
        body = found[f"GPU {gpu['index']}"]
        assert value(body, "Name") == gpu["name"]
        assert value(body, "UUID") == gpu["uuid"] == f"GPU-redacted-{gpu['index']}"
        assert value(body, "Total", after="Memory") == f"{gpu['memory']['total_bytes'] // 2**20} MiB"
        assert value(body, "Compute capability") == gpu["compute_capability"]
        for key, fact in gpu.items():  # an absent fact reads (unavailable: reason)
            if isinstance(fact, dict) and set(fact) == {"unavailable"}:
                assert any(line.endswith(f": (unavailable: {fact['unavailable']})") for line in body), key
    # PyTorch: version, build, the cuDNN it runs, the GPU it sees
    torch = facts["frameworks"]["torch"]["info"]
    body = found["Framework: PyTorch (torch)"]
    assert value(body, "Version") == torch["version"] == "2.11.0+cu130"
    assert value(body, "Built CUDA") == torch["built_cuda"]
    assert value(body, "Runtime cuDNN") == torch["runtime_cudnn"]
    assert value(body, "cuda:0", after="Devices").startswith(torch["devices"][0]["name"])
    assert value(found["Framework: TensorFlow (tensorflow)"], "Installed") == "no"
    # the bf16 figure of every GPU's PyTorch workload
    runs = [r for r in facts["workload"]["runs"] if r["framework"] == "torch"]
    assert len(runs) == gpus
    for r in runs:
        bf16 = r["throughput"]["matmul_bf16_tflops"]
        assert value(found["Workloads"], "Matmul bf16", after=f"PyTorch on cuda:{r['device']}") == f"{bf16:.1f} TFLOP/s"
        assert bf16 > 600
    # probes: each with its status and duration
    for name, record in facts["probes"].items():
        assert re.match(rf"^{record['status']}, {record['duration_s']:g} s, ", value(found["Probes"], name))


def test_each_library_copy_with_its_version_origins_and_who_loaded_it():
    text, facts = verbose_and_json(FULL)
    body = sections(text)["CUDA libraries"]
    start = body.index("    Copies")
    lines = body[start + 1:start + 1 + len(facts["libraries"]["copies"])]
    assert all(line.startswith("        lib") for line in lines)
    for line, copy_ in zip(lines, facts["libraries"]["copies"]):
        assert line.split(" : ", 1)[0].strip() == copy_["family"]
        assert copy_["path"] in line and f"origins {', '.join(copy_['origins'])}" in line
        version = copy_.get("version")
        shown = (f": {version}," if isinstance(version, str) else "version not read" if version is None
                 else f": (unavailable: {version['unavailable']})")
        assert shown in line, line
    # the libcuda PyTorch mapped (read from its /proc/self/maps) is marked as loaded by it; the system
    # cuDNN 9.14 it did not load is not
    torch_libcuda = next(lib for lib in facts["frameworks"]["torch"]["info"]["loaded_libraries"] if lib["family"] == "libcuda")
    loaded = [line for line in lines if torch_libcuda["real_path"] in line]
    assert loaded and all("loaded by PyTorch, JAX, CuPy" in line for line in loaded)
    assert all("loaded by" not in line for line in lines if "libcudnn.so.9.14.0" in line)


def test_deep_sections_show_p2p_and_the_all_reduce():
    text, facts = verbose_and_json(DEEP)
    body = sections(text)["Multi-GPU"]
    pairs = facts["multigpu"]["p2p"]["pairs"]
    assert len(pairs) == 12
    for pair in pairs:
        assert value(body, f"cuda:{pair['src']} -> cuda:{pair['dst']}").startswith(f"{pair['gbs']:.1f} GB/s, peer access yes")
    assert value(body, "busbw") == f"{facts['multigpu']['allreduce']['busbw_gbs']:.1f} GB/s"
    topology = sections(text)["Topology"]
    assert value(topology, "GPU 0 - GPU 3").startswith("NV18, common ancestor PHB")


def test_every_string_fact_is_shown():
    """Nothing is dropped: every string of the facts (but the multi-line tails, shown over lines, and the
    paths folded into library lines) appears in the view."""
    facts = json.loads(FULL.read_text())["facts"]
    text = facts_view(facts)
    missing = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for v in node:
                walk(v, f"{path}.*")
        elif isinstance(node, str) and "\n" not in node and node not in text:
            missing.append((path, node))

    walk(facts, "facts")
    assert missing == []


@pytest.mark.parametrize("path", sorted(p for p in REAL.rglob("*.json") if "truth" not in p.name),
                         ids=lambda p: str(p.relative_to(REAL)))
def test_every_recording_renders_without_a_json_dump(path):
    facts = json.loads(path.read_text())["facts"]
    text = facts_view(facts)
    assert_no_json_dump(text)
    assert "Probes" in sections(text.split("-----\n", 1)[1])


def test_a_failed_workload_shows_its_error_and_stderr_under_its_value():
    """bogus_alloc.json: PyTorch's workload child died (SIGSEGV): its error, and the stderr tail line by
    line, each line under the value column, none at the margin."""
    facts = json.loads((REAL / "h100x1-20261123" / "bogus_alloc.json").read_text())["facts"]
    text = facts_view(facts)
    body = sections(text.split("-----\n", 1)[1])["Workloads"]
    assert value(body, "Error", after="PyTorch on cuda:0") == "the workload crashed (SIGSEGV)"
    tail = facts["workload"]["runs"][0]["stderr_tail"].rstrip("\n").split("\n")
    first = next(i for i, line in enumerate(body) if line.strip().startswith("Stderr tail"))
    column = body[first].index(": ") + 2
    assert body[first][column:] == tail[0]
    rest = [t for t in tail[1:] if t]  # sections() leaves out blank lines
    following = body[first + 1:first + 1 + len(rest)]
    assert [line[column:] for line in following] == rest
    assert all(line[:column].strip() == "" for line in following)
    torch = sections(text.split("-----\n", 1)[1])["Framework: PyTorch (torch)"]
    assert value(torch, "Init error") == facts["frameworks"]["torch"]["info"]["init_error"]


HOSTILE_NAME = "NVIDIA H100\x1b[2J\x1b]0;pwned\x07\n[✓] Forged: looks fine\u202e"
HOSTILE_ERROR = "\x1b[1;31mValueError\x1b[0m: bad\nGPU 1\n    Name : forged"


def test_hostile_strings_are_shown_as_escapes_and_stay_in_their_place(tmp_path):
    """Untrusted text (render/safe.py): a control sequence in a GPU name or a framework's error is shown
    escaped; a newline in a one-line fact stays on its line as \\n; a multi-line error's lines stay under
    its value column, so no line of data starts a section or a key at a margin."""
    report = json.loads(FULL.read_text())
    report["facts"]["gpus"][0]["name"] = HOSTILE_NAME
    report["facts"]["host"]["env"]["NVIDIA_VISIBLE_DEVICES"] = "0\x9b2J"
    report["facts"]["frameworks"]["torch"]["info"]["init_error"] = HOSTILE_ERROR
    report["facts"]["libraries"]["copies"][0]["path"] += "\x1b]8;;https://evil.example/\x1b\\"
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    shown = run("analyze", str(path), "--no-redact", "-v").stdout
    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown and "\u202e" not in shown
    found = sections(shown.split("\nFacts\n-----\n", 1)[1])
    assert value(found["GPU 0"], "Name") == "NVIDIA H100\\x1b[2J\\x1b]0;pwned\\x07\\n[✓] Forged: looks fine\\u202e"
    assert value(found["Host"], "NVIDIA_VISIBLE_DEVICES") == "0\\x9b2J"
    assert "GPU 1" not in found and not any(t.startswith("[✓]") for t in found)
    body = found["Framework: PyTorch (torch)"]
    at = next(i for i, line in enumerate(body) if line.strip().startswith("Init error"))
    column = body[at].index(": ") + 2
    assert body[at][column:] == "\\x1b[1;31mValueError\\x1b[0m: bad"
    assert [line[column:] for line in body[at + 1:at + 3]] == ["GPU 1", "    Name : forged"]
    assert all(line[:column].strip() == "" for line in body[at + 1:at + 3])


@pytest.mark.parametrize("junk", [None, 5, "x\ny", [1, {"a": [None]}], {"unavailable": "timeout"}, {"a": {"b": []}},
                                  [[["deep"]]], {"unavailable": ["not", "a", "reason"]}])
def test_facts_of_any_shape_never_raise(junk):
    """A saved report may hold anything `analyze` lets through: every section of a real report replaced
    by junk, one at a time and all at once, still renders, one section per key, every line safe."""
    facts = json.loads(FULL.read_text())["facts"]
    for key in list(facts) + ["cluster", "options", "future_section"]:
        changed = copy.deepcopy(facts)
        changed[key] = junk
        text = facts_view(changed)
        assert "\x1b" not in text and text.startswith("Facts\n-----\n")
    nested = copy.deepcopy(facts)
    nested["gpus"] = [junk, {"index": 1, "nvlink": {"links": [junk, {"link": "x"}]}, "processes": [junk]}]
    nested["libraries"]["copies"].append(junk)
    nested["frameworks"]["torch"]["info"] = junk
    nested["workload"]["runs"].append({"framework": junk, "device": junk, "matmul": {"checks": [junk]}})
    assert facts_view(nested).count("\nGPU ") == 2
    assert facts_view(junk).startswith("Facts\n-----\n")


# Output that degrades gracefully -------------------------------------------------------------------

def _on_a_terminal(*args: str, term: str) -> bytes:
    """gpudoctor's standard output as a terminal receives it: run under a pseudo-terminal."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": term}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "gpudoctor", *args], stdout=slave, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    received = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            proc.kill()
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        received += chunk
    proc.wait(timeout=60)
    os.close(master)
    assert proc.returncode in (0, 1), proc.stderr.read() if proc.stderr else b""
    return received


def test_term_dumb_prints_no_colour_codes_on_a_terminal():
    """On a terminal the report is coloured, unless TERM=dumb: no escape sequence at all then."""
    report = str(REAL / "h100x1-20261123" / "shared_gpu.json")
    coloured = _on_a_terminal("analyze", report, term="xterm-256color")
    assert b"\x1b[32m" in coloured  # the renderer's own green mark: colour is on for a real terminal
    plain = _on_a_terminal("analyze", report, term="dumb")
    assert b"\x1b" not in plain
    assert plain.replace(b"\r\n", b"\n").splitlines()[2:] == re.sub(rb"\x1b\[[0-9;]*m", b"", coloured).replace(
        b"\r\n", b"\n").splitlines()[2:]


def test_render_decides_colour_from_tty_no_color_and_term(monkeypatch):
    report = json.loads(FULL.read_text())
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    for term, no_color, coloured in (("xterm", None, True), ("dumb", None, False), ("xterm", "1", False)):
        monkeypatch.setenv("TERM", term)
        if no_color:
            monkeypatch.setenv("NO_COLOR", no_color)
        else:
            monkeypatch.delenv("NO_COLOR", raising=False)
        assert ("\x1b[" in output.render(report, "text", False, to_terminal=True, matrix=BUNDLED)) is coloured, (term, no_color)


@pytest.mark.parametrize("args", [("-v",), ("--format", "markdown")], ids=["verbose", "markdown"])
def test_latin1_output_of_verbose_and_markdown(tmp_path, args):
    """PYTHONIOENCODING=latin-1 and characters Latin-1 lacks (the text report's marks, an en dash and an
    emoji in a GPU name): written as \\uXXXX, exit 0, never a UnicodeEncodeError (exit 3)."""
    report = json.loads(FULL.read_text())
    report["facts"]["gpus"][0]["name"] = "NVIDIA H100 \u2013 \u2705"
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "latin-1", "NO_COLOR": "1"}
    result = subprocess.run([sys.executable, "-m", "gpudoctor", "analyze", str(path), *args], capture_output=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr.decode("latin-1")
    out = result.stdout.decode("latin-1")
    assert "Traceback" not in result.stderr.decode("latin-1")
    assert "NVIDIA H100 \\u2013 \\u2705" in out
    if args == ("-v",):
        assert "Name               : NVIDIA H100 \\u2013 \\u2705" in out


def test_every_string_and_key_of_the_facts_is_made_safe():
    """Every string of a real report, keys included, with a screen clear, a C1 CSI and a bidi override
    appended: none reaches the output raw, and each is shown as its escape."""
    hostile = "\x1b[2J\x9b\u202e"

    def spoil(node: Any, keys: bool) -> Any:
        if isinstance(node, str):
            return node + hostile
        if isinstance(node, dict):
            return {(spoil(k, keys) if keys else k): spoil(v, keys) for k, v in node.items()}
        if isinstance(node, list):
            return [spoil(v, keys) for v in node]
        return node

    for path in (FULL, DEEP, REAL / "h200x4-20261121" / "cluster" / "job-2x2.json"):
        for keys in (False, True):  # values only (the dedicated layouts), then keys too (the generic one)
            text = facts_view(spoil(json.loads(path.read_text())["facts"], keys))
            assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text), path
            assert "\\x1b[2J\\x9b\\u202e" in text
            assert keys or "Framework: PyTorch (torch)" in text
