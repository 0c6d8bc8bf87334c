import os
import stat

import pytest

from core.io import DataError, read_jsonl, write_json, write_jsonl


def test_roundtrip_and_blank_lines(tmp_path):
    f = tmp_path / "a.jsonl"
    write_jsonl(f, [{"a": 1}, {"a": "é"}])
    f.write_text(f.read_text() + "\n\n")
    assert read_jsonl(f) == [{"a": 1}, {"a": "é"}]


@pytest.mark.parametrize("content,match", [
    ('{"a": 1}\n{"a": \n', r"x\.jsonl:2: not valid JSON"),
    ('{"a": 1}\n[1, 2]\n', r"x\.jsonl:2: expected a JSON object, got list"),
    ('{"b": 1}\n', r"x\.jsonl:1: missing field\(s\) \['a'\]"),
])
def test_malformed_rows_name_file_and_line(tmp_path, content, match):
    f = tmp_path / "x.jsonl"
    f.write_text(content)
    with pytest.raises(DataError, match=match):
        read_jsonl(f, required=("a",))


def test_missing_file_says_which_stage(tmp_path):
    with pytest.raises(FileNotFoundError, match="did the stage that writes it run"):
        read_jsonl(tmp_path / "nope.jsonl")


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    f = tmp_path / "m.json"
    write_json(f, {"ok": 1})

    def rows():
        yield {"x": 1}
        raise RuntimeError("killed mid-write")

    g = tmp_path / "r.jsonl"
    write_jsonl(g, [{"x": 0}])
    with pytest.raises(RuntimeError):
        write_jsonl(g, rows())
    assert read_jsonl(g) == [{"x": 0}]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_invalid_utf8_names_file_and_line(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_bytes(b'{"a": "\xc3\xa9"}\n\n{"a": "ok \xff"}\n')
    with pytest.raises(DataError, match=r"x\.jsonl:3: not valid UTF-8 \(byte 0xff at character 11\)"):
        read_jsonl(f)


def test_crlf_and_non_ascii_rows_still_read(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_bytes('{"a": "é"}\r\n{"a": "\\udcff"}\r\n'.encode())
    assert read_jsonl(f) == [{"a": "é"}, {"a": "\udcff"}]  # an escaped surrogate is data, not a bad byte


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_respect_the_umask(tmp_path, umask):
    """Regression: files came out 0600 (tempfile.mkstemp's mode), whatever the umask."""
    old = os.umask(umask)
    try:
        write_jsonl(tmp_path / "r.jsonl", [{"x": 1}])
        write_json(tmp_path / "m.json", {"x": 1})
    finally:
        os.umask(old)
    for name in ("r.jsonl", "m.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "r.jsonl"]
