"""Secrets never leave in any format, whatever the options; host names that are
common words and a $HOME behind a symlink are redacted without rewriting (or leaking) anything else.

The end-to-end tests run the real CLI (`gpudoctor analyze`) on a report recorded on a real H100
(tests/fixtures/real/h100x1-20261123/full.json, see tests/fixtures/real/README.md) into whose facts
the secrets below were injected where a user's machine would put them: environment variables that
gpudoctor records, a framework's stderr tail and error message, a probe's traceback.

Every sample is fake but has the format of the real thing; the source of each format is named next
to it. The patterns themselves follow public secret scanners' rules (cited in gpudoctor/redact.py).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudoctor import pipeline
from gpudoctor.cli import cli
from gpudoctor.probes.libnames import describe
from gpudoctor.probes.toolkit import probe_toolkit
from gpudoctor.redact import HOST_PSEUDONYM, KEY_MARK, MARK, redact_home, redact_report, scrub_secrets

from conftest import REAL

FIXTURE = REAL / "h100x1-20261123" / "full.json"

# --- the samples: (text as it would appear, the parts of it that must never be printed) -------------

#: An OpenPGP private key block as `gpg --export-secret-keys --armor` writes it: armor header line,
#: optional headers, a blank line, base64 lines, a CRC line ("=..."), the tail line.
#: https://www.rfc-editor.org/rfc/rfc4880#section-6.2
PGP_LINES = ("lQVYBGfAKEkBDADfakePGPsecretLine1xyzwAbCdEfGh", "FAKEpgpSecretLine2abcdEFGHijklMNOPqrsTUVwx")
PGP = ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nComment: fake\n\n" + "\n".join(PGP_LINES)
       + "\n=fAk3\n-----END PGP PRIVATE KEY BLOCK-----")
#: NGC / build.nvidia.com API key: the example of Kingfisher's rule
#: https://github.com/mongodb/kingfisher/blob/main/data/rules/nvapi.yml
NGC_KEY = "nvapi-123456ABCDEF78901234567890abcdefABCDEF1234567890abcdefABCDEF1234"
#: The example access key pair of the AWS documentation
#: https://docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_access-keys.html and the
#: ~/.aws/credentials syntax https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-files.html
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_STS_ID = "ASIAIOSFODNN7EXAMPLE"  # a temporary (STS) key id: ASIA...
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#: An Azure storage SAS URL, the example of https://learn.microsoft.com/en-us/azure/storage/common/storage-sas-overview
SAS_SIG = "Z%2FRHIX5Xcg0Mq2rqI3OlWTjEg2tYkboXr1P9ZUXDtkk%3D"
SAS_URL = ("https://myaccount.blob.core.windows.net/sascontainer/sasblob.txt?sv=2019-02-02&st=2019-04-29T22%3A18%3A26Z"
           f"&se=2019-04-30T02%3A23%3A26Z&sr=b&sp=rw&sip=168.1.5.60-168.1.5.70&spr=https&sig={SAS_SIG}")
#: Presigned URLs. AWS Signature V4, the example of https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html
#: (with a fake session token, X-Amz-Security-Token, as temporary credentials add it)
AMZ_SIGNATURE = "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
AMZ_TOKEN = "FwoGZXIvYXdzEFakeSessionToken%2F%2F%2F%2F%2FwEaDFakeToken0123456789"
AMZ_URL = ("https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
           "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z"
           f"&X-Amz-Expires=86400&X-Amz-Security-Token={AMZ_TOKEN}&X-Amz-SignedHeaders=host&X-Amz-Signature={AMZ_SIGNATURE}")
#: Google Cloud Storage V4 (https://cloud.google.com/storage/docs/authentication/signatures): a fake hex signature
GOOG_SIGNATURE = "5eae6a4b8f0e1c2d3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9012" * 4
GOOG_URL = ("https://storage.googleapis.com/example-bucket/cat.jpeg?X-Goog-Algorithm=GOOG4-RSA-SHA256"
            "&X-Goog-Credential=example%40example-project.iam.gserviceaccount.com%2F20181026%2Fus-central1%2Fstorage"
            f"%2Fgoog4_request&X-Goog-Date=20181026T181309Z&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature={GOOG_SIGNATURE}")
#: S3 query string authentication (Signature Version 2), the example of
#: https://docs.aws.amazon.com/AmazonS3/latest/userguide/RESTAuthentication.html
V2_SIGNATURE = "NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D"
V2_URL = ("https://awsexamplebucket1.s3.us-west-1.amazonaws.com/photos/puppy.jpg?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE"
          f"&Signature={V2_SIGNATURE}&Expires=1175139620")
#: Google OAuth 2 access token: an example of https://github.com/mongodb/kingfisher/blob/main/data/rules/googleoauth2.yml
GOOGLE_TOKEN = "ya29.A0ARrdaM9Ra8K7R9AcxA1PpIMLVQ021H0TL0PRh2s_HH0_tn5gCSSf"
#: Docker Hub personal access token: dckr_pat_ and 27 characters
#: (https://github.com/mongodb/kingfisher/blob/main/data/rules/dockerhub.yml)
DOCKER_TOKEN = "dckr_pat_2YtLF0xV8Vb0aH9c1k3ZqM7pQ4r"
DB_PASS, DB_PASSWORD, PASSPHRASE, PASSWD = "Hunter2Db!", "c0rrectHorse", "open sesame 42", "pa55wdValue"
SSH_KEY_VALUE = "sshKeyValue9000"
#: The storage account key of Microsoft's Azurite emulator, a connection string's AccountKey=
#: (https://learn.microsoft.com/en-us/azure/storage/common/storage-use-azurite#connection-strings)
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#: A ~/.netrc entry, one line and one token a line: https://www.gnu.org/software/inetutils/manual/html_node/The-_002enetrc-file.html
NETRC_PASSWORD, NETRC_PASSWORD_2 = "n3trcPassw0rd", "s3condNetrcPw"
#: A PuTTY key file (PPK v3): https://the.earth.li/~sgtatham/putty/0.78/htmldoc/AppendixC.html
PUTTY_PRIVATE, PUTTY_MAC = "AAAAIFakePuttyPrivateLineBXwHr1MMOtfXrDxBl", "9e4c8a0b12d3f4e5a6b7c8d9e0f1a2b3c4d5e6f7"
PUTTY = ("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: eddsa-key-20261123\nPublic-Lines: 2\n"
         "AAAAC3NzaC1lZDI1NTE5AAAAIHcFakePublicKeyLine1\nFakePublicKeyLine2ab\nPrivate-Lines: 1\n"
         f"{PUTTY_PRIVATE}\nPrivate-MAC: {PUTTY_MAC}")
#: PEM private keys of every kind (RFC 7468 https://www.rfc-editor.org/rfc/rfc7468, OpenSSH's
#: PROTOCOL.key, the ssh.com format of RFC 4716 https://www.rfc-editor.org/rfc/rfc4716)
PEM_BODIES = {kind: f"MIIFake{kind.replace(' ', '')}Body0123456789abcdefABCDEF" for kind in
              ("RSA", "EC", "DSA", "OPENSSH", "ENCRYPTED", "")}
PEMS = [f"-----BEGIN {k + ' ' if k else ''}PRIVATE KEY-----\n{b}\n-----END {k + ' ' if k else ''}PRIVATE KEY-----"
        for k, b in PEM_BODIES.items()]
SSH2_BODY = "P2/56wAAAi4AAAA3aWYtbW9kbntzaWdue2Zha2V9"
SSH2 = f"---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: \"fake\"\n{SSH2_BODY}\n---- END SSH2 ENCRYPTED PRIVATE KEY ----"
#: The ones gpudoctor already caught, kept in the same run: a URL password, token=, a GitHub token.
URL_PASSWORD, TOKEN_VALUE, GITHUB_TOKEN = "urlPassw0rd", "t0kenValue77", "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngOnly0123"

SAMPLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "pgp private key block": (PGP, PGP_LINES),
    "ngc nvapi key": (f"requests.exceptions.HTTPError: 401 for key {NGC_KEY}", (NGC_KEY[6:],)),
    "AWS_SECRET_ACCESS_KEY=": (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", (AWS_SECRET,)),
    "aws_secret_access_key = (credentials file)": (f"[default]\naws_access_key_id = {AWS_ID}\n"
                                                   f"aws_secret_access_key = {AWS_SECRET}", (AWS_ID, AWS_SECRET)),
    "aws secret after its name, no =": (f"aws_secret_access_key {AWS_SECRET}", (AWS_SECRET,)),
    "aws secret after a prefixed name": (f"MY_AWS_SECRET_ACCESS_KEY {AWS_SECRET}", (AWS_SECRET,)),
    "aws key pair (credentials csv)": (f"{AWS_ID},{AWS_SECRET}", (AWS_ID, AWS_SECRET)),
    "aws sts key id": (f"AccessKeyId {AWS_STS_ID}", (AWS_STS_ID,)),
    "azure sas sig=": (f"BlobClient.from_blob_url('{SAS_URL}') failed", (SAS_SIG,)),
    "aws presigned url (sigv4)": (f"botocore: 403 Forbidden for url: {AMZ_URL}", (AMZ_SIGNATURE, AMZ_TOKEN, "AKIAIOSFODNN7EXAMPLE")),
    "gcs presigned url (v4)": (f"urlopen('{GOOG_URL}') failed", (GOOG_SIGNATURE, "example%40example-project")),
    "s3 presigned url (v2)": (f"HTTPError 403: {V2_URL}", (V2_SIGNATURE, "AKIAIOSFODNN7EXAMPLE")),
    "google oauth ya29.": (f"google.auth: token {GOOGLE_TOKEN} expired", (GOOGLE_TOKEN[5:],)),
    "docker dckr_pat_": (f"docker login -u alice -p {DOCKER_TOKEN}", (DOCKER_TOKEN[9:],)),
    "DB_PASS=": (f"DB_PASS={DB_PASS} DB_PASSWORD={DB_PASSWORD}", (DB_PASS, DB_PASSWORD)),
    "passphrase= (quoted, spaces)": (f'passphrase="{PASSPHRASE}"', (PASSPHRASE, "sesame")),
    "PASSWD=": (f"export PASSWD={PASSWD}", (PASSWD,)),
    "SSH_KEY= / AccountKey=": (f"SSH_KEY={SSH_KEY_VALUE};DefaultEndpointsProtocol=https;AccountName=acct;"
                               f"AccountKey={ACCOUNT_KEY};EndpointSuffix=core.windows.net", (SSH_KEY_VALUE, ACCOUNT_KEY[:20])),
    "netrc line": (f"machine api.example.com login alice password {NETRC_PASSWORD}", (NETRC_PASSWORD,)),
    "netrc, a token a line": (f"machine files.example.com\n  login bob\n  password {NETRC_PASSWORD_2}\n",
                              (NETRC_PASSWORD_2,)),
    "putty key file": (PUTTY, (PUTTY_PRIVATE, PUTTY_MAC)),  # the public lines go too, but are no secret
    "putty private lines, header cut off": (f"Private-Lines: 1\n{PUTTY_PRIVATE}\nnext", (PUTTY_PRIVATE,)),
    **{f"pem {k or 'PKCS#8'} private key": (pem, (b,)) for (k, b), pem in zip(PEM_BODIES.items(), PEMS)},
    "ssh.com private key": (SSH2, (SSH2_BODY,)),
    "url password": (f"https://alice:{URL_PASSWORD}@pypi.example.com/simple", (URL_PASSWORD,)),
    "url password with an unencoded @": (f"postgres://alice:p@ss{URL_PASSWORD}@db.example.com:5432/x", (URL_PASSWORD,)),
    "token=": (f"GET /api?token={TOKEN_VALUE}&x=1", (TOKEN_VALUE,)),
    "github token": (f"remote: {GITHUB_TOKEN}", (GITHUB_TOKEN,)),
}
ALL_TEXT = "\n".join(text for text, _ in SAMPLES.values())
SECRETS = tuple(dict.fromkeys(s for _, secrets in SAMPLES.values() for s in secrets))
FORMATS = (["--format", "text"], ["--format", "text", "-v"], ["--format", "json"], ["--format", "markdown"],
           ["--format", "junit"], ["--quiet"])


@pytest.mark.parametrize("name", list(SAMPLES))
def test_each_secret_is_removed(name):
    text, secrets = SAMPLES[name]
    out = scrub_secrets(text)
    assert [s for s in secrets if s in out] == [], out
    assert MARK in out
    assert scrub_secrets(out) == out  # idempotent: a redacted report redacts to itself


def test_a_key_block_keeps_the_text_around_it():
    assert scrub_secrets(f"compute,utility {PGP} tail") == f"compute,utility {KEY_MARK} tail"
    assert scrub_secrets(f"before\n{PUTTY}\nafter") == f"before\n{KEY_MARK}\nafter"
    assert scrub_secrets(f"a\n{SSH2}\nb") == f"a\n{KEY_MARK}\nb"
    for pem in PEMS:
        assert scrub_secrets(f"x {pem} y") == f"x {KEY_MARK} y"
    # a block whose end a stderr tail cut off is removed to the end
    assert scrub_secrets("ok\n" + PGP[:120]) == f"ok\n{KEY_MARK}"


@pytest.mark.parametrize("text", [
    # facts of real reports: versions, UUIDs, paths, packages, hashes, allocator and XLA settings
    "GPU-5c2f0e6a-9a7b-3b1d-8e0f-6a1b2c3d4e5f", "MIG-4b1f5e2a-aaaa-5aaa-aaaa-aaaaaaaaaaaa", "580.159.04",
    "NVIDIA H100 80GB HBM3", "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcudart.so.13",
    "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9",
    "torch-2.11.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl#sha256="
    "4e0b5c0ad4e0a3b0b7f0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2",
    "nvidia-cudnn-cu12==9.1.0.70 --hash=sha256:4e0b5c0ad4e0a3b0b7f0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2",
    "keyring==25.6.0", "expandable_segments:True,garbage_collection_threshold:0.6", "backend:cudaMallocAsync",
    "--xla_gpu_autotune_level=0 --xla_disable_hlo_passes=foo", "NCCL_IB_PKEY=0", "TOKENIZERS_PARALLELISM=false",
    "max_new_tokens=20", "HF_HUB_DISABLE_TOKEN=true", "KeyError: 'cuda'", "pass: 39", "PWD=/opt/torch",
    "/job:localhost/replica:0/task:0/device:GPU:0", "ValueError: Unrecognized key 'bogus_option' in CUDA allocator config.",
    "nvapi-rs", "signal=9", "machine learning password reset", "Private key not found",
    "git+https://github.com/org/repo@v1.0", "botocore: SignatureDoesNotMatch: Signature=expected",
    "https://x.example/api?Signature=kept&page=2", "pip install 'torch @ https://download.pytorch.org/whl/cu130/torch.whl'",
])
def test_what_looks_like_a_secret_but_is_a_fact_is_kept(text):
    assert scrub_secrets(text) == text


PASTES = Path(__file__).parent / "fixtures" / "pastes"  # public issue bodies, sources in its index.json


@pytest.mark.parametrize("path", sorted(p for p in PASTES.iterdir() if p.suffix in (".md", ".txt")), ids=lambda p: p.name)
def test_no_secret_rule_changes_a_public_issue_paste(path):
    """collect_env and nvidia-smi outputs, tracebacks, pip logs and paths that users pasted into public
    issues: nothing in them is a secret, and nothing is changed."""
    text = path.read_text(encoding="utf-8", errors="replace")
    assert scrub_secrets(text) == text


def _reports() -> list[Path]:
    """Every report under tests/fixtures/real (torch-truth.json files are PyTorch's answers, no report)."""
    return sorted(p for p in REAL.rglob("*.json") if p.name != "torch-truth.json")


@pytest.mark.parametrize("path", _reports(), ids=lambda p: str(p.relative_to(REAL)))
def test_no_secret_rule_changes_a_real_report(path):
    """Every report recorded on a real machine (healthy, faults, deep, cluster jobs), facts and
    findings: secret redaction alone (--no-redact) changes nothing, not a UUID, version, package
    name, path or hash."""
    report = json.loads(path.read_text())
    assert isinstance(report.get("facts"), dict)
    assert redact_report(report, identities=False) == {**report, "redacted": report.get("redacted") is True}


# --- the real CLI on a real report with secrets injected --------------------------------------------

def _injected() -> dict[str, Any]:
    """The real H100 report with every sample in env facts, a framework's stderr and error, and a probe's
    traceback; its verdict dropped, so every finding is "new" on analyze's stderr too."""
    report = json.loads(FIXTURE.read_text())
    facts = report["facts"]
    env = facts["host"]["env"]
    env["NVIDIA_DRIVER_CAPABILITIES"] = f"compute,utility {PGP} {NGC_KEY}"
    env["NVIDIA_REQUIRE_CUDA"] = f"cuda>=13.0 {SAS_URL} {AWS_ID},{AWS_SECRET}"
    env["CUDA_PATH"] = f"https://alice:{URL_PASSWORD}@mirror.example.com/cuda?token={TOKEN_VALUE}&t={GITHUB_TOKEN}"
    env["LD_LIBRARY_PATH"] = f"/usr/local/nvidia/lib64:https://bob:{URL_PASSWORD}@mirror.example.com/lib"
    facts["host"]["framework_env"]["XLA_FLAGS"] = f"--xla_gpu_autotune_level=0 DB_PASS={DB_PASS}"
    facts["toolkit"]["env"]["CUDA_PATH"] = {"path": env["CUDA_PATH"], "exists": False, "real_path": env["CUDA_PATH"],
                                            "version": None}
    facts["frameworks"]["jax"] = {
        "installed": True, "status": "import_error", "duration_s": 1.0,
        "error": f"RuntimeError: NGC pull failed with {NGC_KEY}, {GOOGLE_TOKEN}, {DOCKER_TOKEN}",
        "stderr_tail": f"Traceback (most recent call last):\n{ALL_TEXT}\nRuntimeError: jax failed",
    }
    facts["frameworks"]["torch"]["info"]["init_error"] = f"RuntimeError: {ALL_TEXT}"
    facts["probes"]["python"] = {**facts["probes"]["python"], "status": "error", "error": f"OSError: {ALL_TEXT[:400]}",
                                 "traceback_tail": ALL_TEXT}
    report["findings"] = []
    return report


@pytest.fixture
def injected(tmp_path) -> Path:
    path = tmp_path / "injected.json"
    path.write_text(json.dumps(_injected()), encoding="utf-8")
    return path


def _analyze(args: list[str]) -> tuple[str, str]:
    result = CliRunner().invoke(cli, ["analyze", *args])
    assert result.exit_code == 1, result.output  # FWK004 is an error
    assert "Traceback (most recent call last)" not in result.stderr
    return result.stdout, result.stderr


def test_the_injected_facts_give_findings_that_quote_them():
    """The injection reaches the findings' titles (and so every format, --quiet included)."""
    titles = {f["code"]: f["title"] for f in pipeline.judge(_injected()["facts"])["findings"]}
    assert {"CTR002", "CUDA002", "FWK004"} <= set(titles)
    assert NGC_KEY in titles["FWK004"] and GITHUB_TOKEN in titles["CUDA002"] and PGP_LINES[0] in titles["CTR002"]


@pytest.mark.parametrize("no_redact", [[], ["--no-redact"]], ids=["redacted", "no-redact"])
@pytest.mark.parametrize("fmt", FORMATS[:-1], ids=lambda f: " ".join(f))
def test_analyze_prints_no_secret_in_any_format(injected, fmt, no_redact):
    out_file = injected.parent / "out.txt"
    stdout, stderr = _analyze([str(injected), *fmt, *no_redact])
    _analyze([str(injected), *fmt, *no_redact, "--output", str(out_file)])
    written = out_file.read_text(encoding="utf-8")
    for text in (stdout, stderr, written):
        assert [s for s in SECRETS if s in text] == []
    for code in ("CTR002", "CUDA002", "FWK004"):  # the findings that quote the secrets were printed
        assert code in stdout and code in written
    assert "new: FWK004 JAX fails to import" in stderr


@pytest.mark.parametrize("no_redact", [[], ["--no-redact"]], ids=["redacted", "no-redact"])
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: " ".join(f))
def test_check_prints_no_secret_in_any_format(monkeypatch, tmp_path, fmt, no_redact):
    """`check` (the one command with --quiet) probing the same facts."""
    monkeypatch.setattr(pipeline, "run_probes", lambda probes, options, on_progress=None: _injected()["facts"])
    out_file = tmp_path / "out.txt"
    result = CliRunner().invoke(cli, ["check", *fmt, *no_redact])
    assert result.exit_code == 1, result.output
    assert CliRunner().invoke(cli, ["check", *fmt, *no_redact, "--output", str(out_file)]).exit_code == 1
    for text in (result.stdout, result.stderr, out_file.read_text(encoding="utf-8")):
        assert [s for s in SECRETS if s in text] == []
        assert "FWK004" in text or text == result.stderr


