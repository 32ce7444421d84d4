"""Hypothesis strategies of hostile tool arguments: shell syntax, globs, regexes, traversal,
option look-alikes, unicode and oversized strings.

Strings may hold placeholders (``<<WS>>``, ``<<OUT>>``, ...) that a test replaces with the real
paths of its fixture layout (see ``fill`` in tests/activities/test_hostile.py), so strategies can
be built at import time and still name absolute paths inside and outside the workspace.
"""

from __future__ import annotations

from hypothesis import strategies as st

from fs_search.activities._contract import (
    MAX_INCLUDE_BYTES,
    MAX_LOCATOR_BYTES,
    MAX_PATH_BYTES,
    MAX_PATTERN_BYTES,
)

# Placeholders a test substitutes with real paths of its layout.
WS = "<<WS>>"  # the workspace, as given to the worker (maybe through a symlink)
WS_REAL = "<<WS_REAL>>"  # the workspace's real path
WS_LINK = "<<WS_LINK>>"  # a symlink to the workspace
WS_EVIL = "<<WS_EVIL>>"  # a sibling whose name extends the workspace's (".../ws-evil")
OUT = "<<OUT>>"  # the directory outside the workspace
OUT_FILE = "<<OUT_FILE>>"  # a file outside whose name and content carry the marker
OUT_NAME = "<<OUT_NAME>>"  # that file's name
STORE = "<<STORE>>"  # the spill store directory
ARTIFACT = "<<ARTIFACT>>"  # a real artifact in the store
CANARY = "<<CANARY>>"  # a file that only a shell would create
PLACEHOLDERS = (WS_REAL, WS_LINK, WS_EVIL, WS, OUT_FILE, OUT_NAME, OUT, STORE, ARTIFACT, CANARY)

# Only this prefix of the marker is used in inputs: the full marker (prefix + uuid) can only
# reach a result by reading something outside the workspace.
MARKER_PREFIX = "OUTSIDE_MARKER"

SHELL_META = [
    "$(",
    ")",
    "`",
    ";",
    "|",
    "||",
    "&&",
    "&",
    ">",
    ">>",
    "<",
    "*",
    "?",
    "[",
    "]",
    "{",
    "}",
    "'",
    '"',
    "\\",
    "\n",
    "$",
    "${IFS}",
    "$HOME",
    "~",
    "!",
    "#",
    " ",
    "\t",
]
GLOB_SYNTAX = [
    "*",
    "**",
    "**/",
    "/**",
    "?",
    "[a-z]",
    "[!a]",
    "[^a]",
    "[]",
    "{a,b}",
    "{py,rs}",
    "{",
    "}",
    "[",
    "]",
    "\\",
    "\\*",
    "/",
    ",",
    "!",
    "*.py",
    "**/*.txt",
    ".*",
    "*.{py,md}",
    "{,}",
    "**/**/**",
]
REGEX_SYNTAX = [
    "(",
    ")",
    "[",
    "]",
    "[^\\n]",
    "{2,}",
    "{1000}",
    "*",
    "+",
    "?",
    "|",
    "^",
    "$",
    ".",
    ".*",
    "(?s).*",
    "(?m)^",
    "\\b",
    "\\w+",
    "\\p{L}",
    "\\p{Greek}",
    "\\pL",
    "(?i)",
    "(?x)",
    "(?-u:\\xff)",
    "(?=x)",
    "(?<!x)",
    "\\1",
    "\\",
    "\\x{10FFFF}",
    "\\x{110000}",
    "\\n",
    "\\z",
    "\\Q",
    "needle",
    "[[:alpha:]]",
]
OPTION_LIKE = [
    "-",
    "--",
    "-e",
    "--follow",
    "-L",
    "-uuu",
    "--no-ignore",
    "--pre=sh",
    "--pre-glob=*",
    "--files",
    "-f/etc/passwd",
    "--glob=!*",
    "-g",
    "--max-count=0",
    "--files-without-match",
    "--debug",
    "--version",
    "--help",
    "--type-add=x:*",
    "--null-data",
    "--regex-size-limit=1",
    "--search-zip",
]
TRAVERSAL = [
    "..",
    ".",
    "/",
    "//",
    "../",
    "./",
    "/..",
    "../..",
    "../../..",
    "~",
    "~root",
    "/etc",
    "/etc/passwd",
    "/proc/self/root",
    "/proc/self/cwd",
    "/proc/self/environ",
    "/dev/zero",
    "/dev/stdin",
    "/tmp",
    "%2e%2e",
    "..%2f",
    "..\\",
    "file://",
]
# Names inside the layout's workspace (symlinks leading out, in, and nowhere).
WORKSPACE_NAMES = [
    "src",
    "src/app",
    "src/app/main.py",
    "src/leak.txt",
    "src/rel_leak.txt",
    "escape_dir",
    "escape_dir/",
    "rel_escape",
    "up",
    "alias",
    "loop",
    "docs",
    "README.md",
    ".hidden",
    "-dash.txt",
    "odd",
    "ignored.log",
    "ws",
    "outside",
    "ws-evil",
    "ws-link",
    MARKER_PREFIX,
    MARKER_PREFIX + "*",
    "*" + MARKER_PREFIX + "*",
]
UNICODE = [
    "é",
    "ß",
    "日本",
    "\u202e",
    "\u200b",
    "\ufeff",
    "\r",
    "\r\n",
    "\x85",
    "\u2028",
    "\U0001f600",
    "İ",
    "ﬃ",
    "\U0010ffff",
    "\x01",
    "\x1b[31m",
    "\x7f",
    # Lone surrogates: not valid UTF-8, but a direct caller can pass them.
    "\udcff",
    "\ud800",
]
PLACEHOLDER_PIECES = [WS, WS_REAL, WS_LINK, WS_EVIL, OUT, OUT_FILE, f"{OUT}/..", f"{WS}/.."]

