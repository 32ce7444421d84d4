"""Pure: entries -> the model-facing text: caps, sampling, previews and footers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fs_search.activities._contract import ReadSpillResult
from fs_search.activities.results._parse import FileLines

NO_FILES = "No files found"
NO_MATCHES = "No matches found"
LINE_TRUNCATED = "(line truncated)"
PARTIAL_NOTE = "(Some paths could not be read, so results may be incomplete.)"


@dataclass(frozen=True)
class SpillNote:
    """How an over-cap result's complete form fared: saved (locator + hint) or not."""

    locator: str | None = None
    hint: str | None = None
    error: str | None = None


# --- glob --------------------------------------------------------------------------


@dataclass(frozen=True)
class GlobPage:
    """The paths shown inline and how they were chosen.

    ``indices`` point into the full mtime-ordered list, in display order.
    """

    indices: list[int]
    sampled: bool
    groups_reached: int = 0
    groups_total: int = 0
    directories: int = 0  # distinct directories the page's paths are in (0: not counted)
    top_level_only: bool = False  # balanced between the top-level entries only


def glob_text(
    shown: Sequence[str],
    page: GlobPage,
    *,
    total: int,
    root: str,
    spill: SpillNote | None,
    partial: bool = False,
) -> str:
    """The text of a glob result: paths one per line, and a footer when over the cap."""
    if total == 0:
        return _with_partial(NO_FILES, partial)
    body = "\n".join(one_line(p) for p in shown)
    omitted = total - len(shown)
    if omitted <= 0:
        return _with_partial(body, partial)
    if page.sampled:
        where = "the search root" if root == "." else one_line(root)
        # Past the sampler's memory budget the page is balanced between the top-level
        # entries only, and the footer says only that.
        inside = (
            " only" if page.top_level_only else " and, inside each directory, across its entries"
        )
        footer = (
            f"(Showing {len(shown)} of {total} files, sampled across the top-level entries "
            f"of {where}{inside}: one file per entry per round, oldest modified first. "
            f"Reached {page.groups_reached} of {page.groups_total} top-level entries"
        )
        if page.directories:
            footer += f" and {page.directories} directories"
        if page.groups_reached < page.groups_total:
            footer += "; narrow `path` to one of them to see the rest"
        footer += f". {omitted} more not shown.)"
    else:
        footer = (
            f"(Showing {len(shown)} of {total} files, oldest modified first. "
            f"{omitted} more not shown.)"
        )
    lines = [body, "", footer]
    lines += _spill_lines(spill, what=f"the complete list ({total} paths, oldest modified first)")
    return _with_partial("\n".join(lines), partial)


# --- grep --------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """A matching line ready to show: display path, number, preview text."""

    path: str
    line_number: int
    text: str
    truncated: bool = False


