"""glob and grep as specs of the one pipeline: argv, rg rules, digest, text and result."""

from __future__ import annotations

import logging
from typing import Literal

from fs_search.activities import command, digest, parse, render
from fs_search.activities.digest import GlobDigest, GrepDigest
from fs_search.activities.errors import SearchError
from fs_search.activities.models import (
    ErrorCode,
    GlobRequest,
    GlobResult,
    GrepMatch,
    GrepRequest,
    GrepResult,
    SpillRef,
)
from fs_search.activities.offload import Offload
from fs_search.activities.paths import SearchTarget
from fs_search.activities.pipeline import RunRg, Searched, SearchSpec
from fs_search.activities.render import SpillNote

log = logging.getLogger(__name__)

IGNORE_FILES_SKIPPED = (
    "(ignore files were not applied: one in the workspace could not be read safely, "
    "so files it would hide are included)"
)


class GlobSpec(SearchSpec[GlobRequest, GlobDigest, GlobResult]):
    """glob: ``rg --files`` in the search root, paged (head or sampled) by mtime."""

    name: Literal["glob", "grep"] = "glob"

    async def search(
        self, req: GlobRequest, *, target: SearchTarget, rg: str, run: RunRg
    ) -> Searched:
        argv = command.for_glob(req.pattern, rg=rg)
        # `rg --files` writes no closing message to look for: its exit code decides.
        return Searched(run=await run(argv), clean_argv=argv, complete=True)

    async def digest(
        self, offload: Offload, chunks: list[bytes], *, target: SearchTarget, req: GlobRequest
    ) -> GlobDigest:
        # Paged and (over the cap) rendered in full in one pass over the bytes.
        return await offload.run(
            digest.glob,
            chunks,
            target,
            cap=self.config.glob_max_results,
            sample=self.config.sample_over_cap_glob_results,
            artifact=req.spill,
            every=not req.spill,
        )

    def text(
        self,
        got: GlobDigest,
        *,
        target: SearchTarget,
        spill: SpillNote | None,
        partial: bool,
    ) -> str:
        return render.glob_text(
            got.shown, got.page, total=got.total, root=target.root, spill=spill, partial=partial
        )

    def payload_estimate(self, got: GlobDigest) -> int:
        return sum(len(p) + 4 for p in got.every or [])

    def result(
        self,
        req: GlobRequest,
        got: GlobDigest,
        *,
        target: SearchTarget,
        text: str,
        partial: bool,
        spill: SpillRef | None,
        spill_error: str | None,
    ) -> GlobResult:
        return GlobResult(
            root=target.root,
            paths=got.shown if req.spill else got.every or [],
            total=got.total,
            truncated=got.truncated,
            sampled=got.page.sampled,
            text=text,
            spill=spill,
            spill_error=spill_error,
            partial=partial,
        )


class GrepSpec(SearchSpec[GrepRequest, GrepDigest, GrepResult]):
    """grep: ``rg --json`` matches grouped by file; ignore files that stop rg are dropped."""

    name: Literal["glob", "grep"] = "grep"

    async def search(
        self, req: GrepRequest, *, target: SearchTarget, rg: str, run: RunRg
    ) -> Searched:
        def argv(*, ignore_files: bool, file_arg: str | None) -> list[str]:
            return command.for_grep(
                req.pattern,
                rg=rg,
                include=_include(req),
                file_arg=file_arg,
                threads=self.config.rg_threads,
                ignore_files=ignore_files,
            )

        found = await run(argv(ignore_files=True, file_arg=target.file_arg))
        note = None
        if found.aborted or found.fifo_refused:
            # An ignore file the tree planted (huge, endless, a FIFO outside) stopped rg:
            # search again without ignore files, and say so.
            log.warning("rg was stopped by an ignore file; searching again without them")
            found = await run(argv(ignore_files=False, file_arg=target.file_arg))
            note = IGNORE_FILES_SKIPPED
            if found.aborted:
                # Not an ignore file, then: rg holds each file's matches in memory before
                # writing them, and one file's were too many.
                raise SearchError(
                    ErrorCode.SEARCH_RAW_OUTPUT_OVERFLOW,
                    "the matches in one file needed more memory than rg may use on this "
                    "worker (FS_SEARCH_RG_MEMORY_MB) and the search was stopped; narrow "
                    "the pattern, path or include",
                )
        return Searched(
            run=found,
            clean_argv=argv(ignore_files=True, file_arg=None),
            complete=parse.ends_with_summary(found.chunks),
            note=note,
        )

    async def digest(
        self, offload: Offload, chunks: list[bytes], *, target: SearchTarget, req: GrepRequest
    ) -> GrepDigest:
        return await offload.run(
            digest.grep,
            chunks,
            target,
            cap=self.config.grep_max_matches,
            max_line_bytes=self.config.grep_max_line_bytes,
            artifact=req.spill,
            every=not req.spill,
        )

    def text(
        self,
        got: GrepDigest,
        *,
        target: SearchTarget,
        spill: SpillNote | None,
        partial: bool,
    ) -> str:
        return render.grep_text(
            got.page, total=got.total, files=got.files, spill=spill, partial=partial
        )

    def payload_estimate(self, got: GrepDigest) -> int:
        return sum(len(p) + len(t) + 64 for p, lines in got.every or [] for _, t in lines)

    def result(
        self,
        req: GrepRequest,
        got: GrepDigest,
        *,
        target: SearchTarget,
        text: str,
        partial: bool,
        spill: SpillRef | None,
        spill_error: str | None,
    ) -> GrepResult:
        if req.spill:
            matches = [
                GrepMatch(
                    path=line.path,
                    line_number=line.line_number,
                    line=line.text,
                    line_truncated=line.truncated,
                )
                for line in got.page
            ]
        else:
            # Trusted values straight from the parser: skip per-match validation.
            matches = [
                GrepMatch.model_construct(path=path, line_number=number, line=line)
                for path, lines in got.every or []
                for number, line in lines
            ]
        return GrepResult(
            matches=matches,
            total=got.total,
            files=got.files,
            truncated=got.truncated,
            partial=partial,
            text=text,
            spill=spill,
            spill_error=spill_error,
        )


def _include(req: GrepRequest) -> str | None:
    """The include glob, or None when blank."""
    return req.include if req.include and req.include.strip() else None