ALL_PIECES = sorted(
    set(
        SHELL_META
        + GLOB_SYNTAX
        + REGEX_SYNTAX
        + OPTION_LIKE
        + TRAVERSAL
        + WORKSPACE_NAMES
        + UNICODE
        + PLACEHOLDER_PIECES
    )
)

SHELL_INJECTIONS = [
    f"$(touch {CANARY})",
    f"`touch {CANARY}`",
    f"; touch {CANARY}",
    f";touch {CANARY};",
    f"| touch {CANARY}",
    f"|| touch {CANARY}",
    f"&& touch {CANARY}",
    f"& touch {CANARY} &",
    f"\ntouch {CANARY}\n",
    f"$(touch${{IFS}}{CANARY})",
    f"' ; touch {CANARY} ; '",
    f'" ; touch {CANARY} ; "',
    f"> {CANARY}",
    f">{CANARY}",
    f"$(sh -c 'touch {CANARY}')",
    f"-e x --pre=/usr/bin/touch {CANARY}",
    f"--pre=touch{CANARY}",
]


def _pieces(pieces: list[str]) -> st.SearchStrategy[str]:
    return st.sampled_from(sorted(set(pieces)))


def composed(pieces: list[str], *, max_pieces: int = 6) -> st.SearchStrategy[str]:
    """Concatenations of syntax pieces and arbitrary unicode text (surrogates excluded)."""
    atom = st.one_of(_pieces(pieces), _pieces(pieces), st.text(max_size=6))
    return st.lists(atom, min_size=1, max_size=max_pieces).map("".join)


def path_like(pieces: list[str], *, max_pieces: int = 5) -> st.SearchStrategy[str]:
    """Slash-joined sequences of path-ish pieces."""
    atom = st.one_of(_pieces(pieces), _pieces(pieces), st.text(max_size=4))
    return st.lists(atom, min_size=1, max_size=max_pieces).map("/".join)


def over_limit(limit: int) -> st.SearchStrategy[str]:
    """Strings whose UTF-8 size is just over ``limit`` bytes, or far over it."""
    units = st.sampled_from(["a", "é", "日", "\U0001f600", "../", "$(x)", "*", "-"])

    def build(unit: str, extra: int, far: bool) -> str:
        size = len(unit.encode("utf-8"))
        count = limit // size + 1 + extra
        return unit * (count * 4 if far else count)

    return st.builds(build, units, st.integers(0, 8), st.booleans())


