"""``storage.replace_dir``: a folder artifact is replaced whole, locally and on S3 (moto_server).

A re-export never leaves old and new files side by side, and a crash mid-write leaves the
previous committed version (locally) or an uncommitted prefix (S3), never a mix that reads as
committed.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

from pretrain import storage
from tests.servers.s3_server import moto_s3


@pytest.fixture(scope="module")
def s3_root() -> Iterator[str]:
    with moto_s3() as _endpoint:
        yield "s3://campaign/replace"


def names(dir_uri: str) -> list[str]:
    return sorted(uri.rsplit("/", 1)[-1] for uri in storage.list_files(dir_uri))


def fail_on(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make the write of file ``name`` raise, as a crash in the middle of an export would (a
    local folder is staged through the one local file write, an S3 prefix through
    ``write_bytes``)."""
    real, real_local = storage.write_bytes, storage._write_local

    def flaky(data: bytes, uri: str) -> None:
        if uri.endswith("/" + name):
            raise OSError("disk full")
        real(data, uri)

    def flaky_local(data: bytes, target: Path) -> None:
        if target.name == name:
            raise OSError("disk full")
        real_local(data, target)

    monkeypatch.setattr(storage, "write_bytes", flaky)
    monkeypatch.setattr(storage, "_write_local", flaky_local)


@pytest.mark.parametrize("where", ["local", "s3"])
def test_replace_dir_swaps_the_whole_folder(
    where: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path) if where == "local" else request.getfixturevalue("s3_root")
    target = storage.join(root, "hf_export", "b00-s000000100")
    storage.replace_dir({"model.bin": b"v1", "stale.json": b"{}"}, target, {"version": 1})
    assert names(target) == ["_COMMITTED", "model.bin", "stale.json"]
    storage.replace_dir({"model.bin": b"v2", "config.json": b"{}"}, target, {"version": 2})
    assert names(target) == ["_COMMITTED", "config.json", "model.bin"]  # stale.json is gone
    assert storage.read_bytes(storage.join(target, "model.bin")) == b"v2"
    assert storage.read_json(storage.join(target, "_COMMITTED"))["version"] == 2

    fail_on(monkeypatch, "z.bin")
    with pytest.raises(OSError, match="disk full"):
        storage.replace_dir({"model.bin": b"v3", "z.bin": b"boom"}, target, {"version": 3})
    monkeypatch.undo()
    if where == "local":  # the previous version, whole and committed
        assert names(target) == ["_COMMITTED", "config.json", "model.bin"]
        assert storage.read_bytes(storage.join(target, "model.bin")) == b"v2"
        assert not [p for p in Path(target).parent.iterdir() if p.name.startswith(".")]
    else:  # no rename on S3: the half-written prefix is uncommitted, so readers see no export
        assert not storage.is_committed(target)
