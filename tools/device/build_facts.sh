#!/usr/bin/env bash
# What the device image's framework builds really carry, for the matrix to equal where a real build is at
# hand: PyTorch's arch list and cuDNN, the SASS/PTX inside its CUDA libraries, JAX's and CuPy's.
# Usage on a device machine: bash tools/device/build_facts.sh > $OUT/build_facts.txt
set -u
PY=${PY:-python3}
echo "== date"; date -u
echo "== nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
echo "== torch"
$PY - <<'PY'
import torch, json
print(json.dumps({"version": torch.__version__, "cuda": torch.version.cuda, "arch_list": torch.cuda.get_arch_list(),
                  "cudnn": torch.backends.cudnn.version(), "nccl": ".".join(map(str, torch.cuda.nccl.version()))}))
PY
echo "== pip nvidia packages"; $PY -m pip list 2>/dev/null | grep -i -E "^(torch|jax|cupy|nvidia-|triton)" 
echo "== torch Requires-Dist"; $PY - <<'PY'
from importlib.metadata import requires
print("\n".join(r for r in (requires("torch") or []) if "nvidia" in r.lower()))
PY
TL=$($PY -c "import torch,os;print(os.path.join(os.path.dirname(torch.__file__),'lib'))")
for lib in libtorch_cuda.so libc10_cuda.so; do
  f="$TL/$lib"; [ -f "$f" ] || continue
  echo "== cuobjdump $lib elf archs"; timeout 120 cuobjdump --list-elf "$f" 2>/dev/null | grep -oE "sm_[0-9]+[af]?" | sort | uniq -c
  echo "== cuobjdump $lib ptx archs"; timeout 120 cuobjdump --list-ptx "$f" 2>/dev/null | grep -oE "sm_[0-9]+[af]?" | sort | uniq -c
done
echo "== jax"
$PY - <<'PY'
import json
try:
    import jax, jaxlib
    print(json.dumps({"jax": jax.__version__, "jaxlib": jaxlib.__version__, "devices": [str(d) for d in jax.devices()]}))
except Exception as e:
    print("jax error", e)
PY
for f in $($PY -c "
import glob,site,os
for s in site.getsitepackages():
    for g in glob.glob(os.path.join(s,'jax_cuda*_plugin','*.so'))+glob.glob(os.path.join(s,'jaxlib','*cuda*.so')): print(g)
" 2>/dev/null); do
  echo "== cuobjdump $(basename $f) elf"; timeout 60 cuobjdump --list-elf "$f" 2>/dev/null | grep -oE "sm_[0-9]+[af]?" | sort | uniq -c
  echo "== cuobjdump $(basename $f) ptx"; timeout 60 cuobjdump --list-ptx "$f" 2>/dev/null | grep -oE "sm_[0-9]+[af]?" | sort | uniq -c
done
echo "== cupy"
$PY - <<'PY'
import json
try:
    import cupy
    from cupy.cuda import runtime
    print(json.dumps({"cupy": cupy.__version__, "runtime": runtime.runtimeGetVersion(), "driver": runtime.driverGetVersion(),
                      "cudnn": getattr(cupy.cuda, "cudnn", None) is not None}))
    cupy.show_config()
except Exception as e:
    print("cupy error", e)
PY
echo "== nvcc"; nvcc --version | tail -2; nvcc --list-gpu-arch 2>/dev/null | tr '\n' ' '; echo
