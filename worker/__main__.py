"""``python -m fs_search.worker``: the same as the ``fs-search`` console script."""

from fs_search.worker.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
