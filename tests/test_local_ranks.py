"""Rank 0 of a torchrun job exits after the other ranks torchrun started beside it: torchrun stops every rank once
one exits with an error, and rank 0 exits 1 when the job has findings, which would cut off another rank's line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from gpudoctor.distributed import Launch, wait_for_local_ranks
from gpudoctor.procs.child import PACKAGE_ROOT
from gpudoctor.procs.pids import child_pids, running, start_ticks

#: A stand-in for torchrun's agent: another rank of the job that sleeps, a child of the agent that is no rank
#: (LOCAL_RANK 0, as a `tee` beside rank 0 inherits), then rank 0, which waits. The agent says whether the rank had
#: ended when rank 0 returned, and reaps it only after (a zombie must count as ended).
AGENT = r"""
import json, os, subprocess, sys, time
job = {**os.environ, "TORCHELASTIC_RUN_ID": "job-1"}
other = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({float(sys.argv[1])})"], env={**job, "LOCAL_RANK": "1"})
bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env={**job, "LOCAL_RANK": "0"})
zero = subprocess.run([sys.executable, "-c", sys.argv[2]], capture_output=True, text=True, cwd=sys.argv[3],
                      env={**job, "LOCAL_RANK": "0"})
said = json.loads(zero.stdout.strip().splitlines()[-1])
said["other_ended"] = other.poll() is not None
bystander.kill()
bystander.wait()
other.wait()
print(json.dumps(said), flush=True)
"""
RANK0 = r"""
import json, time
from gpudoctor.distributed import Launch, wait_for_local_ranks
launch = Launch(rank=0, world_size=2, local_rank=0, local_world_size=2, node_rank=0, launcher="torchrun")
begun = time.monotonic()
left = wait_for_local_ranks(launch)
print(json.dumps({"left": left, "waited_s": time.monotonic() - begun}))
"""


def _agent(sleep_s: float) -> dict:
    out = subprocess.run([sys.executable, "-c", AGENT, str(sleep_s), RANK0, PACKAGE_ROOT], capture_output=True,
                         text=True, timeout=60)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_rank_0_waits_until_the_rank_beside_it_has_ended_and_for_nothing_else():
    said = _agent(1.0)
    assert said["left"] == 0 and said["other_ended"] is True
    assert said["waited_s"] < 9  # the bystander sleeps 30 s and is not waited for


def test_a_rank_that_already_ended_is_not_waited_for_even_before_it_is_reaped():
    said = _agent(0.0)
    assert said["left"] == 0 and said["waited_s"] < 5


def test_only_rank_0_of_a_torchrun_job_waits():
    for launch in (Launch(1, 2, 1, 2, 0, "torchrun"), Launch(0, 2, 0, 2, 0, "environment"), Launch(0, 2, 0, 1, 0, "torchrun")):
        begun = time.monotonic()
        assert wait_for_local_ranks(launch) == 0 and time.monotonic() - begun < 0.5


def test_a_zombie_is_not_running_and_a_live_child_is():
    kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    ticks = start_ticks(kid.pid)
    try:
        assert kid.pid in child_pids(os.getpid()) and running(kid.pid, ticks)
        kid.kill()
        deadline = time.monotonic() + 5
        while running(kid.pid, ticks) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not running(kid.pid, ticks)  # killed, not yet reaped: a zombie
    finally:
        kid.wait()
    assert not running(kid.pid, ticks)
