"""`check -v` / `analyze -v`: the facts as a person reads them, not as a JSON dump.

Maintainers read tickets with ``nvidia-smi -q`` and ``python -m torch.utils.collect_env`` in them: named
sections, one ``Key : value`` per line, aligned. The verbose report shows gpudoctor's facts the same way,
so a reader finds the driver, each GPU, each library copy and each framework's build at a glance; the
exact data stays in ``--format json``.

Layout: a section header at the margin (``Host``, ``Driver``, ``GPU 0``, ``Topology``, ``CUDA toolkit``,
``CUDA libraries``, ``Python``, ``Framework: PyTorch (torch)``, ..., ``Smoke``, ``Workloads``,
``Multi-GPU``, ``Cluster``, ``Probes``), its facts indented under it, nested groups indented further, keys
aligned within a group. Units are shown with the number (``81559 MiB``, ``700 W``, ``743.5 TFLOP/s``); an
absent fact ``{"unavailable": reason}`` reads ``(unavailable: reason)``. Lists people scan (library copies,
packages, GPU pairs, P2P pairs, processes) get one line per entry. Anything without a dedicated layout
(a fact added later, a section of an unknown report) is still shown, by the generic layout, never dropped.

Every string of the data (keys included) goes through :func:`safe.terminal`, so a control character in a
GPU name or a framework's error is shown as an escape, never acted on. A multi-line value (a traceback)
continues on lines indented under its value column, so no line of data can start at a margin and pass for
a section of the report. The view never raises: a fact of an unexpected shape falls back to the generic
layout, and should even that fail the section says so in one line.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from gpudoctor import versions
from gpudoctor.findings import ERROR, INFO, WARNING
from gpudoctor.frameworks_table import NAMES
from gpudoctor.nvlink_totals import UNREAD_IN_QUICK
from gpudoctor.render.safe import terminal
from gpudoctor.snapshot import as_object
from gpudoctor.status import PROBE_OK

MIB = 1024**2
INDENT = "    "
#: Keys are aligned within a group up to this width; a longer key (a long path) just pushes its value.
KEY_WIDTH_MAX = 36

#: How a word of a snake_case key reads in a label.
WORDS = {
    "cuda": "CUDA", "nvml": "NVML", "gpu": "GPU", "gpus": "GPUs", "pci": "PCI", "pcie": "PCIe", "id": "ID",
    "uuid": "UUID", "mig": "MIG", "ecc": "ECC", "numa": "NUMA", "cpu": "CPU", "vbios": "VBIOS",
    "nccl": "NCCL", "p2p": "P2P", "nvlink": "NVLink", "cudnn": "cuDNN", "os": "OS", "wsl": "WSL",
    "h2d": "H2D", "d2h": "D2H", "tf32": "TF32", "jit": "JIT", "xla": "XLA", "ld": "LD", "hip": "HIP",
    "nvcc": "nvcc", "jaxlib": "jaxlib", "bf16": "bf16", "algbw": "algbw", "busbw": "busbw",
    "ib": "IB", "ip": "IP", "env": "environment",
}


# The layout ---------------------------------------------------------------------------------------

@dataclass
class Row:
    """One ``Key : value`` line; ``lines`` are the value's lines, each already terminal-safe."""

    key: str
    lines: list[str]


@dataclass
class Section:
    """A header and what is under it, one level deeper."""

    title: str
    items: list[Union[Row, "Section"]] = field(default_factory=list)


Node = Union[Row, Section]


def facts_view(facts: Any) -> str:
    """The facts of a report as sections of aligned ``Key : value`` lines (see the module docstring)."""
    out = ["Facts", "-----"]
    if not isinstance(facts, dict):
        out.append(f"(not an object: {terminal(type(facts).__name__)})")
        return "\n".join(out)
    for section in _sections(facts):
        out.append("")
        _render(section, 0, out)
    return "\n".join(out)


def _render(section: Section, depth: int, out: list[str]) -> None:
    pad = INDENT * depth
    out.append(pad + section.title)
    rows = [item for item in section.items if isinstance(item, Row)]
    width = min(max((len(r.key) for r in rows), default=0), KEY_WIDTH_MAX)
    for item in section.items:
        if isinstance(item, Section):
            _render(item, depth + 1, out)
            continue
        first, *more = item.lines or [""]
        key = item.key.ljust(width)
        out.append(f"{pad}{INDENT}{key} : {first}".rstrip())
        under = " " * (len(pad) + len(INDENT) + len(key) + 3)
        out.extend((under + line).rstrip() for line in more)


