#!/usr/bin/env bash
# How fast this machine's disk gives what the frameworks read, cold, as more readers ask at once: the same
# ~2 GB of PyTorch's and the CUDA wheels' libraries read whole with 1, 4 and 16 readers, page caches dropped
# before each (root only). Tells whether a check that reads more than collect_env can still finish as soon.
# Usage (through the device tool, from the repo root): bash tools/device/disk_rate.sh  -> $OUT/disk_rate.txt
# Reads only; changes no GPU setting.
set -u
out=${OUT:-$(mktemp -d)}
sp=$(python3 -c 'import torch,os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
list=$(mktemp)
find "$sp/torch/lib" "$sp/nvidia" -name '*.so*' -type f -printf '%s %p\n' | sort -n | \
  awk '{ total += $1; print $2; if (total > 2e9) exit }' > "$list"
bytes=$(xargs -a "$list" stat -c %s | awk '{s += $1} END {print s}')
for readers in 1 4 16; do
  sync; echo 3 > /proc/sys/vm/drop_caches
  t0=$EPOCHREALTIME
  xargs -a "$list" -P "$readers" -n 1 cat > /dev/null
  t=$(awk "BEGIN{printf \"%.2f\", $EPOCHREALTIME - $t0}")
  echo "$readers reader(s): $(wc -l < "$list") files, $(awk "BEGIN{printf \"%.0f\", $bytes / 1e6}") MB in $t s, $(awk "BEGIN{printf \"%.0f\", $bytes / 1e6 / $t}") MB/s" | tee -a "$out/disk_rate.txt"
done
