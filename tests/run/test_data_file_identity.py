"""A resumed run's data files are identified by their whole content: a change in the middle of a
file that keeps its size is seen (it used to go unnoticed beyond the first and last MiB)."""

import hashlib

from vijax.run import _checkpoint
from vijax.run._config import config_fingerprint, file_identity


def test_file_identity_is_the_sha256_of_the_whole_file(tmp_path):
    data = bytes(range(256)) * (3 * 4096 + 7)  # a little over 3 MiB: more than a first and a last MiB
    path = tmp_path / "corpus.ldac"
    path.write_bytes(data)
    assert file_identity(path) == f"{len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]}"


def test_a_same_size_change_in_the_middle_of_a_data_file_changes_the_fingerprint(tmp_path):
    path = tmp_path / "corpus.ldac"
    data = bytearray(b"1 0:1\n" * 600_000)  # 3.6 MB
    path.write_bytes(bytes(data))
    config = {"experiment": "x", "data": {"path": str(path)}}
    before = config_fingerprint(config)
    middle = len(data) // 2
    data[middle - (middle % 6) + 4] = ord("2")  # one count 1 -> 2, the size unchanged
    path.write_bytes(bytes(data))
    after = config_fingerprint(config)
    changed = _checkpoint.compare_fingerprints(before, after)
    assert [line.split(":")[0] for line in changed] == ["data_files.path"], changed
    assert before["values"]["data_files.path"].split(",")[0] == after["values"]["data_files.path"].split(",")[0]
