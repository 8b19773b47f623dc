"""Data larger than memory: zips written and read member by member in chunks, incompressible
members stored, and a leakage check that streams public files and loads only the arrays
that could equal a hidden one. The build's peak memory does not grow with its data."""
import hashlib
import importlib.util
import zipfile
from pathlib import Path

import numpy as np
import pytest

from bundle import leakage, zips
from bundle.leakage import leakage_problems
from bundle.zips import write_zip, zip_members
from array_bytes import npy_bytes, npz_bytes

REPO = Path(__file__).resolve().parents[1]
MIB = 2**20


def _benchmark():
    spec = importlib.util.spec_from_file_location(
        "build_large_data", REPO / "benchmarks" / "build_large_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_builds_peak_memory_does_not_grow_with_its_input_data(tmp_path):
    benchmark = _benchmark()
    spec = benchmark.write_spec(tmp_path)
    peaks = {}
    for size in (64 * MIB, 512 * MIB):
        images = benchmark.write_images(tmp_path / "images.npy", size)
        out = tmp_path / f"out{size}"
        _, peaks[size] = benchmark.measure(spec, out, images)
        (dataset,) = out.glob("*input_data.zip")
        with zipfile.ZipFile(dataset) as archive:
            info = archive.getinfo(benchmark.IMAGES)
        assert info.file_size >= size and info.compress_type == zipfile.ZIP_STORED
        assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []
        images.unlink()
    grown = peaks[512 * MIB] - peaks[64 * MIB]
    assert grown < (512 - 64) * MIB / 4, {size // MIB: peak // MIB for size, peak in peaks.items()}


def _old_way(destination: Path, members: dict[str, bytes]) -> bytes:
    """How write_zip wrote every member before it streamed them."""
    with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, zips.FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, members[name], compresslevel=6)
    return destination.read_bytes()


def test_small_members_keep_their_bytes_and_large_incompressible_ones_are_stored(tmp_path):
    rng = np.random.default_rng(0)
    small = {"a.txt": b"hello " * 1000, "b.npy": npy_bytes(rng.normal(size=1000))}
    (tmp_path / "b.npy").write_bytes(small["b.npy"])
    from_files = write_zip(tmp_path / "files.zip", {"a.txt": small["a.txt"],
                                                    "b.npy": tmp_path / "b.npy"})
    assert from_files.read_bytes() == _old_way(tmp_path / "old.zip", small)

    (tmp_path / "noise.npy").write_bytes(npy_bytes(rng.integers(0, 256, 9 * MIB, dtype=np.uint8)))
    (tmp_path / "zeros.npy").write_bytes(npy_bytes(np.zeros(9 * MIB, dtype=np.uint8)))
    large = {"noise.npy": tmp_path / "noise.npy", "zeros.npy": tmp_path / "zeros.npy"}
    first = write_zip(tmp_path / "large1.zip", large).read_bytes()
    assert write_zip(tmp_path / "large2.zip", large).read_bytes() == first
    with zipfile.ZipFile(tmp_path / "large1.zip") as archive:
        assert archive.getinfo("noise.npy").compress_type == zipfile.ZIP_STORED
        assert archive.getinfo("zeros.npy").compress_type == zipfile.ZIP_DEFLATED
        assert archive.testzip() is None
        assert archive.read("noise.npy") == large["noise.npy"].read_bytes()
    members = zip_members(tmp_path / "large1.zip")
    with members["noise.npy"].open() as stream:
        assert zips.stream_sha256(stream) == zips.content_sha256(large["noise.npy"])


def test_a_hidden_file_across_two_chunks_of_a_public_file_is_found(monkeypatch, tmp_path):
    monkeypatch.setattr(leakage, "CHUNK", 4096)
    secret = np.arange(300, dtype=np.int64)
    hidden = {"labels.npy": npy_bytes(secret)}
    for start in (4096 - 100, 3 * 4096 - 1, 5):
        public = bytes(start) + hidden["labels.npy"] + bytes(20000)
        path = tmp_path / f"public{start}.bin"
        path.write_bytes(public)
        write_zip(tmp_path / "public.zip", {"data.bin": path})
        for members in ({"data.bin": path}, zip_members(tmp_path / "public.zip")):
            problems = " ".join(leakage_problems(hidden, {"public.zip": members}))
            assert "data.bin contains the bytes of hidden labels.npy" in problems, start
    clean = tmp_path / "clean.bin"
    clean.write_bytes(bytes(30000))
    assert leakage_problems(hidden, {"public.zip": {"clean.bin": clean}}) == []


def test_public_arrays_are_compared_when_their_size_could_match(monkeypatch, tmp_path):
    monkeypatch.setattr(leakage, "NESTED_IN_MEMORY_BYTES", 0)     # npz read from a copy
    labels = np.arange(40, dtype=float)
    hidden = {"labels.npy": npy_bytes(labels)}
    (tmp_path / "same.npy").write_bytes(npy_bytes(labels.reshape(-1, 1).astype(np.float32)))
    (tmp_path / "other.npy").write_bytes(npy_bytes(labels + 1))
    (tmp_path / "big.npy").write_bytes(npy_bytes(np.zeros(10**6)))
    (tmp_path / "inputs.npz").write_bytes(npz_bytes(x=np.ones((50, 4)), y_test=np.zeros(40),
                                               y_copy=labels.astype(np.int32)))
    (tmp_path / "leaky.npz").write_bytes(npz_bytes(y_test=np.ones(7)))
    public = write_zip(tmp_path / "public.zip",
                       {name: tmp_path / name for name in
                        ("same.npy", "other.npy", "big.npy", "inputs.npz", "leaky.npz")})
    problems = leakage_problems(hidden, {"public.zip": zip_members(public)}, ("y_test",))
    assert problems == sorted([
        "public.zip:inputs.npz: array inputs.npz:y_copy equals hidden labels.npy",
        "public.zip:leaky.npz: y_test is not all zeros (test labels would leak)",
        "public.zip:same.npy: array same.npy equals hidden labels.npy"])


def test_large_text_files_are_parsed_only_with_a_hidden_arrays_count(monkeypatch, tmp_path):
    monkeypatch.setattr(leakage, "TEXT_PARSE_BYTES", 0)
    parsed = []
    original = leakage._text_array
    monkeypatch.setattr(leakage, "_text_array",
                        lambda stream, delimiter: parsed.append(1) or original(stream, delimiter))
    labels = np.arange(30, dtype=float).reshape(10, 3)
    hidden = {"labels.csv": b"\n".join(b",".join(b"%g" % v for v in row) for row in labels)}
    (tmp_path / "copy.csv").write_text("# header\n" + "\n".join(
        ",".join(f"{v:.1f}" for v in row) for row in labels) + "\n")
    (tmp_path / "long.csv").write_text("\n".join("1,2,3" for _ in range(1000)))
    problems = leakage_problems(hidden, {"kit": {"copy.csv": tmp_path / "copy.csv",
                                                 "long.csv": tmp_path / "long.csv"}})
    assert problems == ["kit:copy.csv: array copy.csv equals hidden labels.csv"]
    assert len(parsed) == 2              # the hidden file and copy.csv, never long.csv


def test_the_stored_and_streamed_checks_agree_with_the_in_memory_ones(tmp_path):
    """The same leaks found from bytes, from files and from members of a zip on disk."""
    labels = np.arange(200, dtype=float)
    hidden = {"wine_test_labels.npy": npy_bytes(labels), "wine_probs.npy": npy_bytes(np.eye(50))}
    planted = {"notes.bin": b"xx" + labels.tobytes() + b"yy",
               "copy.npy": hidden["wine_probs.npy"], "wine.npz": npz_bytes(y_test=np.ones(5))}
    from_bytes = leakage_problems(hidden, {"kit.zip": planted}, ("y_test",))
    archive = tmp_path / "kit.zip"
    with zipfile.ZipFile(archive, "w") as opened:
        for name, data in planted.items():
            opened.writestr(name, data)
    assert leakage_problems(hidden, {"kit.zip": zip_members(archive)}, ("y_test",)) \
        == from_bytes and len(from_bytes) >= 3
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == zips.content_sha256(archive)


@pytest.mark.parametrize("size", [0, 5 * MIB])
def test_nested_zips_open_in_memory_or_from_a_copy(monkeypatch, tmp_path, size):
    monkeypatch.setattr(zips, "NESTED_IN_MEMORY_BYTES", MIB)
    inner = write_zip(tmp_path / "inner.zip", {"a.txt": b"a", "big.bin": bytes(size)})
    outer = write_zip(tmp_path / "outer.zip", {"inner.zip": inner})
    with zipfile.ZipFile(outer) as archive, zips.nested_zip(archive, "inner.zip") as opened:
        assert opened.read("a.txt") == b"a"
