"""Decompression bombs built at runtime from zeros: valid gzip and zlib streams of 1 GiB in about
1 MiB, and nested codings of those in about 2 KiB. Never stored as files."""

from __future__ import annotations

import functools
import struct
import zlib

GIB = 1 << 30
MIB = 1 << 20


def _affine_power(block: bytes, times: int) -> int:
    """crc32 of `block` repeated `times` times, without hashing them all.

    crc32(block, c) is affine in c over GF(2): c -> M c ^ t. The map is learned from 33 calls
    and raised to the power `times` by squaring, so a 1 GiB checksum costs milliseconds.
    """
    t = zlib.crc32(block, 0)
    columns = [zlib.crc32(block, 1 << i) ^ t for i in range(32)]

    def apply(matrix: list[int], vector: int) -> int:
        out, i = 0, 0
        while vector:
            if vector & 1:
                out ^= matrix[i]
            vector >>= 1
            i += 1
        return out

    def compose(g: tuple[list[int], int], f: tuple[list[int], int]) -> tuple[list[int], int]:
        return [apply(g[0], column) for column in f[0]], apply(g[0], f[1]) ^ g[1]

    result: tuple[list[int], int] = ([1 << i for i in range(32)], 0)
    base = (columns, t)
    while times:
        if times & 1:
            result = compose(base, result)
        base = compose(base, base)
        times >>= 1
    return result[1]


@functools.cache
def zeros_bomb(wbits: int, decoded: int = GIB) -> bytes:
    """A valid gzip (wbits 31) or zlib/"deflate" (wbits 15) stream of `decoded` zero bytes.

    After a full flush the compressor starts afresh, so every middle MiB compresses to the same
    bytes: compress three, repeat the middle one, and patch the trailer (gzip: CRC-32 and size;
    zlib: Adler-32, whose value for zeros is closed-form).
    """
    block = bytes(MIB)
    count = decoded // MIB
    assert count >= 3 and decoded % MIB == 0
    c = zlib.compressobj(9, zlib.DEFLATED, wbits)
    first = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    middle = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    last = c.compress(block) + c.flush(zlib.Z_FINISH)
    if wbits > 15:
        trailer = struct.pack("<II", _affine_power(block, count), decoded & 0xFFFFFFFF)
    else:
        trailer = struct.pack(">I", ((decoded % 65521) << 16) | 1)
    return first + middle * (count - 2) + last[: -len(trailer)] + trailer


def gzip_of(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def deflate_of(data: bytes) -> bytes:
    return zlib.compress(data, 9)
