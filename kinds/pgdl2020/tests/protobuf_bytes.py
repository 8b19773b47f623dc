"""Protocol buffer fields written by hand, for tests and benchmarks that make TFRecord files
without TensorFlow (and so independently of the reader they check)."""


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1            # negative integers as 10-byte two's complement
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def length_field(number: int, payload: bytes) -> bytes:
    return tag(number, 2) + varint(len(payload)) + payload


def varint_field(number: int, value: int) -> bytes:
    return tag(number, 0) + varint(value)
