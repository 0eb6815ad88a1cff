#!/usr/bin/env bash
# gpudoctor diagnosing a user's venv that lacks gpudoctor's own dependencies, as a pipx install of gpudoctor
# does: (1) a bare venv (nothing in it); (2) a venv holding every package of the image's framework venv
# (torch, jax, cupy, the nvidia-* wheels) except psutil, click, packaging and nvidia-ml-py, as a fresh
# `pip install torch` venv has none of them. In each source tree given: `check --python VENV` and its
# findings. Usage (device tool, repo root): bash tools/device/bare_venv.sh TREE...   -> $OUT/bare/
set -u
d=${OUT:-/tmp}/bare; mkdir -p "$d"
python3 -m venv --without-pip /tmp/bare-venv
python3 -m venv --without-pip /tmp/fw-venv
src=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
deps=/tmp/fw-deps; mkdir -p "$deps"
for entry in "$src"/*; do
  case "$(basename "$entry")" in psutil*|click*|packaging*|nvidia_ml_py*|pynvml*|_distutils_hack|distutils-precedence.pth|*.pth) continue;; esac
  ln -s "$entry" "$deps/$(basename "$entry")"
done
echo "$deps" > "$(/tmp/fw-venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/fw.pth"
/tmp/fw-venv/bin/python -c 'import torch, importlib.util as u; print("fw-venv: torch", torch.__version__, "psutil:", u.find_spec("psutil") is not None, "click:", u.find_spec("click") is not None)'
for venv in bare-venv fw-venv; do
  for tree in "$@"; do
    name=$(basename "$(cd "$tree" && pwd)")-$venv
    (cd "$tree" && python3 -m gpudoctor check --python /tmp/$venv/bin/python --format json -o "$d/$name.json" 2> "$d/$name.err"; echo "$name: rc=$?")
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('  findings:', [(f['code'], f['title'][:100]) for f in r['findings']]); print('  frameworks:', {k: (v.get('status'), (v.get('info') or {}).get('version')) for k, v in r['facts']['frameworks'].items()}); print('  workload runs:', [(x.get('framework'), x.get('device'), 'error' in x) for x in r['facts'].get('workload', {}).get('runs', [])])" "$d/$name.json"
  done
done
