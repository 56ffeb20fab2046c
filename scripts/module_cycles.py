#!/usr/bin/env python3
"""Fails if a module of a workspace crate imports a module that imports it back.

For every crate under crates/*/src, each file is a module (`a/b.rs` and
`a/b/mod.rs` are `a::b`); its edges are the `crate::…` and `super::…` paths
in its code (comment lines and everything after `#[cfg(test)]` left out),
each resolved to the longest path that is a module. A module's own
submodules and ancestors are not edges (a parent declaring or re-exporting
its children is not a dependency). Prints every cycle found and exits 1 if
there is one: docs/architecture.md §2.

    python3 scripts/module_cycles.py [CRATES_DIR]
"""
import pathlib
import re
import sys

PATH = re.compile(r"\b(crate|super)((?:::\w+)+)")


def modules(src):
    mods = {}
    for p in src.rglob("*.rs"):
        parts = list(p.relative_to(src).with_suffix("").parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        mods["::".join(parts)] = p
    return mods


def code(path):
    text = path.read_text()
    text = re.split(r"#\[cfg\(test\)\]", text)[0]
    return "\n".join(l for l in text.split("\n") if not l.strip().startswith("//"))


def edges(mods):
    out = {m: set() for m in mods}
    for m, p in mods.items():
        here = m.split("::") if m else []
        for base, path in PATH.findall(code(p)):
            full = ([] if base == "crate" else here[:-1]) + path.strip(":").split("::")
            for n in range(len(full), 0, -1):
                target = "::".join(full[:n])
                if target in mods:
                    related = target == m or m.startswith(target + "::") or target.startswith(m + "::")
                    if not related:
                        out[m].add(target)
                    break
    return out


def cycles(graph):
    found, seen = [], set()

    def walk(node, stack):
        for nxt in sorted(graph[node]):
            if nxt in stack:
                cyc = stack[stack.index(nxt):] + [nxt]
                key = frozenset(cyc)
                if key not in seen:
                    seen.add(key)
                    found.append(cyc)
            elif len(stack) < 12:
                walk(nxt, stack + [nxt])

    for n in sorted(graph):
        walk(n, [n])
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "crates")
    bad = 0
    for crate in sorted(root.iterdir()):
        src = crate / "src"
        if not src.is_dir():
            continue
        for cyc in cycles(edges(modules(src))):
            bad += 1
            print(f"{crate.name}: module cycle " + " -> ".join(c or "(root)" for c in cyc))
    if bad:
        sys.exit(1)
    print(f"module_cycles: no module cycle in {root}")


if __name__ == "__main__":
    main()
