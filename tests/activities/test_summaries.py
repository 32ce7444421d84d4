"""Activity summaries for the Temporal UI."""

from __future__ import annotations

import pytest

from fs_search.activities._summaries import SUMMARY_MAX_BYTES, summary


def test_summary_shape():
    """Summaries read like `grep "TODO" in src (*.py)`."""
    assert summary("grep", "TODO", "src", "*.py") == 'grep "TODO" in src (*.py)'
    assert summary("glob", "**/*.ts") == 'glob "**/*.ts"'


@pytest.mark.parametrize("pattern", ["x" * 5000, "日本語" * 500, "a\nb" * 300])
def test_long_or_multiline_patterns_fit_in_200_bytes_on_one_line(pattern):
    """A long pattern is shortened (UTF-8 safe) so the summary stays within 200 bytes, on one line."""
    text = summary("grep", pattern, "some/dir", "*.{py,pyi}")
    assert len(text.encode()) <= SUMMARY_MAX_BYTES
    assert (
        "\n" not in text
        and text.startswith('grep "')
        and text.endswith(" in some/dir (*.{py,pyi})")
    )
    assert "…" in text


def test_huge_path_still_fits():
    """Even a huge path is cut to fit."""
    assert len(summary("glob", "*", "p" * 1000).encode()) <= SUMMARY_MAX_BYTES


def test_a_host_routed_call_names_its_workspace_whatever_the_rest():
    """On a host queue the summary is the UI's only mention of the workspace: it is kept
    whole, the pattern and path shortened around it."""
    from fs_search.activities._contract import GrepRequest, ReadSpillRequest
    from fs_search.activities._summaries import summary_of

    wid = "w" * 128
    assert summary("grep", "TODO", "src", workspace="ws-1") == 'grep "TODO" in src @ ws-1'
    long = summary_of(GrepRequest(pattern="x" * 5000, path="p" * 1000, workspace_id=wid))
    assert long.endswith(f" @ {wid}") and len(long.encode()) <= SUMMARY_MAX_BYTES
    spill = summary_of(ReadSpillRequest(locator="s3://b/" + "k" * 300, workspace_id=wid))
    assert spill.endswith(f" @ {wid}") and len(spill.encode()) <= SUMMARY_MAX_BYTES
    assert summary_of(GrepRequest(pattern="TODO")) == 'grep "TODO"'
