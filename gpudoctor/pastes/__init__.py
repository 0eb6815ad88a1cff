"""Reading what users paste into bug tickets: `collect_env` text, `nvidia-smi` output (table, ``-q``,
``-q -x``), gpudoctor's own Markdown report, or a whole issue body holding several of them.

Pure functions of text, standard library only: ``detect`` finds each paste in a body, one module per
format turns a paste into plain values, and ``to_facts`` merges them into one snapshot in the normal
shape (docs/report-format.md), every fact with the paste it came from, plus the list of checks the
pastes can feed. `gpudoctor analyze` (gpudoctor/cli/reports.py) judges that snapshot with the normal checks.
"""

from gpudoctor.pastes.read import PasteError, read_inputs

__all__ = ["PasteError", "read_inputs"]
