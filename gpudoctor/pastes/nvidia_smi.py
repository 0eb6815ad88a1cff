"""`nvidia-smi` output in its three pasted forms: the default table, ``nvidia-smi -q`` text and
``nvidia-smi -q -x`` XML, read into plain values; and the one-line failures nvidia-smi prints instead.

The table truncates long GPU names ("NVIDIA A100-SXM...") and its layout changed with driver 535
(wider columns) and 580; so GPU rows are matched by their shape (index, name, persistence or
driver model, bus id), not by column positions. "CUDA Version" there is the newest CUDA the
driver supports, not an installed toolkit.

The XML is parsed with the standard library's parser only after refusing any document type with an
internal subset and any ENTITY declaration (the billion-laughs expansion): real nvidia-smi output
carries only an external ``<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_vNN.dtd">``, which is
dropped unread.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Optional

MIB = 1024**2

#: What nvidia-smi prints when NVML cannot start, and the NVML reason each means (driver checks, DRV00x).
FAILURES = (
    ("nvidia-smi has failed because it couldn't communicate with the nvidia driver", "driver_not_loaded"),
    ("failed to initialize nvml: driver/library version mismatch", "driver_library_mismatch"),
    ("nvidia-smi couldn't find libnvidia-ml.so", "library_not_found"),
    ("failed to initialize nvml: insufficient permissions", "no_permission"),
    ("failed to initialize nvml: unknown error", "unknown"),
    ("no devices were found", "no_devices"),
    # NVML started but could not open one GPU: it has usually fallen off the bus (Xid 79) or hung
    ("unable to determine the device handle for gpu", "unknown"),
    ("unable to detect the device handle for gpu", "unknown"),
)
# driver 610 renamed the header's fields "KMD Version" and "CUDA UMD Version" (docs.nvidia.com/deploy/nvidia-smi)
_HEADER = re.compile(r"NVIDIA-SMI\s+([\d.]+)\s+(?:Driver|KMD) Version:\s*([\d.]+)(?:\s+CUDA (?:UMD )?Version:\s*([\d.]+|N/A))?", re.I)
_ROW = re.compile(r"^\|\s*(\d+)\s+(.+?)\s+(On|Off|WDDM|TCC|MCDM)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")
_ASCII_NUMBER = re.compile(r"[0-9]{1,9}")
_MEMORY = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_Q_KEY = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*?)\s*$")
_PROMPT = re.compile(r"^.*?[$#]\s*nvidia-smi\s*")  # a shell prompt and the command before its output
_Q_GPU = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")


def failure(text: str) -> Optional[tuple[str, str]]:
    """(NVML reason, the line nvidia-smi printed) when the paste is nvidia-smi failing to start: the line
    must begin with nvidia-smi's own words (after a shell prompt at most), so prose that mentions the
    error is not taken for it."""
    whole = text.lower()
    if not any(marker in whole for marker, _ in FAILURES):
        return None  # a scan per marker over the whole paste: most hold none, and a body can hold thousands of lines
    for line in text.splitlines():
        lowered = _PROMPT.sub("", line.strip().lower()).strip()
        for marker, reason in FAILURES:
            if lowered.startswith(marker):
                lost = "device handle" in marker and "gpu is lost" in lowered
                return ("gpu_lost" if lost else reason), line.strip()
    return None


#: `nvidia-container-cli info`: the driver, the CUDA it runs, then a block per GPU.
# [ \t], never \s, around these multi-line anchors: \s would run over every blank line that follows, at each one
_CLI_DRIVER = re.compile(r"^[ \t]*NVRM version:[ \t]+(\d{3}\.\d{1,3}(?:\.\d{1,3})?)[ \t]*$", re.M)
_CLI_CUDA = re.compile(r"^[ \t]*CUDA version:[ \t]+(\d{1,2}\.\d{1,2})[ \t]*$", re.M)
_CLI_FIELD = re.compile(r"^[ \t]*(Device Index|Model|GPU UUID|Bus Location|Architecture):[ \t]+(\S.{0,120}?)[ \t]*$", re.M)


def looks_like_cli_info(text: str) -> bool:
    return "Device Index:" in text and bool(_CLI_DRIVER.search(text))


def parse_cli_info(text: str) -> dict[str, Any]:
    """`nvidia-container-cli info`, as the container toolkit's issue template asks for it: the driver, its CUDA, and
    each GPU's index, model, UUID, bus and compute capability ("Architecture: 6.1")."""
    driver, cuda = _CLI_DRIVER.search(text), _CLI_CUDA.search(text)
    out: dict[str, Any] = {"gpus": [], "notes": [], "driver_version": driver.group(1) if driver else None}
    out["cuda_version"] = cuda.group(1) if cuda else None
    keys = {"Model": "name", "GPU UUID": "uuid", "Bus Location": "bus_id", "Architecture": "compute_capability"}
    current: Optional[dict[str, Any]] = None  # the GPU whose block is being read: it ends at a line of another kind
    for line in text.splitlines():
        m = _CLI_FIELD.match(line)
        field = m.group(1) if m else None
        if field == "Device Index":
            current = {"index": int(m.group(2))} if m and m.group(2).isdigit() else None
            if current is not None:
                out["gpus"].append(current)
        elif m and current is not None and field in keys and not (
                field == "Architecture" and not re.fullmatch(r"\d{1,2}\.\d", m.group(2))):
            current[keys[field]] = m.group(2)
        elif not m and not re.match(r"[ \t]*(?:Device Minor|Brand|IRQ|VBIOS|Video)", line):
            current = None
    out["gpus"] = [g for g in out["gpus"] if isinstance(g.get("index"), int) and g.get("name")]
    return out


