"""Redaction: what a report may carry off the machine, applied after judging and before rendering.

``redact_report(report)`` returns a copy of a report (a pure function: the input is not changed,
nothing is queried; only ``$HOME`` and the directory it is a symlink to are read when no ``home`` is
given) in which:

Always, whatever the command line says (also with ``--no-redact``):

- ``facts.host.env`` (and that of every node's report inside a torchrun job's report) keeps only the
  variables gpudoctor reads (``probes.system.ENV_NAMES``), and ``facts.host.framework_env`` those of
  ``probes.system.FRAMEWORK_ENV_NAMES``; any other name is dropped, and the ``container=<value>``
  marker keeps its value only when it is one short word.
- secrets are replaced by ``***`` in every string (and every key) of the report: passwords in
  URLs (``https://user:pass@host`` -> ``https://***@host``), AWS access key ids and secret keys
  (after their name or key id), tokens with a known prefix (GitHub, GitLab, Hugging Face, NVIDIA NGC
  ``nvapi-``, Docker ``dckr_pat_``, Google ``ya29.`` and ``AIza``, Slack, OpenAI, Anthropic,
  Stripe, npm, PyPI, Groq, Replicate, Databricks, DigitalOcean, Vault, SendGrid, age, Azure AD
  client secrets), JSON web tokens, an Azure SAS ``sig=``, bearer and ``Authorization`` values, a
  ``.netrc`` password, the value after a keyword (``token=``, ``api_key=``, ``password:``,
  ``secret=``, ``--password``) or after a variable whose name has a secret part (``DB_PASS=``,
  ``PASSWD=``, ``passphrase=``, ``SSH_KEY=``, ``AccountKey=``), any string value filed under a key
  that names a secret (``{"api_key": ...}``), and private keys: PEM blocks of every kind (RSA, EC,
  DSA, OPENSSH, ENCRYPTED, PKCS#8), OpenPGP private key blocks, ssh.com and PuTTY key files, also
  when a stderr tail cut them off (``[private key ***]``).

Unless ``identities=False`` (``--no-redact``):

- home directories become ``~``: ``$HOME`` and its real path when it is a symlink (unless either is
  ``/``, ``/root`` or a system directory), and any ``/home/<name>``, ``/Users/<name>`` or
  ``C:\\Users\\<name>``. ``/root`` stays: it names no person, and whether gpudoctor ran as root
  matters when device nodes are not accessible.
- host names (every ``hostname`` value) become ``host-redacted`` (``host-redacted-N`` when a
  document holds several), also where they appear in other text (an FQDN's first label too): a
  distinctive name (``node-17.cluster.local``) everywhere as a whole token, in paths, URLs and log
  lines. A name of fewer than 3 letters (``vm``) is replaced only in its own field; a name that is a
  common word (``gpu``, ``debian``, ``node``, or any word of the report's keys and of its facts that
  describe software and hardware: ``os``, ``distro``, ``kernel``, GPU and package ``name`` ...) only
  where the text uses it as a host name (``user@gpu``, ``ssh://gpu``, ``host gpu``, ``gpu:29500``),
  so that ``Debian GNU/Linux 12``, ``NVIDIA GPU`` and ``gpu_burn`` keep their words; a plain word
  is never replaced in a value that is exactly that word nor as a path component.
- an IPv4 address followed by a port (``10.1.0.6<49152>``, ``10.1.0.6:29500``, as NCCL's and gloo's
  messages name peers) becomes ``ip-redacted``.
- GPU and MIG UUIDs become ``GPU-redacted-N`` and ``MIG-redacted-N``, GPU serial numbers
  ``serial-redacted-N``. The mapping is ordering-based, so it is the same everywhere in one report
  (facts, topology, findings' subjects, titles and commands): a GPU that NVML lists gets its NVML
  index as N (``GPU-redacted-0`` is nvidia-smi's GPU 0, and its serial is ``serial-redacted-0``),
  any other UUID the next free numbers in order of appearance. N is zero-padded to one width per
  report, so that no pseudonym is a prefix of another. An entry of ``CUDA_VISIBLE_DEVICES`` or
  ``NVIDIA_VISIBLE_DEVICES`` that is a unique UUID prefix gets its GPU's pseudonym, so
  ``gpudoctor analyze`` of a redacted report resolves the mask as the original did.

The result records ``"redacted": true`` (identities replaced) or ``false``. Redacting a redacted
report changes nothing.
"""

from __future__ import annotations

import functools

import os
import re
from typing import Any, Callable, Iterable, Optional

from gpudoctor.probes.system import ENV_NAMES, FRAMEWORK_ENV_NAMES
from gpudoctor.snapshot import job_nodes

MARK = "***"
IP_PSEUDONYM = "ip-redacted"
#: An IPv4 address with a port, as NCCL and gloo print a peer ("10.1.0.6<49152>", "10.1.0.6:29500"); a bare
#: dotted quad is left alone, since library versions look the same (libcublas.so.13.1.0.3).
_ENDPOINT = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?=<\d|:\d|\]:\d|, \d)")
HOST_PSEUDONYM = "host-redacted"
#: A $HOME under these (or equal to one) is not replaced: it would rewrite system paths.
_SYSTEM_HOMES = ("/", "/root", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/media", "/mnt", "/opt",
                 "/proc", "/run", "/sbin", "/snap", "/srv", "/sys", "/tmp", "/usr", "/var", "/nix")
