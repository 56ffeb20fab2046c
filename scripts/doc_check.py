#!/usr/bin/env python3
"""The doc check: runs the commands of README.md and docs/guide.md, and checks
the links of every Markdown page.

Commands. Every fenced block of README.md and docs/guide.md tagged `sh` or
`python` is run, block after block in page order, in a fresh temporary folder
per page (so a block sees the files the blocks before it wrote). The folder
holds `data` (a link to the repository's data/) and, for the README, the
fixtures its commands name: `scenes/{train,test}/{bag,sandal,trouser}` (8 + 4
images of the bundled Fashion-MNIST set per class) and `new_photos/{a,b}.png`.
A fence without a language is refused, so no command can hide; `text` and
`rust` blocks are not run (the README's Rust example is the `fisherkit`
crate's doctest).

 * `fisherkit ...` runs the built binary (`--bin`, or $FISHERKIT_BIN, or
   target/debug/fisherkit, or target/release/fisherkit), and
   `cargo run --release -p fisherkit-cli -- ...` is the same binary.
 * Tiny settings, so both pages run in a couple of minutes on a debug build:
   `fisherkit run` on image folders and Python's `fisherkit.pipeline.run`
   (which `SceneClassifier` calls) get the options of TINY_RUN that the
   command does not set itself; `fisherkit demo` gets `--data` a 3-class,
   8 + 4-image copy of its data. Nothing else is changed.
 * A block is skipped only when an HTML comment right before it says so:
   `<!-- doc-check: skip (why) -->` skips the block, and
   `<!-- doc-check: skip "PREFIX" (why) -->` only its lines starting with
   PREFIX. Other `<!-- doc-check: ... -->` comments are notes for the reader.

Front door. README.md is at most 12 KB and its first `sh` block is exactly the
two commands (the demo, the test suite).

Links. In every tracked Markdown page: each relative link `[text](path#anchor)`
must name an existing file (and, for a Markdown page, an existing heading or
`<a id>` anchor), and each repository path in backticks that starts with
docs/, scripts/, crates/, tests/, data/, fuzz/, bench/ or python/ must exist
(at the root or in a crate; not checked in docs/evidence/, whose dated pages name
files as they were then).

    python3 scripts/doc_check.py                 # everything (scripts/test.sh runs this)
    python3 scripts/doc_check.py --links-only
    python3 scripts/doc_check.py --bin target/release/fisherkit --keep
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/guide.md"]
DEMO = ROOT / "data" / "fashion-mnist-demo"
CLASSES = ("bag", "sandal", "trouser")

# Small settings that still run every stage (as tests/python/pipeline_data.py).
TINY_RUN = {
    "scales": "28",
    "pca-dim": "12",
    "gmm-components": "3",
    "gmm-max-iter": "10",
    "mfa-components": "2",
    "mfa-factors": "2",
    "mfa-max-iter": "5",
    "sample-images": "12",
    "pca-sample": "2000",
    "model-sample": "1500",
    "c-grid": "0.1,1,10",
    "cv-folds": "2",
}
IMAGE_ONLY = {"scales"}  # not for descriptor-file runs

MARKER = re.compile(r"<!--\s*doc-check:\s*(.*?)\s*-->")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)\s*$")


# ---------------------------------------------------------------- the wrapper


def as_fisherkit(argv: list[str]) -> None:
    """`fisherkit ARGS` inside a checked block: the binary with tiny settings."""
    binary = os.environ["DOC_CHECK_BIN"]
    args = list(argv)
    present = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    if args[:1] == ["run"]:
        images = "--train" in present or "--test" in present
        for k, v in TINY_RUN.items():
            if "--" + k not in present and (images or k not in IMAGE_ONLY):
                args += ["--" + k, v]
    elif args[:1] == ["demo"] and "--data" not in present:
        args += ["--data", os.environ["DOC_CHECK_DEMO"]]
    os.execv(binary, [binary] + args)


def as_cargo(argv: list[str]) -> None:
    prefix = ["run", "--release", "-p", "fisherkit-cli", "--"]
    if argv[: len(prefix)] == prefix:
        as_fisherkit(argv[len(prefix):])
    sys.exit(f"doc check: cannot run `cargo {' '.join(argv)}` here; mark its block "
             "`<!-- doc-check: skip (why) -->`")


PY_PRELUDE = """
try:
    import fisherkit.pipeline as _fk_pipeline
    _fk_run = _fk_pipeline.run
    def _fk_tiny_run(train, test, **kw):
        for _k, _v in %r.items():
            kw.setdefault(_k, _v)
        return _fk_run(train, test, **kw)
    _fk_pipeline.run = _fk_tiny_run
except ImportError:
    pass
