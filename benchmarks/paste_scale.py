"""How long `gpudoctor analyze` takes on big pastes: every 1 MB body in 0.3 s or less, and a larger input
bounded in time and memory.

Builds one body per kind from the real pastes in tests/fixtures (each repeat in its own ``` fence, as an
issue body with many pastes has them):

- ``collect_env``: one real collect_env paste repeated to 1 MB;
- ``nvidia-smi``, ``nvidia-smi -q``: a real table, a real ``-q`` paste, each repeated to 1 MB;
- ``tickets``: the real ticket bodies of tests/fixtures/tickets, one after another, to 1 MB;
- ``prose``: random words in lines (seeded: the same body every run), 1 MB;
- ``one line``: the same words on one 1 MB line;
- ``markdown report``: gpudoctor's own Markdown report of a real H100 run, pasted again and again to 1 MB;
- ``tickets 15 MB``: the ticket bodies to 15 MB, under the 16 MiB cap on an input;
- ``tickets 20 MB``: the same to 20 MB, over the cap (refused after reading the first 16 MiB).

Each body is written to a temporary file. A child process per body imports gpudoctor, runs `analyze` once
on a small paste (so that imports and the matrix's first load are not counted), then times `analyze FILE`
in process, through Click's test runner, REPEAT times. The time covers reading and decoding the file,
finding and parsing every paste, turning them into facts, judging them, redacting and rendering the text
report. It does not cover Python's start and gpudoctor's import, the same for any input
(benchmarks/quick_start.py measures those). The CPU column is the process's CPU time over the same span:
on a machine shared with other work it shows what the wall time would be on an idle one. Peak RSS is the
child's own (VmHWM), imports included.

Usage: python benchmarks/paste_scale.py [--repeat N] [KIND ...]   (default: every kind, N = 3; the median
is printed, with the slowest run).
"""

from __future__ import annotations

import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests/fixtures"
MB = 1_000_000


def _fenced(text: str, size: int) -> str:
    """``text`` (without the fences it came in) in a fence, repeated until the body holds ``size`` characters."""
    lines = [line for line in text.strip().splitlines() if not line.lstrip().startswith(("```", "~~~"))]
    return _repeated("```\n" + "\n".join(lines) + "\n```\n\n", size)


def _repeated(block: str, size: int) -> str:
    return (block * (size // len(block) + 1))[:size]


def _tickets(size: int) -> str:
    bodies = [p.read_text(errors="replace") for p in sorted((FIXTURES / "tickets").iterdir())
              if p.suffix in (".md", ".txt")]
    joined = "\n\n---\n\n".join(bodies)
    return (joined * (size // len(joined) + 1))[:size]


def _words(size: int, newline_every: int) -> str:
    rng = random.Random(26)
    common = "the a to of and in is it for on with that this my when i not but run gpu driver error".split()
    out, length, count = [], 0, 0
    while length < size:
        word = rng.choice(common) if rng.random() < 0.4 else "".join(
            rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10)))
        count += 1
        sep = "\n" if newline_every and count % newline_every == 0 else " "
        out.append(word + sep)
        length += len(word) + 1
    return "".join(out)[:size]


KINDS: dict[str, Callable[[], str]] = {
    "collect_env": lambda: _fenced((FIXTURES / "pastes/pytorch-175855.txt").read_text(), MB),
    "nvidia-smi": lambda: _fenced((FIXTURES / "pastes/dcgm-232.md").read_text(), MB),
    "nvidia-smi -q": lambda: _fenced((FIXTURES / "pastes/netdata-2759.md").read_text(), MB),
    "tickets": lambda: _tickets(MB),
    "prose": lambda: _words(MB, 12),
    "one line": lambda: _words(MB, 0),
    "markdown report": lambda: _repeated((FIXTURES / "real/h100x1-20261127/full.md").read_text() + "\n\n", MB),
    "tickets 15 MB": lambda: _tickets(15 * MB),
    "tickets 20 MB": lambda: _tickets(20 * MB),
}


def child(path: str, repeat: int) -> None:
    """Run in the child: warm up on a small paste, then time ``analyze path`` ``repeat`` times."""
    from click.testing import CliRunner

    from gpudoctor.cli import cli

    runner = CliRunner()
    runner.invoke(cli, ["analyze", str(FIXTURES / "pastes/pytorch-175855.txt")])
    seconds, cpu, code = [], [], None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = runner.invoke(cli, ["analyze", path])
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        code = result.exit_code
    print(json.dumps({"seconds": seconds, "cpu": cpu, "rss_mib": peak_mib(), "exit": code}))


def peak_mib() -> float:
    """This process's peak resident memory: VmHWM, which starts afresh at exec. Linux carries ru_maxrss over
    exec, so a child's ru_maxrss would include the parent's, which built the bodies."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str]) -> None:
    repeat = 3
    if argv[:1] == ["--repeat"]:
        repeat, argv = int(argv[1]), argv[2:]
    kinds = argv or list(KINDS)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        sys.exit(f"unknown kind(s): {', '.join(unknown)}; known: {', '.join(KINDS)}")
    print(f"{'kind':>16} {'MB':>6} {'median s':>9} {'max s':>7} {'CPU s':>6} {'peak MiB':>9} {'exit':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            body = KINDS[kind]()
            path = Path(tmp) / "body.md"
            path.write_text(body)
            done = subprocess.run([sys.executable, __file__, "--child", str(path), str(repeat)], cwd=ROOT,
                                  capture_output=True, text=True)
            try:
                got = json.loads(done.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                print(f"{kind:>16}: the child failed: {done.stderr.strip()[-300:]}")
                continue
            size = path.stat().st_size / MB
            print(f"{kind:>16} {size:>6.1f} {statistics.median(got['seconds']):>9.3f} {max(got['seconds']):>7.3f} "
                  f"{statistics.median(got['cpu']):>6.3f} {got['rss_mib']:>9.0f} {got['exit']:>5}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]))
    else:
        main(sys.argv[1:])
