"""Every page a reader can follow: relative links and their anchors resolve, and every
repository path a page cites exists, so a page never sends a newcomer to a file that is
not there (the README and the notes once cited a DESIGN.md the repository lacked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support_docs import (
    REPOSITORY,
    anchors,
    cited_paths,
    heading_anchor,
    page_names,
    pages,
    relative_links,
    runnable_blocks,
)

PAGES = pages()


def _name(page: Path) -> str:
    return str(page.relative_to(REPOSITORY))


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_relative_links_resolve_to_files_and_headings(page: Path) -> None:
    broken = []
    for line, target in relative_links(page.read_text()):
        path_part, _, anchor = target.partition("#")
        resolved = page if not path_part else (page.parent / path_part).resolve()
        if not resolved.exists():
            broken.append(f"{_name(page)}:{line}: {target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
            broken.append(f"{_name(page)}:{line}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_cited_repository_paths_exist(page: Path) -> None:
    missing = [
        f"{_name(page)}:{line}: {path}"
        for line, path in cited_paths(page.read_text())
        if not (REPOSITORY / path).exists()
    ]
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_named_pages_exist(page: Path) -> None:
    """A page name is read from the repository's top, the page's own folder or docs/."""
    places = (REPOSITORY, page.parent, REPOSITORY / "docs")
    missing = [
        f"{_name(page)}:{line}: {name}"
        for line, name in page_names(page.read_text())
        if not any((place / name).is_file() for place in places)
    ]
    assert not missing, "\n".join(missing)


def test_the_design_document_is_in_the_repository_and_cited() -> None:
    assert (REPOSITORY / "docs" / "design.md").is_file()
    citing = [p for p in PAGES if "design.md" in p.read_text() and p.name != "design.md"]
    assert {p.name for p in citing} >= {"README.md", "design-notes.md"}


def test_deploy_page_sends_ensembles_to_the_zookeeper_page() -> None:
    deploy = (REPOSITORY / "docs" / "deploy.md").read_text()
    assert any(target.startswith("zookeeper.md") for _, target in relative_links(deploy))


def test_every_runnable_marker_sits_on_a_bash_block() -> None:
    for page in PAGES:
        runnable_blocks(page)


def test_reading_finds_what_a_reader_would_follow() -> None:
    text = (
        "See [the design](design.md#3-zookeeper) and `brokerd/log/` (`docs/kafka.md`),\n"
        "docs/deploy.md, [a site](https://example.org), `pyspark/jars/zookeeper-*.jar`.\n"
        "```bash\n[not a link](nowhere.md) `tests/absent.py`\n```\n"
        "## 3. ZooKeeper\n## Ports and firewalls\n## Ports and firewalls\n"
    )
    assert relative_links(text) == [(1, "design.md#3-zookeeper")]
    assert cited_paths(text) == [(1, "brokerd/log/"), (1, "docs/kafka.md")]
    assert page_names(text) == [(1, "design.md"), (1, "docs/kafka.md"), (2, "docs/deploy.md")]
    assert heading_anchor("3. ZooKeeper") == "3-zookeeper"
    assert heading_anchor("The sink's `guarantee`") == "the-sinks-guarantee"
    assert anchors(text) == {"3-zookeeper", "ports-and-firewalls", "ports-and-firewalls-1"}