_SYSTEM_TREES = ("/usr/", "/etc/", "/proc/", "/sys/", "/dev/", "/lib", "/bin/", "/sbin/", "/boot/")
_MASK_VARS = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")

# --- secrets: always removed -------------------------------------------------------------------
#
# The token formats follow public secret scanners' rules, so that what they call a secret is one here:
# gitleaks' config/gitleaks.toml (https://github.com/gitleaks/gitleaks/blob/master/config/gitleaks.toml:
# aws-access-token, private-key, gcp-api-key, gitlab-*, huggingface-organization-api-token,
# databricks-api-token, digitalocean-*, age-secret-key, azure-ad-client-secret, sendgrid-api-token,
# hashicorp vault-*-token, generic-api-key), MongoDB's Kingfisher rules
# (https://github.com/mongodb/kingfisher/tree/main/data/rules: nvapi.yml for NGC's nvapi- keys,
# dockerhub.yml for dckr_pat_, googleoauth2.yml / google.yml for ya29., netrc.yml, pem.yml, and aws.yml
# for a 40-character secret access key near its name) and Microsoft's security-utilities
# (https://github.com/microsoft/security-utilities, SEC101/051 LooseSasSecret: an Azure SAS ``sig=``).
# They are stricter on length where a scanner needs it against false alarms; here a short match is
# fine (``***`` hides a few harmless characters at worst), but every rule still needs a prefix or a name
# that says "secret", because a report is full of hashes, UUIDs and versions that look random.

_KEYWORDS = (r"(?:token(?!iz|s)|secret|passw(?:or)?d|passphrase|pwd|api[_.-]?key|apikey|access[_.-]?key|"
             r"private[_.-]?key|credentials?|auth[_.-]?key|session[_.-]?(?:id|key))")
_STRONG_NAME = re.compile(r"(?i)" + _KEYWORDS)
#: Parts of a variable's name (split at ``_ . -`` and camelCase) that make ``NAME=value`` a secret,
#: besides _KEYWORDS anywhere in it: DB_PASS, PASSWD, SSH_KEY, AccountKey, DOCKER_AUTH, DB_PW, CREDS.
_NAME_PARTS = frozenset({"pass", "pw", "pwd", "passwd", "password", "passphrase", "key", "keys", "secret", "secrets",
                         "token", "auth", "creds", "credential", "credentials", "apikey"})
_NAME_PART_ENDS = ("password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey", "secretkey",
                   "privatekey", "authkey", "sshkey", "signingkey", "masterkey", "encryptionkey")
_NAME_SPLIT = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


#: Values that hide nothing (TOKENIZERS_PARALLELISM=false, HF_HUB_DISABLE_TOKEN=true): kept, so facts stay.
_NOT_SECRET_VALUES = frozenset({"", MARK, "true", "false", "none", "null", "yes", "no"})


def _secret_name(name: str, assignment: bool) -> bool:
    """Whether ``name`` (the left of ``name=value`` or ``name: value``) names a secret. ``KeyError: 'x'`` and
    ``pass: 3`` are not: a part such as ``key`` or ``pass`` counts only in an assignment (``=``); nor are
    ``max_tokens=`` / ``TOKENIZERS_PARALLELISM=`` (counts and settings) or ``PWD=`` (the shell's directory)."""
    if re.search(r"(?i)(?:error|exception|warning)$", name) or name.upper() in ("PWD", "OLDPWD"):
        return False
    if _STRONG_NAME.search(name):
        return True
    if not assignment:
        return False
    parts = [p.lower() for p in _NAME_SPLIT.findall(name)]
    return any(p in _NAME_PARTS or p.endswith(_NAME_PART_ENDS) for p in parts)


#: ``NAME=value``, ``NAME = "value"``, ``"name": "value"``, ``name: value`` (a colon needs a space or quote
#: after it, so that ``expandable_segments:True`` and ``device:GPU:0`` are left alone). The value is a
#: lookahead: in ``project: password=x`` the scan goes on into the value and finds ``password=x``.
_ASSIGNMENT = re.compile(r"""(?<![\w.-])(?P<name>[A-Za-z_][\w.-]*)(?P<sep>["']?[ \t]*(?:=|:(?=[\s"']))[ \t]*)"""
                         r"""(?=(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"'&,;]+))""")


def _scrub_assignments(text: str) -> str:
    spans: list[tuple[int, int]] = []
    for match in _ASSIGNMENT.finditer(text):
        name, sep, value = match.group("name", "sep", "value")
        if value.strip("\"'").lower() in _NOT_SECRET_VALUES or not _secret_name(name, "=" in sep):
            continue
        quoted = value[0] in "\"'" and len(value) > 1 and value[-1] == value[0]
        start, end = match.start("value") + quoted, match.end("value") - quoted
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    for start, end in reversed(spans):
        text = text[:start] + MARK + text[end:]
    return text