# Values -------------------------------------------------------------------------------------------

def _multiline(key: str) -> bool:
    """Facts whose text has lines of its own: a child's stderr, a traceback, an error message. Anywhere else
    (a host name, a GPU name) a newline is shown as ``\\n``, as a newline in a one-line place should be."""
    return key.endswith("_tail") or key.endswith("error") or key in ("stderr", "warnings", "messages")


def _lines(value: Any, key: str = "") -> list[str]:
    """A scalar value as the lines it shows: the text of a multi-line fact keeps its lines (each made safe),
    anything else is one line."""
    if isinstance(value, str) and "\n" in value and _multiline(key):
        lines = [terminal(line) for line in value.rstrip("\n").split("\n")]
        return lines or [""]
    return [_scalar(value, key)]


def _scalar(value: Any, key: str = "") -> str:
    if _is_absent(value):
        return _absent(value)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    for suffix, unit in UNITS:
        if key == suffix.lstrip("_") or key.endswith(suffix):
            shown = unit(value)
            if shown is not None:
                return shown
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(_scalar(v, key) for v in value) if value else "none"
    if isinstance(value, dict):
        return ", ".join(f"{terminal(k)} {_scalar(v, str(k))}" for k, v in value.items()) if value else "none"
    return terminal(value)


def _is_absent(value: Any) -> bool:
    """An absent fact: ``{"unavailable": reason}``, possibly with the ``error`` (or another note) that says why."""
    return isinstance(value, dict) and isinstance(value.get("unavailable"), str) and \
        all(not isinstance(v, (dict, list)) for v in value.values())


def _absent(value: dict[str, Any]) -> str:
    notes = "; ".join(f"{terminal(v)}" if k == "error" else f"{terminal(k)} {terminal(v)}"
                      for k, v in value.items() if k != "unavailable")
    return f"(unavailable: {terminal(value['unavailable'])}{'; ' + notes if notes else ''})"


def _number(value: float) -> str:
    return f"{value:.4g}"


def _seconds(value: Any) -> Optional[str]:
    """Seconds as recorded (to the millisecond) from one second up, four significant digits below."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and abs(value) >= 1:
        return f"{value:.3f}".rstrip("0").rstrip(".") + " s"
    return f"{_number(value) if isinstance(value, float) else value} s"


def _mib(value: Any) -> Optional[str]:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value // MIB} MiB" if abs(value) >= MIB else f"{value} bytes"
    return None


def _with(unit: str, digits: Optional[int] = None) -> Callable[[Any], Optional[str]]:
    def show(value: Any) -> Optional[str]:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        number = f"{value:.{digits}f}" if digits is not None else (_number(value) if isinstance(value, float) else str(value))
        return f"{number} {unit}".rstrip()
    return show


def _milliwatts(value: Any) -> Optional[str]:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value / 1000:.0f} W"
    return None


def _cuda(value: Any) -> Optional[str]:
    """NVML's encoded CUDA version (1000*major + 10*minor): 13000 reads 13.0."""
    return versions.cuda(value)


#: Unit suffixes of keys (``total_bytes``, and ``bytes`` itself): the label drops the suffix, the value shows
#: the unit. NVML's encoded CUDA versions read as versions.
UNITS: tuple[tuple[str, Callable[[Any], Optional[str]]], ...] = (
    ("_bytes", _mib), ("_mw", _milliwatts), ("_c", _with("C")), ("_percent", _with("%")), ("_s", _seconds),
    ("_gbs", _with("GB/s", 1)), ("_tflops", _with("TFLOP/s", 1)),
    ("cuda_driver_version", _cuda), ("driver_cuda", _cuda),
)


#: The word a unit suffix leaves in a label where two keys would read alike (``device_copy_gbs`` and
#: ``device_copy_bytes``: ``Device copy bandwidth`` and ``Device copy size``).
UNIT_WORDS = {"_bytes": "size", "_mw": "power", "_c": "temperature", "_percent": "percent", "_s": "time",
              "_gbs": "bandwidth", "_tflops": "throughput"}
