"""Redaction (gpudoctor/redact.py): on by default in every format of `check` and `analyze`; secrets
never leave, also with --no-redact.

The end-to-end tests run the real CLI with Click's CliRunner. `check` gets the facts of the real
2 x H200 recording (GPU serials and UUIDs, NVLink topology, torch and the smoke kernel naming the
GPUs by UUID), with this process's own host probe and CUDA_HOME read from an environment that
has secrets planted in it, plus a few facts made to carry secrets the way a crashed probe or a
framework's stderr would. Then nothing secret or identifying may appear in anything printed or
written.
"""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import docexamples
from gpudoctor import pipeline
from gpudoctor.cli import cli
from gpudoctor.probes.libraries import _ld_library_path
from gpudoctor.probes.system import ENV_NAMES, probe_host
from gpudoctor.probes.toolkit import probe_toolkit
from gpudoctor.redact import MARK, redact_report, scrub_secrets
from conftest import REAL_DIRS, load_facts

H200X2 = next(p for p in REAL_DIRS if p.name.startswith("h200x2"))
REPORT_FORMAT = Path(__file__).resolve().parents[1] / "docs" / "report-format.md"
README = Path(__file__).resolve().parents[1] / "README.md"

HOSTNAME = "alice-workstation-7"
USER = "alice"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB_TOKEN = "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngOnly0123"
HF_TOKEN = "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
URL_PASSWORD = "hunter2pass"
REQUIRE_PASSWORD = "s3cretpass"
ERROR_PASSWORD = "pa55word"
KEYWORD_VALUE = "s3cr3tvalue123"
BEARER = "abcdefgh12345678XYZ"
KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"
UNKNOWN_UUID = "GPU-deadbeef-1111-2222-3333-444444444444"

#: Never printed, whatever the flags.
SECRETS = (AWS_KEY, AWS_SECRET, GITHUB_TOKEN, HF_TOKEN, URL_PASSWORD, REQUIRE_PASSWORD, ERROR_PASSWORD, KEYWORD_VALUE,
           BEARER, KEY_BODY)


def _real() -> dict[str, Any]:
    return load_facts(H200X2)


UUIDS = [g["uuid"] for g in _real()["gpus"]]
SERIALS = [g["serial"] for g in _real()["gpus"]]
#: Printed only with --no-redact (the UUIDs also by their distinctive first group).
IDENTITIES = (HOSTNAME, USER, "/home/", *SERIALS, *UUIDS, *(u[4:12] for u in UUIDS), "deadbeef")
FORMATS = (["--format", "text"], ["--format", "text", "-v"], ["--format", "json"], ["--format", "markdown"],
           ["--format", "junit"], ["--quiet"])


