"""The data converter a client needs to talk to fs-search, without the plugin's worker parts.

``FsSearchPlugin`` builds its converter here; so does the command line's address mode, which
connects a client for one call and runs no worker, so it need not load ``temporalio.worker``
(``temporalio.plugin`` imports it) just to start.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter, PydanticPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    ExternalStorage,
    PayloadConverter,
)

from fs_search.activities import (
    ConfigError,
    StorageSettings,
    endpoint_url_problem,
    spill_url_problem,
)
from fs_search.activities.storage import Storage, storage_for

# The warning below is FsSearchPlugin's, under the logger it has always had.
log = logging.getLogger("fs_search.workflows._plugin")


def fs_search_converter(
    existing: DataConverter | None, *, external_storage: ExternalStorage | None
) -> DataConverter:
    """``existing`` (else the default) made pydantic-aware, with ``external_storage`` unless
    it has one: its codec, failure converter and own external storage are kept; a payload
    converter that is not pydantic-aware cannot carry fs-search's models, so it is replaced
    by ``PydanticPayloadConverter`` (with a warning naming it)."""
    base = existing or DataConverter.default
    if not _pydantic_aware(base.payload_converter_class()):
        replaced = base.payload_converter_class
        if replaced is not DefaultPayloadConverter:
            log.warning(
                "FsSearchPlugin replaced the payload converter %s.%s with "
                "temporalio.contrib.pydantic.PydanticPayloadConverter: fs-search's "
                "pydantic models cannot be converted without it",
                replaced.__module__,
                replaced.__qualname__,
            )
        base = dataclasses.replace(base, payload_converter_class=PydanticPayloadConverter)
    if external_storage is not None and base.external_storage is None:
        base = dataclasses.replace(base, external_storage=external_storage)
    return base


def storage_from(
    spill_url: str | None,
    s3_endpoint_url: str | None,
    payload_threshold: int | None,
    getenv: Callable[[str], str | None],
) -> Storage:
    """The storage the arguments, else the environment, name; errors name whichever the
    user gave (``FsSearchPlugin(spill_url=...)`` or ``FS_SEARCH_SPILL_URL``).

    Raises:
        ConfigError: a URL names no store, or the threshold is not a number.
    """
    # The arguments are checked here, so that errors name them; the settings name the
    # environment variables.
    problem = spill_url and spill_url_problem(spill_url, endpoint_setting="s3_endpoint_url=")
    if problem:
        raise ConfigError(f"FsSearchPlugin(spill_url={spill_url!r}): {problem}")
    problem = s3_endpoint_url and endpoint_url_problem(s3_endpoint_url)
    if problem:
        raise ConfigError(f"FsSearchPlugin(s3_endpoint_url={s3_endpoint_url!r}): {problem}")
    settings = StorageSettings.load(
        getenv=getenv,
        overrides={
            "spill_url": spill_url or None,
            "s3_endpoint_url": s3_endpoint_url or None,
            "payload_threshold_bytes": payload_threshold,
        },
    )
    return storage_for(settings)


def _pydantic_aware(converter: PayloadConverter) -> bool:
    """Whether JSON goes through pydantic (PydanticPayloadConverter, or a composite using it)."""
    if isinstance(converter, PydanticPayloadConverter):
        return True
    return isinstance(converter, CompositePayloadConverter) and any(
        isinstance(c, PydanticJSONPlainPayloadConverter) for c in converter.converters.values()
    )
