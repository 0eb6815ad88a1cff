#!/usr/bin/env bash
# gpudoctor installed as a user installs it, in a venv of its own (what `pipx install .` makes): its wheel
# built from this tree and installed with pip (which compiles its bytecode), and its four runtime
# dependencies copied from the image's Python (the machine has no network, so pip cannot fetch them; the
# copies are the same files pip would unpack). No system site-packages: the image's .pth files are not
# read at start-up, as they are not in a pipx venv. Usage (device tool, repo root):
#   bash tools/device/tool_venv.sh [VENV]   (default /tmp/gd-tool) -> VENV/bin/gpudoctor
set -eu
venv=${1:-/tmp/gd-tool}
rm -rf "$venv"
python3 -m venv "$venv"
src=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
dst=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for entry in "$src"/click* "$src"/packaging* "$src"/psutil* "$src"/pynvml* "$src"/nvidia_ml_py*; do
  [ -e "$entry" ] && cp -a "$entry" "$dst/"
done
"$venv/bin/python" -m compileall -q "$dst"  # as pip does when it installs them
wheels=$(mktemp -d)
python3 -m pip wheel -q --no-deps --no-build-isolation --no-index -w "$wheels" . > /dev/null
"$venv/bin/pip" install -q --no-deps --no-index "$wheels"/gpudoctor-*.whl
rm -rf "$wheels" build gpudoctor.egg-info
"$venv/bin/python" -c 'import click, packaging, psutil, pynvml, gpudoctor; print("tool venv ready:", gpudoctor.__file__)'
