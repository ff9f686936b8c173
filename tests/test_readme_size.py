"""README.md stays a user's README (issue 35): at most 200 lines, and every link in it leads to
a file of the repository; the manual is the documentation site under docs/ (``make docs``
checks its own links)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
MOST_LINES = 200
# [text](target): a relative target, its #anchor cut (web and mail addresses are left out).
LINK = re.compile(r"\]\((?!https?://|mailto:)([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_has_at_most_200_lines() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MOST_LINES, f"README.md has {lines} lines; move the details into docs/"


def test_every_relative_link_of_the_readme_is_a_file_of_the_repository() -> None:
    targets = LINK.findall(README.read_text())
    assert "docs/settings.md" in targets  # the README points into the documentation
    missing = sorted(target for target in set(targets) if not (REPO / target).exists())
    assert not missing, f"README.md links to what is not in the repository: {missing}"


def test_every_documentation_page_is_in_the_sites_navigation() -> None:
    """A page left out of mkdocs.yml's nav would be built but found by nobody."""
    config = (REPO / "mkdocs.yml").read_text()
    pages = sorted(page.name for page in (REPO / "docs").glob("*.md"))
    assert pages and [page for page in pages if f": {page}" not in config] == []


def test_every_relative_link_of_the_guides_is_a_file_of_the_repository() -> None:
    """The contributors' guide and each package's README link to files that exist (the site's
    own pages are checked by ``make docs``)."""
    guides = [
        REPO / "CONTRIBUTING.md",
        *sorted(REPO.glob("*/README.md")),
        *sorted(REPO.glob("services/*/README.md")),
    ]
    missing = [
        f"{guide.relative_to(REPO)}: {target}"
        for guide in guides
        for target in sorted(set(LINK.findall(guide.read_text())))
        if not (guide.parent / target).exists()
    ]
    assert not missing, "links to what is not in the repository:\n" + "\n".join(missing)