def test_analyze_json_keeps_the_facts_around_the_secrets(injected):
    for no_redact in ([], ["--no-redact"]):
        report = json.loads(_analyze([str(injected), "--format", "json", *no_redact])[0])
        env = report["facts"]["host"]["env"]
        assert env["NVIDIA_DRIVER_CAPABILITIES"] == f"compute,utility {KEY_MARK} {MARK}"
        assert env["NVIDIA_REQUIRE_CUDA"].startswith("cuda>=13.0 https://myaccount.blob.core.windows.net/")
        assert f"&sig={MARK}" in env["NVIDIA_REQUIRE_CUDA"] and env["NVIDIA_REQUIRE_CUDA"].endswith(f"{MARK},{MARK}")
        assert report["facts"]["host"]["framework_env"]["XLA_FLAGS"] == f"--xla_gpu_autotune_level=0 DB_PASS={MARK}"
        tail = report["facts"]["frameworks"]["jax"]["stderr_tail"]
        assert tail.startswith("Traceback (most recent call last):\n") and tail.endswith("RuntimeError: jax failed")
        assert tail.count(KEY_MARK) == len(PEMS) + 4  # the PEMs, PGP, ssh.com, PuTTY and the cut-off PuTTY lines


def test_analyze_no_redact_new_lines_hold_no_secret(injected):
    """analyze's "new:" lines on stderr quote the re-judged findings' titles: with --no-redact they keep
    identities but, like every output, no URL password, token= value or GitHub token."""
    _, stderr = _analyze([str(injected), "--no-redact"])
    new = [line for line in stderr.splitlines() if line.startswith("  new: ")]
    assert any(line.startswith(f"  new: CUDA002 CUDA_PATH=https://{MARK}@mirror.example.com/cuda?token={MARK}")
               for line in new), new
    assert not [line for line in new if any(s in line for s in (URL_PASSWORD, TOKEN_VALUE, GITHUB_TOKEN))]