def at_limit(limit: int) -> st.SearchStrategy[str]:
    """Strings of exactly ``limit`` UTF-8 bytes (accepted by the size check)."""
    return st.sampled_from(["a", "é"]).map(lambda u: u * (limit // len(u.encode("utf-8"))))


PATTERN_PIECES = GLOB_SYNTAX + REGEX_SYNTAX + SHELL_META + OPTION_LIKE + UNICODE + WORKSPACE_NAMES
PATH_PIECES = TRAVERSAL + WORKSPACE_NAMES + PLACEHOLDER_PIECES + OPTION_LIKE + SHELL_META + UNICODE
INCLUDE_PIECES = GLOB_SYNTAX + SHELL_META + OPTION_LIKE + WORKSPACE_NAMES + UNICODE

# Broad but valid-looking values: where the interesting outcome is a (non-empty) result.
tame_patterns = st.one_of(
    st.sampled_from(["*", "**", "**/*", "*.py", "needle", ".", "(?s).*", "^", "[a-z]+", "e"]),
    composed(GLOB_SYNTAX + REGEX_SYNTAX + WORKSPACE_NAMES, max_pieces=3),
)
tame_paths = st.one_of(
    st.none(),
    st.sampled_from(["src", "docs", ".", "alias", "escape_dir", "up", WS, f"{WS}/src"]),
)
tame_cwds = st.sampled_from(["src", "docs", "alias", ".", WS, WS_LINK, WS_REAL])
tame_includes = st.one_of(
    st.none(), st.sampled_from(["*", "*.py", "**/*.md", "*.{py,rs}", "*.zzz"])
)


def weighted(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """One of the strategies, picked with the given weights (``st.one_of`` is unweighted and
    collapses repeated strategies)."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(range(len(table))).flatmap(lambda i: table[i])


def with_nul(text: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A NUL character inserted somewhere in a value."""
    return st.builds(lambda a, b: a + "\x00" + b, text, text)


def hostile(usual: st.SearchStrategy, limit: int) -> st.SearchStrategy:
    """``usual`` values; about one in 12 is over ``limit`` bytes, one in 30 holds a NUL."""
    texts = composed(ALL_PIECES, max_pieces=3)
    return weighted((56, usual), (2, with_nul(texts)), (5, over_limit(limit)))


patterns = hostile(
    weighted(
        (2, tame_patterns),
        (3, composed(PATTERN_PIECES)),
        (2, composed(ALL_PIECES)),
    ),
    MAX_PATTERN_BYTES,
)
paths = hostile(
    weighted(
        (4, st.none()),
        (1, st.just("")),
        (3, tame_paths),
        (1, _pieces(PATH_PIECES)),
        (3, path_like(PATH_PIECES)),
        (1, composed(ALL_PIECES, max_pieces=3)),
    ),
    MAX_PATH_BYTES,
)
cwds = weighted((10, st.none()), (2, tame_cwds), (3, paths))
includes = hostile(
    weighted(
        (5, st.none()),
        (2, tame_includes),
        (2, composed(INCLUDE_PIECES, max_pieces=4)),
        (1, _pieces(INCLUDE_PIECES)),
    ),
    MAX_INCLUDE_BYTES,
)
tools = st.sampled_from(["glob", "grep"])


def shell_injections() -> st.SearchStrategy[str]:
    """A shell-injection payload aimed at the canary, wrapped in hostile text."""
    return st.builds(
        lambda before, payload, after: before + payload + after,
        composed(SHELL_META + GLOB_SYNTAX, max_pieces=2),
        st.sampled_from(SHELL_INJECTIONS),
        composed(SHELL_META + GLOB_SYNTAX, max_pieces=2),
    )


LOCATOR_PIECES = [
    STORE,
    f"{STORE}/",
    f"{STORE}/..",
    f"{STORE}/../outside",
    f"{STORE}-sibling/x.txt",
    f"{STORE}.txt",
    f"{STORE}/evil.txt",
    f"{STORE}/rel_evil.txt",
    f"{STORE}/evil_dir",
    f"{STORE}/evil_dir/",
    f"{STORE}/dir.txt",
    ARTIFACT,
    OUT,
    OUT_FILE,
    "..",
    ".",
    "/",
    "//",
    "./",
    "%2e%2e",
    "%2F",
    "%00",
    "x.txt",
    ".txt",
    "/etc/passwd",
    "/etc/hostname",
    "/proc/self/environ",
    "/proc/self/root",
    "/dev/zero",
    "file://",
    "file:///",
    "file://localhost",
    "file://evil.example",
    "s3://",
    "s3://bucket/key.txt",
    "http://169.254.169.254/latest/meta-data",
    "~",
    "?",
    "#",
    "\x00",
    "\n",
    "\udcff",
    "\U0001f600",
]


ARTIFACT_PREFIXES = [
    "",
    "file://",
    "file://localhost",
    "file://evil.example",
    "/proc/self/root",
    "//",
    "s3://",
    "./",
    "~",
]
ARTIFACT_SUFFIXES = [
    "",
    "/..",
    "/../x.txt",
    "/../../../..",
    "#frag",
    "?q=1",
    "%00",
    "\x00",
    ".txt",
    "/",
    "\n",
]


# Routes from inside the store to outside it (the test's store holds these symlinks).
STORE_ROUTES = [
    "/evil.txt",
    "/rel_evil.txt",
    f"/evil_dir/{OUT_NAME}",
    "/evil_dir/../spill.txt",
    f"/../outside/{OUT_NAME}",
    f"/%2e%2e/outside/{OUT_NAME}",
    "/./evil.txt",
    "//evil.txt",
    "/test/../evil.txt",
    "/dir.txt",
    "/dir.txt/../evil.txt",
    "-sibling/x.txt",
    ".txt",
    "/../spill.txt",
]


def locators() -> st.SearchStrategy[str]:
    """read_spill locators: traversal, URLs, store look-alikes, symlinks, huge and NUL."""
    atom = st.one_of(_pieces(LOCATOR_PIECES), _pieces(LOCATOR_PIECES), st.text(max_size=5))
    return st.one_of(
        st.builds(
            lambda pre, route: pre + STORE + route,
            _pieces(["", "file://", "file://localhost", "/proc/self/root"]),
            _pieces(STORE_ROUTES),
        ),
        st.builds(
            lambda pre, post: pre + ARTIFACT + post,
            _pieces(ARTIFACT_PREFIXES),
            _pieces(ARTIFACT_SUFFIXES),
        ),
        _pieces(LOCATOR_PIECES),
        st.lists(atom, min_size=1, max_size=5).map("".join),
        st.lists(atom, min_size=1, max_size=5).map("/".join),
        st.builds(
            lambda p, r: p + r,
            _pieces(["file://", "file://localhost", ""]),
            _pieces(LOCATOR_PIECES),
        ),
        over_limit(MAX_LOCATOR_BYTES),
        st.text(max_size=20),
    )
