"""Patch sharing._describe, in a copy on the GPU machine only, to say what /proc shows of each process a timed
step took for another's (its environment, state, parents). Usage there: python3 tools/device/debug_sharing.py"""

p = "gpudoctor/probes/workload/sharing.py"
s = open(p).read()
s = s.replace('''    return {"pid": pid, "name": name, "used_memory_bytes": used}''', '''    env = _environ(pid)
    state = ""
    try:
        state = [l for l in open(f"/proc/{pid}/status") if l.startswith(("State", "PPid"))]
    except OSError as exc:
        state = repr(exc)
    chain = []
    q = pid
    for _ in range(5):
        q = parent_pid(q)
        chain.append(q)
        if not q or q <= 1:
            break
    return {"pid": pid, "name": name, "used_memory_bytes": used, "env_len": None if env is None else len(env),
            "has_token": None if not env else (os.environ.get(RUN_ENV, "?") in env.decode(errors="replace")),
            "state": state, "chain": chain, "my_ppid": os.getppid(), "me": os.getpid()}''')
open(p, "w").write(s)