#: Words shown as they are even first in a label.
KEEP_CASE = {"nvcc", "jaxlib", "bf16", "algbw", "busbw"}


def _label(key: Any, collide: bool = False) -> str:
    """``total_bytes`` reads ``Total``, ``cuda_driver_version`` ``CUDA driver version``, ``import_s``
    ``Import time``; a key that is data (an environment variable, a device path) is shown as it is.
    ``collide``: another key of the same object reads alike, so the unit's word is kept."""
    text = str(key)
    if not text or not all(c.islower() or c.isdigit() or c == "_" for c in text) or not text[0].isalpha():
        return terminal(text)
    tail = ""
    for suffix, word in UNIT_WORDS.items():
        if text.endswith(suffix) and len(text) > len(suffix):
            text = text[:-len(suffix)]
            if (suffix == "_s" and text not in ("duration", "time", "times", "uptime") and not text.endswith(("_time", "_times"))) \
                    or collide:
                tail = " " + word
            break
    parts = [w for w in text.split("_") if w]
    words = [WORDS.get(w, w) for w in parts]
    if words and words[0].islower() and words[0] not in KEEP_CASE:
        words[0] = words[0][:1].upper() + words[0][1:]
    return terminal(" ".join(words) + tail)


def _labels(keys: list[Any]) -> list[str]:
    """The labels of an object's keys, kept apart where two would read alike."""
    plain = [_label(k) for k in keys]
    return [_label(k, collide=plain.count(p) > 1) for k, p in zip(keys, plain)]


# The generic layout -------------------------------------------------------------------------------

#: Layouts for particular facts, by dotted path (``*`` matches a list index or a key): each returns the
#: node for the fact, or raises (TypeError, KeyError, ...) on a shape it does not expect, and the generic
#: layout is used instead.
Special = Callable[[str, Any, "Context", str], Node]  # (label, value, context, path)


@dataclass
class Context:
    """What a special layout may need from elsewhere in the facts."""

    loaded_by: dict[str, list[str]] = field(default_factory=dict)  # real path -> frameworks that mapped it
    frameworks_unread: Optional[str] = None  # why no framework was looked for: "not installed" is then unknown


def _node(label: str, value: Any, path: str, ctx: Context) -> Node:
    for pattern, special in SPECIALS:
        if fnmatch.fnmatchcase(path, pattern):
            try:
                return special(label, value, ctx, path)
            except (TypeError, KeyError, AttributeError, ValueError, IndexError):
                break
    return _generic(label, value, path, ctx)


def _generic(label: str, value: Any, path: str, ctx: Context) -> Node:
    key = path.rsplit(".", 1)[-1]
    if isinstance(value, dict) and value and not _is_absent(value):
        return Section(label, _rows(value, path, ctx))
    if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        single = label[:-1] if label.endswith("s") and not label.endswith("ss") else label
        return Section(label, [_node(f"{single} {i}", v, f"{path}.*", ctx) for i, v in enumerate(value)])
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value) \
            and any(isinstance(v, str) and ("\n" in v or ", " in v) for v in value):
        return Row(label, [line for v in value for line in _lines(v, key)])  # one line each: commas in them
    return Row(label, _lines(value, key))


def _rows(value: dict[str, Any], path: str, ctx: Context, skip: tuple[str, ...] = (),
          lead: tuple[str, ...] = ()) -> list[Node]:
    """An object's facts as rows, ``lead`` keys first, then the others in their order, ``skip`` left out."""
    keys = [k for k in lead if k in value] + [k for k in value if k not in skip and k not in lead]
    return [_node(label, value[k], f"{path}.{k}", ctx) for k, label in zip(keys, _labels(keys))]


# Special layouts ----------------------------------------------------------------------------------

def _env(label: str, value: dict[str, Any], ctx: Context, path: str) -> Node:
    if not value:
        return Row(label, ["none set"])
    return Section(label, [Row(terminal(k), ["(not set)"] if v is None else _lines(v)) for k, v in value.items()])


