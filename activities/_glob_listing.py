"""A glob's listing, owned whole: rg's walk fed to the worker's sort as it comes, the fall
back to rg's own sort for a large one, and the names handed back in modification order.

rg walks with one thread (``sort=False``) and the worker puts the names in modification
order as they arrive (:class:`~fs_search.activities.results.ModifiedOrder`: the files' times
read on two cores, faster than rg's sort), up to :data:`SORT_HERE_MAX_BYTES` of listing; past
it the walk is stopped and rg lists again, sorted (the same order, at less memory than a list
and a sort of every name in the worker). Whatever ends the call early — rg failing, a
cancellation, a pattern error — the listing is discarded once, on leaving the ``async
with``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType

from fs_search.activities import rg
from fs_search.activities._contract import ErrorCode
from fs_search.activities._errors import SearchError
from fs_search.activities.results import ModifiedOrder, Offload

# A glob's listing is put in modification order in the worker up to this much of it; a
# larger one is sorted by rg.
SORT_HERE_MAX_BYTES = 4 * 1024 * 1024


class GlobListing:
    """The listing of one glob call. Run :attr:`argv` with :attr:`max_stdout` and
    :attr:`sink` (the caller keeps the I/O: rg's run awaits in the activity's own frame); on
    its failure ask :meth:`fall_back` whether to run :attr:`argv` again; confirm the exit with
    :attr:`argv`; take :meth:`sorted` when it :attr:`sorts_here` (else rg's output is in
    order). As ``async with``, it is discarded on any failure."""

    def __init__(self, pattern: str, *, rg_path: str, offload: Offload, at: int, cap: int) -> None:
        self._pattern = pattern
        self._rg_path = rg_path
        self._cap = cap
        self.argv = rg.for_glob(pattern, rg=rg_path, sort=False)
        """The argv of the run that produced the listing (a pattern error is confirmed
        with it)."""
        # The worker's sort of the walk; None once finished, discarded, or left to rg.
        self._order: ModifiedOrder | None = ModifiedOrder(
            offload, at, reserve=min(cap, SORT_HERE_MAX_BYTES)
        )
        # Plain attributes, not properties: read on the call's path, they cost no call.
        self.sorts_here = True
        """Whether the worker sorts the listing (False once rg lists it sorted)."""
        self.max_stdout: int | None = min(cap, SORT_HERE_MAX_BYTES)
        """The cap of the run that lists it: the walk stops past what is sorted here (None:
        the call's own cap, once rg sorts)."""
        self.sink: Callable[[bytes], None] | None = self._order.feed
        """Where the run's output goes as it is read: the worker's sort (None once rg sorts)."""

    async def fall_back(self, error: BaseException) -> bool:
        """Whether the walk's failure means "too large to sort here": then what was fed is
        dropped and :attr:`argv` lists it again, sorted by rg (run it: the last fall-back)."""
        if not (
            self._order is not None
            and isinstance(error, SearchError)
            and error.code == ErrorCode.SEARCH_RAW_OUTPUT_OVERFLOW
            and self._cap > SORT_HERE_MAX_BYTES
        ):
            return False
        await self.discard()
        self.argv = rg.for_glob(self._pattern, rg=self._rg_path, sort=True)
        self.sorts_here, self.max_stdout, self.sink = False, None, None
        return True

    def sorted(self) -> Awaitable[list[bytes]]:
        """The listing the worker sorted, in modification order, as ``rg --files --null``
        output in one buffer (rg has exited: nothing more is fed). The sort's own awaitable:
        awaited by the caller, no frame of this object's stands between."""
        assert self._order is not None, "sorted by rg: its output is in order"
        order, self._order = self._order, None
        return order.finish()

    async def discard(self) -> None:
        """Drop what was fed and stop the sort's lanes (nothing to do once sorted)."""
        if self._order is not None:
            order, self._order = self._order, None
            await order.discard()

    async def __aenter__(self) -> GlobListing:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.discard()