""" % {k.replace("-", "_"): (int(v) if v.isdigit() else [float(x) for x in v.split(",")] if k == "c-grid"
                              else [int(v)] if k == "scales" else v) for k, v in TINY_RUN.items()}


# ---------------------------------------------------------------- the pages


class Block:
    def __init__(self, page: str, line: int, lang: str, text: str, markers: list[str]):
        self.page, self.line, self.lang, self.text, self.markers = page, line, lang, text, markers

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks_of(page: str) -> list[Block]:
    lines = (ROOT / page).read_text().split("\n")
    out, markers, i = [], [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            fence, lang, start = m.group(2), m.group(3), i + 1
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence):
                j += 1
            if not lang:
                raise SystemExit(f"doc check: {page}:{start}: a fence without a language "
                                 "(sh, python, text, rust, …): say what it is")
            out.append(Block(page, start, lang, "\n".join(lines[i + 1: j]), markers))
            markers, i = [], j + 1
            continue
        found = MARKER.findall(lines[i])
        if found:
            markers = markers + found
        elif lines[i].strip() and not lines[i].strip().startswith("<!--"):
            markers = []  # a marker applies to the block right after it
        i += 1
    return out


def skip_rules(block: Block) -> tuple[bool, list[str]]:
    whole, prefixes = False, []
    for m in block.markers:
        if not m.startswith("skip"):
            continue
        q = re.match(r'skip\s+"([^"]+)"', m)
        if q:
            prefixes.append(q.group(1))
        else:
            whole = True
    return whole, prefixes


def copy_subset(dst: Path, n_train: int, n_test: int) -> None:
    for split, n in (("train", n_train), ("test", n_test)):
        for c in CLASSES:
            d = dst / split / c
            d.mkdir(parents=True, exist_ok=True)
            for f in sorted((DEMO / split / c).iterdir())[:n]:
                shutil.copy(f, d / f.name)


def prepare(work: Path, page: str) -> None:
    (work / "data").symlink_to(ROOT / "data")
    if page == "README.md":
        copy_subset(work / "scenes", 8, 4)
        (work / "new_photos").mkdir()
        shutil.copy(sorted((DEMO / "test" / "bag").iterdir())[-1], work / "new_photos" / "a.png")
        shutil.copy(sorted((DEMO / "test" / "trouser").iterdir())[-1], work / "new_photos" / "b.png")


def make_tools(tools: Path, demo: Path) -> None:
    copy_subset(demo, 8, 4)
    me = Path(__file__).resolve()
    for name, mode in (("fisherkit", "--as-fisherkit"), ("cargo", "--as-cargo")):
        p = tools / name
        p.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{me}" {mode} "$@"\n')
        p.chmod(0o755)


def run_block(block: Block, work: Path, env: dict, log) -> tuple[bool, float, str]:
    whole, prefixes = skip_rules(block)
    if whole:
        return True, 0.0, "skipped"
    text = block.text
    if prefixes:
        text = "\n".join(": # doc check: skipped" if any(l.strip().startswith(p) for p in prefixes) else l
                         for l in text.split("\n"))
    if block.lang in ("sh", "bash"):
        cmd = ["bash", "-euo", "pipefail", "-c", text]
    elif block.lang == "python":
        cmd = [sys.executable, "-c", PY_PRELUDE + "\n" + text]
    else:
        return True, 0.0, "not run"
    t, cpu = time.monotonic(), children_cpu()
    p = subprocess.run(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, stdin=subprocess.DEVNULL)
    dt, cpu = time.monotonic() - t, children_cpu() - cpu
    log.write(f"==== {block.where()} ({block.lang}, exit {p.returncode}, {dt:.1f} s)\n{p.stdout}\n")
    if p.returncode != 0:
        tail = "\n".join(p.stdout.rstrip().split("\n")[-25:])
        return False, dt, f"exit {p.returncode}\n{tail}"
    return True, dt, f"ok, {cpu:.1f} s CPU" + (" (some lines skipped)" if prefixes else "")


def children_cpu() -> float:
    """CPU seconds of the finished child processes (Ray's daemons are not counted)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def check_commands(binary: str, keep: bool) -> bool:
    ok = True
    top = Path(tempfile.mkdtemp(prefix="fisherkit-doc-check-"))
    tools, demo = top / "bin", top / "demo-data"
    tools.mkdir()
    make_tools(tools, demo)
    env = dict(os.environ, PATH=f"{tools}{os.pathsep}{os.environ.get('PATH', '')}",
               DOC_CHECK_BIN=binary, DOC_CHECK_DEMO=str(demo), PYTHONUNBUFFERED="1")
    with open(top / "doc-check.log", "w") as log:
        for page in PAGES:
            work = top / page.replace("/", "_").replace(".md", "")
            work.mkdir()
            prepare(work, page)
            for block in blocks_of(page):
                if block.lang not in ("sh", "bash", "python"):
                    continue
                good, dt, what = run_block(block, work, env, log)
                print(f"doc check: {block.where():<22} {block.lang:<6} {dt:6.1f} s  {what}", flush=True)
                if not good:
                    ok = False
                    break  # later blocks of the page depend on this one
    if keep or not ok:
        print(f"doc check: outputs and log kept in {top}")
    else:
        shutil.rmtree(top, ignore_errors=True)
    return ok


# ---------------------------------------------------------------- links


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    s = re.sub(r"[`*_]|<[^>]+>", "", heading.strip().lower())
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    names, seen, fenced = set(), {}, False
    for line in path.read_text().split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        m = re.match(r"#+\s+(.*)", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            names.add(s if n == 0 else f"{s}-{n}")
        names.update(re.findall(r'<a id="([^"]+)"', line))
    return names


def markdown_pages() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True)
    files = out.stdout.split() if out.returncode == 0 else []
    new = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", "*.md"], cwd=ROOT,
                         capture_output=True, text=True).stdout.split()
    return [ROOT / f for f in sorted(set(files + new)) if (ROOT / f).is_file()]


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CRATES = sorted((ROOT / "crates").glob("*/"))
PATH = re.compile(r"`((?:docs|scripts|crates|tests|data|fuzz|bench|python)/[^`\s]*)`")


