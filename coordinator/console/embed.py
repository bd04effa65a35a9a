#!/usr/bin/env python3
"""Writes the C++ source that holds the console's files (console_assets.h).

    embed.py OUT.cc FILE...

Each FILE is served at /console/<its name>, and index.html at / too.
"""
import os
import sys

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


def literal(data):
    """`data` as a C++ string literal, in lines of at most 80 bytes."""
    lines = []
    for start in range(0, len(data), 80):
        chunk = data[start:start + 80]
        lines.append('"' + "".join(
            chr(b) if 32 <= b < 127 and chr(b) not in '"\\?' else "\\%03o" % b
            for b in chunk) + '"')
    return "\n    ".join(lines) or '""'


def main():
    out, files = sys.argv[1], sys.argv[2:]
    entries = []
    for path in files:
        name = os.path.basename(path)
        kind = TYPES[os.path.splitext(name)[1]]
        with open(path, "rb") as f:
            data = f.read()
        entries.append((name, kind, data))
    with open(out, "w") as f:
        f.write('#include "coordinator/console/console_assets.h"\n\n')
        f.write("namespace ringmaster {\nnamespace {\n\n")
        f.write("const ConsoleAsset kAssets[] = {\n")
        for name, kind, data in entries:
            f.write('    {"/console/%s", "%s",\n     absl::string_view(\n    %s,\n    %d)},\n'
                    % (name, kind, literal(data), len(data)))
        f.write("};\n\n}  // namespace\n\n")
        f.write("const ConsoleAsset* FindConsoleAsset(absl::string_view path) {\n")
        f.write('  if (path == "/") path = "/console/index.html";\n')
        f.write("  for (const ConsoleAsset& asset : kAssets) {\n")
        f.write("    if (asset.path == path) return &asset;\n  }\n  return nullptr;\n}\n\n")
        f.write("}  // namespace ringmaster\n")


if __name__ == "__main__":
    main()
