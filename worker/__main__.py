"""``python -m fs_search.worker``: the same as the ``fs-search`` console script."""

from fs_search.worker.cli import run

if __name__ == "__main__":
    run()