_AWS_KEY_ID = r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{16}"
_V2_SIGNATURE = re.compile(r"(?i)([?&]Signature=)(?!\*\*\*)[^&\s\"'<>#]+")


def _presigned_v2(match: re.Match[str]) -> str:
    """A query string signed the old way carries its signature as a plain ``Signature=``: redacted only
    there, so a "Signature=" in an error message that is no URL keeps its meaning."""
    return _V2_SIGNATURE.sub(r"\1" + MARK, match.group())


_SECRETS: tuple[tuple[re.Pattern[str], Any], ...] = (
    # credentials in a URL: scheme://user:password@host, scheme://token@host; up to the last "@" before
    # the path, as a password with an unencoded "@" (p@ss) has it
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#'\"]*@"), r"\1" + MARK + "@"),
    # an AWS secret access key (40 characters) shortly after its name or its key id (Kingfisher aws.yml),
    # also where no "=" stands between: "aws_secret_access_key wJalr...", a credentials CSV line
    (re.compile(r"((?i:(?<![A-Za-z0-9])(?:aws|amazon|amzn)[\w.-]{0,32}?(?:secret|private|access)[\w.-]{0,16}?"
                r"(?:key|token))\b[^A-Za-z0-9/+\n]{1,16}|\b" + _AWS_KEY_ID + r"\b[^A-Za-z0-9/+\n]{1,16})"
                r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"), r"\1" + MARK),
    # well-known token formats
    (re.compile(r"\b" + _AWS_KEY_ID + r"\b"), MARK),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"), MARK),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"), MARK),
    (re.compile(r"\bgl(?:pat|ptt|dt|rt|cbt|imt|soat|ffct|oas|agent)-[A-Za-z0-9_-]{20,}"), MARK),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), MARK),
    (re.compile(r"\bapi_org_[A-Za-z0-9]{20,}\b"), MARK),  # Hugging Face organisation token
    (re.compile(r"\bnvapi-[A-Za-z0-9_-]{20,}"), MARK),  # NVIDIA NGC / build.nvidia.com API key
    (re.compile(r"\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}"), MARK),  # Docker Hub access token
    (re.compile(r"\bya29\.[A-Za-z0-9_-]{20,}"), MARK),  # Google OAuth 2 access token
    (re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{8,}"), MARK),
    (re.compile(r"(hooks\.slack\.com/services/)[A-Za-z0-9/_-]+"), r"\1" + MARK),
    (re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"), MARK),
    (re.compile(r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}\b"), MARK),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), MARK),
    (re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), MARK),
    (re.compile(r"\bpypi-[A-Za-z0-9_-]{40,}"), MARK),
    (re.compile(r"\bgsk_[A-Za-z0-9]{20,}\b"), MARK),  # Groq
    (re.compile(r"\br8_[A-Za-z0-9]{20,}\b"), MARK),  # Replicate
    (re.compile(r"\bdapi[a-f0-9]{32}(?:-\d)?\b"), MARK),  # Databricks
    (re.compile(r"\bdo[opr]_v1_[a-f0-9]{64}\b"), MARK),  # DigitalOcean
    (re.compile(r"\bhv[sb]\.[A-Za-z0-9_-]{24,}"), MARK),  # HashiCorp Vault
    (re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), MARK),  # SendGrid
    (re.compile(r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b"), MARK),
    # an Azure AD client secret
    (re.compile(r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])"), MARK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MARK),
    # an Azure shared access signature: ...?sv=2022-11-02&...&sig=<base64, URL-encoded>
    (re.compile(r"(?i)((?:^|(?<=[?&;\s\"'])|\b)sig=)[A-Za-z0-9%+/=_-]{8,}"), r"\1" + MARK),
    # a presigned URL's query: AWS Signature V4 (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token,
    # https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html), Google Cloud Storage V4
    # (X-Goog-Signature, X-Goog-Credential, https://cloud.google.com/storage/docs/authentication/signatures)
    (re.compile(r"(?i)((?:^|(?<=[?&;\s\"'])|\b)X-(?:Amz|Goog)-(?:Signature|Credential|Security-Token)=)"
                r"(?!\*\*\*)[^&\s\"'<>#]+"), r"\1" + MARK),
    # ... and the older form: Signature= in a query that also has Expires= with AWSAccessKeyId= (S3 query
    # string authentication, https://docs.aws.amazon.com/AmazonS3/latest/userguide/RESTAuthentication.html)
    # or GoogleAccessId= (GCS V2); a bare "Signature=" elsewhere is left alone
    (re.compile(r"\?[^\s\"'<>#]*\b(?:AWSAccessKeyId|GoogleAccessId|Expires)=[^\s\"'<>#]*"), _presigned_v2),
    # a .netrc entry: machine HOST login USER password SECRET (also one token a line); a login is needed,
    # as in Kingfisher's netrc.yml, so that prose ("machine learning password reset") is left alone
    (re.compile(r"(?i)(\b(?:machine\s+\S+|default)\s+login\s+\S+\s+(?:account\s+\S+\s+)?password\s+)(?!\*\*\*)\S+"),
     r"\1" + MARK),
    # Authorization headers and bearer tokens
    (re.compile(r"(?i)\b(authorization[\"']?\s*[:=]\s*[\"']?)(?:(basic|bearer|token|digest)\s+)?[^\s,;'\"]+"),
     lambda m: m.group(1) + (m.group(2) + " " if m.group(2) else "") + MARK),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + MARK),
    # the value after an option or a variable that names a secret: --password ..., token=...,
    # "api_key": "...", password: ..., DB_PASS=..., AccountKey=...
    (re.compile(r"(?i)(?<![\w.-])(--[\w-]*" + _KEYWORDS + r"[\w-]*)(\s+|=)(?!-)([^\s\"'&,;]+)"), r"\1\2" + MARK),
)
_SECRET_KEY = re.compile(r"(?i)" + _KEYWORDS)
KEY_MARK = f"[private key {MARK}]"
#: A private key block of any kind: PEM/PKCS#1/PKCS#8 (RSA, EC, DSA, ENCRYPTED, OPENSSH), the ssh.com
#: format (``---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----``) and OpenPGP (``-----BEGIN PGP PRIVATE KEY
#: BLOCK-----``), after gitleaks' private-key rule; one whose end (or start) a stderr tail cut off
#: is removed to the end (from the start) of the text.
_KEY_BEGIN = r"-{4,5} ?BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)? ?-{4,5}"
_KEY_FINISH = r"-{4,5} ?END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)? ?-{4,5}"
_KEY_BLOCK = re.compile(_KEY_BEGIN + r".*?(?:" + _KEY_FINISH + r"|\Z)", re.S)
_KEY_END = re.compile(r"\A.*?" + _KEY_FINISH, re.S)  # a block whose start was cut off
#: A PuTTY key file (``PuTTY-User-Key-File-3: ssh-ed25519`` ... ``Private-Lines: N`` + N lines ...
#: ``Private-MAC: <hex>``); the private part alone when the header was cut off.
_PUTTY_START = re.compile(r"PuTTY-User-Key-File-\d+:|Private-Lines:")
_PUTTY_LINES = re.compile(r"Private-Lines:[ \t]*(\d+)[^\n]*")
_PUTTY_MAC = re.compile(r"Private-MAC:[ \t]*[0-9A-Fa-f]*")


def _scrub_putty(text: str) -> str:
    out, pos = [], 0
    while (start := _PUTTY_START.search(text, pos)) is not None:
        mac = _PUTTY_MAC.search(text, start.start())
        lines = _PUTTY_LINES.search(text, start.start())
        if mac is not None:
            end = mac.end()
        elif lines is not None:  # no MAC line (cut off): the private lines the header announces
            end = lines.end()
            for _ in range(int(lines.group(1))):
                newline = text.find("\n", end + 1)
                end = len(text) if newline < 0 else newline
        else:
            end = len(text)
        out += [text[pos:start.start()], KEY_MARK]
        pos = max(end, start.end())
    return "".join(out) + text[pos:]


def scrub_secrets(text: str) -> str:
    """``text`` with every credential, token and key replaced by ``***``.

    A pure function of the text, remembered for short strings: a fleet's reports repeat the same paths,
    versions and names thousands of times, and some forty patterns per string were most of ``merge``'s time."""
    if len(text) <= _MEMO_MAX_CHARS:
        return _scrub_memo(text)
    return _scrub_secrets(text)


_MEMO_MAX_CHARS = 512


@functools.lru_cache(maxsize=65536)
def _scrub_memo(text: str) -> str:
    return _scrub_secrets(text)


def _scrub_secrets(text: str) -> str:
    if "PRIVATE KEY" in text:
        text = _KEY_END.sub(KEY_MARK, _KEY_BLOCK.sub(KEY_MARK, text))
    if "PuTTY-User-Key-File-" in text or "Private-Lines:" in text:
        text = _scrub_putty(text)
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return _scrub_assignments(text)


# --- identities: replaced unless --no-redact -----------------------------------------------------

_HOME_DIRS = re.compile(r"(?<![\w.~-])(?:(?<=//)|(?<!/))/(?:home|Users)/[^/\s:;,'\"`<>|\\)\]]+")
_WINDOWS_HOME = re.compile(r"(?i)\b[a-z]:[\\/]+Users[\\/]+[^\\/\s:;,'\"`<>|)\]]+")
_ID_TOKEN = re.compile(r"(?i)(?<![\w-])((?:MIG-GPU-|MIG-|GPU-)[0-9a-fA-F][0-9a-fA-F-]*(?:/\d+/\d+)?)(?!\w)")
_BARE_UUID = re.compile(r"(?<![\w-])([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?![\w-])")
_PATH_END = r"(?=$|[/\s:;,'\"`<>|)\]])"


def _home_pattern(home: Optional[str]) -> Optional[re.Pattern[str]]:
    """``$HOME`` and the directory it really is: with HOME=/home/alice a symlink to /data/users/alice, the
    interpreter, the venv and every path a probe resolved with os.path.realpath (libraries' and
    packages' ``real_path``, ``location``) name /data/users/alice, which no /home rule would catch."""
    if not home:
        return None
    homes = {os.path.normpath(home), os.path.realpath(home)}
    homes = {h for h in homes if h.startswith("/") and h not in _SYSTEM_HOMES and not h.startswith(_SYSTEM_TREES)}
    if not homes:
        return None
    spelled = "|".join(re.escape(h) for h in sorted(homes, key=lambda h: -len(h)))
    return re.compile(r"(?<![\w.~-])(?:(?<=//)|(?<!/))(?:" + spelled + ")" + _PATH_END)


#: Host names that are also ordinary words of a report (``Debian GNU/Linux 12``, ``NVIDIA GPU``,
#: ``gpu_burn``, ``node_rank``, ``/usr/local/cuda``): such a name is replaced only where the text uses it
#: as a host name (see _host_pattern). The report's own words are added to these: its keys, and the
#: values that describe software and hardware, never the machine's identity (_REFERENCE_KEYS).
_GENERIC_HOST_WORDS = frozenset({
    "localhost", "gpu", "gpus", "node", "nodes", "host", "server", "worker", "master", "head", "login", "compute",
    "debian", "ubuntu", "fedora", "centos", "rocky", "almalinux", "rhel", "redhat", "suse", "opensuse", "arch",
    "archlinux", "alpine", "linux", "manjaro", "mint", "kali", "raspberrypi", "nvidia", "cuda", "docker",
    "container", "sandbox", "machine", "desktop", "laptop", "workstation", "instance", "runner", "jupyter",
    "notebook", "colab", "kaggle", "default", "none", "unknown", "test", "dev", "main", "primary", "cluster",
    "dgx", "hpc", "pod", "box", "vm", "wsl",
})
_REFERENCE_KEYS = frozenset({"os", "distro", "kernel", "machine", "name", "architecture", "brand", "family",
                             "implementation", "flavour", "product_name", "driver_version", "version"})
_WORDS = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_TOKENS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _host_pattern(host: str, common: bool) -> re.Pattern[str]:
    """Where ``host`` is replaced in text. A distinctive name (``node-17.cluster.local``, ``alice-ws``)
    everywhere it stands as a whole token: in paths, URLs, log lines; a name of letters only (``hopper``)
    not as a path component, so that /opt/hopper/lib stays. A common word (``gpu``, ``debian``) only where
    the text names a host: ``user@gpu``, ``ssh://gpu``, ``host gpu``, ``hostname=gpu``, ``gpu:29500``;
    ``NVIDIA GPU``, ``gpu_burn`` and ``Debian GNU/Linux`` keep their words."""
    name = re.escape(host)
    if common:
        return re.compile(r"(?i)(?:(?P<pre>@|://|\b(?:host|node)(?:_?name)?(?:\s*[=:]\s*|\s+)[\"'\[]?)" + name
                          + r"(?![\w-])|(?<![\w./-])" + name + r"(?=:\d{4,5}(?!\d)))")
    path = "/" if host.isalpha() else ""
    return re.compile(r"(?i)(?P<pre>)(?<![A-Za-z0-9_" + ("." + path if path else "") + r"-])" + name
                      + r"(?![A-Za-z0-9_" + path + r"-])")


def _may_name_id(text: str) -> bool:
    """Whether _ID_TOKEN can match ``text``: it needs GPU- or MIG-, in any case (any non-ASCII text is tried,
    as case-insensitive matching there is not what lower() gives). Remembered: a fleet's reports repeat
    the same keys and values thousands of times."""
    known = _ID_HINTS.get(text)
    if known is None:
        lower = text.lower()
        known = not text.isascii() or "gpu-" in lower or "mig-" in lower
        if len(_ID_HINTS) < _ID_HINTS_MAX:
            _ID_HINTS[text] = known
    return known


_ID_HINTS: dict[str, bool] = {}
_ID_HINTS_MAX = 1 << 16


def _may_name_endpoint(text: str) -> bool:
    """Whether _ENDPOINT can match ``text``: four dotted numbers, then a port, a list or a bracket."""
    return text.count(".") >= 3 and (":" in text or "<" in text or ", " in text)


def _hex_digits(token: str) -> int:
    return sum(1 for ch in token.split("-", 1)[1] if ch in "0123456789abcdefABCDEF")


class _Identities:
    """Every host name, GPU/MIG UUID and serial in one report, and the pseudonym each one gets."""

    def __init__(self, report: Any, home: Optional[str]) -> None:
        self.home = _home_pattern(home)
        self.hosts: dict[str, None] = {}
        self.word_texts: list[str] = []  # the report's own words are in these (is_word)
        self._applied: dict[str, str] = {}
        self.uuids: dict[str, tuple[str, int]] = {}  # lower-cased token -> (kind, number)
        self.serials: dict[str, int] = {}
        self.prefixes: dict[str, tuple[str, list[int]]] = {}  # a mask entry -> (kind, numbers it matches)
        self._collect(report)
        self.mapping = self._finish()

    # pass 1: what there is to replace, numbered in a fixed order
    def _collect(self, report: Any) -> None:
        facts = report.get("facts") if isinstance(report, dict) else None
        taken: set[tuple[str, int]] = set()
        for gpu in sorted(self._gpus(facts), key=lambda g: g["index"]):
            uuid = gpu.get("uuid")
            if isinstance(uuid, str) and uuid.lower() not in self.uuids and ("gpu", gpu["index"]) not in taken:
                self.uuids[uuid.lower()] = ("gpu", gpu["index"])
                taken.add(("gpu", gpu["index"]))
        ids: list[str] = []  # the texts that may name a GPU or MIG UUID, in document order
        self._walk(report, None, ids)  # one pass: a report has thousands of nodes
        self._masks(facts)
        # the other nodes of a torchrun job: their GPUs, then the masks that name them by UUID prefix
        inner = [n["report"]["facts"] for n in job_nodes(facts)]
        for node_facts in inner:
            for gpu in sorted(self._gpus(node_facts), key=lambda g: g["index"]):
                if isinstance(gpu.get("uuid"), str):
                    self._number(gpu["uuid"], "gpu")
        for node_facts in inner:
            self._masks(node_facts)
        for text in ids:
            for token in _ID_TOKEN.findall(text):
                if token.lower() not in self.uuids and token.lower() not in self.prefixes and _hex_digits(token) >= 8:
                    self._number(token, "mig" if token.upper().startswith("MIG-") else "gpu")

    def _walk(self, node: Any, parent: Any, ids: list[str]) -> None:
        """Every (key, value) under ``node`` in document order (list items have key None, and the dict that
        holds the list as parent): the words, the texts that may name an identity, MIG UUIDs, serials and
        host names. One recursive loop with the common tests inline: it visits every node of every report."""
        if isinstance(node, dict):
            pairs: Iterable[tuple[Any, Any]] = node.items()
            parent = node
        elif isinstance(node, list):
            pairs = ((None, item) for item in node)
        else:
            return
        words, hints = self.word_texts, _ID_HINTS
        for key, value in pairs:
            named = isinstance(key, str)
            if named:
                words.append(key)
            if not isinstance(value, str):
                if named and (hints[key] if key in hints else _may_name_id(key)):
                    ids.append(key)
                if isinstance(value, (dict, list)):
                    self._walk(value, parent, ids)
                continue
            if key in _REFERENCE_KEYS:
                words.append(value)
            if hints[value] if value in hints else _may_name_id(value):
                ids.append(value)
            if named and (hints[key] if key in hints else _may_name_id(key)):
                ids.append(key)
            if key == "uuid" and value.upper().startswith("MIG-"):  # MIG devices and serials in order of appearance
                self._number(value, "mig")
            elif key == "serial" and value.strip() and value not in self.serials:
                owner = self.uuids.get(str(parent.get("uuid", "")).lower())
                number = owner[1] if owner and owner[0] == "gpu" and owner[1] not in self.serials.values() else None
                self.serials[value] = number if number is not None else self._next(self.serials.values())
            elif key == "hostname" and value.strip():
                self.hosts.setdefault(value, None)

    def _masks(self, facts: Any) -> None:
        host = facts.get("host") if isinstance(facts, dict) else None
        env = host.get("env") if isinstance(host, dict) else None
        for var in _MASK_VARS:
            value = env.get(var) if isinstance(env, dict) else None
            for entry in (value.split(",") if isinstance(value, str) else []):
                self._prefix(entry.strip())

    @staticmethod
    def _gpus(facts: Any) -> Iterable[dict[str, Any]]:
        for gpu in (facts.get("gpus") if isinstance(facts, dict) else None) or []:
            if isinstance(gpu, dict) and isinstance(gpu.get("index"), int) and not isinstance(gpu.get("index"), bool):
                yield gpu

    @staticmethod
    def _next(used: Iterable[int]) -> int:
        used = set(used)
        return max(used) + 1 if used else 0

    def _number(self, token: str, kind: str) -> None:
        if token.lower() not in self.uuids:
            self.uuids[token.lower()] = (kind, self._next(n for k, n in self.uuids.values() if k == kind))

    def _prefix(self, entry: str) -> None:
        lowered = entry.lower()
        kind = "gpu" if lowered.startswith("gpu-") else "mig" if lowered.startswith("mig-") else None
        if kind is None or lowered in self.uuids or not _ID_TOKEN.fullmatch(entry):
            return
        hits = sorted({n for uuid, (k, n) in self.uuids.items() if k == kind and uuid.startswith(lowered)})
        if hits:
            self.prefixes[lowered] = (kind, hits)
        else:
            self._number(entry, kind)

    # pass 2: the pseudonyms, once the widest number is known
    def _finish(self) -> dict[str, str]:
        widths = {kind: len(str(max([n for k, n in self.uuids.values() if k == kind] or [0]))) for kind in ("gpu", "mig")}

        def name(kind: str, number: int) -> str:
            return f"{kind.upper()}-redacted-{number:0{widths[kind]}d}"

        mapping = {token: name(kind, n) for token, (kind, n) in self.uuids.items()}
        for token, (kind, n) in list(self.uuids.items()):
            if kind == "gpu" and token.startswith("gpu-") and _BARE_UUID.fullmatch(token[4:]):
                mapping.setdefault(token[4:], mapping[token])
        for entry, (kind, hits) in self.prefixes.items():
            names = [name(kind, n) for n in hits]
            mapping[entry] = names[0] if len(names) == 1 else os.path.commonprefix(names)
        serial_width = len(str(max(self.serials.values() or [0])))
        self.serial_names = {s: f"serial-redacted-{n:0{serial_width}d}" for s, n in self.serials.items()}
        hosts = list(self.hosts)
        self.host_names = {h: HOST_PSEUDONYM if len(hosts) == 1 else f"{HOST_PSEUDONYM}-{i + 1}" for i, h in enumerate(hosts)}
        # the short name of an FQDN too; longest first so gpu1.example.com goes before gpu1
        spelled = dict(self.host_names)
        for host, pseudonym in self.host_names.items():
            spelled.setdefault(host.split(".")[0], pseudonym)
        self.host_text = [(_host_pattern(h, self.is_word(h.lower())), h, p)
                          for h, p in sorted(spelled.items(), key=lambda hp: -len(hp[0]))
                          if len(h) >= 3 and h.lower() not in ("localhost", "localhost.localdomain") and p != h]
        self.serial_text = [(re.compile(r"(?<![\w-])" + re.escape(s) + r"(?![\w-])"), s, p)
                            for s, p in sorted(self.serial_names.items(), key=lambda sp: -len(sp[0])) if len(s) >= 6]
        return mapping

    def is_word(self, name: str) -> bool:
        """Whether ``name`` (lower case) is a generic host word or one of the report's own words: its keys'
        and reference values' words and tokens. Only the texts that hold it are split into words: a host
        name occurs in few of a report's thousands of strings."""
        if name in _GENERIC_HOST_WORDS:
            return True
        for text in self.word_texts:
            if name in text.lower() and (name in (w.lower() for w in _WORDS.findall(text)) or
                                         name in (w.lower().strip("._-") for w in _TOKENS.findall(text))):
                return True
        return False

    def apply(self, text: str, key: Any = None) -> str:
        if key == "hostname" and text in self.host_names:
            return self.host_names[text]
        if key == "serial" and text in self.serial_names:
            return self.serial_names[text]
        done = self._applied.get(text)
        if done is None:
            done = self._applied[text] = self._replace(text)
        return done

    def _replace(self, text: str) -> str:
        """Every identity in ``text`` replaced. A report has thousands of strings and few identities: each
        pattern runs only on a text that holds the literal it needs (in ASCII text, where lower() and
        the patterns' case-insensitive matching agree; any other text meets every pattern)."""
        plain = text.isascii()
        lower = text.lower() if plain else ""
        if "/" in text:
            if self.home is not None:
                text = self.home.sub("~", text)
            if "/home/" in text or "/Users/" in text:
                text = _HOME_DIRS.sub("~", text)
        if not plain or ":" in text and "users" in lower:
            text = _WINDOWS_HOME.sub("~", text)
        if _may_name_endpoint(text):
            text = _ENDPOINT.sub(IP_PSEUDONYM, text)
        if _may_name_id(text):
            text = _ID_TOKEN.sub(lambda m: self.mapping.get(m.group(1).lower(), m.group(1)), text)
        if self.mapping and len(text) >= 36 and "-" in text:
            text = _BARE_UUID.sub(lambda m: self.mapping.get(m.group(1).lower(), m.group(1)), text)
        for pattern, host, pseudonym in self.host_text:
            if plain and host.isascii() and host.lower() not in text.lower():
                continue
            if text.lower() == host.lower() and host.isalpha():
                continue  # a plain word standing alone is a fact's value (an architecture), not the host name
            text = pattern.sub(lambda m: (m.group("pre") or "") + pseudonym, text)
        for pattern, serial, pseudonym in self.serial_text:
            if serial in text:  # case-sensitive: the literal is the test
                text = pattern.sub(pseudonym, text)
        return text


#: Lists that are one environment variable split at ":", so a URL in it is cut into pieces: they are
#: scrubbed joined again (probes/libraries.py splits LD_LIBRARY_PATH this way).
_SPLIT_VARIABLES = ("ld_library_path",)


def _scrub(node: Any, key: Any = None) -> Any:
    kind = type(node)
    if kind is str:
        # a value filed under a key that names a secret ({"api_key": "..."}) is one, whatever it looks like
        return MARK if node and _names_a_secret(key) else scrub_secrets(node)
    if kind is dict:
        return {(scrub_secrets(k) if type(k) is str else k): _scrub(v, k) for k, v in node.items()}
    if kind is list:
        if key in _SPLIT_VARIABLES and all(isinstance(p, str) for p in node):
            joined = ":".join(node)
            scrubbed = scrub_secrets(joined)
            if scrubbed != joined:
                return [p for p in scrubbed.split(":") if p]
        return [_scrub(item, key) for item in node]
    if isinstance(node, str):  # a str subclass (not from JSON, but from a caller's own dict)
        return MARK if node and _names_a_secret(key) else scrub_secrets(str(node))
    if isinstance(node, dict):
        return _scrub(dict(node), key)
    if isinstance(node, list):
        return _scrub(list(node), key)
    return node


@functools.lru_cache(maxsize=8192)
def _names_a_secret(key: Any) -> bool:
    return isinstance(key, str) and bool(_SECRET_KEY.search(key))


def _map(node: Any, fn: Callable[[str, Any], str], key: Any = None) -> Any:
    kind = type(node)  # the exact types JSON gives first: isinstance costs more, over thousands of nodes
    if kind is str:
        return fn(node, key)
    if kind is dict:
        return {(fn(k, None) if type(k) is str else k): _map(v, fn, k) for k, v in node.items()}
    if kind is list:
        return [_map(item, fn, key) for item in node]
    if kind in (int, float, bool) or node is None:
        return node
    if isinstance(node, dict):
        return {(fn(k, None) if isinstance(k, str) else k): _map(v, fn, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_map(item, fn, key) for item in node]
    if isinstance(node, str):
        return fn(node, key)
    return node


_SHORT_WORD = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")


def _allowed_env(report: dict[str, Any]) -> dict[str, Any]:
    """Only the variables gpudoctor reads, whatever a (hand-edited or older) report holds; also in the
    other nodes' reports that a torchrun job's report carries (``facts.cluster.nodes[*].report``)."""
    facts: Any = report.get("facts")
    cluster = facts.get("cluster") if isinstance(facts, dict) else None
    if isinstance(cluster, dict) and isinstance(cluster.get("nodes"), list):
        nodes = [{**n, "report": _allowed_env(n["report"])} if isinstance(n, dict) and isinstance(n.get("report"), dict)
                 else n for n in cluster["nodes"]]
        report = {**report, "facts": {**facts, "cluster": {**cluster, "nodes": nodes}}}
    host = (report.get("facts") or {}).get("host") if isinstance(report.get("facts"), dict) else None
    if not isinstance(host, dict):
        return report
    host = dict(host)
    if isinstance(host.get("env"), dict):
        host["env"] = {k: v for k, v in host["env"].items() if k in ENV_NAMES}
    if isinstance(host.get("framework_env"), dict):
        host["framework_env"] = {k: v for k, v in host["framework_env"].items() if k in FRAMEWORK_ENV_NAMES}
    container = host.get("container")
    if isinstance(container, dict) and isinstance(container.get("markers"), list):
        container = dict(container)
        container["markers"] = [m if not (isinstance(m, str) and m.startswith("container=")) or _SHORT_WORD.match(m[10:])
                                else f"container={MARK}" for m in container["markers"]]
        host["container"] = container
    return {**report, "facts": {**report["facts"], "host": host}}


def redact_home(report: dict[str, Any], home: Optional[str] = None) -> dict[str, Any]:
    """``report`` with only this machine's ``$HOME`` shown as ``~`` (secrets are not touched here): what a
    node of a torchrun job does to its report before sending it to rank 0, whose redaction knows its own
    ``$HOME`` only. A home under /home or /Users is found anywhere; /scratch/alice is found only here."""
    pattern = _home_pattern(os.environ.get("HOME") if home is None else home)
    return report if pattern is None else _map(report, lambda text, key: pattern.sub("~", text))


def redact_report(report: dict[str, Any], identities: bool = True, home: Optional[str] = None) -> dict[str, Any]:
    """A redacted copy of ``report`` (see the module's docstring). ``identities=False`` is ``--no-redact``:
    host names, UUIDs, serials and home directories are kept; secrets never are. ``home`` defaults
    to ``$HOME``."""
    out = _allowed_env(report)
    out = _scrub(out)
    if identities:
        ids = _Identities(out, os.environ.get("HOME") if home is None else home)
        out = _map(out, ids.apply)
    out = dict(out)
    out.pop("redacted", None)
    out["redacted"] = bool(identities or report.get("redacted") is True)
    return out


def part_redactor(whole: dict[str, Any], identities: bool = True,
                  home: Optional[str] = None) -> Callable[..., Any]:
    """A function that redacts a part of the report ``whole`` (a subtree, a title written from its facts) as
    ``redact_report(whole)`` redacts it: the same secrets removed and the same pseudonyms, numbered over the
    whole report. ``merge`` shows a few dozen strings of each node's report: walking all of it for each one
    once (to find its identities) costs a fraction of rewriting it all. The identities are gathered from
    the report before its secrets are removed; every string the function returns has them removed."""
    ids = _Identities(_allowed_env(whole), os.environ.get("HOME") if home is None else home) if identities else None

    def redact(part: Any, key: Any = None) -> Any:
        scrubbed = _scrub(part, key)
        return _map(scrubbed, ids.apply, key) if ids is not None else scrubbed

    return redact