def cut_utf8(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes on a character boundary."""
    if len(text) * 4 <= max_bytes:
        return text, False
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text, False
    return raw[:max_bytes].decode("utf-8", "ignore"), True


def grep_page(
    files: Sequence[tuple[str, FileLines]], *, cap: int, max_line_bytes: int
) -> list[Line]:
    """The first ``cap`` matches (files in order, lines in order), previews cut to the byte cap."""
    page: list[Line] = []
    for path, lines in files:
        for number, text in lines:
            if len(page) >= cap:
                return page
            shown, cut = cut_utf8(text, max_line_bytes)
            page.append(Line(path, number, shown, cut))
    return page


def grep_text(
    page: Sequence[Line],
    *,
    total: int,
    files: int,
    spill: SpillNote | None,
    partial: bool = False,
    note: str | None = None,
) -> str:
    """The text of a grep result: matches grouped by file, a footer when over the cap, and
    ``note`` last (which ignore files were not applied)."""
    text = _with_partial(_grep_body(page, total=total, files=files, spill=spill), partial)
    return f"{text}\n{note}" if note else text


def _grep_body(page: Sequence[Line], *, total: int, files: int, spill: SpillNote | None) -> str:
    if total == 0:
        return NO_MATCHES
    body = grouped(page)
    omitted = total - len(page)
    if omitted <= 0:
        return body
    footer = (
        f"(Showing {len(page)} of {total} matching lines in {files} files. "
        f"{omitted} more not shown.)"
    )
    lines = [body, "", footer]
    lines += _spill_lines(spill, what=f"all {total} matching lines (full text)")
    return "\n".join(lines)


def grouped(lines: Sequence[Line]) -> str:
    """``<path>:`` then ``  Line N: <text>`` per match, a blank line between files."""
    out: list[str] = []
    current: str | None = None
    for line in lines:
        if line.path != current:
            if current is not None:
                out.append("")
            out.append(f"{one_line(line.path)}:")
            current = line.path
        mark = f" {LINE_TRUNCATED}" if line.truncated else ""
        out.append(f"  Line {line.line_number}: {one_line(line.text)}{mark}")
    return "\n".join(out)


def grep_artifact_block(lines: FileLines) -> str:
    """One file's matches as its artifact shows them: a ``  Line N: <text>`` line each, no
    header. Built where the file's lines were parsed (a helper builds its part's), so a
    large artifact is rendered on every core that parsed it."""
    block = "\n".join([f"  Line {number}: {text}" for number, text in lines])
    if _breaks_only_at(block, len(lines) - 1):
        return block
    return "\n".join([f"  Line {number}: {one_line(text)}" for number, text in lines])


def grep_artifact_of_blocks(blocks: Sequence[tuple[str, str]]) -> str:
    """The artifact from each file's display path and block (:func:`grep_artifact_block`),
    files in order: ``<path>:``, its block, a blank line between files."""
    out: list[str] = []
    for path, block in blocks:
        if out:
            out.append("")
        out += (f"{one_line(path)}:", block)
    return "\n".join(out) + "\n"


# --- shared --------------------------------------------------------------------------


def _spill_lines(spill: SpillNote | None, *, what: str) -> list[str]:
    if spill is None:
        return []
    if spill.locator is not None:
        lines = [f"Saved {what} to: {spill.locator}"]
        if spill.hint:
            lines.append(spill.hint)
        return lines
    reason = f" ({spill.error})" if spill.error else ""
    return [f"Could not save {what}{reason}; narrow the pattern or path to see the rest."]


def _with_partial(text: str, partial: bool) -> str:
    return f"{text}\n\n{PARTIAL_NOTE}" if partial else text


# Every character that some reader renders as a line break, as escape text: a path or a
# preview can then never start a line of its own (and forge an entry or a footer).
_LINE_BREAKS = str.maketrans(
    {
        "\n": "\\n",
        "\r": "\\r",
        "\v": "\\x0b",
        "\f": "\\x0c",
        "\x1c": "\\x1c",
        "\x1d": "\\x1d",
        "\x1e": "\\x1e",
        "\x85": "\\x85",
        "\u2028": "\\u2028",
        "\u2029": "\\u2029",
    }
)


_OTHER_BREAKS = "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def _breaks_only_at(text: str, newlines: int) -> bool:
    """Whether ``text`` breaks lines only at its ``newlines`` separators (one C scan each).

    Lets a large artifact skip escaping item by item when, as nearly always, nothing in it
    needs escaping.
    """
    return text.count("\n") == newlines and not any(c in text for c in _OTHER_BREAKS)


def one_line(text: str) -> str:
    """``text`` on one line: each character that renders as a line break is shown escaped.

    Applied to every path and preview in model-facing text and in spill artifacts, which
    are therefore split by ``\\n`` alone. A backslash is left as it is.
    """
    return text.translate(_LINE_BREAKS)


def read_spill_text(page: ReadSpillResult) -> str:
    """A read_spill page as the model sees it, with where it sits in the artifact."""
    end = page.total_lines if page.next_offset is None else page.next_offset
    shown = max(end - page.offset, 0)
    if shown == 0:
        if page.total_lines == 0:
            return "(The result is empty: it has no lines.)"
        return (
            f"(No lines at offset {page.offset}: the result has {page.total_lines} lines, "
            f"so offsets run from 0 to {page.total_lines - 1}.)"
        )
    where = f"(Lines {page.offset + 1}-{page.offset + shown} of {page.total_lines}"
    if page.next_offset is not None:
        return f"{page.text}\n\n{where}; continue with offset={page.next_offset}.)"
    return f"{page.text}\n\n{where}; end of the result.)"
