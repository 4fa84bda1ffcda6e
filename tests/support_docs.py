"""Reading the project's Markdown pages the way a reader follows them: the links and
repository paths they cite, and the shell blocks marked runnable.

Pure text in, plain values out, so the checks on the pages (tests/unit/test_docs_links.py)
and the run of their blocks (tests/integration/test_docs_runnable.py) share one reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
# The marker a page puts on the line before a ```bash fence; an HTML comment renders as
# nothing, so readers see a plain block.
RUNNABLE_MARKER = "<!-- runnable -->"
# Top-level names a cited path starts with when it means a file of this repository.
TOP_LEVEL = (
    "spark_replica/",
    "brokerd/",
    "connectors/",
    "tests/",
    "examples/",
    "docs/",
    "benchmarks/",
    "pyproject.toml",
    "README.md",
    "pyspark_replog.py",
)

_FENCE = re.compile(r"^\s*```")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_PAGE_NAME = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w.-]+\.md)\b")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class ShellBlock:
    page: Path
    line: int  # of the opening fence, 1-based
    text: str


def pages() -> list[Path]:
    """README.md and every page under docs/."""
    return [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]


def prose_lines(markdown: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks: what a reader sees as text."""
    found: list[tuple[int, str]] = []
    in_fence = False
    for number, line in enumerate(markdown.splitlines(), start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            found.append((number, line))
    return found


def relative_links(markdown: str) -> list[tuple[int, str]]:
    """Targets of Markdown links that point into the repository (not http:, mailto:)."""
    return [
        (number, target)
        for number, line in prose_lines(markdown)
        for target in _LINK.findall(line)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)
    ]


def cited_paths(markdown: str) -> list[tuple[int, str]]:
    """Repository paths a page names in code spans (`brokerd/log/`); placeholders
    (`*`, `<dir>`, `...`) are not paths."""
    found: list[tuple[int, str]] = []
    for number, line in prose_lines(markdown):
        for span in _CODE_SPAN.findall(line):
            candidate = span.split()[0] if span.split() else ""
            if candidate.startswith(TOP_LEVEL) and not re.search(r"[*<>{}]|\.\.\.", candidate):
                found.append((number, candidate.rstrip(",.;:")))
    return found


def page_names(markdown: str) -> list[tuple[int, str]]:
    """Every `*.md` a page names, in a code span, a link or plain text (`DESIGN.md`,
    `docs/kafka.md`, `client.md`): a reader looks for each one."""
    return [
        (number, name)
        for number, line in prose_lines(markdown)
        for name in _PAGE_NAME.findall(line)
    ]


def heading_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to
    hyphens (formatting marks and link syntax removed first)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[`*_]", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, … as on GitHub."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(markdown):
        match = _HEADING.match(line)
        if match is None:
            continue
        anchor = heading_anchor(match.group(2))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def runnable_blocks(page: Path) -> list[ShellBlock]:
    """The ```bash blocks a page marks runnable, in page order."""
    lines = page.read_text().splitlines()
    blocks: list[ShellBlock] = []
    for index, line in enumerate(lines):
        if line.strip() != RUNNABLE_MARKER:
            continue
        fence = index + 1
        if fence >= len(lines) or lines[fence].strip() not in ("```bash", "```sh"):
            raise ValueError(f"{page.name}:{index + 1}: {RUNNABLE_MARKER} is not before ```bash")
        end = next((i for i in range(fence + 1, len(lines)) if _FENCE.match(lines[i])), None)
        if end is None:
            raise ValueError(f"{page.name}:{fence + 1}: the block never closes")
        blocks.append(ShellBlock(page, fence + 1, "\n".join(lines[fence + 1 : end]) + "\n"))
    return blocks
