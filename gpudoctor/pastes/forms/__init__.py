"""Readers for the ticket forms beyond collect_env and nvidia-smi, one module per family: the messages
frameworks, CUDA, NVML, the container toolkit and the kernel print (``messages``), Python sessions and
one-liners (``session``), issue templates and environment scripts (``templates``), tool outputs and
package lists (``tools``), the versions a ticket's prose states (``prose``), the weakest evidence; what a
reporter says they saw (``observed``: "is_available() is False", "fell off the bus"); and the signs of an AMD
ROCm stack (``rocm``), which no NVIDIA rule may judge.

Each reader goes through the body once, line by line, and tests a line with a plain substring before
any regular expression; every expression is anchored or bounded, so a 1 MB body stays linear. Each
returns plain values plus ``evidence``: what the paste shows happened (a warning printed, an
``is_available()`` answer), each item with the line it came from, which outranks what the matrix infers.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

from gpudoctor.pastes.forms import messages, observed, prose, rocm, session, templates, tools

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix


def readers(matrix: Matrix) -> tuple[tuple[str, Callable[[list[str]], Any]], ...]:
    """(paste kind, reader), in order: a reader takes the body's lines and returns its values, or None when
    the body holds none of its form. The messages reader is bound to ``matrix``, the one the input is read
    with: it names the architecture of a GPU a warning names without one."""
    return (
        ("messages", functools.partial(messages.read, matrix=matrix)),
        ("session", session.read),
        ("template", templates.read),
        ("tools", tools.read),
        ("prose", prose.read),
        ("observed", observed.read),
        ("rocm", rocm.read),
    )


#: Longest line a reader looks at; a longer one is cut (a minified blob pasted by mistake).
MAX_LINE = 2000
