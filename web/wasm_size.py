#!/usr/bin/env python3
"""Where a wasm file's bytes go: its sections, and its code by crate.

usage: wasm_size.py FILE [TOP]

The code is attributed through the function names in the file's `name` section (the build keeps
them; wasm-opt drops them from the file the page downloads), so run it on the build's own output
(target/wasm32-unknown-unknown/web/qkv-lab.wasm). A function's crate is the first segment of its
mangled path; a trait method implemented for another crate's type (`<T as Trait>::f`) counts for
the type's crate, and names that are not Rust paths count as "(other)".
"""

import collections
import re
import sys

SECTIONS = {0: "custom", 1: "type", 2: "import", 3: "function", 4: "table", 5: "memory", 6: "global",
            7: "export", 8: "start", 9: "element", 10: "code", 11: "data", 12: "datacount"}


class Reader:
    def __init__(self, data):
        self.data = data

    def uleb(self, at):
        """The unsigned LEB128 number at `at`, and where the next field starts."""
        value, shift = 0, 0
        while True:
            byte = self.data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value, at

    def name(self, at):
        length, at = self.uleb(at)
        return self.data[at:at + length].decode("utf-8", "replace"), at + length


def sections(reader):
    """(id, name, start, size) of every section."""
    data, at, found = reader.data, 8, []
    if data[:4] != b"\0asm":
        sys.exit("not a WebAssembly file")
    while at < len(data):
        section = data[at]
        size, at = reader.uleb(at + 1)
        name = SECTIONS.get(section, str(section))
        if section == 0:
            name = "custom: " + reader.name(at)[0]
        found.append((section, name, at, size))
        at += size
    return found


def imported_functions(reader, start):
    """How many functions the file imports (they come first in the function index space)."""
    count, at = reader.uleb(start)
    functions = 0
    for _ in range(count):
        _, at = reader.name(at)
        _, at = reader.name(at)
        kind = reader.data[at]
        at += 1
        if kind == 0:  # a function: its type index
            _, at = reader.uleb(at)
            functions += 1
        elif kind == 1:  # a table: element type, limits
            flags, at = reader.uleb(at + 1)
            _, at = reader.uleb(at)
            if flags & 1:
                _, at = reader.uleb(at)
        elif kind == 2:  # a memory: limits
            flags, at = reader.uleb(at)
            _, at = reader.uleb(at)
            if flags & 1:
                _, at = reader.uleb(at)
        elif kind == 3:  # a global: value type, mutability
            at += 2
        else:  # a tag
            at += 1
            _, at = reader.uleb(at)
    return functions


def body_sizes(reader, start):
    count, at = reader.uleb(start)
    sizes = []
    for _ in range(count):
        size, body = reader.uleb(at)
        sizes.append(size + body - at)
        at = body + size
    return sizes


def function_names(reader, start, size):
    """Function index → name, from the `name` section's function names (subsection 1)."""
    _, at = reader.name(start)
    end, names = start + size, {}
    while at < end:
        subsection = reader.data[at]
        length, at = reader.uleb(at + 1)
        if subsection == 1:
            count, entry = reader.uleb(at)
            for _ in range(count):
                index, entry = reader.uleb(entry)
                names[index], entry = reader.name(entry)
        at += length
    return names


def crate_of(name):
    mangled = re.match(r"_ZN(\d+)", name)
    if mangled:
        length = int(mangled.group(1))
        segment = name[mangled.end():mangled.end() + length]
        if segment.startswith("_$LT$"):  # <Type as Trait>::method: the type's crate
            segment = re.split(r"\.\.|\$", segment[5:])[0]
        return segment or "(other)"
    plain = re.match(r"<?([A-Za-z_][A-Za-z_0-9]*)::", name)
    return plain.group(1) if plain else "(other)"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    reader = Reader(open(sys.argv[1], "rb").read())
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    found = sections(reader)
    print(f"{len(reader.data) / 1e6:.2f} MB in all; by section:")
    for _, name, _, size in sorted(found, key=lambda s: -s[3]):
        if size >= 10_000:
            print(f"  {size / 1e6:7.2f} MB  {name}")
    by_id = {section: (start, size) for section, _, start, size in found if section != 0}
    named = [(start, size) for section, name, start, size in found if name == "custom: name"]
    if 10 not in by_id or not named:
        print("(no code section or no function names: build without stripping names to see the crates)")
        return
    imports = imported_functions(reader, by_id[2][0]) if 2 in by_id else 0
    names = function_names(reader, *named[0])
    sizes = body_sizes(reader, by_id[10][0])
    by_crate = collections.Counter()
    for index, size in enumerate(sizes):
        by_crate[crate_of(names.get(imports + index, ""))] += size
    total = sum(sizes)
    print(f"code by crate ({len(sizes)} functions), the largest {top}:")
    for crate, size in by_crate.most_common(top):
        print(f"  {size / 1e6:7.2f} MB {100 * size / total:5.1f}%  {crate}")


if __name__ == "__main__":
    main()
