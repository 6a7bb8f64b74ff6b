#!/usr/bin/env python3
"""Builds assets/digits.bin, QKV Lab's embedded image set, from the 8×8 handwritten digits that
scikit-learn ships (sklearn/datasets/data/digits.csv.gz in its wheel).

    python3 scripts/build_digits.py            # downloads scikit-learn 1.9.1's wheel with pip
    python3 scripts/build_digits.py WHEEL.whl

The digits are E. Alpaydin and C. Kaynak's "Optical Recognition of Handwritten Digits" (UCI,
1998; CC BY 4.0): 1,797 images, 8×8 pixels of 0..16 (the count of inked pixels in a 4×4 block of
a 32×32 bitmap), labels 0-9. The output keeps scikit-learn's order: 65 bytes an image, its 64
pixels row by row, then its label; the same bytes on every run.
"""
import gzip
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MEMBER = "sklearn/datasets/data/digits.csv.gz"
IMAGES, PIXELS = 1797, 64


def wheel_path(argv) -> Path:
    if len(argv) > 1:
        return Path(argv[1])
    folder = Path(tempfile.mkdtemp())
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
         "scikit-learn==1.9.1", "-d", str(folder)],
        check=True,
    )
    return next(folder.glob("scikit_learn-*.whl"))


def main(argv) -> None:
    with zipfile.ZipFile(wheel_path(argv)) as wheel:
        rows = gzip.decompress(wheel.read(MEMBER)).decode("ascii").split()
    out = bytearray()
    for row in rows:
        values = [int(float(v)) for v in row.split(",")]
        if len(values) != PIXELS + 1 or not all(0 <= v <= 16 for v in values[:PIXELS]) or not 0 <= values[-1] <= 9:
            raise SystemExit(f"unexpected row in {MEMBER}: {row[:60]}")
        out.extend(values)
    if len(rows) != IMAGES:
        raise SystemExit(f"{MEMBER} has {len(rows)} images, not {IMAGES}")
    path = Path(__file__).resolve().parent.parent / "assets" / "digits.bin"
    path.write_bytes(bytes(out))
    print(f"wrote {path}: {len(out)} bytes, {len(rows)} images")


if __name__ == "__main__":
    main(sys.argv)
