"""PGDL's training data as it was shipped: TFRecord shards of ``tf.train.Example`` protos, read
without TensorFlow (organizer side only; the competition's image has no TensorFlow).

Each example holds two bytes features, ``inputs`` and ``output``, each one serialized
``TensorProto`` (what ``tf.io.serialize_tensor`` writes). This module decodes the framing, the
protobuf wire format of those few messages, and the tensors.

Field numbers checked against tensorflow/tensorflow's own definitions (read with the search
tool): core/example/example.proto (Example.features = 1), core/example/feature.proto
(Features.feature = 1, map<string, Feature>; Feature oneof bytes_list = 1, float_list = 2,
int64_list = 3; each list's ``value`` = 1, float and int64 packed), core/framework/tensor.proto
(dtype = 1, tensor_shape = 2, tensor_content = 4, float_val = 5, double_val = 6, int_val = 7,
int64_val = 10, all packed), core/framework/tensor_shape.proto (dim = 2, Dim.size = 1) and
core/framework/types.proto (DT_FLOAT = 1, DT_DOUBLE = 2, DT_INT32 = 3, DT_INT64 = 9).

A TFRecord file is a sequence of records: uint64 little-endian length, uint32 masked CRC32C
of those 8 bytes, the data, uint32 masked CRC32C of the data. Both checksums are verified, so
a truncated download or a flipped bit is reported (file and record number) rather than read
as wrong numbers.
"""
from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np

# --- CRC32C (Castagnoli), as TFRecord uses it ---------------------------------------------

_POLYNOMIAL = 0x82F63B78        # the reflected Castagnoli polynomial
_MASK_DELTA = 0xA282EAD8


def _table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLYNOMIAL if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _table()