@pytest.fixture
def planted(monkeypatch, tmp_path):
    """This process's environment with secrets in it, and `check` probing the 2 x H200 recording."""
    for name in ENV_NAMES + ("PYTHONPATH", "NO_COLOR", "CONDA_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", f"/home/{USER}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AWS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    monkeypatch.setenv("GITHUB_TOKEN", GITHUB_TOKEN)
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    monkeypatch.setenv("LD_LIBRARY_PATH", f"/home/{USER}/cuda/lib64:https://{USER}:{URL_PASSWORD}@mirror.example.com/lib"
                                          f":/usr/local/nvidia/lib64")
    monkeypatch.setenv("NVIDIA_REQUIRE_CUDA", f"cuda>=13.0 brand=tesla,driver>=535 "
                                              f"https://bob:{REQUIRE_PASSWORD}@registry.example.com/v2")
    monkeypatch.setenv("NVIDIA_DRIVER_CAPABILITIES", f"compute,utility {HF_TOKEN}")
    monkeypatch.setenv("CUDA_PATH", f"/opt/{AWS_KEY}/{GITHUB_TOKEN}")
    monkeypatch.setenv("CUDA_HOME", f"/home/{USER}/cuda")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{UUIDS[1]},{UNKNOWN_UUID}")
    monkeypatch.setattr(socket, "gethostname", lambda: HOSTNAME)

    def run_probes(probes, options, on_progress=None):
        facts = _real()
        facts["host"] = probe_host()
        facts["host"]["env"]["AWS_SECRET_ACCESS_KEY"] = AWS_SECRET  # a probe that let one more through
        facts["toolkit"]["env"] = probe_toolkit()["env"]
        facts["libraries"]["ld_library_path"] = _ld_library_path()
        facts["gpus"][1]["ecc"]["uncorrected_volatile"] = 3  # a finding about GPU 1
        facts["topology"]["pairs"][0]["p2p"]["read"] = "chipset_not_supported"  # one about the pair
        facts["frameworks"]["jax"] = {
            "installed": True, "status": "import_error", "duration_s": 1.0,
            "error": f"ImportError: cannot fetch https://carol:{ERROR_PASSWORD}@pypi.internal/simple (token={KEYWORD_VALUE})",
            "stderr_tail": (f'Traceback (most recent call last):\n  File "/home/{USER}/.venv/lib/python3.12/site-packages/'
                            f'jax/__init__.py", line 1\nHF_TOKEN={HF_TOKEN}\nAuthorization: Bearer {BEARER}\n'
                            f"-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----\n"
                            f"on {HOSTNAME}, device {UUIDS[0]} serial {SERIALS[0]}"),
        }
        facts["probes"]["python"] = {"status": "error", "title": "the Python environment", "duration_s": 0.1,
                                     "error": f"OSError: /home/{USER}/project: password={KEYWORD_VALUE}",
                                     "traceback_tail": f'  File "/Users/{USER}/x.py"\n{GITHUB_TOKEN}\n{AWS_KEY}'}
        return facts

    monkeypatch.setattr(pipeline, "run_probes", run_probes)
    return tmp_path


def _invoke(args: list[str], expect: tuple[int, ...] = (1,)) -> str:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in expect, result.output
    assert "Traceback (most recent" not in result.stderr
    return result.stdout


def _assert_clean(text: str, identities: bool = True) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert leaked == [], f"secrets printed: {leaked}"
    if identities:
        shown = [s for s in IDENTITIES if s in text]
        assert shown == [], f"identities printed: {shown}"


def _outputs(command: list[str], tmp_path: Path, fmt: list[str]) -> list[str]:
    """What a command prints, and what it writes with --output."""
    out = tmp_path / "out.txt"
    printed = _invoke([*command, *fmt])
    assert _invoke([*command, *fmt, "--output", str(out)]) == ""
    return [printed, out.read_text(encoding="utf-8")]


# the real CLI, every format -------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: " ".join(f))
def test_check_prints_no_secret_and_no_identity(planted, fmt):
    texts = _outputs(["check"], planted, fmt)
    for text in texts:
        assert text.strip(), "nothing printed: the test would prove nothing"
        _assert_clean(text)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: " ".join(f))
def test_check_no_redact_keeps_identities_but_never_secrets(planted, fmt):
    for text in _outputs(["check", "--no-redact"], planted, fmt):
        _assert_clean(text, identities=False)
        assert UUIDS[1] in text  # VIS002's title names the GPU by its UUID, in every format
        if fmt != ["--quiet"]:  # the others print JAX's stderr, which names the host, or the facts
            assert HOSTNAME in text and f"/home/{USER}/" in text


def test_check_json_no_redact_keeps_the_facts(planted):
    report = json.loads(_invoke(["check", "--format", "json", "--no-redact"]))
    assert report["redacted"] is False
    facts = report["facts"]
    assert facts["host"]["hostname"] == HOSTNAME
    assert [g["uuid"] for g in facts["gpus"]] == UUIDS and [g["serial"] for g in facts["gpus"]] == SERIALS
    assert facts["toolkit"]["env"]["CUDA_HOME"]["path"] == f"/home/{USER}/cuda"
    assert facts["host"]["env"]["LD_LIBRARY_PATH"].startswith(f"/home/{USER}/cuda/lib64:https://{MARK}@mirror")
    assert "AWS_SECRET_ACCESS_KEY" not in facts["host"]["env"]  # only the variables gpudoctor reads, always
    assert set(facts["host"]["env"]) <= set(ENV_NAMES)


