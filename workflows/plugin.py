"""FsSearchPlugin: the data converter (and external storage) callers and workers install."""

from __future__ import annotations

import dataclasses

from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter, DefaultPayloadConverter, ExternalStorage
from temporalio.plugin import SimplePlugin

PLUGIN_NAME = "fs_search.FsSearchPlugin"


class FsSearchPlugin(SimplePlugin):
    """Install on a client (workers built from it inherit it) to talk to fs-search.

    It makes the data converter pydantic-aware (results are readable JSON in the UI) and,
    when given one, adds the external storage that large ``spill: false`` results cross
    Temporal through. Settings the caller already has (codec, failure converter, a custom
    payload converter) are kept.

    Args:
        external_storage: storage for payloads above its threshold; see
            :func:`fs_search.workflows.storage.external_storage_from_env`.
    """

    def __init__(self, *, external_storage: ExternalStorage | None = None) -> None:
        self.external_storage = external_storage
        super().__init__(PLUGIN_NAME, data_converter=self._converter)

    def _converter(self, existing: DataConverter | None) -> DataConverter:
        base = existing or DataConverter.default
        if base.payload_converter_class is DefaultPayloadConverter:
            base = dataclasses.replace(base, payload_converter_class=PydanticPayloadConverter)
        if self.external_storage is not None and base.external_storage is None:
            base = dataclasses.replace(base, external_storage=self.external_storage)
        return base