# --- host names that are common words ---------------------------------------------------------------

def _real_with_host(hostname: str, **host: Any) -> dict[str, Any]:
    report = json.loads(FIXTURE.read_text())
    report["facts"]["host"].update(hostname=hostname, **host)
    return report


DEBIAN = {"distro": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.1.0-28-debian-amd64"}


@pytest.mark.parametrize("hostname,host", [
    ("gpu", {}), ("debian", DEBIAN), ("ubuntu", {}), ("node", {}), ("localhost", {}), ("nvidia", {}),
    ("cuda", {}), ("h100", {}), ("hopper", {}), ("linux", {}), ("python", {}), ("torch", {}),
])
def test_a_host_named_like_a_common_word_rewrites_nothing_else(hostname, host):
    """On the real H100 report: only the host name's own field changes; "Ubuntu 24.04.3 LTS", "Debian
    GNU/Linux 12", "NVIDIA H100 80GB HBM3", /usr/local/cuda, package names, the kernel keep their words."""
    report = _real_with_host(hostname, **host)
    redacted = redact_report(report, home="/home/nobody")
    expected = copy.deepcopy(report)
    expected["facts"]["host"]["hostname"] = HOST_PSEUDONYM
    assert redacted == {**expected, "redacted": True}


def test_a_common_host_name_is_still_replaced_where_it_names_the_host():
    note = ("ssh root@gpu; ssh://gpu/srv; hostname=gpu; host: gpu; store gpu:29500; NVIDIA GPU; gpu_burn; "
            "/device:GPU:0; gpu.example.com")
    report = _real_with_host("gpu", note=note)
    out = redact_report(report, home="/home/nobody")["facts"]["host"]["note"]
    assert out == ("ssh root@host-redacted; ssh://host-redacted/srv; hostname=host-redacted; host: host-redacted; "
                   "store host-redacted:29500; NVIDIA GPU; gpu_burn; /device:GPU:0; gpu.example.com")


def test_a_distinctive_host_name_is_replaced_everywhere():
    host = "node-17.cluster.local"
    report = _real_with_host(host, note=f"/scratch/node-17/run.log https://{host}:8080/x node-17: NCCL WARN; "
                                        f"[{host}] up; NODE-17 down")
    report["facts"]["python"]["executable"] = "/mnt/node-17/venv/bin/python"
    facts = redact_report(report, home="/home/nobody")["facts"]
    assert facts["host"]["note"] == ("/scratch/host-redacted/run.log https://host-redacted:8080/x host-redacted: NCCL WARN; "
                                     "[host-redacted] up; host-redacted down")
    assert facts["python"]["executable"] == "/mnt/host-redacted/venv/bin/python"
    assert "node-17" not in json.dumps(facts)
    assert redact_report(report, identities=False)["facts"]["host"]["hostname"] == host


def test_analyze_of_a_redacted_debian_report_keeps_its_distribution(tmp_path):
    """The driver check's remediation reads the distribution (apt on Debian): after redaction a host
    called debian still runs Debian."""
    path = tmp_path / "debian.json"
    path.write_text(json.dumps(_real_with_host("debian", **DEBIAN)), encoding="utf-8")
    result = CliRunner().invoke(cli, ["analyze", str(path), "--format", "json", "--fail-on", "never"])
    assert result.exit_code == 0, result.output
    host = json.loads(result.stdout)["facts"]["host"]
    assert host["hostname"] == HOST_PSEUDONYM and host["distro"] == DEBIAN["distro"] and host["kernel"] == DEBIAN["kernel"]


# --- $HOME behind a symlink -------------------------------------------------------------------------

@pytest.fixture
def linked_home(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """HOME=<tmp>/link/alice, a symlink to <tmp>/data/users/alice, as on clusters whose home directories
    live on a shared file system; a CUDA toolkit and a venv's library inside it."""
    real = tmp_path / "data" / "users" / "alice"
    (real / "cuda" / "include").mkdir(parents=True)
    (real / "cuda" / "include" / "cuda.h").write_text("#define CUDA_VERSION 13000\n")
    (real / "venv" / "lib").mkdir(parents=True)
    (real / "venv" / "lib" / "libcudnn.so.9").write_bytes(b"")
    link = tmp_path / "link" / "alice"
    link.parent.mkdir()
    link.symlink_to(real)
    monkeypatch.setenv("HOME", str(link))
    monkeypatch.setenv("CUDA_HOME", str(link / "cuda"))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    return link, real


def _home_report(link: Path) -> dict[str, Any]:
    """Facts as the probes record them under that home: the toolkit probe and the library describer
    resolve symlinks (``real_path``), so do the package locations of probes/frameworks/metadata.py."""
    report = json.loads(FIXTURE.read_text())
    facts = report["facts"]
    facts["toolkit"]["env"] = probe_toolkit()["env"]
    facts["libraries"]["copies"].append({**describe(str(link / "venv" / "lib" / "libcudnn.so.9"), False),
                                         "origins": ["LD_LIBRARY_PATH"]})
    facts["python"]["executable"] = str(link / "venv" / "bin" / "python")
    facts["python"]["distributions"].append({"name": "fake", "version": "1.0",
                                             "location": os.path.realpath(link / "venv" / "lib")})
    return report


def test_the_real_path_behind_home_is_redacted(linked_home):
    link, real = linked_home
    report = _home_report(link)
    raw = json.dumps(report)
    assert str(real) in raw and str(link) in raw  # the probes did record the real path
    for home in (None, str(link)):  # $HOME, as check and analyze use it, and given explicitly
        text = json.dumps(redact_report(report, home=home))
        assert str(real) not in text and str(link) not in text and "/data/users/alice" not in text
        assert '"real_path": "~/cuda"' in text and '"real_path": "~/venv/lib/libcudnn.so.9"' in text
    assert str(real) in json.dumps(redact_report(report, identities=False))  # --no-redact keeps it
    assert str(real) not in json.dumps(redact_home(report))  # a torchrun node's own home before sending


@pytest.mark.parametrize("fmt", FORMATS[:-1], ids=lambda f: " ".join(f))
def test_analyze_prints_no_real_home_path(linked_home, tmp_path, fmt):
    link, real = linked_home
    path = tmp_path / "home.json"
    report = _home_report(link)
    report["facts"]["toolkit"]["env"]["CUDA_HOME"]["exists"] = False  # CUDA002 quotes the path in its title
    path.write_text(json.dumps(report), encoding="utf-8")
    result = CliRunner().invoke(cli, ["analyze", str(path), *fmt, "--fail-on", "never"])
    assert result.exit_code == 0, result.output
    assert "CUDA002" in result.stdout
    assert str(real) not in result.output and str(link) not in result.output
