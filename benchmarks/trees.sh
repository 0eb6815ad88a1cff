# Shared by the benchmark scripts that time source trees against each other on one GPU machine (source it
# after setting $here, this tree's path, and $log, the file every figure is also written to).
# take_trees BASE...: the array trees, each BASE's absolute path and then this tree's, in that order.
take_trees() { trees=(); local b; for b in "$@"; do trees+=("$(cd "$b" && pwd)"); done; trees+=("$here"); }
say() { echo "$*" | tee -a "$log"; }
# drop: empty the page caches (root only), so that the next command reads from a cold disk.
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
name() { [ "$1" = "$here" ] && echo this || basename "$1"; }
median() { python3 -c 'import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print(f"{statistics.median(v):.3f}")' "$@"; }