#: What recent nvidia-smi prints under "Driver/library version mismatch": the user-space libraries' version.
_NVML_LIBRARY = re.compile(r"NVML library version:\s*(\d{3}\.\d{1,3}(?:\.\d{1,3})?)\b")


def nvml_library_version(text: str) -> Optional[str]:
    m = _NVML_LIBRARY.search(text) if "NVML library version" in text else None
    return m.group(1) if m else None


#: A line of `nvidia-smi -L`. The UUID tells it from collect_env's GPU list, which drops it.
_LIST = re.compile(r"^[ \t]*GPU (\d{1,3}): (.{1,120}?) \(UUID: (GPU-[0-9A-Fa-f-]{8,64})\)[ \t]*$", re.M)


def looks_like_list(text: str) -> bool:
    return "(UUID: GPU-" in text and bool(_LIST.search(text))


def parse_list(text: str) -> dict[str, Any]:
    """`nvidia-smi -L`: each GPU's index, name and UUID. It names no driver: nvidia-smi ran, so NVML started."""
    return {"gpus": [{"index": int(m.group(1)), "name": m.group(2).strip(), "uuid": m.group(3)} for m in _LIST.finditer(text)],
            "notes": []}


def looks_like_table(text: str) -> bool:
    return bool(_HEADER.search(text))


def parse_table(text: str) -> dict[str, Any]:
    """Driver, its CUDA, and per GPU its index, (possibly truncated) name, bus id and memory."""
    out: dict[str, Any] = {"gpus": [], "notes": []}
    header = _HEADER.search(text)
    if header:
        out["smi_version"], out["driver_version"] = header.group(1), header.group(2)
        cuda = header.group(3)
        out["cuda_version"] = cuda if cuda and cuda.upper() != "N/A" else None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        row = _ROW.match(line.strip())
        if not row:
            continue
        name = row.group(2).strip()
        gpu: dict[str, Any] = {"index": int(row.group(1)), "name": name, "bus_id": row.group(4),
                               "name_truncated": name.endswith("...")}
        mode = row.group(3)
        if mode in ("On", "Off"):
            gpu["persistence_mode"] = "enabled" if mode == "On" else "disabled"
        else:
            gpu["driver_model"] = mode
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        mem = _MEMORY.search(nxt)
        if mem:
            gpu["memory_used_mib"], gpu["memory_total_mib"] = int(mem.group(1)), int(mem.group(2))
        out["gpus"].append(gpu)
    if header and not out["gpus"] and "no devices were found" not in text.lower():
        out["notes"].append("nvidia-smi table: the header was read but no GPU row (the paste may be cut short)")
    return out


def looks_like_q(text: str) -> bool:
    return "NVSMI LOG" in text or (bool(re.search(r"^[ \t]*Attached GPUs[ \t]*:", text, re.M))
                                   and bool(re.search(r"^[ \t]*(?:Driver|KMD) Version[ \t]*:", text, re.M)))


