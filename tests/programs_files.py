"""Programs of the files-and-artifacts tests."""

from __future__ import annotations

import struct
import zlib

# Reads data.csv, prints a summary and draws a bar chart as a PNG with only the standard
# library (zlib + struct), so it runs in the plain python image.
CSV_TO_PNG_PROGRAM = r"""
import csv, struct, zlib

rows = list(csv.DictReader(open("data.csv", newline="")))
temperatures = [float(row["temp"]) for row in rows]
mean = sum(temperatures) / len(temperatures)
print(f"rows={len(rows)} mean={mean:.2f} max={max(temperatures):g}")

width, height = 120, 80
pixels = [[(255, 255, 255)] * width for _ in range(height)]
bar = width // len(temperatures)
for index, value in enumerate(temperatures):
    top = height - int(value / max(temperatures) * (height - 5))
    for y in range(top, height):
        for x in range(index * bar + 2, (index + 1) * bar - 2):
            pixels[y][x] = (40, 90, 200)

def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

raw = b"".join(b"\x00" + bytes(c for pixel in row for c in pixel) for row in pixels)
header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
open("out/plot.png", "wb").write(png + chunk(b"IEND", b""))
"""

CSV = "city,temp\nOslo,3\nRome,15\nCairo,24\nLima,19\n"
CSV_SUMMARY = "rows=4 mean=15.25 max=24\n"


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG; fails unless it starts with a valid signature and IHDR."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    assert data[12:16] == b"IHDR"
    length = struct.unpack(">I", data[8:12])[0]
    crc = struct.unpack(">I", data[16 + length : 20 + length])[0]
    assert zlib.crc32(data[12 : 16 + length]) == crc
    width, height = struct.unpack(">II", data[16:24])
    return width, height


DATA_IMAGE = "sandcrew/python-data:latest"

# pandas reads the CSV and prints a summary; the figure is only shown, never saved:
# the sandbox saves it as out/figure-1.png.
PANDAS_PLOT_PROGRAM = """\
import pandas as pd
import matplotlib.pyplot as plt

frame = pd.read_csv("data.csv")
print(frame["temp"].describe()[["count", "mean", "max"]].to_string())
frame.plot.bar(x="city", y="temp")
plt.show()
"""
PANDAS_SUMMARY = "count     4.00\nmean     15.25\nmax      24.00\n"