@pytest.fixture
def saved(planted) -> dict[str, Path]:
    """The report `check --format json` writes, redacted (the default) and with --no-redact."""
    paths = {"redacted": planted / "redacted.json", "plain": planted / "plain.json"}
    _invoke(["check", "--format", "json", "--output", str(paths["redacted"])])
    _invoke(["check", "--format", "json", "--no-redact", "--output", str(paths["plain"])])
    return paths


@pytest.mark.parametrize("which", ["redacted", "plain"])
@pytest.mark.parametrize("fmt", FORMATS[:-1], ids=lambda f: " ".join(f))
def test_analyze_redacts_by_default(saved, which, fmt):
    for text in _outputs(["analyze", str(saved[which])], saved[which].parent, fmt):
        assert text.strip()
        _assert_clean(text)


@pytest.mark.parametrize("fmt", FORMATS[:-1], ids=lambda f: " ".join(f))
def test_analyze_no_redact_keeps_identities_but_never_secrets(saved, fmt):
    for text in _outputs(["analyze", str(saved["plain"]), "--no-redact"], saved["plain"].parent, fmt):
        _assert_clean(text, identities=False)
        assert UUIDS[1] in text


def test_analyze_of_a_redacted_report_judges_it_as_the_original(saved):
    """Exit code and findings (codes, severities, subjects' GPUs) as for the unredacted report; the report
    stays marked redacted, even with --no-redact, since its facts are."""
    for fail_on, code in (("error", 1), ("never", 0)):
        for which in ("redacted", "plain"):
            _invoke(["analyze", str(saved[which]), "--fail-on", fail_on], expect=(code,))
    plain = json.loads(_invoke(["analyze", str(saved["plain"]), "--format", "json"]))
    again = json.loads(_invoke(["analyze", str(saved["redacted"]), "--format", "json", "--no-redact"]))
    assert again["redacted"] is True and plain["redacted"] is True
    assert again["findings"] == plain["findings"]
    assert {f["code"] for f in plain["findings"]} >= {"GPU111", "TOPO201", "VIS002", "FWK004", "INT001", "CUDA002"}
    assert again["summary"] == plain["summary"]


def test_the_same_gpu_keeps_its_pseudonym_everywhere(planted):
    report = json.loads(_invoke(["check", "--format", "json"]))
    assert report["redacted"] is True
    facts = report["facts"]
    names = [g["uuid"] for g in facts["gpus"]]
    assert names == ["GPU-redacted-0", "GPU-redacted-1"]
    assert [g["serial"] for g in facts["gpus"]] == ["serial-redacted-0", "serial-redacted-1"]
    assert facts["host"]["hostname"] == "host-redacted"
    assert [d["uuid"] for d in facts["frameworks"]["torch"]["info"]["devices"]] == names
    assert [r["uuid"] for r in facts["smoke"]["runs"]] == names
    assert [d["uuid"] for d in facts["smoke"]["count"]["devices"]] == names
    unknown = "GPU-redacted-2"  # a UUID no GPU has keeps being one no GPU has
    assert facts["host"]["env"]["CUDA_VISIBLE_DEVICES"] == f"{names[1]},{unknown}"
    by_code = {f["code"]: f for f in report["findings"]}
    assert by_code["GPU111"]["subject"] == {"kind": "gpu", "gpu_index": 1, "gpu_uuid": names[1]}
    assert by_code["TOPO201"]["subject"] == {"kind": "pair", "gpu_index": 0, "gpu_uuid": names[0],
                                             "peer_index": 1, "peer_uuid": names[1]}
    assert by_code["VIS002"]["title"].startswith(f"CUDA_VISIBLE_DEVICES='{names[1]},{unknown}': entry '{unknown}'")
    assert by_code["VIS002"]["remediation"]["commands"] == [f"export CUDA_VISIBLE_DEVICES={names[1]}"]
    titles = [f["title"] for f in report["findings"] if f["code"] == "CUDA002"]
    assert titles == ["CUDA_HOME=~/cuda does not exist", f"CUDA_PATH=/opt/{MARK}/{MARK} does not exist"]
    assert facts["host"]["env"]["CUDA_HOME"] == "~/cuda"
    tail = facts["frameworks"]["jax"]["stderr_tail"]
    assert f"on host-redacted, device {names[0]} serial serial-redacted-0" in tail
    assert '"~/.venv/lib/python3.12/site-packages/jax/__init__.py"' in tail
    assert f"HF_TOKEN={MARK}" in tail and f"Bearer {MARK}" in tail and f"[private key {MARK}]" in tail


