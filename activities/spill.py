"""SpillStore protocol, artifact keys and the locators that name them, the ``file://`` backend."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import re
import string
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, unquote_to_bytes, urlparse

from fs_search.activities.errors import SearchError, invalid_argument
from fs_search.activities.models import ErrorCode, ReadSpillResult, SpillRef
from fs_search.activities.paging import Pager, check_page_args, line_count

log = logging.getLogger("fs_search.activities.spill")

# read_spill reads a file artifact in blocks of this size: memory is the page, not the file.
READ_BLOCK_BYTES = 256 * 1024
_WRITE_SLICE = 1 << 20  # characters
_SAFE = frozenset(string.ascii_letters + string.digits + "-_")
_SEGMENT = re.compile(r"(?:[A-Za-z0-9_-]|%[0-9A-F]{2})+")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


@dataclass(frozen=True)
class SpillKey:
    """Identity of one artifact: workflow run + activity id + tool. A retry overwrites.

    Built from Temporal's activity info only, never from model input.
    """

    workflow_id: str
    run_id: str
    activity_id: str
    tool: str

    def relpath(self) -> str:
        """The key as a relative path whose segments are percent-encoded (no ``/``, no ``..``)."""
        return "/".join(
            [
                _segment(self.workflow_id),
                _segment(self.run_id),
                f"{_segment(self.activity_id)}.{_segment(self.tool)}.txt",
            ]
        )

    @classmethod
    def from_relpath(cls, relpath: str) -> SpillKey | None:
        """The key whose ``relpath()`` is exactly ``relpath``, or None for any other string.

        The inverse tells the store's own artifact names from everything else: three
        segments, ``.txt``, canonical escapes of UTF-8 text without NUL. Temporal's payload
        keys (``v0/.../d/sha256/<hex>``) never have this shape.
        """
        parts = relpath.split("/")
        name = parts[-1].split(".")
        if len(parts) != 3 or len(name) != 3 or name[2] != "txt":
            return None
        try:
            key = cls(*(_unsegment(s) for s in (parts[0], parts[1], name[0], name[1])))
        except ValueError:
            return None
        return key if key.relpath() == relpath else None


def _segment(value: str) -> str:
    encoded = "".join(
        chr(b) if chr(b) in _SAFE else f"%{b:02X}" for b in value.encode("utf-8", "replace")
    )
    return encoded or "null"


def _unsegment(segment: str) -> str:
    """A segment's value; ValueError unless ``_segment`` could have written it."""
    value = unquote_to_bytes(segment).decode("utf-8")
    if not _SEGMENT.fullmatch(segment) or "\x00" in value:
        raise ValueError(segment)
    return value


def artifact_relpath(locator: str, *, root: str) -> str | None:
    """The artifact name ``locator`` gives under ``root`` (``<root>/<relpath>``), else None."""
    relpath = locator.removeprefix(root + "/")
    if relpath == locator or SpillKey.from_relpath(relpath) is None:
        return None
    return relpath


def not_an_artifact(locator: str) -> SearchError:
    """INVALID_ARGUMENT for a locator that names no artifact of this store."""
    if "\x00" in locator:
        return invalid_argument("the locator contains a NUL character")
    return invalid_argument(
        f"locator {locator!r} is outside this worker's spill store: it names none of its "
        "artifacts (pass a locator exactly as a search result gave it)"
    )


def _file_url_path(locator: str) -> str:
    """The path of ``file://[localhost]/...``: escapes decoded strictly, or INVALID_ARGUMENT."""
    rest = locator.removeprefix("file://")
    rest = rest.removeprefix("localhost") if rest.startswith("localhost/") else rest
    if not rest.startswith("/"):
        raise not_an_artifact(locator)
    if _BAD_ESCAPE.search(rest):
        raise invalid_argument(f"locator {locator!r} has a malformed percent-escape")
    try:
        return unquote_to_bytes(rest).decode("utf-8")
    except UnicodeDecodeError:
        raise invalid_argument(
            f"locator {locator!r} has percent-escapes that are not UTF-8 text"
        ) from None


def expired(locator: str) -> SearchError:
    """SEARCH_FAILED for an artifact name of this store with nothing under it."""
    return SearchError(
        ErrorCode.SEARCH_FAILED, f"no spill artifact at {locator!r} (it may have expired)"
    )


class SpillFailed(Exception):
    """A store could not save an artifact. The message is for the model (no host detail);
    the store's own exception is chained as the cause, for the log."""


