"""model_repo.sync_source: the ONNX check is fast on a large model."""

from __future__ import annotations

import os
import time

from tests.support.onnx_models import onnx_model


def test_the_onnx_check_is_fast_on_a_large_model(tmp_path) -> None:
    from triton_gke.model_repo.sync_source import check_model_file

    big = tmp_path / "model.onnx"
    big.write_bytes(onnx_model(os.urandom(100 * 1000 * 1000)))
    # CPU seconds of this process (time.process_time: user and system CPU, not the time spent waiting for a core,
    # https://docs.python.org/3/library/time.html#time.process_time): other work on the machine does not move it.
    # 0.11 s measured here; 5 s catches a check that reads or parses the 100 MB of weights, not a slow host.
    started = time.process_time()
    check_model_file(big)
    assert time.process_time() - started < 5


def test_a_model_py_is_decoded_strictly_before_it_is_compiled(tmp_path) -> None:
    """compile() of the bytes lets an incomplete UTF-8 sequence ending a comment through (the reader property test
    found b'#\\xc3\\xb4\\xc3'); a coding declaration (PEP 263) or a BOM still names the encoding."""
    import pytest

    from triton_gke.model_repo.sync_source import SyncError, _check_python

    path = tmp_path / "model.py"
    for refused in (b"#\xc3\xb4\xc3", b"x = 1  # \xc3", b"# coding: nope\n", b"# coding: undefined\nx = 1\n"):
        path.write_bytes(refused)
        with pytest.raises(SyncError, match=r"model\.py: the Python backend's model\.py is not valid text \("):
            _check_python(path)
    path.write_bytes(b"x = " + b"(" * 100_000 + b")" * 100_000 + b"\n")  # too deep for the compiler: one line
    with pytest.raises(SyncError, match=r"model\.py: the Python backend's model\.py does not compile"):
        _check_python(path)
    for accepted in (b'# -*- coding: latin-1 -*-\nx = "\xe9"\n', b"\xef\xbb\xbfx = 1\n", "x = 'é'\n".encode()):
        path.write_bytes(accepted)
        _check_python(path)


def test_hard_links_of_one_file_are_hashed_once_and_alike(tmp_path, monkeypatch) -> None:
    """The build links the ONNX file several variants share: hash_local reads it once and gives each path its hashes."""
    from triton_gke.model_repo import sync_source

    (tmp_path / "a").write_bytes(b"model bytes")
    os.link(tmp_path / "a", tmp_path / "b")
    (tmp_path / "c").write_bytes(b"other bytes")
    read: list[str] = []
    original = sync_source.file_hashes

    def counting(path):
        read.append(path.name)
        return original(path)

    monkeypatch.setattr(sync_source, "file_hashes", counting)
    hashed = sync_source.hash_local(tmp_path, [tmp_path / n for n in ("a", "b", "c")])
    assert sorted(read) == ["a", "c"]
    assert hashed["a"].md5 == hashed["b"].md5 != hashed["c"].md5 and hashed["b"].path == tmp_path / "b"
