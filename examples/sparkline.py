#!/usr/bin/env python3
"""Write a PNG sparkline of the numbers given as arguments to stdout (stdlib only)."""

import struct
import sys
import zlib

WIDTH, HEIGHT = 200, 50


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def main(values: list[float]) -> bytes:
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    pixels = [[255] * WIDTH for _ in range(HEIGHT)]
    for x in range(WIDTH):
        value = values[round(x * (len(values) - 1) / (WIDTH - 1))]
        y = HEIGHT - 1 - round((value - low) / span * (HEIGHT - 1))
        pixels[y][x] = 0
    raw = b"".join(b"\x00" + bytes(row) for row in pixels)
    header = struct.pack(">IIBBBBB", WIDTH, HEIGHT, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


if __name__ == "__main__":
    numbers = [float(v) for v in sys.argv[1:] if v != "--"]
    if len(numbers) < 2:
        sys.exit("sparkline: give at least two numbers")
    sys.stdout.buffer.write(main(numbers))
