"""The worker's validated settings and their ``FS_SEARCH_*`` environment names."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fs_search.activities._contract import DEFAULT_TIMEOUT_MS

# The name to ``pip install`` (the package registry's ``fs-search`` is an unrelated project),
# defined where ``fs-search --version`` reads it without loading pydantic.
from fs_search.activities._distribution import DISTRIBUTION  # noqa: F401 - re-exported

ENV_PREFIX = "FS_SEARCH_"
SPILL_URL_ENV = "FS_SEARCH_SPILL_URL"
S3_ENDPOINT_URL_ENV = "FS_SEARCH_S3_ENDPOINT_URL"
# --http: a host (a name, an IPv4 address, [an IPv6 one], or nothing: every interface) and a port.
_HOST_PORT = r"(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]*):([0-9]{1,5})"
_SPILL_URL_FORMS = "file:///absolute/dir or s3://bucket/prefix"


class ConfigError(ValueError):
    """A setting is missing or invalid; the message names the key."""


# Defaults the storage settings own (the stores' own defaults are these).
DEFAULT_SPILL_TTL_HOURS = 72.0
# Results at least this large cross Temporal through external storage (the spill store's
# bucket or directory) instead of the event history. Well under Temporal's 512 KiB warning
# and 2 MiB limit.
DEFAULT_PAYLOAD_THRESHOLD = 256 * 1024


class StorageSettings(BaseModel):
    """Where complete results go: the spill store and the payload store beside it.

    What every user of the stores reads (the worker, ``FsSearchPlugin``, ``fs-search spill
    read``), without a worker's other settings. Frozen; invalid values are refused.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    # What a ConfigError's message starts with.
    _errors_begin: ClassVar[str] = ""

    spill_url: str | None = None
    s3_endpoint_url: str | None = None
    spill_ttl_hours: float = Field(DEFAULT_SPILL_TTL_HOURS, gt=0)
    payload_threshold_bytes: int = Field(DEFAULT_PAYLOAD_THRESHOLD, ge=1024, le=1536 * 1024)

    @field_validator("spill_url")
    @classmethod
    def _spill_url(cls, url: str | None) -> str | None:
        problem = spill_url_problem(url, endpoint_setting=S3_ENDPOINT_URL_ENV) if url else None
        if problem:
            raise ValueError(problem)
        return url

    @field_validator("s3_endpoint_url")
    @classmethod
    def _s3_endpoint_url(cls, url: str | None) -> str | None:
        problem = endpoint_url_problem(url) if url else None
        if problem:
            raise ValueError(problem)
        return url

    @field_validator("payload_threshold_bytes", mode="before")
    @classmethod
    def _threshold(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                raise ValueError("expected a number of bytes") from None
        return value

    @classmethod
    def env_name(cls, key: str) -> str:
        """The environment variable that sets ``key``."""
        return f"{ENV_PREFIX}{key.upper()}"

    @classmethod
    def load(
        cls,
        *,
        getenv: Callable[[str], str | None] = os.environ.get,
        overrides: Mapping[str, Any] | None = None,
    ) -> Self:
        """Build the settings from the environment, with explicit overrides on top.

        Raises:
            ConfigError: a key is missing or invalid; the message names the key.
        """
        values: dict[str, Any] = {}
        for key in cls.model_fields:
            raw = getenv(cls.env_name(key))
            if raw is not None and raw.strip() != "":
                values[key] = raw.strip()
        given = {k: v for k, v in (overrides or {}).items() if v is not None}
        values.update(given)
        try:
            return cls.model_validate(values)
        except ValidationError as e:
            raise ConfigError(cls._errors_begin + _describe(e, overridden=set(given))) from None


class FsSearchConfig(StorageSettings):
    """Every knob of a worker (its :class:`StorageSettings` among them). Frozen; invalid
    values are refused at start-up."""

    _errors_begin: ClassVar[str] = "invalid fs-search configuration: "

    # No default: a deployment must choose how over-cap glob pages are selected.
    sample_over_cap_glob_results: bool
    glob_max_results: int = Field(100, ge=1)
    grep_max_matches: int = Field(250, ge=1)
    grep_max_line_bytes: int = Field(2000, ge=1)
    raw_output_max_bytes: int = Field(20_000_000, ge=1)
    timeout_ms: int = Field(DEFAULT_TIMEOUT_MS, ge=1)
    trace_patterns: bool = False
    # An absolute path: a relative one would resolve against rg's cwd, the workspace.
    rg_path: str | None = Field(None, pattern=r"^/")
    # rg's own worker threads per search (None: rg decides). With many concurrent
    # searches on few cores, 1-2 avoids oversubscription.
    rg_threads: int | None = Field(None, ge=1)
    # rg searches run at once in this worker process (all workspaces together).
    max_concurrent_searches: int = Field(16, ge=1)
    # Calls the process holds at once, running or waiting (heartbeating "queued") for one
    # of the running slots (Temporal's activity slots; at least max_concurrent_searches).
    # A busy worker still takes calls, so a caller tells it from a missing one at once.
    max_queued_searches: int = Field(256, ge=1)
    # Searches one workspace may run at once when a worker serves a workspaces root
    # (default 4 there); a single-workspace worker has only the process-wide cap.
    max_concurrent_per_workspace: int | None = Field(None, ge=1)
    # Helper processes that parse large rg outputs so concurrent searches use every core
    # (None: one per core up to 4, none on a single core; 0: parse in a thread).
    parse_processes: int | None = Field(None, ge=0)
    # Kernel confinement of rg (docs/security.md): auto = Landlock where the kernel has it,
    # required = refuse to start without it, off = path checks and limits only.
    sandbox: Literal["auto", "required", "off"] = "auto"
    # rg's address-space limit: a planted huge or endless ignore file cannot exhaust the host.
    rg_memory_mb: int = Field(1024, ge=64)
    # Poll a workspace queue even when a live worker of another host polls it (hosts that
    # see the same files). Off: such a queue is refused (worker/_queue_owner.py).
    allow_shared_queue: bool = False
    # Which queues a --workspaces-root worker polls: one per workspace (default), the
    # host's one queue fs-search-host/<host-id> (requests name their workspace), or both.
    queues: Literal["workspace", "host", "both"] = "workspace"
    # How a --workspaces-root worker learns of workspaces appearing or vanishing: auto =
    # filesystem events (inotify), plus a scan at --scan-interval on a network filesystem;
    # on = events alone; off = a scan at --scan-interval only (worker/_root_events.py).
    root_events: Literal["auto", "on", "off"] = "auto"
    # Also serve the fs_search Nexus service's handler on this task queue (an endpoint's
    # target), for callers in other namespaces (docs/serving-other-namespaces.md). None: not served.
    nexus_queue: str | None = Field(None, min_length=1, pattern=r"^\S(.*\S)?$")
    # Serve /livez, /readyz and /metrics on HOST:PORT (docs/operating.md). None: not served.
    http: str | None = None
    # Seconds running calls have to finish after SIGTERM before they are cancelled (and
    # retried by Temporal on the next worker): within Kubernetes' default 30 s grace.
    drain_timeout: float = Field(25.0, ge=0)
    # Label the call counters of a --workspaces-root worker with each workspace's id (one
    # series per workspace: off by default).
    metrics_per_workspace: bool = False

    @field_validator("http")
    @classmethod
    def _http(cls, address: str | None) -> str | None:
        found = re.fullmatch(_HOST_PORT, address) if address is not None else None
        if address is not None and (found is None or int(found.group(2)) > 65535):
            raise ValueError("expected HOST:PORT (e.g. 0.0.0.0:9464; port 0: a free one)")
        return address

    @property
    def accepted_searches(self) -> int:
        """Calls a worker process takes from Temporal at once (running or queued)."""
        return max(self.max_queued_searches, self.max_concurrent_searches)


def _describe(error: ValidationError, *, overridden: set[str]) -> str:
    """One line naming each bad key as the user gave it: the environment variable for a
    value read from the environment, the setting's own name for an override."""
    lines = []
    for item in error.errors():
        key = str(item["loc"][0]) if item["loc"] else "?"
        env = FsSearchConfig.env_name(key)
        got = item.get("input")
        if item["type"] == "missing" and key == "sample_over_cap_glob_results":
            lines.append(
                f"{env} (sample_over_cap_glob_results) is required and has no default: set it "
                "to true or false, or pass --sample-over-cap-glob-results / "
                "--no-sample-over-cap-glob-results"
            )
        elif item["type"] == "extra_forbidden":
            lines.append(f"unknown setting {key!r}")
        elif item["type"] == "value_error":
            # Our own validators: the problem in words, after the value as the user wrote it.
            problem = item.get("ctx", {}).get("error", item["msg"])
            lines.append(f"{key if key in overridden else env}={got!r}: {problem}")
        elif key in overridden:
            lines.append(f"{key}: {item['msg']} (got {got!r})")
        else:
            lines.append(f"{env} ({key}): {item['msg']} (got {got!r})")
    return "; ".join(lines)


def spill_url_problem(url: str, *, endpoint_setting: str = S3_ENDPOINT_URL_ENV) -> str | None:
    """What is wrong with a spill store URL, and what a right one looks like; None if fine.

    Pure: the syntax only (whether the store can be reached is the worker's start-up check).
    ``endpoint_setting`` names where an S3-compatible server's address goes, for a URL that
    looks like one.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "s3":
        rest = url.split(":", 1)[1]
        if not rest.startswith("//"):
            guess = rest.lstrip("/")
            hint = f"; did you mean 's3://{guess}'?" if guess else ""
            return f"an S3 store is written s3://bucket/prefix, two slashes after 's3:'{hint}"
        if not parts.netloc:
            return (
                "no bucket: an S3 store is written s3://bucket/prefix (the prefix may be "
                "left out), e.g. s3://my-bucket/fs-search"
            )
        return None
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            return (
                "a file store is an absolute directory, written file:///absolute/dir "
                "(three slashes: file:// then a path starting with /)"
            )
        return None
    if not scheme:
        if url.startswith("/"):
            return f"not a URL: a directory is written file://{url}"
        return f"not a URL: expected {_SPILL_URL_FORMS}"
    if scheme in ("http", "https"):
        return (
            f"{scheme}:// is not a spill store: expected {_SPILL_URL_FORMS}; an S3-compatible "
            f"server's address goes in {endpoint_setting}, beside s3://bucket/prefix"
        )
    return f"{scheme}:// is not a spill store: expected {_SPILL_URL_FORMS}"


def endpoint_url_problem(url: str) -> str | None:
    """What is wrong with an S3 endpoint URL; None if fine (``http(s)://host[:port]``)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return "an S3 endpoint is written http://host:port or https://host"
    return None
