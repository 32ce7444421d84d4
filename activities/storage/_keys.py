"""Artifact keys and the locators that name them, shared by every backend; the running
activity's spill key."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from fs_search.activities._contract import ErrorCode
from fs_search.activities._errors import SearchError, invalid_argument

_SAFE = frozenset(string.ascii_letters + string.digits + "-_")
_SEGMENT = re.compile(r"(?:[A-Za-z0-9_-]|%[0-9A-F]{2})+")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


# The workspace of keys made without one (tests, tools). Activities always give theirs; no
# valid workspace id starts with ``_`` (``[A-Za-z0-9][A-Za-z0-9._-]*``).
UNNAMED_WORKSPACE = "_unnamed"


@dataclass(frozen=True)
class SpillKey:
    """Identity of one artifact: workspace + workflow run + activity id + tool. A retry
    overwrites.

    Built from the workspace the activities serve and Temporal's activity info only, never
    from model input.
    """

    workflow_id: str
    run_id: str
    activity_id: str
    tool: str
    workspace: str = field(default=UNNAMED_WORKSPACE, kw_only=True)

    def relpath(self) -> str:
        """The key as a relative path whose segments are percent-encoded (no ``/``, no ``..``):
        ``<workspace>/<workflow id>/<run id>/<activity id>.<tool>.txt``."""
        return "/".join(
            [
                _segment(self.workspace),
                _segment(self.workflow_id),
                _segment(self.run_id),
                f"{_segment(self.activity_id)}.{_segment(self.tool)}.txt",
            ]
        )

    @classmethod
    def from_relpath(cls, relpath: str) -> SpillKey | None:
        """The key whose ``relpath()`` is exactly ``relpath``, or None for any other string.

        The inverse tells the store's own artifact names from everything else: four
        segments, ``.txt``, canonical escapes of UTF-8 text without NUL. Temporal's payload
        keys (``v0/.../d/sha256/<hex>``) never have this shape.
        """
        parts = relpath.split("/")
        name = parts[-1].split(".")
        if len(parts) != 4 or len(name) != 3 or name[2] != "txt":
            return None
        try:
            workspace, workflow_id, run_id, activity_id, tool = (
                _unsegment(s) for s in (*parts[:3], *name[:2])
            )
        except ValueError:
            return None
        key = cls(workflow_id, run_id, activity_id, tool, workspace=workspace)
        return key if key.relpath() == relpath else None

    def belongs_to(self, workspace: str) -> bool:
        """Whether this is an artifact of ``workspace`` (compared as the key spells it)."""
        return _segment(self.workspace) == _segment(workspace)


# The identity of the directory a spill was made in ends its key's workspace segment:
# ``<workspace>--<32 hex digits>`` (identity.workspace_identity), so a locator made in one
# directory names no artifact of a directory re-created at the same path.
_ROOT_DIGITS = 32
_HEX = frozenset("0123456789abcdef")


def directory_owner(workspace: str, root: str) -> str:
    """The owner of the artifacts saved by ``workspace`` while its path names the
    directory whose identity is ``root``."""
    return f"{workspace}--{root}"


def _owner_parts(owner: str) -> tuple[str, str | None]:
    """``(workspace, root)`` of a key's owner; root None when it names no directory."""
    base, dot, root = owner.rpartition("--")
    if dot and len(root) == _ROOT_DIGITS and set(root) <= _HEX:
        return base, root
    return owner, None


def _saved_before_workspaces(relpath: str) -> bool:
    """Whether ``relpath`` is an artifact name of the earlier layout, which had no workspace:
    ``<workflow id>/<run id>/<activity id>.<tool>.txt``."""
    if relpath.count("/") != 2:
        return False
    return SpillKey.from_relpath(f"{UNNAMED_WORKSPACE}/{relpath}") is not None


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


def artifact_key(
    locator: str, *, root: str, workspace: str | None, name: str | None = None
) -> SpillKey:
    """The key of the artifact ``locator`` names under ``root`` (``<root>/<relpath>``).

    Pure: nothing is opened. ``workspace``: the workspace whose artifacts may be named (None:
    any workspace's, for the operator's ``spill read``). ``name``: the locator as the store
    spells its artifacts (a ``file://`` URL's decoded path), when that differs; messages
    quote ``locator`` as given.

    Raises:
        SearchError: INVALID_ARGUMENT for a locator that names no artifact of this store, one
            of another workspace, or one saved before artifacts were kept per workspace.
    """
    name = locator if name is None else name
    relpath = name.removeprefix(root + "/")
    if relpath != name:
        key = SpillKey.from_relpath(relpath)
        if key is not None:
            if workspace is not None and not key.belongs_to(workspace):
                raise _not_ours(locator, key, workspace)
            return key
        if _saved_before_workspaces(relpath):
            raise invalid_argument(
                f"locator {locator!r} names a spill artifact saved before artifacts were kept "
                "per workspace: it belongs to no workspace and is not read (run the search "
                "again for a new locator)"
            )
    raise not_an_artifact(locator)


def _not_ours(locator: str, key: SpillKey, owner: str) -> SearchError:
    """INVALID_ARGUMENT for an artifact of another workspace, or of another directory of
    this one."""
    theirs, their_root = _owner_parts(key.workspace)
    mine, _ = _owner_parts(owner)
    if _segment(theirs) != _segment(mine):
        return invalid_argument(
            f"locator {locator!r} names a spill artifact of another workspace: "
            "read_spill reads only the results of searches on this workspace (pass a "
            "locator exactly as a search on this workspace gave it)"
        )
    if their_root is None:
        return invalid_argument(
            f"locator {locator!r} names a spill artifact saved before artifacts were kept "
            "per directory: it cannot be tied to the workspace's directory and is not read "
            "(run the search again for a new locator)"
        )
    return invalid_argument(
        f"locator {locator!r} names a spill artifact made in another directory than the "
        "one this workspace's path names now (it was removed or replaced since): it is not "
        "read (run the search again for a new locator)"
    )


def not_an_artifact(locator: str) -> SearchError:
    """INVALID_ARGUMENT for a locator that names no artifact of this store."""
    if "\x00" in locator:
        return invalid_argument("the locator contains a NUL character")
    return invalid_argument(
        f"locator {locator!r} is outside this worker's spill store: it names none of its "
        "artifacts (pass a locator exactly as a search result gave it)"
    )


def file_url_path(locator: str) -> str:
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


def spill_key(tool: str, workspace: str) -> SpillKey:
    """The running activity's artifact key: workspace + workflow run + activity id + tool
    (the one thing here that reads the world: the running activity's info)."""
    from temporalio import activity

    info = activity.info()
    if info.workflow_id is not None:
        return SpillKey(
            workflow_id=info.workflow_id,
            run_id=info.workflow_run_id or "null",
            activity_id=info.activity_id,
            tool=tool,
            workspace=workspace,
        )
    return SpillKey(
        workflow_id="standalone",
        run_id=info.activity_run_id or "null",
        activity_id=info.activity_id,
        tool=tool,
        workspace=workspace,
    )
