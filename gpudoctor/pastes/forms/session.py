"""Python sessions and one-liners that print versions and GPU answers: a REPL (``>>> expr`` and the line
under it), ``python -c "import torch; print(torch.__version__, torch.cuda.is_available())"`` and the
line it printed.

Only expressions whose answer has one meaning are read (``torch.cuda.is_available()``,
``torch.version.cuda``, ``torch.cuda.get_arch_list()``, ``tf.config.list_physical_devices('GPU')``,
``jax.devices()`` ...); a one-liner's output is split into its values only when their count equals the
number of printed expressions, else it is left unread.
"""

from __future__ import annotations

import ast
import functools
import re
from typing import Any, Optional

#: expression (spaces removed) -> field
EXPRESSIONS = {
    "torch.__version__": "torch_version",
    "torch.version.cuda": "torch_cuda",
    "torch.cuda.is_available()": "torch_cuda_available",
    "torch.cuda.device_count()": "torch_device_count",
    "torch.cuda.get_arch_list()": "torch_arch_list",
    "torch.backends.cudnn.version()": "torch_cudnn",
    "tf.__version__": "tensorflow_version",
    "tensorflow.__version__": "tensorflow_version",
    "tf.test.is_gpu_available()": "tensorflow_gpu_available",
    "tf.test.is_built_with_cuda()": "tensorflow_built_with_cuda",
    "tf.config.list_physical_devices('gpu')": "tensorflow_gpus",
    "tf.config.experimental.list_physical_devices('gpu')": "tensorflow_gpus",
    "jax.__version__": "jax_version",
    "jax.devices()": "jax_devices",
    "jax.default_backend()": "jax_backend",
}
_NAME = re.compile(r"^torch\.cuda\.get_device_name\(\s*\d*\s*\)$")
_PROMPT = re.compile(r"^\s*(?:>>>|In \[\d{1,5}\]:)\s?(.{1,300})$")
_ONE_LINER = re.compile(r"python[\d.]*(?:\.exe)?\s+-c\s+([\"'])(.{1,600}?)\1")
_PRINT = re.compile(r"print\((.{1,500})\)\s*;?\s*$")


def read(lines: list[str]) -> Optional[dict[str, Any]]:
    """The answers the sessions in ``lines`` printed; None when there are none."""
    out: dict[str, Any] = {"notes": [], "evidence": []}
    commands: set[str] = set()
    for number, line in enumerate(lines, 1):
        if ("-c" in line or ">>>" in line or "In [" in line) and line in commands:
            continue  # the same command again: its first answer is kept
        if ">>>" in line or "In [" in line:
            commands.add(line)
            prompt = _PROMPT.match(line)
            if prompt:
                expr = _unprint(prompt.group(1))
                if _field(expr) and _field(expr) not in out:
                    _take(out, [expr], _answer_lines(lines, number, 1), number)
        elif "-c" in line and "python" in line:
            commands.add(line)
            m = _ONE_LINER.search(line)
            if m:
                printed = _PRINT.search(m.group(2).rsplit(";", 1)[-1].strip())
                if printed:
                    exprs = [e.strip() for e in _split_args(printed.group(1))]
                    _take(out, exprs, _answer_lines(lines, number, len(exprs)), number)
    return out if len(out) > 2 else None


def _unprint(expr: str) -> str:
    m = _PRINT.match(expr.strip())
    return m.group(1).strip() if m else expr.strip()


def _answer_lines(lines: list[str], number: int, count: int) -> list[str]:
    """What came out of the command on line ``number``: the next line, or ``count`` lines when one value
    per line was printed; nothing when the next line is another prompt."""
    after = [ln.strip() for ln in lines[number:number + max(count, 1)]]
    if not after or not after[0] or _PROMPT.match(after[0]) or after[0].startswith(("$", "#", "(")) and "Device" not in after[0]:
        return []
    return after


def _take(out: dict[str, Any], exprs: list[str], answer: list[str], number: int) -> None:
    fields = [_field(e) for e in exprs]
    if not answer or not all(fields):
        return
    if len(fields) == 1:
        values = [answer[0]]
    elif len(answer[0].split()) == len(fields):
        values = answer[0].split()  # print(a, b) on one line
    elif len(answer) >= len(fields) and all(answer[:len(fields)]):
        values = answer[:len(fields)]  # one print per value
    else:
        return
    for field, raw in zip(fields, values):
        assert field is not None  # all(fields) above
        value = _value(field, raw)
        if value is None or field in out:
            continue
        out[field] = value
        out["evidence"].append({"kind": field, "value": value, "line": number + 1, "text": raw[:300]})


@functools.lru_cache(maxsize=256)
def _field(expr: str) -> Optional[str]:
    compact = re.sub(r"\s+", "", expr).replace('"', "'").lower()
    if _NAME.match(compact):
        return "torch_device_name"
    return EXPRESSIONS.get(compact) or EXPRESSIONS.get(compact.replace("tensorflow.", "tf.")) if compact else None


def _value(field: str, raw: str) -> Any:
    text = raw.strip()
    if field.endswith(("_available", "_built_with_cuda")):
        return {"true": True, "false": False}.get(text.lower())
    if field in ("torch_arch_list", "tensorflow_gpus", "jax_devices"):
        if not text.startswith("["):
            return None
        if field == "torch_arch_list":
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return None
            return [a for a in value if isinstance(a, str)] if isinstance(value, list) else None
        if field == "tensorflow_gpus":
            return len(re.findall(r"device_type='GPU'", text))
        return "cpu" if re.match(r"^\[\s*(?:Cpu|TFRT_CPU)", text) else "gpu" if re.match(
            r"^\[\s*(?:Cuda|cuda|gpu|Gpu|StreamExecutorGpu)", text) else None
    if field == "torch_device_count":
        return int(text) if text.isascii() and text.isdigit() else None  # int() refuses "²"
    value = text.strip("'\"")
    if field == "torch_cuda" and value == "None":
        return "None"
    if field in ("torch_version", "tensorflow_version", "jax_version", "torch_cuda") and not re.match(r"^\d+\.\d+", value):
        return None
    return value or None


def _split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of a print() call."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts
