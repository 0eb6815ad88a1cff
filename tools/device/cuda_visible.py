"""Compare gpudoctor's reading of CUDA_VISIBLE_DEVICES with what the CUDA driver really enumerates.

Run on a GPU machine: for each mask, a child process asks libcuda (cuInit, cuDeviceGetCount,
cuDeviceGetUuid) which devices it sees; gpudoctor's resolve() predicts the same from NVML facts.
Prints one JSON line per mask and a summary line. Never changes any GPU setting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = r"""
import ctypes, json, uuid
cuda = ctypes.CDLL("libcuda.so.1")
rc = cuda.cuInit(0)
out = {"init": rc, "uuids": []}
if rc == 0:
    n = ctypes.c_int()
    cuda.cuDeviceGetCount(ctypes.byref(n))
    for i in range(n.value):
        dev = ctypes.c_int()
        cuda.cuDeviceGet(ctypes.byref(dev), i)
        buf = (ctypes.c_ubyte * 16)()
        cuda.cuDeviceGetUuid(buf, dev)
        out["uuids"].append("GPU-" + str(uuid.UUID(bytes=bytes(buf))))
print(json.dumps(out))
"""


def driver_sees(mask: str | None) -> dict:
    env = dict(os.environ)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if mask is not None:
        env["CUDA_VISIBLE_DEVICES"] = mask
    res = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60)
    try:
        return json.loads(res.stdout)
    except ValueError:
        return {"error": res.stderr[-500:]}


def masks_for(uuids: list[str]) -> list[str | None]:
    """The masks compared: documented forms, strtol's corners, UUID prefixes and cases, and white space
    and digits that are Unicode's but not C's."""
    masks: list[str | None] = [None, "", "-1", "0", "0,0", "0,7", "7,0", " 0", "0 ", "foo,0", "GPU-zzzz", "-0", "0,foo",
             uuids[0][:12], uuids[0], "GPU-" + uuids[0][4:].upper()]
    if len(uuids) > 1:
        masks += ["1", "1,0", "0,1,0", "1,1", "0,-1,1", "0, 1", f"{uuids[1][:10]},0", f"{uuids[1]},{uuids[0]}", "00,1", "+1",
                  f"0,{uuids[1][:10]}", f"{uuids[0][:10]},{uuids[1][:10]}", f"{uuids[1][:10]},1", "1abc", "0x1", "1.0",
                  " +1", "1,", ",1", "0,,1", "GPU-", "MIG-xyz,0", f"{uuids[0][:8]},{uuids[0][:12]}", "1,GPU-zzzz,0",
                  "0 1", "1,\u00a00", "\t1", "1\u3000", "\u0661"]
    # C's white space and digits, against Unicode's: what text copied from a web page or typed on another keyboard holds
    masks += ["\uff10", "\u0660", "\uff11", "\u00a00", "\u20030", "0,\u00a00", "0 1", "\t0", "\v0", "0\r", "\u00850",
              "0\u00a0", "\u2007" + "0", f"\u00a0{uuids[0]}", f"{uuids[0]}\t", "\u00b2", "0\u0301"]
    return masks


def main() -> None:
    from gpudoctor.views.visibility import resolve
    from gpudoctor.probes.nvml import probe_nvml

    facts = probe_nvml()
    facts["host"] = {"env": {}}
    masks = masks_for([g["uuid"] for g in facts["gpus"]])
    agree = 0
    for mask in masks:
        seen = driver_sees(mask)
        predicted = [d.uuid for d in resolve({**facts, "host": {"env": {"CUDA_VISIBLE_DEVICES": mask}}}).devices]
        same = seen.get("uuids") == predicted
        agree += same
        print(json.dumps({"mask": mask, "driver": seen, "gpudoctor": predicted, "agree": same}))
    print(f"visibility: {agree} of {len(masks)} masks agree with the CUDA driver")


if __name__ == "__main__":
    main()
