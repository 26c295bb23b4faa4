#!/usr/bin/env python3
"""Check the relative links in README.md, BENCHMARKS.md and docs/*.md.

Every `](path)` and `](path#anchor)` that is not a URL must name a file or
directory that exists, and an anchor must match a heading of the target
Markdown file (GitHub's rules: lower case, punctuation dropped, spaces to
hyphens, -1, -2 ... for repeats). Run from anywhere: python3 docs/check_links.py
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")


def strip_code(text):
    """Text outside fenced code blocks and inline code."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "``", line))
    return out


def anchors(path):
    seen, result = {}, set()
    fenced = False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = m.group(1).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", slug).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        result.add(slug if n == 0 else f"{slug}-{n}")
    return result


def main():
    files = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]
    bad = checked = 0
    for md in files:
        for no, line in enumerate(strip_code(md.read_text()), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue
                checked += 1
                path, _, anchor = target.partition("#")
                dest = (md.parent / path).resolve() if path else md
                where = f"{md.relative_to(ROOT)}:{no}: {target}"
                if not dest.exists():
                    print(f"{where}: no such file")
                    bad += 1
                elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
                    print(f"{where}: no heading #{anchor}")
                    bad += 1
    print(f"{checked} relative links checked, {bad} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
