"""The ``file://`` backend: artifacts the model opens with its read tool, payloads as files.

Both live in one directory on the worker's host: artifacts under ``<dir>/<key>``
(``<workspace>/<workflow id>/<run id>/<activity id>.<tool>.txt``, see :mod:`._keys`), Temporal
payloads under ``<dir>/payloads/<sha256>.payload``. Payload files are single-host: a caller
elsewhere cannot read them (the embedded CLI and tests share the filesystem).
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import logging
import os
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from fs_search.activities._config import DEFAULT_SPILL_TTL_HOURS
from fs_search.activities._contract import ErrorCode, ReadSpillResult, SpillRef
from fs_search.activities._errors import SearchError
from fs_search.activities.results import Pager, line_count
from fs_search.activities.storage._keys import (
    SpillFailed,
    SpillKey,
    artifact_key,
    expired,
    file_url_path,
    not_an_artifact,
)
from fs_search.activities.storage._payloads import storing_payload

log = logging.getLogger(__name__)

# read_spill reads an artifact in blocks of this size: memory is the page, not the file.
READ_BLOCK_BYTES = 256 * 1024
_WRITE_SLICE = 1 << 20  # characters
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


def default_spill_dir() -> Path:
    """The per-user cache directory used when FS_SEARCH_SPILL_URL is unset."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fs-search" / "spill"


class FileSpillStore:
    """Artifacts as files on the worker's host: the model reads them with its read tool."""

    backend = "file"
    model_readable = True

    def __init__(
        self, directory: str | os.PathLike[str], *, ttl_hours: float = DEFAULT_SPILL_TTL_HOURS
    ) -> None:
        self.directory = Path(os.path.abspath(os.path.expanduser(directory)))
        self.ttl_seconds = ttl_hours * 3600

    @classmethod
    def from_url(cls, url: str, *, ttl_hours: float) -> FileSpillStore:
        """``file:///abs/dir`` -> a store in that directory."""
        parsed = urlparse(url)
        path = unquote(parsed.path)
        if parsed.netloc not in ("", "localhost") or not path.startswith("/"):
            raise ValueError(f"{url!r}: expected file:///absolute/directory")
        return cls(path, ttl_hours=ttl_hours)

    def describe(self) -> str:
        """See SpillStore."""
        return f"file://{self.directory}"

    async def save(self, key: SpillKey, text: str | bytes | bytearray) -> SpillRef:
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

    async def read(
        self, locator: str, *, offset: int, limit: int, workspace: str | None = None
    ) -> ReadSpillResult:
        """See SpillStore."""
        path = self._confine(locator, workspace)
        try:
            return await asyncio.to_thread(_read_page, path, locator, offset, limit)
        except FileNotFoundError:
            raise expired(locator) from None
        except OSError as e:
            log.warning("spill artifact %s cannot be read: %s", path, e)
            raise SearchError(
                ErrorCode.SEARCH_FAILED, f"the spill artifact {locator!r} cannot be read"
            ) from None

    def _confine(self, locator: str, workspace: str | None) -> Path:
        path = file_url_path(locator) if locator.startswith("file://") else locator
        key = artifact_key(locator, root=str(self.directory), workspace=workspace, name=path)
        # A symlink planted in the store must lead nowhere else: out of it, or from one
        # workspace's directory into another's. The store itself writes no links.
        expected = os.path.join(os.path.realpath(self.directory), key.relpath())
        if os.path.realpath(self.directory / key.relpath()) != expected:
            raise not_an_artifact(locator)
        return Path(expected)

    async def check(self) -> None:
        """See SpillStore."""
        await asyncio.to_thread(_check_writable, self.directory, "spill")

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


def _write_atomically(target: Path, text: str | bytes | bytearray) -> None:
    """``text`` (or bytes, written as they are) as ``target``: a temp file renamed over it,
    which never outlives a failure (a full disk, an error, a cancellation)."""
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
        if isinstance(text, str):
            with os.fdopen(fd, "w", encoding="utf-8", errors="replace", newline="") as f:
                # In slices: writing it whole would encode a second full copy at once.
                for start in range(0, len(text), _WRITE_SLICE):
                    f.write(text[start : start + _WRITE_SLICE])
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(text)  # already UTF-8: written from the buffer, no copy
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class LocalDirectoryDriver(StorageDriver):
    """Payloads as ``<directory>/<sha256>.payload`` files (content-addressed, verified on read)."""

    def __init__(self, directory: str | os.PathLike[str], *, name: str = "fs_search.local") -> None:
        self.directory = Path(os.path.abspath(directory))
        self._name = name

    def describe(self) -> str:
        """A one-line description for logs."""
        return f"file://{self.directory}"

    async def check(self, payload_bytes: int = 0) -> None:
        """Raise when payloads cannot be written here now, or (``payload_bytes`` > 0) when
        the filesystem has no room for a payload of about that size (ENOSPC)."""
        await asyncio.to_thread(_check_room, self.directory, payload_bytes)

    async def close(self) -> None:
        """Nothing to release."""

    def name(self) -> str:
        """See StorageDriver."""
        return self._name

    def type(self) -> str:
        """See StorageDriver."""
        return "fs_search.local"

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        """See StorageDriver. In an activity: bounded by the attempt, failing as the
        contract's SEARCH_FAILED (``attempt.storing_payload``); never leaves a temp file."""
        return await storing_payload(
            lambda: asyncio.to_thread(self._store_sync, payloads),
            size=sum(p.ByteSize() for p in payloads),
            where=self.describe(),
        )

    def _store_sync(self, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        claims = []
        for payload in payloads:
            data = payload.SerializeToString()
            digest = hashlib.sha256(data).hexdigest()
            target = self.directory / f"{digest}.payload"
            try:
                os.utime(target)  # already here: keep it from being pruned while in use
            except FileNotFoundError:
                _write_atomically(target, data)
            claims.append(StorageDriverClaim(claim_data={"sha256": digest}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        """See StorageDriver."""
        return await asyncio.to_thread(self._retrieve_sync, claims)

    def _retrieve_sync(self, claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        out = []
        for claim in claims:
            digest = claim.claim_data.get("sha256", "")
            if not _DIGEST.match(digest):
                raise ValueError(f"invalid local payload claim {dict(claim.claim_data)!r}")
            path = self.directory / f"{digest}.payload"
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                raise FileNotFoundError(
                    f"payload {digest} is not in {self.directory}: the file:// payload store is "
                    "single-host (caller and worker must share it), or it expired"
                ) from None
            if hashlib.sha256(data).hexdigest() != digest:
                raise ValueError(f"payload {path} failed its integrity check")
            payload = Payload()
            payload.ParseFromString(data)
            out.append(payload)
        return out


def _check_writable(directory: Path, what: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    if not os.access(directory, os.W_OK):
        raise OSError(f"{what} directory {directory} is not writable")


def room_needed(payload_bytes: int) -> int:
    """Free bytes a payload of about ``payload_bytes`` needs: a quarter more (the estimate
    is of the result's text, not of its encoding) and 64 KiB for the file system's own."""
    return payload_bytes + payload_bytes // 4 + 64 * 1024


def _check_room(directory: Path, payload_bytes: int) -> None:
    _check_writable(directory, "payload")
    if payload_bytes <= 0:
        return
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    needed = room_needed(payload_bytes)
    if free < needed or (st.f_files and not st.f_favail):
        raise OSError(
            errno.ENOSPC,
            f"payload directory {directory} has {free} bytes ({st.f_favail} inodes) free; "
            f"a payload of about {payload_bytes} bytes needs {needed}",
        )