class SpillStore(Protocol):
    """Where over-cap results are saved in full."""

    backend: str
    """``file`` or ``s3``."""
    model_readable: bool
    """Whether the model's own ``read`` tool can open a locator (co-located files)."""

    def describe(self) -> str:
        """A one-line description for logs."""
        ...

    async def save(self, key: SpillKey, text: str) -> SpillRef:
        """Store ``text`` under ``key``; return its locator and retrieval hint.

        Raises:
            SpillFailed: the store could not take it (said in our words).
        """
        ...

    async def read(self, locator: str, *, offset: int, limit: int) -> ReadSpillResult:
        """A page of an artifact; refuses locators outside this store (INVALID_ARGUMENT)."""
        ...

    async def check(self) -> None:
        """Raise when the store cannot be used right now (start-up diagnostics)."""
        ...

    async def prune(self) -> int:
        """Delete artifacts older than the retention period; return how many."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


def default_spill_dir() -> Path:
    """The per-user cache directory used when FS_SEARCH_SPILL_URL is unset."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fs-search" / "spill"


class FileSpillStore:
    """Artifacts as files on the worker's host: the model reads them with its read tool."""

    backend = "file"
    model_readable = True

    def __init__(self, directory: str | os.PathLike[str], *, ttl_hours: float = 72.0) -> None:
        self.directory = Path(os.path.abspath(os.path.expanduser(directory)))
        self.ttl_seconds = ttl_hours * 3600

    @classmethod
    def from_url(cls, url: str, *, ttl_hours: float) -> FileSpillStore:
        """``file:///abs/dir`` -> a store in that directory."""
        parsed = urlparse(url)
        path = unquote(parsed.path)
        if parsed.netloc not in ("", "localhost") or not path.startswith("/"):
            raise ValueError(f"FS_SEARCH_SPILL_URL {url!r}: expected file:///absolute/directory")
        return cls(path, ttl_hours=ttl_hours)

    def describe(self) -> str:
        """See SpillStore."""
        return f"file://{self.directory}"

    async def save(self, key: SpillKey, text: str) -> SpillRef:
        """See SpillStore."""
        target = self.directory / key.relpath()
        try:
            await asyncio.to_thread(_write_atomically, target, text)
        except OSError as e:
            full = e.errno in (errno.ENOSPC, errno.EDQUOT)
            raise SpillFailed(
                "the spill store is full" if full else "the spill store refused the write"
            ) from e
        lines = line_count(text)
        return SpillRef(
            locator=str(target),
            hint=(
                f"Read that file with the read tool ({lines} lines; use offset and limit "
                "to page through it)."
            ),
        )

    async def read(self, locator: str, *, offset: int, limit: int) -> ReadSpillResult:
        """See SpillStore."""
        limit = check_page_args(offset, limit)
        path = self._confine(locator)
        try:
            return await asyncio.to_thread(_read_page, path, locator, offset, limit)
        except FileNotFoundError:
            raise expired(locator) from None
        except OSError as e:
            log.warning("spill artifact %s cannot be read: %s", path, e)
            raise SearchError(
                ErrorCode.SEARCH_FAILED, f"the spill artifact {locator!r} cannot be read"
            ) from None

    def _confine(self, locator: str) -> Path:
        path = _file_url_path(locator) if locator.startswith("file://") else locator
        relpath = artifact_relpath(path, root=str(self.directory))
        if relpath is None:
            raise not_an_artifact(locator)
        # A symlink planted in the store must not lead out of it.
        real = os.path.realpath(self.directory / relpath)
        if not real.startswith(os.path.realpath(self.directory) + os.sep):
            raise not_an_artifact(locator)
        return Path(real)

    async def check(self) -> None:
        """See SpillStore."""
        await asyncio.to_thread(self.directory.mkdir, parents=True, exist_ok=True)
        if not os.access(self.directory, os.W_OK):
            raise OSError(f"spill directory {self.directory} is not writable")

    async def prune(self) -> int:
        """See SpillStore."""
        return await asyncio.to_thread(self._prune_sync)

    async def close(self) -> None:
        """See SpillStore (nothing to release)."""

    def _prune_sync(self) -> int:
        cutoff = time.time() - self.ttl_seconds
        removed = 0
        if not self.directory.is_dir():
            return 0
        for dirpath, _dirnames, filenames in os.walk(self.directory, topdown=False):
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    if os.lstat(path).st_mtime < cutoff:
                        os.unlink(path)
                        removed += 1
                except OSError:
                    continue
            if dirpath != str(self.directory):
                try:
                    os.rmdir(dirpath)  # only succeeds when empty
                except OSError:
                    pass
        return removed


def _read_page(path: Path, locator: str, offset: int, limit: int) -> ReadSpillResult:
    pager = Pager(offset=offset, limit=limit)
    with open(path, "rb", buffering=0) as f:
        while block := f.read(READ_BLOCK_BYTES):
            pager.feed(block)
    return pager.result(locator)


def _write_atomically(target: Path, text: str) -> None:
    for attempt in (1, 2):
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".txt")
            break
        except FileNotFoundError:
            # A concurrent prune removed the (then empty) directory: make it again.
            if attempt == 2:
                raise
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace", newline="") as f:
            # In slices: writing it whole would encode a second full copy at once.
            for start in range(0, len(text), _WRITE_SLICE):
                f.write(text[start : start + _WRITE_SLICE])
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