def _one_per_line(keyed: Callable[[dict[str, Any]], tuple[Any, str]]) -> Special:
    """A list of objects shown one line each: ``keyed`` gives an entry's key and its value text."""
    def layout(label: str, value: list[Any], ctx: Context, path: str) -> Node:
        if not isinstance(value, list):
            raise TypeError("not a list")
        if not value:
            return Row(label, ["none"])
        rows: list[Node] = []
        for item in value:
            if not isinstance(item, dict):
                raise TypeError("not an object")
            key, text = keyed(item)
            rows.append(Row(terminal(key), [text]))
        return Section(label, rows)
    return layout


def _join(*parts: Optional[str]) -> str:
    return ", ".join(p for p in parts if p)


def _copy(item: dict[str, Any], ctx: Optional[Context] = None) -> tuple[Any, str]:
    """A library copy: ``libcudnn : 9.14.0, /lib/.../libcudnn.so.9 -> /usr/lib/...so.9.14.0, origins system``."""
    version = item.get("version")
    named = item.get("version_from_name")
    path: Any = item.get("path")
    real: Any = item.get("real_path")
    where = terminal(path) + (f" -> {terminal(real)}" if real and real != path else "")
    dist = item.get("distribution")
    loaded = (ctx.loaded_by.get(real) or ctx.loaded_by.get(path) or []) if ctx else []
    return item["family"], _join(
        _scalar(version) if "version" in item else "version not read",
        f"file name {terminal(named)}" if named and named != version else None,
        "STUB" if item.get("stub") else None,
        where,
        f"origins {_scalar(item['origins'])}" if "origins" in item else None,
        f"from pip {terminal(dist.get('name'))} {terminal(dist.get('version'))}" if isinstance(dist, dict) else None,
        f"error {terminal(item['error'])}" if item.get("error") else None,
        f"loaded by {', '.join(loaded)}" if loaded else None)


def _copies(label: str, value: list[Any], ctx: Context, path: str) -> Node:
    return _one_per_line(lambda item: _copy(item, ctx))(label, value, ctx, path)


def _device(item: dict[str, Any]) -> tuple[Any, str]:
    number = item.get("index", item.get("ordinal", "?"))
    cc = item.get("compute_capability")
    return f"cuda:{number}", _join(terminal(item.get("name", "?")), f"compute capability {_scalar(cc)}" if cc else None,
                                   terminal(item["uuid"]) if item.get("uuid") else None)


def _pair(item: dict[str, Any]) -> tuple[Any, str]:
    a, b = item["gpus"]
    count = item.get("nvlink_count")
    link = f"NV{count}" if isinstance(count, int) and count > 0 else "no NVLink" if count == 0 else _scalar(count)
    p2p = item.get("p2p")
    p2p_text = ("P2P " + ", ".join(f"{terminal(k)} {_scalar(v)}" for k, v in p2p.items())) if isinstance(p2p, dict) \
        else f"P2P {_scalar(p2p)}"
    return f"GPU {a} - GPU {b}", _join(link, f"common ancestor {_scalar(item.get('common_ancestor'))}", p2p_text)


def _p2p_pair(item: dict[str, Any]) -> tuple[Any, str]:
    text = _join(_scalar(item["gbs"], "gbs") if "gbs" in item else None,
                 f"peer access {_scalar(item['access'])}" if "access" in item else None,
                 f"{_scalar(item['wrong_elements'])} wrong element(s)" if "wrong_elements" in item else None,
                 f"error {terminal(item['error'])}" if item.get("error") else None)
    return f"cuda:{item['src']} -> cuda:{item['dst']}", text


def _process(item: dict[str, Any]) -> tuple[Any, str]:
    return f"PID {item['pid']}", _join(_scalar(item.get("type")), _scalar(item.get("name")),
                                       _scalar(item.get("used_memory_bytes"), "used_memory_bytes"))


def _distribution(item: dict[str, Any]) -> tuple[Any, str]:
    return item["name"], _join(_scalar(item.get("version")), terminal(item.get("location", "")))


def _install(item: dict[str, Any]) -> tuple[Any, str]:
    real = item.get("real_path")
    return item["path"], _join(_scalar(item.get("version")),
                               f"read from {terminal(item['version_source'])}" if item.get("version_source") else None,
                               f"nvcc {_scalar(item.get('has_nvcc'))}",
                               f"real path {terminal(real)}" if real and real != item["path"] else None)


def _pci_device(item: dict[str, Any]) -> tuple[Any, str]:
    return item["bus_id"], _join(f"device {_scalar(item.get('device_id'))}", f"class {_scalar(item.get('class'))}",
                                 f"driver {_scalar(item.get('driver'))}")