def crc32c(data: bytes) -> int:
    """CRC32C of ``data`` (byte-wise table; pure Python, a few MB/s)."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord stores the CRC rotated right by 15 bits plus a constant (its "mask"), so that a
    CRC of data that itself holds CRCs is not trivially related to them."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class TFRecordError(ValueError):
    """A file that is not a readable TFRecord or example; the message names the file."""


def read_records(path: Path) -> list[bytes]:
    """Every record's data in one TFRecord file, checksums verified."""
    path = Path(path)
    try:
        content = path.read_bytes()
    except OSError as error:
        raise TFRecordError(f"{path}: cannot be read ({error.strerror or error})") from None
    records, offset, number = [], 0, 0
    while offset < len(content):
        where = f"{path}: record {number} (byte {offset})"
        if offset + 12 > len(content):
            raise TFRecordError(f"{where}: truncated: {len(content) - offset} bytes where a "
                                "12-byte record header was expected")
        header = content[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", content[offset + 8:offset + 12])
        if masked_crc32c(header) != length_crc:
            raise TFRecordError(f"{where}: the length's CRC32C does not match (corrupt, or "
                                "not a TFRecord file)")
        start, end = offset + 12, offset + 12 + length
        if end + 4 > len(content):
            raise TFRecordError(f"{where}: truncated: the record announces {length} bytes of "
                                f"data and its CRC, the file has {len(content) - start} left")
        data = content[start:end]
        (data_crc,) = struct.unpack("<I", content[end:end + 4])
        if masked_crc32c(data) != data_crc:
            raise TFRecordError(f"{where}: the data's CRC32C does not match (corrupt file)")
        records.append(data)
        offset, number = end + 4, number + 1
    return records


# --- protobuf wire format ------------------------------------------------------------------

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


class ProtoError(ValueError):
    """Bytes that are not the protobuf message expected."""


def _varint(buffer: bytes, offset: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if offset >= len(buffer):
            raise ProtoError("a varint runs past the end of the message")
        byte = buffer[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7
        if shift > 63:
            raise ProtoError("a varint is longer than 10 bytes")


def fields(buffer: bytes) -> list[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` of every field in order: an int for a varint, the
    raw bytes for the other wire types (fixed32/64 undecoded, length-delimited unwrapped)."""
    out, offset = [], 0
    while offset < len(buffer):
        key, offset = _varint(buffer, offset)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, offset = _varint(buffer, offset)
        elif wire in (FIXED64, FIXED32):
            size = 8 if wire == FIXED64 else 4
            value, offset = buffer[offset:offset + size], offset + size
            if len(value) != size:
                raise ProtoError(f"field {number}: truncated fixed-width value")
        elif wire == LENGTH:
            size, offset = _varint(buffer, offset)
            value, offset = buffer[offset:offset + size], offset + size
            if len(value) != size:
                raise ProtoError(f"field {number}: announces {size} bytes past the end")
        else:
            raise ProtoError(f"field {number}: unsupported wire type {wire}")
        if number == 0:
            raise ProtoError("field number 0")
        out.append((number, wire, value))
    return out


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _repeated_varints(entries) -> list[int]:
    """A repeated integer field, packed (one LENGTH blob) or not (one VARINT each)."""
    values = []
    for _, wire, value in entries:
        if wire == LENGTH:
            offset = 0
            while offset < len(value):
                number, offset = _varint(value, offset)
                values.append(_signed64(number))
        elif wire == VARINT:
            values.append(_signed64(value))
        else:
            raise ProtoError(f"an integer list with wire type {wire}")
    return values


def _repeated_fixed(entries, wire_type: int, code: str) -> list:
    """A repeated float/double field, packed or one fixed-width value per entry."""
    size = struct.calcsize("<" + code)
    values = []
    for _, wire, value in entries:
        if wire == LENGTH:
            if len(value) % size:
                raise ProtoError(f"a packed list of {len(value)} bytes, not a multiple of {size}")
            values.extend(struct.unpack(f"<{len(value) // size}{code}", value))
        elif wire == wire_type:
            values.append(struct.unpack("<" + code, value)[0])
        else:
            raise ProtoError(f"a {code} list with wire type {wire}")
    return values


def _only(entries, number: int) -> list:
    return [entry for entry in entries if entry[0] == number]


def _message(entries, number: int) -> bytes | None:
    """The last occurrence of a sub-message field (protobuf's rule for a repeated singular)."""
    chosen = _only(entries, number)
    if not chosen:
        return None
    if chosen[-1][1] != LENGTH:
        raise ProtoError(f"field {number} should be a message")
    return chosen[-1][2]


def parse_feature(buffer: bytes):
    """A ``Feature``: ``("bytes", [bytes...])``, ``("float", [...])`` or ``("int64", [...])``."""
    entries = fields(buffer)
    for number, kind in ((1, "bytes"), (2, "float"), (3, "int64")):
        inner = _message(entries, number)
        if inner is None:
            continue
        values = _only(fields(inner), 1)
        if kind == "bytes":
            if any(wire != LENGTH for _, wire, _ in values):
                raise ProtoError("a bytes_list value that is not bytes")
            return kind, [value for _, _, value in values]
        if kind == "float":
            return kind, _repeated_fixed(values, FIXED32, "f")
        return kind, _repeated_varints(values)
    return "empty", []


def parse_example(buffer: bytes) -> dict[str, tuple[str, list]]:
    """A ``tf.train.Example`` as ``{feature name: (kind, values)}``."""
    features = _message(fields(buffer), 1)
    result = {}
    for _, wire, entry in _only(fields(features or b""), 1):
        if wire != LENGTH:
            raise ProtoError("a features map entry that is not a message")
        parts = fields(entry)
        key = _message(parts, 1)
        value = _message(parts, 2)
        try:
            name = (key or b"").decode("utf-8")
        except UnicodeDecodeError:
            raise ProtoError("a feature name that is not UTF-8") from None
        result[name] = parse_feature(value or b"")
    return result


# DataType -> (numpy dtype of tensor_content, value field, how the field is read)
DTYPES = {
    1: ("DT_FLOAT", np.dtype("<f4"), 5, "f"),
    2: ("DT_DOUBLE", np.dtype("<f8"), 6, "d"),
    3: ("DT_INT32", np.dtype("<i4"), 7, "varint"),
    9: ("DT_INT64", np.dtype("<i8"), 10, "varint"),
}


MAX_VALUES = 1 << 28          # one example of more than 256 Mi values is a corrupt shape


def _shape(buffer: bytes | None) -> tuple[int, ...]:
    if buffer is None:
        return ()
    entries = fields(buffer)
    if any(number == 3 and value for number, _, value in entries):
        raise ProtoError("the tensor's rank is unknown")
    shape = []
    for _, wire, dim in _only(entries, 2):
        if wire != LENGTH:
            raise ProtoError("a tensor dimension that is not a message")
        sizes = [_signed64(value) for number, w, value in fields(dim) if number == 1]
        size = sizes[-1] if sizes else 0
        if size < 0:
            raise ProtoError("the tensor has a dimension of unknown size")
        shape.append(size)
    return tuple(shape)


def parse_tensor(buffer: bytes) -> np.ndarray:
    """A serialized ``TensorProto`` (``tf.io.serialize_tensor``) as a numpy array: its shape,
    from ``tensor_content`` when present, else from the typed value list (one value fills the
    whole shape, as TensorFlow reads it; none means zeros)."""
    entries = fields(buffer)
    dtypes = [value for number, wire, value in entries if number == 1 and wire == VARINT]
    code = dtypes[-1] if dtypes else 0
    if code not in DTYPES:
        raise ProtoError(f"tensor dtype {code} is not one of "
                         + ", ".join(f"{name} ({n})" for n, (name, *_) in DTYPES.items()))
    _, dtype, value_field, reading = DTYPES[code]
    shape = _shape(_message(entries, 2))
    count = math.prod(shape)
    if count > MAX_VALUES:
        raise ProtoError(f"a tensor of shape {shape} ({count} values) is too large to be one "
                         "example")
    content = _message(entries, 4)
    if content is not None:
        if len(content) != count * dtype.itemsize:
            raise ProtoError(f"tensor_content holds {len(content)} bytes; shape {shape} of "
                             f"{dtype} needs {count * dtype.itemsize}")
        return np.frombuffer(content, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))
    listed = _only(entries, value_field)
    if reading == "varint":
        values = _repeated_varints(listed)
    else:
        values = _repeated_fixed(listed, FIXED32 if reading == "f" else FIXED64, reading)
    if not values:
        values = [0]
    if len(values) == 1 and count != 1:
        values = values * count
    if len(values) != count:
        raise ProtoError(f"the tensor lists {len(values)} values for shape {shape}")
    return np.array(values, dtype=dtype.newbyteorder("=")).reshape(shape)