def test_devices_of_a_redacted_report_and_visibility_still_resolve(saved):
    """The pseudonyms keep CUDA_VISIBLE_DEVICES resolvable: cuda:0 is still GPU 1."""
    result = CliRunner().invoke(cli, ["devices", "--report", str(saved["redacted"])])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith(("0 ", "1 "))]
    assert [(r[0], r[1], r[4]) for r in rows] == [("0", "hidden", "GPU-redacted-0"), ("1", "cuda:0", "GPU-redacted-1")]


# redact_report itself -----------------------------------------------------------------------------

def _judged(facts: dict[str, Any]) -> dict[str, Any]:
    return pipeline.judge(copy.deepcopy(facts), created="2026-11-21T10:46:16Z")


def _all_fact_sets() -> list[tuple[str, dict[str, Any]]]:
    sets = [(d.name, load_facts(d)) for d in REAL_DIRS]
    sets += [(f"{d.name}/{p.name}", json.loads(p.read_text())["facts"]) for d in REAL_DIRS
             for p in sorted((d / "faults").glob("*.json"))]
    return sets + [(f"example {code}", facts) for code, facts in docexamples.EXAMPLES.items()]


@pytest.mark.parametrize("name,facts", _all_fact_sets(), ids=lambda x: x if isinstance(x, str) else "")
def test_redacted_facts_are_judged_as_the_originals(name, facts):
    """On every recording, fault and documented example: re-judging the redacted facts finds the same
    problems, and redacting that gives the redacted findings back (one mapping for facts and text)."""
    report = _judged(facts)
    redacted = redact_report(report, home="/home/nobody")
    again = _judged(redacted["facts"])
    assert [(f["code"], f["severity"], f["subject"].get("gpu_index")) for f in again["findings"]] == \
           [(f["code"], f["severity"], f["subject"].get("gpu_index")) for f in report["findings"]]
    assert redact_report(again, home="/home/nobody")["findings"] == redacted["findings"]
    assert redact_report(redacted, home="/home/nobody") == redacted  # idempotent


@pytest.mark.parametrize("name,facts", _all_fact_sets(), ids=lambda x: x if isinstance(x, str) else "")
def test_secret_patterns_change_nothing_in_real_reports(name, facts):
    """No false positives: on reports without secrets, --no-redact prints exactly what was judged."""
    report = _judged(facts)
    assert redact_report(report, identities=False) == {**report, "redacted": False}


def test_redact_is_pure():
    report = _judged(_real())
    before = copy.deepcopy(report)
    redacted = redact_report(report)
    assert report == before and "redacted" not in report
    assert redacted is not report and redacted["facts"]["gpus"][0]["uuid"] == "GPU-redacted-0"