def _device_nodes(label: str, value: dict[str, Any], ctx: Context, path: str) -> Node:
    if not isinstance(value, dict) or _is_absent(value):
        raise TypeError("not a map of device nodes")
    rows: list[Node] = []
    for path, node in value.items():
        if not isinstance(node, dict):
            raise TypeError("not an object")
        text = "missing" if node.get("exists") is False else _join(
            "exists" if node.get("exists") else None,
            "accessible" if node.get("accessible") else "not accessible" if node.get("accessible") is False else None,
            *(f"{terminal(k)} {_scalar(v, str(k))}" for k, v in node.items() if k not in ("exists", "accessible")))
        rows.append(Row(terminal(path), [text]))
    return Section(label, rows) if rows else Row(label, ["none"])


def _links(label: str, value: list[Any], ctx: Context, path: str) -> Node:
    """NVLinks grouped: ``Links 0-17 : active, switch FFFFFFFF:FF:FF.0`` instead of 18 lines alike."""
    if not isinstance(value, list):
        raise TypeError("not a list")
    groups: list[tuple[list[Any], str]] = []
    for link in value:
        text = _join("active" if link["active"] else "inactive", _scalar(link["remote_type"]) if "remote_type" in link else None,
                     terminal(link["remote_bus_id"]) if "remote_bus_id" in link else None,
                     *(f"{terminal(k)} {_scalar(v)}" for k, v in link.items()
                       if k not in ("link", "active", "remote_type", "remote_bus_id")))
        if groups and groups[-1][1] == text and isinstance(link["link"], int) and groups[-1][0][-1] == link["link"] - 1:
            groups[-1][0].append(link["link"])
        else:
            groups.append(([link["link"]], text))
    rows: list[Node] = [Row(f"Link {terminal(ls[0])}" + (f"-{terminal(ls[-1])}" if len(ls) > 1 else ""), [text]) for ls, text in groups]
    return Section(label, rows) if rows else Row(label, ["none"])


#: The NVLink error counters in the order and words of ``nvidia-smi nvlink -e``.
_NVLINK_COUNTERS = (("replay", "replay"), ("recovery", "recovery"), ("crc_flit", "CRC-flit"), ("crc_data", "CRC-data"))


def _nvlink_errors(label: str, value: Any, ctx: Context, path: str) -> Node:
    """The GPU's totals over its links in one line (``all links: replay 0, recovery 96, ...``) or, from a
    report that kept each link, each counter as its range over the links:
    ``18 links: replay 0, recovery 1-24, CRC-flit 0, CRC-data 0`` instead of 72 numbers."""
    if isinstance(value, dict) and not _is_absent(value):
        return Row(label, ["all links: " + ", ".join(
            f"{words} {_absent(value[key]) if _is_absent(value.get(key)) else terminal(str(value.get(key, 'not read')))}"
            for key, words in _NVLINK_COUNTERS)])
    if not isinstance(value, list):
        raise TypeError("not a list")
    parts = []
    for key, words in _NVLINK_COUNTERS:
        counts = [e[key] for e in value if isinstance(e.get(key), int)]
        absent = sorted({_absent(e[key]) for e in value if _is_absent(e.get(key))})
        shown = (f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)}-{max(counts)}") if counts else ""
        parts.append(f"{words} " + " ".join(p for p in (shown, *absent) if p))
    return Row(label, [f"{len(value)} active link(s): " + ", ".join(parts) if value else "no active link"])


def _nvlink_unread(label: str, value: Any, ctx: Context, path: str) -> Node:
    """Why the NVLink counts beside it are absent: a driver that keeps no totals, and a --quick run."""
    if value != UNREAD_IN_QUICK:
        raise ValueError("not a reason this view words")
    return Row(label, ["per link only on this driver; not read in --quick, the full check reads them"])


def _violations(label: str, value: dict[str, Any], ctx: Context, path: str) -> Node:
    """Time with clocks held down per cause, in seconds: ``sw_power_cap 1.5 s, hw_thermal_slowdown 0 s``."""
    if not isinstance(value, dict) or _is_absent(value):
        raise TypeError("not a reading per cause")
    shown = [f"{terminal(k)} {_absent(v) if _is_absent(v) else _number(v / 1e9) + ' s'}" for k, v in value.items()]
    return Row(label, [", ".join(shown)])


