"""The gzipped JSON that published results keep: read back as written, and the same bytes for
the same data, so a republished folder that did not change leaves git's tree as it was."""

import gzip
import json

from compilekit.model import store


def test_gzipped_json_is_the_same_bytes_for_the_same_data(tmp_path, monkeypatch):
    data = {"kernels": [{"name": "triton_poi_fused_0", "ms": 0.25}], "status": "ok"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    store.write_json_gz(str(tmp_path / "a" / "kernels.json"), data)
    # another second, another file name: neither may reach the bytes
    monkeypatch.setattr(gzip.time, "time", lambda: 2_000_000_000.0)
    store.write_json_gz(str(tmp_path / "b" / "result.json"), data)
    first = (tmp_path / "a" / "kernels.json.gz").read_bytes()
    assert first == (tmp_path / "b" / "result.json.gz").read_bytes()
    assert json.loads(gzip.decompress(first)) == data
    assert not (tmp_path / "a" / "kernels.json").exists()
