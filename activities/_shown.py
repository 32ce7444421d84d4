"""Text from a tree or a request as a log line shows it: every control character escaped.

Directory and file names are the tree's, and a tree is hostile: a name holding a newline
would forge a second log line, an ANSI escape would rewrite the operator's terminal. Every
path a log line names goes through :func:`escaped` (or ``%r``, which escapes as well).
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, and the characters that break or reorder a line when shown: the
# Unicode line/paragraph separators and the bidirectional controls.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escaped(text: object) -> str:
    """``str(text)`` with every control character shown as an escape (``\\x0a``, ``\\u2028``);
    a backslash is left as it is, everything else unchanged."""
    return _CONTROL.sub(_escape, str(text))