def _checked(item: dict[str, Any]) -> tuple[Any, str]:
    """A workload's correctness check: ``matmul bfloat16 : ok, rel. error 0.002882 (tolerance 0.01)``."""
    return item["what"], _join("ok" if item.get("ok") else "WRONG" if item.get("ok") is False else None,
                               f"rel. error {_scalar(item['rel_error'])} (tolerance {_scalar(item.get('tolerance'))})"
                               if "rel_error" in item else None,
                               *(f"{_label(k).lower()} {_scalar(v, str(k))}" for k, v in item.items()
                                 if k not in ("what", "ok", "rel_error", "tolerance")))


def _check_row(label: str, value: dict[str, Any], ctx: Context, path: str) -> Node:
    if not isinstance(value, dict) or "what" not in value or any(isinstance(v, (dict, list)) for v in value.values()):
        raise TypeError("not one check")
    what, text = _checked(value)
    return Row(label, [f"{terminal(what)}: {text}"])


def _framework(label: str, value: Any, ctx: Context, path: str) -> Section:
    """A framework: its status and error first, then what it answered (``info``), then the child's tail."""
    if not isinstance(value, dict):
        return Section(label, [Row("Value", _lines(value))])
    rows: list[Node] = []
    if value.get("installed") is False and ctx.frameworks_unread:  # not looked for: the probe's "no" says nothing
        rows.append(Row("Installed", [f"unknown: {terminal(ctx.frameworks_unread)}"]))
    elif "installed" in value:
        rows.append(Row("Installed", [_scalar(value["installed"])]))
    for key in ("status", "error"):
        if key in value:
            rows.append(_node(_label(key), value[key], f"{path}.{key}", ctx))
    info = value.get("info")
    if isinstance(info, dict) and not _is_absent(info):
        rows += _rows(info, f"{path}.info", ctx)
    elif "info" in value:
        rows.append(_node("Info", info, f"{path}.info", ctx))
    rows += _rows(value, path, ctx, skip=("installed", "status", "error", "info", "stderr_tail"))
    if "stderr_tail" in value:
        rows.append(_node("Stderr tail", value["stderr_tail"], f"{path}.stderr_tail", ctx))
    return Section(label, rows)


def _workload_runs(label: str, value: list[Any], ctx: Context, path: str) -> Node:
    if not isinstance(value, list):
        raise TypeError("not a list")
    if not value:
        return Row(label, ["none"])
    sections: list[Node] = []
    for run in value:
        if not isinstance(run, dict):
            raise TypeError("not an object")
        name: Any = run.get("framework")
        device = run.get("device", "?")
        where = f"cuda:{device}" if str(device).isdigit() else terminal(device)
        title = f"{NAMES.get(name, terminal(name))} on {where}"
        sections.append(Section(title, _rows(run, f"{path}.*", ctx, skip=("framework",))))
    return Section(label, sections)


def _titled_items(title: Callable[[dict[str, Any]], str]) -> Special:
    def layout(label: str, value: list[Any], ctx: Context, path: str) -> Node:
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise TypeError("not a list of objects")
        if not value:
            return Row(label, ["none"])
        return Section(label, [_generic(terminal(title(v)), v, f"{path}.*", ctx) for v in value])
    return layout


def _node_report(label: str, value: Any, ctx: Context, path: str) -> Node:
    """Another node's whole report inside ``cluster.nodes``: its verdict here; its facts are in the JSON."""
    if value is None:
        return Row(label, ["none arrived"])
    summary = value.get("summary") if isinstance(value, dict) else None
    if not isinstance(summary, dict):
        return Row(label, [_scalar(value) if not isinstance(value, dict) else "a report (its facts: --format json)"])
    counts = as_object(summary.get("counts"))
    return Row(label, [f"verdict {_scalar(summary.get('verdict'))}: {_scalar(counts.get(ERROR, 0))} error(s), "
                       f"{_scalar(counts.get(WARNING, 0))} warning(s), {_scalar(counts.get(INFO, 0))} note(s) "
                       "(its facts: --format json)"])