def check_links() -> bool:
    problems = []
    for page in markdown_pages():
        # dated evidence names files as they were then: only its links are checked
        historical = page.parent == ROOT / "docs" / "evidence"
        fenced = False
        for n, line in enumerate(page.read_text().split("\n"), 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if fenced:
                continue
            where = f"{page.relative_to(ROOT)}:{n}"
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue
                file, _, anchor = target.partition("#")
                dest = (page.parent / file).resolve() if file else page
                if not dest.exists():
                    problems.append(f"{where}: link to a missing file: {target}")
                elif anchor and dest.suffix == ".md" and anchor not in anchors_of(dest):
                    problems.append(f"{where}: link to a missing heading: {target}")
            if historical:
                continue
            for path in PATH.findall(line):
                if re.search(r"[<>{}*…]|\.\.\.|[A-Z]{3,}", path):
                    continue  # a pattern (`docs/evidence/NAME.md`, `runs/<key>/`), not a path
                p = path.split("::")[0].rstrip(".,;:")
                # crate-relative paths (`tests/onnx.rs` in a page about one crate) count too
                if not (ROOT / p).exists() and not any(c.joinpath(p).exists() for c in CRATES):
                    problems.append(f"{where}: `{path}` does not exist")
    problems += front_door()
    for p in problems:
        print("doc check:", p)
    print(f"doc check: links of {len(markdown_pages())} Markdown pages: "
          f"{'ok' if not problems else f'{len(problems)} problems'}")
    return not problems


TWO_COMMANDS = ["cargo run --release -p fisherkit-cli -- demo", "bash scripts/test.sh"]


def front_door() -> list[str]:
    """The README stays a front door: at most 12 KB, the two commands in its first block."""
    out, size = [], (ROOT / "README.md").stat().st_size
    if size > 12 * 1024:
        out.append(f"README.md is {size} bytes; the front door keeps to 12 KB (move detail to docs/)")
    first = next((b for b in blocks_of("README.md") if b.lang == "sh"), None)
    lines = [l.split("#")[0].strip() for l in (first.text if first else "").split("\n") if l.strip()]
    if lines != TWO_COMMANDS:
        out.append(f"README.md: the first sh block must be the two commands {TWO_COMMANDS}, got {lines}")
    return out


# ---------------------------------------------------------------- main


def find_binary(given: str | None) -> str:
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    for p in [given, os.environ.get("FISHERKIT_BIN"), target / "debug/fisherkit",
              target / "release/fisherkit"]:
        if p and Path(p).is_file():
            return str(Path(p).resolve())
    raise SystemExit("doc check: the fisherkit binary is not built (cargo build -p fisherkit-cli) "
                     "and neither --bin nor $FISHERKIT_BIN names one")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--as-fisherkit":
        as_fisherkit(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "--as-cargo":
        as_cargo(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", help="the fisherkit binary")
    ap.add_argument("--links-only", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the work folders")
    a = ap.parse_args()
    t = time.monotonic()
    ok = check_links()
    if not a.links_only:
        ok = check_commands(find_binary(a.bin), a.keep) and ok
    print(f"doc check: {'passed' if ok else 'FAILED'} in {time.monotonic() - t:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