@pytest.mark.parametrize("text,expected", [
    ("https://alice:pw@host/x", f"https://{MARK}@host/x"),
    ("git+https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/o/r", f"git+https://{MARK}@github.com/o/r"),
    (f"key {AWS_KEY} end", f"key {MARK} end"),
    (f"{GITHUB_TOKEN}", MARK),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", MARK),
    (f"x {HF_TOKEN}", f"x {MARK}"),
    ("xoxb-123456789012-abcdefghijklmno", MARK),
    ("glpat-abcdefghijklmnopqrstu", MARK),
    ("token=abc123", f"token={MARK}"),
    ("API_KEY = 'zzz'", f"API_KEY = '{MARK}'"),
    ('{"password": "hunter2", "user": "x"}', f'{{"password": "{MARK}", "user": "x"}}'),
    ("client_secret: abc", f"client_secret: {MARK}"),
    (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", f"AWS_SECRET_ACCESS_KEY={MARK}"),
    ("--password hunter2 --api-key=k1", f"--password {MARK} --api-key={MARK}"),
    ("Authorization: Basic dXNlcjpwYXNz", f"Authorization: Basic {MARK}"),
    ("curl -H 'Authorization: Bearer abc.def.ghi'", f"curl -H 'Authorization: Bearer {MARK}'"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", MARK),
    ("a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nxyz\n-----END RSA PRIVATE KEY-----\nb", f"a\n[private key {MARK}]\nb"),
    ("MIIEowIBAAKCAQEA\n-----END PRIVATE KEY-----\nb", f"[private key {MARK}]\nb"),
    ("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE (cut off)", f"[private key {MARK}]"),
])
def test_secrets(text, expected):
    assert scrub_secrets(text) == expected
    assert scrub_secrets(expected) == expected


@pytest.mark.parametrize("text", [
    "/usr/local/cuda/lib64:/opt/secret:/usr/lib", "cd $(pwd)", "no token here", "password reset required",
    "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-environment-variables",
    "export LD_LIBRARY_PATH=/usr/local/nvidia/lib64", "GPU-accelerated", "sk-learn",
])
def test_ordinary_text_is_left_alone(text):
    assert scrub_secrets(text) == text


def _host_report(hostname: str, env: dict[str, Any], **facts: Any) -> dict[str, Any]:
    return {"schema_version": 1, "facts": {"host": {"hostname": hostname, "env": env,
                                                     "container": {"detected": True, "markers": ["container=podman"]}},
                                            **facts}, "findings": []}


def test_home_directories():
    paths = {
        "/home/alice/venv/bin/python": "~/venv/bin/python",
        "/Users/bob": "~",
        "/home/bob/a:/usr/lib:/home/carol/b": "~/a:/usr/lib:~/b",
        "file:///home/alice/x": "file://~/x",
        "C:\\Users\\dave\\env": "~\\env",
        "/root/venv": "/root/venv",  # names no one; running as root matters for device permissions
        "/data/users/erin/venv": "~/venv",  # $HOME
        "/data/users/erinx": "/data/users/erinx",
        "/opt/home/frank": "/opt/home/frank",
    }
    report = _host_report("h", {"CUDA_HOME": None}, paths=list(paths))
    assert redact_report(report, home="/data/users/erin")["facts"]["paths"] == list(paths.values())
    for home in ("/", "/root", "/usr", "/usr/local"):  # never a $HOME that would rewrite system paths
        assert redact_report(report, home=home)["facts"]["paths"][5] == "/root/venv"
        assert redact_report({"facts": {"p": "/usr/local/cuda"}}, home=home)["facts"]["p"] == "/usr/local/cuda"


def test_a_value_under_a_secret_key_is_a_secret():
    report = {"facts": {"x": {"api_key": "plain", "HF_TOKEN": "abc", "password": "", "name": "plain"}}}
    for identities in (True, False):
        assert redact_report(report, identities=identities)["facts"]["x"] == {
            "api_key": MARK, "HF_TOKEN": MARK, "password": "", "name": "plain"}


def test_only_the_variables_gpudoctor_reads_are_ever_kept():
    env = {**{n: "x" for n in ENV_NAMES}, "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "PATH": "/home/alice/bin"}
    report = _host_report("h", env)
    report["facts"]["host"]["container"]["markers"].append(f"container={AWS_SECRET} and more")
    for identities in (True, False):
        host = redact_report(report, identities=identities)["facts"]["host"]
        assert list(host["env"]) == list(ENV_NAMES)
        assert host["container"]["markers"] == ["container=podman", f"container={MARK}"]


def test_host_names():
    # a plain word that no fact uses: replaced in text, but not as a value of its own nor as a path component
    out = redact_report(_host_report("tesseract", {}, note="tesseract ran out of memory on tesseract",
                                     value="tesseract", path="/opt/tesseract/bin"))["facts"]
    assert out["host"]["hostname"] == "host-redacted"
    assert out["note"] == "host-redacted ran out of memory on host-redacted"
    assert out["value"] == "tesseract" and out["path"] == "/opt/tesseract/bin"
    # a word the report's facts use (a GPU architecture, a key, CUDA_HOME's path): only where it names the host
    facts = {"gpus": [{"index": 0, "architecture": "hopper"}], "note": "hopper ran out of memory on hopper@hopper"}
    out = redact_report(_host_report("hopper", {}, **facts))["facts"]
    assert out["host"]["hostname"] == "host-redacted"
    assert out["gpus"][0]["architecture"] == "hopper"  # a fact's value, not the host name
    assert out["note"] == "hopper ran out of memory on hopper@host-redacted"
    paths = redact_report(_host_report("cuda", {"CUDA_HOME": "/usr/local/cuda"},
                                       note="on cuda: /opt/cuda/bin, ssh://cuda/x"))["facts"]
    assert paths["host"]["env"]["CUDA_HOME"] == "/usr/local/cuda"
    assert paths["note"] == "on cuda: /opt/cuda/bin, ssh://host-redacted/x"
    named = redact_report(_host_report("gpu-node-17", {}, note="/scratch/gpu-node-17/x gpu-node-17.local"))["facts"]
    assert named["note"] == "/scratch/host-redacted/x host-redacted.local"
    fqdn = redact_report(_host_report("gpu17.corp.example.com", {}, note="gpu17: up; gpu17.corp.example.com"))["facts"]
    assert fqdn["note"] == "host-redacted: up; host-redacted"
    assert redact_report(_host_report("vm", {}, note="vmware"))["facts"] == {
        **_host_report("host-redacted", {}, note="vmware")["facts"]}


def test_pseudonyms_are_never_prefixes_of_each_other():
    gpus = [{"index": i, "uuid": f"GPU-{i:08x}-0000-0000-0000-000000000000"} for i in range(12)]
    report = _host_report("h", {"CUDA_VISIBLE_DEVICES": "GPU-00000001,GPU-0000000"}, gpus=gpus)
    out = redact_report(report)["facts"]
    names = [g["uuid"] for g in out["gpus"]]
    assert names[0] == "GPU-redacted-00" and names[11] == "GPU-redacted-11"
    assert not any(a != b and b.startswith(a) for a in names for b in names)
    # a unique prefix takes its GPU's name; an ambiguous one stays ambiguous
    assert out["host"]["env"]["CUDA_VISIBLE_DEVICES"] == "GPU-redacted-01,GPU-redacted-"


def test_mig_uuids_and_case():
    gpus = [{"index": 0, "uuid": UUIDS[0], "mig": {"devices": [{"uuid": "MIG-4b1f5e2a-aaaa-5aaa-aaaa-aaaaaaaaaaaa"}]}}]
    report = _host_report("h", {"CUDA_VISIBLE_DEVICES": "mig-4B1F"}, gpus=gpus,
                          note=f"{UUIDS[0].upper().replace('GPU-', 'gpu-')} and bare {UUIDS[0][4:]}")
    out = redact_report(report)["facts"]
    assert out["gpus"][0]["mig"]["devices"][0]["uuid"] == "MIG-redacted-0"
    assert out["host"]["env"]["CUDA_VISIBLE_DEVICES"] == "MIG-redacted-0"
    assert out["note"] == "GPU-redacted-0 and bare GPU-redacted-0"


def test_documented():
    doc = REPORT_FORMAT.read_text(encoding="utf-8")
    assert "`redacted`" in doc and "GPU-redacted-" in doc and "--no-redact" in doc
    readme = README.read_text(encoding="utf-8")
    assert "## Bug tickets and redaction" in readme and "--no-redact" in readme


def test_peer_addresses_in_nccl_messages_are_redacted_but_versions_stay():
    """NCCL's warnings travel in a torchrun job's report (recorded on 2 x H200: "connect to 192.0.2.2<41139>")."""
    from gpudoctor.redact import redact_report

    report = {"facts": {"cluster": {"ranks": [{"nccl_warnings": [
        "socketPollConnect: connect to 192.0.2.2<41139> returned Connection refused",
        "NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.1.0.5<0>", "store at 10.1.0.1:29500 unreachable"]}]}},
        "findings": [{"title": "libcublas.so.13.1.0.3 and cuDNN 9.19.0.56 loaded"}]}
    out = redact_report(report)
    warnings = out["facts"]["cluster"]["ranks"][0]["nccl_warnings"]
    assert warnings == ["socketPollConnect: connect to ip-redacted<41139> returned Connection refused",
                        "NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:ip-redacted<0>", "store at ip-redacted:29500 unreachable"]
    assert out["findings"][0]["title"] == "libcublas.so.13.1.0.3 and cuDNN 9.19.0.56 loaded"
    assert redact_report(report, identities=False)["facts"]["cluster"]["ranks"][0]["nccl_warnings"][0].endswith(
        "192.0.2.2<41139> returned Connection refused")


def test_a_node_sends_its_report_with_its_own_home_replaced():
    """Rank 0 knows only its own $HOME; a node whose home is /scratch/alice replaces it before sending."""
    from gpudoctor.redact import redact_home

    report = {"facts": {"python": {"executable": "/scratch/alice/venv/bin/python"},
                        "libraries": {"ld_library_path": ["/scratch/alice/cuda/lib64", "/scratch/alicex/lib"]}}}
    out = redact_home(report, home="/scratch/alice")
    assert out["facts"]["python"]["executable"] == "~/venv/bin/python"
    assert out["facts"]["libraries"]["ld_library_path"] == ["~/cuda/lib64", "/scratch/alicex/lib"]
    assert redact_home(report, home="/root") == report  # /root names no one


def test_other_nodes_mask_prefixes_keep_pointing_at_their_gpus():
    """Node 1 of a torchrun job masked by a UUID prefix: after redaction its mask still names its GPU, so
    re-judging that node (as merge does) resolves the mask as the original did."""
    import json
    from pathlib import Path

    from gpudoctor import pipeline
    from gpudoctor.redact import redact_report

    report = json.loads((Path(__file__).parent / "fixtures/real/h200x2-20261121/cluster/job-2x1.json").read_text())
    node = report["facts"]["cluster"]["nodes"][1]["report"]
    gpu = node["facts"]["gpus"][1]
    gpu["uuid"] = "GPU-2222bbbb-1111-2222-3333-444455556666"
    node["facts"]["host"]["env"]["CUDA_VISIBLE_DEVICES"] = "GPU-2222bbbb"
    before = [f["code"] for f in pipeline.judge(node["facts"])["findings"]]
    inner = redact_report(report)["facts"]["cluster"]["nodes"][1]["report"]["facts"]
    mask = inner["host"]["env"]["CUDA_VISIBLE_DEVICES"]
    assert inner["gpus"][1]["uuid"].startswith(mask)
    assert [f["code"] for f in pipeline.judge(inner)["findings"]] == before


@pytest.mark.parametrize("text, expected", [
    ("failed to connect to [10.1.0.6]:29500", "failed to connect to [ip-redacted]:29500"),
    ("TCPStore timeout at (10.1.0.6, 29500)", "TCPStore timeout at (ip-redacted, 29500)"),
])
def test_store_and_gloo_peer_formats_are_redacted(text, expected):
    from gpudoctor.redact import redact_report

    assert redact_report({"facts": {}, "findings": [{"title": text}]})["findings"][0]["title"] == expected