SPECIALS: tuple[tuple[str, Special], ...] = (
    ("host.env", _env), ("host.framework_env", _env), ("*.nccl_settings", _env),
    ("driver.device_nodes", _device_nodes),
    ("driver.pci_devices", _one_per_line(_pci_device)),
    ("gpus.*.processes", _one_per_line(_process)),
    ("gpus.*.nvlink.links", _links),
    ("gpus.*.counters.nvlink_errors", _nvlink_errors),
    ("gpus.*.counters.nvlink_errors_unread", _nvlink_unread),
    ("gpus.*.counters.violation_ns", _violations),
    ("topology.pairs", _one_per_line(_pair)),
    ("toolkit.installs", _one_per_line(_install)),
    ("libraries.copies", _copies),
    ("frameworks.*.info.loaded_libraries", _one_per_line(_copy)),
    ("frameworks.*.info.devices", _one_per_line(_device)),
    ("python.distributions", _one_per_line(_distribution)),
    ("smoke.count.devices", _one_per_line(_device)),
    ("multigpu.devices", _one_per_line(_device)),
    ("multigpu.p2p.pairs", _one_per_line(_p2p_pair)),
    ("multigpu.allreduce.ranks", _titled_items(lambda r: f"Rank {r.get('rank', '?')}")),
    ("cluster.ranks", _titled_items(lambda r: f"Rank {r.get('rank', '?')}")),
    ("cluster.nodes", _titled_items(lambda n: f"Node {n.get('node_rank', '?')}")),
    ("cluster.nodes.*.report", _node_report),
    ("workload.runs", _workload_runs),
    ("workload.runs.*.*.checks", _one_per_line(_checked)),
    ("workload.runs.*.elementwise", _check_row),
)


# The sections -------------------------------------------------------------------------------------

def _probes(value: Any, ctx: Context) -> Section:
    if not isinstance(value, dict):
        return Section("Probes", [Row("Value", _lines(value))])
    rows: list[Node] = []
    for name, record in value.items():
        if not isinstance(record, dict):
            rows.append(Row(terminal(name), _lines(record)))
            continue
        head = _join(_scalar(record.get("status", "?")), _scalar(record["duration_s"], "duration_s") if "duration_s" in record else None,
                     terminal(record["title"]) if record.get("title") else None)
        lines = [head + (f": {terminal(record['error'])}" if record.get("error") else "")]
        for key, extra in record.items():
            if key in ("status", "duration_s", "title", "error", "reason"):  # reason: as data; error says it
                continue
            more = _lines(extra, key) if not isinstance(extra, (dict, list)) else [_scalar(extra, key)]
            lines += [f"{_label(key)}: {more[0]}", *more[1:]]
        rows.append(Row(terminal(name), lines))
    return Section("Probes", rows or [Row("Probes", ["none"])])


#: The sections in the order a reader expects them (nvidia-smi -q, then collect_env), each from its facts.
ORDER = ("host", "nvml", "driver", "gpus", "topology", "toolkit", "libraries", "python", "frameworks", "smoke",
         "workload", "multigpu", "cluster", "options", "paste", "pastes")
TITLES = {"host": "Host", "topology": "Topology", "toolkit": "CUDA toolkit", "libraries": "CUDA libraries",
          "python": "Python", "smoke": "Smoke", "workload": "Workloads", "multigpu": "Multi-GPU", "cluster": "Cluster",
          "options": "Options", "paste": "Paste", "pastes": "Pastes", "probes": "Probes"}
#: What a reader of the Driver section looks for first.
DRIVER_LEAD = ("driver_version", "cuda_driver_version", "nvml_version", "device_count", "init")
#: Shown even when absent (with why): what every full run gathers.
ALWAYS = ("host", "driver", "gpus", "topology", "toolkit", "libraries", "python", "frameworks", "smoke", "workload")
#: The probe that writes each section, to say why a section is absent.
PROBE_OF = {"host": "host", "driver": "driver_files", "gpus": "nvml", "topology": "nvml", "toolkit": "cuda_stack",
            "libraries": "cuda_stack", "python": "python", "frameworks": "frameworks", "smoke": "smoke",
            "workload": "workload"}


