#!/usr/bin/env bash
# Container entrypoint: check the GPU setup first, then run the container's real command.
#
# gpudoctor exits 0 when nothing at or above --fail-on was found, 1 when something was, 2 on a
# usage error and 3 when it could not complete. Anything but 0 stops the container here, with the
# problems already printed one line each (--quiet prints nothing when the machine is healthy), so a
# broken node fails fast instead of half-way through a training run.
set -euo pipefail

if gpudoctor check --fail-on error --quiet; then
    exec "$@"
else
    status=$?
    echo "gpudoctor: the GPU check failed (exit status $status); not starting: $*" >&2
    exit "$status"
fi
