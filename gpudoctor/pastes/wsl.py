"""How a paste tells WSL 1 from WSL 2: shared by the paste readers and the evidence they merge."""

from __future__ import annotations

import re

#: WSL 1's kernel release, "4.4.0-19041-Microsoft" (WSL 2's is "5.15.153.1-microsoft-standard-WSL2"): the spellings
#: yast/yast-yast2#1084 and 4U6U57/wsl-open#4 match on. WSL 1 translates Linux calls and has no GPU; CUDA runs under WSL 2.
WSL1_KERNEL = re.compile(r"\b4\.4\.0-\d{4,5}-Microsoft\b")
