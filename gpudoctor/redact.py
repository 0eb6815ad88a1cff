"""Redaction: what a report may carry off the machine, applied after judging and before rendering.

``redact_report(report)`` returns a copy of a report (a pure function: the input is not changed,
nothing is queried; only ``$HOME`` is read when no ``home`` is given) in which:

Always, whatever the command line says (also with ``--no-redact``):

- ``facts.host.env`` (and that of every node's report inside a torchrun job's report) keeps only the
  variables gpudoctor reads (``probes.system.ENV_NAMES``), and ``facts.host.framework_env`` those of
  ``probes.system.FRAMEWORK_ENV_NAMES``; any other name is dropped, and the ``container=<value>``
  marker keeps its value only when it is one short word.
- secrets are replaced by ``***`` in every string (and every key) of the report: passwords in
  URLs (``https://user:pass@host`` -> ``https://***@host``), AWS access keys, GitHub, GitLab,
  Hugging Face, Slack, OpenAI, Stripe, Google, npm and PyPI tokens, JSON web tokens, bearer and
  ``Authorization`` values, the value after a keyword such as ``token=``, ``api_key=``,
  ``password:``, ``secret=`` or ``--password``, any string value filed under a key that names a
  secret (``{"api_key": ...}``), and private key blocks.

Unless ``identities=False`` (``--no-redact``):

- home directories become ``~``: ``$HOME`` (unless it is ``/``, ``/root`` or a system directory)
  and any ``/home/<name>``, ``/Users/<name>`` or ``C:\\Users\\<name>``. ``/root`` stays: it names
  no person, and whether gpudoctor ran as root matters when device nodes are not accessible.
- host names (every ``hostname`` value) become ``host-redacted`` (``host-redacted-N`` when a
  document holds several), also where they appear in other text; a name of fewer than 3 letters
  (``vm``) is replaced only in its own field, and a name that is a plain word (``hopper``, ``cuda``)
  is not replaced in a value that is exactly that word nor as a path component, so that facts such
  as ``architecture`` and paths such as ``/usr/local/cuda`` survive.
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

_KEYWORDS = (r"(?:token|secret|passw(?:or)?d|pwd|api[_.-]?key|apikey|access[_.-]?key|private[_.-]?key|credentials?|"
             r"auth[_.-]?key|session[_.-]?(?:id|key))")
_SECRETS: tuple[tuple[re.Pattern[str], Any], ...] = (
    # credentials in a URL: scheme://user:password@host, scheme://token@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@:'\"]*(?::[^\s/@'\"]*)?@"), r"\1" + MARK + "@"),
    # well-known token formats
    (re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{16}\b"), MARK),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"), MARK),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"), MARK),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b"), MARK),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), MARK),
    (re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{8,}"), MARK),
    (re.compile(r"(hooks\.slack\.com/services/)[A-Za-z0-9/_-]+"), r"\1" + MARK),
    (re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"), MARK),
    (re.compile(r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}\b"), MARK),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), MARK),
    (re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), MARK),
    (re.compile(r"\bpypi-[A-Za-z0-9_-]{40,}"), MARK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MARK),
    # Authorization headers and bearer tokens
    (re.compile(r"(?i)\b(authorization[\"']?\s*[:=]\s*[\"']?)(?:(basic|bearer|token|digest)\s+)?[^\s,;'\"]+"),
     lambda m: m.group(1) + (m.group(2) + " " if m.group(2) else "") + MARK),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + MARK),
    # the value after a keyword: token=..., "api_key": "...", password: ..., --password ...
    (re.compile(r"(?i)(?<![\w.-])(--[\w-]*" + _KEYWORDS + r"[\w-]*)(\s+|=)(?!-)([^\s\"'&,;]+)"), r"\1\2" + MARK),
    (re.compile(r"(?i)(?<![\w.-])([\w.-]*" + _KEYWORDS + r"[\w.-]*)([\"']?\s*(?:=|:(?=[\s\"']))\s*[\"']?)([^\s\"'&,;]+)"),
     r"\1\2" + MARK),
)
_SECRET_KEY = re.compile(r"(?i)" + _KEYWORDS)
_KEY_BLOCK = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S)
_KEY_END = re.compile(r"\A.*?-----END[A-Z0-9 ]*PRIVATE KEY-----", re.S)  # a block whose start was cut off
KEY_MARK = f"[private key {MARK}]"


def scrub_secrets(text: str) -> str:
    """``text`` with every credential, token and key replaced by ``***``."""
    if "PRIVATE KEY-----" in text:
        text = _KEY_END.sub(KEY_MARK, _KEY_BLOCK.sub(KEY_MARK, text))
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


# --- identities: replaced unless --no-redact -----------------------------------------------------

_HOME_DIRS = re.compile(r"(?<![\w.~-])(?:(?<=//)|(?<!/))/(?:home|Users)/[^/\s:;,'\"`<>|\\)\]]+")
_WINDOWS_HOME = re.compile(r"(?i)\b[a-z]:[\\/]+Users[\\/]+[^\\/\s:;,'\"`<>|)\]]+")
_ID_TOKEN = re.compile(r"(?i)(?<![\w-])((?:MIG-GPU-|MIG-|GPU-)[0-9a-fA-F][0-9a-fA-F-]*(?:/\d+/\d+)?)(?!\w)")
_BARE_UUID = re.compile(r"(?<![\w-])([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?![\w-])")
_PATH_END = r"(?=$|[/\s:;,'\"`<>|)\]])"


def _home_pattern(home: Optional[str]) -> Optional[re.Pattern[str]]:
    if not home:
        return None
    home = os.path.normpath(home)
    if not home.startswith("/") or home in _SYSTEM_HOMES or home.startswith(_SYSTEM_TREES):
        return None
    return re.compile(r"(?<![\w.~-])(?:(?<=//)|(?<!/))" + re.escape(home) + _PATH_END)


def _hex_digits(token: str) -> int:
    return sum(1 for ch in token.split("-", 1)[1] if ch in "0123456789abcdefABCDEF")


class _Identities:
    """Every host name, GPU/MIG UUID and serial in one report, and the pseudonym each one gets."""

    def __init__(self, report: Any, home: Optional[str]) -> None:
        self.home = _home_pattern(home)
        self.hosts: dict[str, None] = {}
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
        nodes = list(_walk_nodes(report))
        for key, value, parent in nodes:  # MIG devices, then serials, in order of appearance
            if key == "uuid" and isinstance(value, str) and value.upper().startswith("MIG-"):
                self._number(value, "mig")
        for key, value, parent in nodes:
            if key == "serial" and isinstance(value, str) and value.strip() and value not in self.serials:
                owner = self.uuids.get(str(parent.get("uuid", "")).lower())
                number = owner[1] if owner and owner[0] == "gpu" and owner[1] not in self.serials.values() else None
                self.serials[value] = number if number is not None else self._next(self.serials.values())
            elif key == "hostname" and isinstance(value, str) and value.strip():
                self.hosts.setdefault(value, None)
        self._masks(facts)
        # the other nodes of a torchrun job: their GPUs, then the masks that name them by UUID prefix
        inner = [n["report"]["facts"] for n in job_nodes(facts)]
        for node_facts in inner:
            for gpu in sorted(self._gpus(node_facts), key=lambda g: g["index"]):
                if isinstance(gpu.get("uuid"), str):
                    self._number(gpu["uuid"], "gpu")
        for node_facts in inner:
            self._masks(node_facts)
        for key, value, _parent in nodes:
            for text in (value, key):
                for token in _ID_TOKEN.findall(text) if isinstance(text, str) else ():
                    if token.lower() not in self.uuids and token.lower() not in self.prefixes and _hex_digits(token) >= 8:
                        self._number(token, "mig" if token.upper().startswith("MIG-") else "gpu")

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
        # a plain word (hopper, cuda) is left alone as a path component: /usr/local/cuda is not the host
        self.host_text = [(re.compile(r"(?i)(?<![A-Za-z0-9_" + ("./" if h.isalpha() else "") + r"-])" + re.escape(h)
                                      + r"(?![A-Za-z0-9_" + ("/" if h.isalpha() else "") + r"-])"), h, p)
                          for h, p in sorted(spelled.items(), key=lambda hp: -len(hp[0]))
                          if len(h) >= 3 and h.lower() not in ("localhost", "localhost.localdomain") and p != h]
        self.serial_text = [(re.compile(r"(?<![\w-])" + re.escape(s) + r"(?![\w-])"), p)
                            for s, p in sorted(self.serial_names.items(), key=lambda sp: -len(sp[0])) if len(s) >= 6]
        return mapping

    def apply(self, text: str, key: Any = None) -> str:
        if key == "hostname" and text in self.host_names:
            return self.host_names[text]
        if key == "serial" and text in self.serial_names:
            return self.serial_names[text]
        if self.home is not None:
            text = self.home.sub("~", text)
        text = _HOME_DIRS.sub("~", text)
        text = _WINDOWS_HOME.sub("~", text)
        text = _ENDPOINT.sub(IP_PSEUDONYM, text)
        text = _ID_TOKEN.sub(lambda m: self.mapping.get(m.group(1).lower(), m.group(1)), text)
        if self.mapping:
            text = _BARE_UUID.sub(lambda m: self.mapping.get(m.group(1).lower(), m.group(1)), text)
        for pattern, host, pseudonym in self.host_text:
            if text.lower() == host.lower() and host.isalpha():
                continue  # a plain word standing alone is a fact's value (an architecture), not the host name
            text = pattern.sub(pseudonym, text)
        for pattern, pseudonym in self.serial_text:
            text = pattern.sub(pseudonym, text)
        return text


def _walk_nodes(node: Any, key: Any = None, parent: Any = None) -> Iterable[tuple[Any, Any, Any]]:
    """Every (key, value, containing dict) in document order; list items have key None."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield k, v, node
            yield from _walk_nodes(v, k, node)
    elif isinstance(node, list):
        for item in node:
            yield None, item, parent
            yield from _walk_nodes(item, None, parent)


#: Lists that are one environment variable split at ":", so a URL in it is cut into pieces: they are
#: scrubbed joined again (probes/libraries.py splits LD_LIBRARY_PATH this way).
_SPLIT_VARIABLES = ("ld_library_path",)


def _scrub(node: Any, key: Any = None) -> Any:
    if key in _SPLIT_VARIABLES and isinstance(node, list) and all(isinstance(p, str) for p in node):
        joined = ":".join(node)
        scrubbed = scrub_secrets(joined)
        if scrubbed != joined:
            return [p for p in scrubbed.split(":") if p]
    if isinstance(node, dict):
        return {(scrub_secrets(k) if isinstance(k, str) else k): _scrub(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_scrub(item, key) for item in node]
    if isinstance(node, str):
        # a value filed under a key that names a secret ({"api_key": "..."}) is one, whatever it looks like
        return MARK if node and isinstance(key, str) and _SECRET_KEY.search(key) else scrub_secrets(node)
    return node


def _map(node: Any, fn: Callable[[str, Any], str], key: Any = None) -> Any:
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
    facts = report.get("facts")
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