def _sections(facts: dict[str, Any]) -> list[Section]:
    from gpudoctor.render.facts_text import frameworks_unread

    ctx = Context(loaded_by=_loaded_by(facts), frameworks_unread=frameworks_unread(facts))
    out: list[Section] = []
    for key in (*ORDER, *(k for k in facts if k not in ORDER and k != "probes"), "probes"):
        try:
            out += _section(key, facts, ctx)
        except Exception as exc:  # noqa: BLE001 - the view must never take the report down
            out.append(Section(TITLES.get(key, _label(key)), [Row("(could not be shown)", [terminal(type(exc).__name__)])]))
    return out


def _section(key: str, facts: dict[str, Any], ctx: Context) -> list[Section]:
    if key == "nvml":
        return []  # shown within Driver
    if key == "driver":
        nvml, driver = facts.get("nvml"), facts.get("driver")
        if nvml is None and driver is None:
            return [_missing("Driver", "driver", facts)]
        rows: list[Node] = []
        for name, part in (("nvml", nvml), ("driver", driver)):
            if isinstance(part, dict) and not _is_absent(part):
                rows += _rows(part, name, ctx, lead=DRIVER_LEAD if name == "nvml" else ())
            elif part is not None:
                rows.append(_node(name.upper() if name == "nvml" else "Kernel driver", part, name, ctx))
        return [Section("Driver", rows)]
    if key not in facts:
        return [_missing(TITLES.get(key, _label(key)), key, facts)] if key in ALWAYS else []
    value = facts[key]
    if key == "probes":
        return [_probes(value, ctx)]
    if key == "gpus":
        if not isinstance(value, list):
            return [Section("GPUs", [_node("GPUs", value, "gpus", ctx)])]
        if not value:
            return [Section("GPUs", [Row("Count", ["0 (NVML listed none)"])])]
        return [_gpu(i, g, ctx) for i, g in enumerate(value)]
    if key == "frameworks":
        if not isinstance(value, dict):
            return [Section("Frameworks", [_node("Frameworks", value, "frameworks", ctx)])]
        return [_framework(f"Framework: {NAMES.get(name, terminal(name))} ({terminal(name)})", fw, ctx,
                           f"frameworks.{name}") for name, fw in value.items()]
    title = TITLES.get(key, _label(key))
    if key == "topology" and isinstance(value, dict) and value.get("pairs") == []:
        return [Section(title, [Row("Pairs", ["none (fewer than two GPUs)"])])]
    node = _node(title, value, key, ctx)
    return [node if isinstance(node, Section) else Section(title, [Row(title, node.lines)])]


def _gpu(position: int, gpu: Any, ctx: Context) -> Section:
    if not isinstance(gpu, dict):
        return Section(f"GPU #{position}", [Row("Value", _lines(gpu))])
    index = gpu.get("index", f"#{position}")
    return Section(f"GPU {terminal(index)}", _rows(gpu, "gpus.*", ctx, skip=("index",)))


def _missing(title: str, key: str, facts: dict[str, Any]) -> Section:
    record = (facts.get("probes") or {}).get(PROBE_OF.get(key, key)) if isinstance(facts.get("probes"), dict) else None
    if isinstance(record, dict) and record.get("status") not in (None, PROBE_OK):
        why = f"probe {PROBE_OF.get(key, key)} {terminal(record.get('status'))}" + \
              (f": {terminal(record['error'])}" if record.get("error") else "")
    elif record is None and key in ("smoke", "workload"):
        why = "not run (check --quick runs no work on the GPUs, or --only/--skip left it out)"
    else:
        why = "not in this report"
    return Section(title, [Row("(not gathered)", [why])])


def _loaded_by(facts: dict[str, Any]) -> dict[str, list[str]]:
    """Each library file a framework's process mapped, by real path and path: which frameworks loaded it."""
    out: dict[str, list[str]] = {}
    frameworks = facts.get("frameworks")
    if not isinstance(frameworks, dict):
        return out
    for name, fw in frameworks.items():
        info = fw.get("info") if isinstance(fw, dict) else None
        libs = info.get("loaded_libraries") if isinstance(info, dict) else None
        for lib in libs if isinstance(libs, list) else []:
            if not isinstance(lib, dict):
                continue
            for where in {lib.get("real_path"), lib.get("path")}:
                if isinstance(where, str):
                    who = out.setdefault(where, [])
                    if NAMES.get(name, terminal(name)) not in who:
                        who.append(NAMES.get(name, terminal(name)))
    return out
