"""``python -m fs_search.worker.cli``: the ``fs-search`` command under a name no other
distribution can take (the registry's unrelated ``fs-search`` installs a command of the
same name)."""

from fs_search.worker.cli._entry import run

if __name__ == "__main__":
    run()
