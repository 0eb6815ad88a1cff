#!/usr/bin/env bash
# gpudoctor as a Slurm node health gate, in one of two places in slurm.conf:
#
#   HealthCheckProgram=/etc/slurm/gpudoctor-healthcheck.sh   # periodically, as root, on every node
#   HealthCheckInterval=300
# or
#   Prolog=/etc/slurm/gpudoctor-healthcheck.sh               # before each job, on each of its nodes
#
# Slurm kills a HealthCheckProgram that runs longer than 60 seconds and acts on nothing it returns: the
# program drains the node itself (scontrol). A Prolog that exits non-zero makes slurmd drain the node and
# requeue the job. So: a quick check (no work on the GPUs, so it costs a job well under a second) with a
# hard time budget, and only an error found drains the node. gpudoctor failing to complete (exit 2 or 3)
# is logged and never drains a node: that says nothing about its GPUs.
#
# Once fixed, return the node to service with: scontrol update NodeName=NODE State=RESUME
set -uo pipefail

node="${SLURMD_NODENAME:-$(hostname -s)}"

run_check() {
    # --quiet prints one line per problem and nothing when healthy; --timeout bounds the whole run,
    # and what is unfinished then is an error (INT004), never a pass.
    gpudoctor check --quick --fail-on error --quiet --timeout 20
}

problems="$(run_check 2>&1)" && status=0 || status=$?
case "$status" in
    0)
        exit 0
        ;;
    1)
        reason="$(printf '%s\n' "$problems" | grep -m1 '^gpudoctor: error' || printf 'gpudoctor: error')"
        reason="${reason:0:200}"
        ;;
    *)
        logger -t gpudoctor-healthcheck "node $node: the check could not complete (exit status $status): ${problems:0:500}" || true
        exit 0
        ;;
esac

if [[ -n "${SLURM_JOB_ID:-}" ]]; then
    # Prolog: slurmd drains the node and requeues the job; this line goes to slurmd's log.
    echo "$reason" >&2
    exit 1
fi
scontrol update NodeName="$node" State=DRAIN Reason="$reason"