def parse_q(text: str) -> dict[str, Any]:
    """``nvidia-smi -q``: the top-level driver lines, then per ``GPU 0000:...`` block its identity and memory."""
    out: dict[str, Any] = {"gpus": [], "notes": []}
    gpu: Optional[dict[str, Any]] = None
    section = ""
    for raw in text.splitlines():
        head = _Q_GPU.match(raw.strip())
        if head:
            gpu = {"index": len(out["gpus"]), "bus_id": head.group(1)}
            out["gpus"].append(gpu)
            section = ""
            continue
        m = _Q_KEY.match(raw)
        if not m:
            continue
        indent, key, value = len(m.group(1).expandtabs(4)), m.group(2).strip(), m.group(3).strip()
        if not value:
            section = key.lower()
            continue
        if gpu is None:
            if key in ("Driver Version", "KMD Version"):
                out.setdefault("driver_version", value)
            elif key in ("CUDA Version", "CUDA UMD Version") and "[Deprecated" not in value:
                out["cuda_version"] = value if value.upper() != "N/A" else None
            elif key == "Attached GPUs" and _ASCII_NUMBER.fullmatch(value):  # "²".isdigit(), yet int() refuses it
                out["attached"] = int(value)
            continue
        if key == "Product Name":
            gpu["name"] = value
        elif key == "Product Architecture":
            gpu["architecture"] = value.lower()
        elif key == "GPU UUID":
            gpu["uuid"] = value
        elif key == "Persistence Mode":
            gpu["persistence_mode"] = value.lower()
        elif key == "Bus Id" and indent > 0:
            gpu["bus_id"] = value
        elif key == "Total" and section.startswith("fb memory usage"):
            mem = re.match(r"(\d+)\s*MiB", value)
            if mem:
                gpu["memory_total_mib"] = int(mem.group(1))
        elif key == "Used" and section.startswith("fb memory usage"):
            mem = re.match(r"(\d+)\s*MiB", value)
            if mem:
                gpu["memory_used_mib"] = int(mem.group(1))
    if out.get("attached") is not None and out["attached"] != len(out["gpus"]):
        out["notes"].append(f"nvidia-smi -q: says {out['attached']} GPU(s) attached, the paste shows {len(out['gpus'])} "
                            "(cut short?)")
    return out


def looks_like_xml(text: str) -> bool:
    return "<nvidia_smi_log" in text


class UnsafeXML(ValueError):
    """A document type with an internal subset or an entity declaration: never expanded."""


def parse_xml(text: str) -> dict[str, Any]:
    """``nvidia-smi -q -x``; a document cut short gives what its complete GPU elements say, and a note."""
    out: dict[str, Any] = {"gpus": [], "notes": []}
    start = text.find("<nvidia_smi_log")
    if re.search(r"<!ENTITY", text, re.I) or re.search(r"<!DOCTYPE[^>\[]*\[", text, re.I):
        raise UnsafeXML("the XML declares entities or an internal document type; it is not read")
    body = text[start:]
    end = body.find("</nvidia_smi_log>")
    if end >= 0:
        body = body[:end + len("</nvidia_smi_log>")]
    else:
        out["notes"].append("nvidia-smi -q -x: the XML is cut short; only its complete GPU elements are read")
        cut = body.rfind("</gpu>")
        if cut < 0:
            first_gpu = body.find("<gpu")
            cut = body.rfind("</", 0, first_gpu if first_gpu >= 0 else len(body))
            cut = body.find(">", cut) + 1 - len("</gpu>") if cut >= 0 else -1
        body = (body[:cut + len("</gpu>")] if cut >= 0 else _opening(body)) + "\n</nvidia_smi_log>"
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        out["notes"].append(f"nvidia-smi -q -x: the XML could not be parsed ({exc}); only its driver lines are read")
        for key, tag in (("driver_version", "driver_version"), ("cuda_version", "cuda_version")):
            found = re.search(rf"<{tag}>\s*([\d.]+)\s*</{tag}>", text)
            if found:
                out[key] = found.group(1)
        return out
    out["driver_version"] = _text(root, "driver_version")
    cuda = _text(root, "cuda_version")
    out["cuda_version"] = cuda if cuda and cuda.upper() != "N/A" else None
    attached = _text(root, "attached_gpus")
    if attached and _ASCII_NUMBER.fullmatch(attached):
        out["attached"] = int(attached)
    for i, node in enumerate(root.findall("gpu")):
        gpu: dict[str, Any] = {"index": i, "bus_id": node.get("id")}
        for key, tag in (("name", "product_name"), ("uuid", "uuid"), ("architecture", "product_architecture"),
                         ("persistence_mode", "persistence_mode")):
            value = _text(node, tag)
            if value and value.upper() != "N/A":
                gpu[key] = value.lower() if key in ("architecture", "persistence_mode") else value
        for key, tag in (("memory_total_mib", "fb_memory_usage/total"), ("memory_used_mib", "fb_memory_usage/used")):
            mem = re.match(r"(\d+)\s*MiB", _text(node, tag) or "")
            if mem:
                gpu[key] = int(mem.group(1))
        out["gpus"].append(gpu)
    return out


def _opening(body: str) -> str:
    """The root's opening tag alone, when not even one GPU element is complete."""
    close = body.find(">")
    return body[:close + 1] if close >= 0 else "<nvidia_smi_log>"


def _text(node: ET.Element, path: str) -> Optional[str]:
    found = node.find(path)
    return found.text.strip() if found is not None and found.text and found.text.strip() else None
