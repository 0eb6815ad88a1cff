"""Bundled compatibility data (JSON files beside this one), shipped inside the wheel as
``gpudoctor.compat_matrix``. Every entry names its source; see gpudoctor/matrix.py."""
