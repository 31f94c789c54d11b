"""The data directory's lock (``data.lock``) as the store takes it: one open store per
directory, refused before recovery touches anything, released by ``close``; and a data
directory path that is a file. Across real processes: tests/server/test_server_e2e.py."""

from __future__ import annotations

import os

import pytest

from data import paths
from data.errors import DataDirIsAFile, DataDirLocked
from data.lock import DataDirLock
from data.store import Store, TopicConfig
from tests.data.support import stop_uncleanly


class DataDirLockTests:

    def test_second_store_is_refused_and_touches_nothing(self, tmp_path):
        """A second store on an open directory raises DataDirLocked naming the directory and
        the holder's pid, before recovery runs: the first store's unsynced tail and the
        absence of a clean-shutdown marker are left as they are."""
        root = str(tmp_path / "d")
        first = Store(root)
        plog = first.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        plog.append([b"acknowledged"])
        with pytest.raises(DataDirLocked) as info:
            Store(root)
        assert info.value.path == os.path.abspath(root)
        assert info.value.pid == os.getpid()
        assert str(info.value) == (f"data directory {os.path.abspath(root)} is locked by "
                                   f"pid {os.getpid()}: another broker is using it")
        assert not os.path.exists(paths.clean_marker_path(root))
        plog.append([b"still writable"])
        assert [r.payload for r in plog.read(0, 10).records] == [b"acknowledged", b"still writable"]
        first.close()

    def test_close_releases_and_the_next_store_opens(self, tmp_path):
        """After close the directory opens again, and the lock file holds the new pid."""
        root = str(tmp_path)
        Store(root).close()
        again = Store(root)
        with open(paths.lock_path(root)) as f:
            assert f.read() == f"{os.getpid()}\n"
        again.close()
        assert not again.lock.held

    def test_a_crash_releases_it(self, tmp_path):
        """A store dropped the way a killed process drops it does not block the next one."""
        root = str(tmp_path)
        store = Store(root)
        stop_uncleanly(store)
        Store(root).close()

    def test_refused_while_the_lock_file_names_nobody(self, tmp_path):
        """A holder that has not written its pid yet is still a holder; the message then
        says another process."""
        root = str(tmp_path)
        lock = DataDirLock.acquire(root)
        os.truncate(paths.lock_path(root), 0)
        with pytest.raises(DataDirLocked, match="locked by another process") as info:
            Store(root)
        assert info.value.pid is None
        lock.release()
        Store(root).close()

    def test_data_dir_that_is_a_file(self, tmp_path):
        """A data directory path that is a regular file, or lies under one, is refused by
        name, not with 'File exists' or 'Not a directory'."""
        path = tmp_path / "notes.txt"
        path.write_text("not a directory\n")
        with pytest.raises(DataDirIsAFile) as info:
            Store(str(path))
        assert str(info.value) == f"data directory {path} is a file, not a directory"
        with pytest.raises(DataDirIsAFile) as info:
            Store(str(path / "data"))
        assert str(info.value) == (f"data directory {path / 'data'} cannot be created: "
                                   f"{path} is a file, not a directory")
        assert path.read_text() == "not a directory\n"
