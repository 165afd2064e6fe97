"""Section references into docs/ resolve: every ``docs/<page>.md §N`` in the repository (and every
``[text](page.md) §N`` in the README and docs/) names an existing page and an existing numbered heading, every
relative link in the README and docs/ resolves, nothing cites the old out-of-repository spec, each family page
lists its options, and the README stays the short page that links the rest (docs/CONTRIBUTING.md §7)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SCANNED = ("app", "inference", "tests", "model_specs", "docs", "installers", "README.md", "pyproject.toml")
SKIPPED_PARTS = {"fixtures", "__pycache__"}
TEXT_SUFFIXES = {".py", ".md", ".json", ".toml", ".sh", ".txt", ".cfg", ""}
REWRITER = ROOT / "tests" / "tools" / "rewrite_spec_references.py"

SECTION = r"§(\d+(?:\.\d+)*)(?:-(\d+(?:\.\d+)*))?"
SEPARATOR = r"(?:, |/| \+ | and )"
# A page, optionally in backticks, then a chain of sections ("§7, §8", "§2.1/§2.2", "§5 + §7.3", "§2.1-2.2").
REFERENCE = re.compile(rf"(?P<page>docs/[\w./-]+?\.md)`?(?P<chain>(?: {SECTION})(?:{SEPARATOR}{SECTION})*)?")
# A relative Markdown link to a page, then optionally a chain: "[cli.md](cli.md) §7", "[x](../docs/a.md#b) §2, §3".
LINK_REFERENCE = re.compile(
    rf"\]\((?P<target>[^)\s#]+\.md)(?:#[^)\s]*)?\)`?(?P<chain>(?:\s{SECTION})(?:{SEPARATOR}{SECTION})*)?"
)
LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CHAIN_SECTION = re.compile(SECTION)
BARE_SECTION = re.compile(rf"(?<![\w/`]){SECTION}")
HEADING = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s", re.MULTILINE)
OLD_SPEC = re.compile(r"families\.md|reference_notes")


@dataclass(frozen=True)
class Broken:
    where: str
    reference: str
    why: str


def numbered_headings(page: Path) -> set[str]:
    return set(HEADING.findall(page.read_text(encoding="utf-8")))


def scanned_files() -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        top = ROOT / name
        if top.is_file():
            files.append(top)
        elif top.is_dir():
            files.extend(
                p
                for p in sorted(top.rglob("*"))
                if p.is_file()
                and p.suffix in TEXT_SUFFIXES
                and not SKIPPED_PARTS & set(p.relative_to(ROOT).parts)
            )
    return files


def broken_references(
    text: str, where: str, own_page: Path | None = None, links_from: Path | None = None
) -> list[Broken]:
    """References in ``text`` whose page or section does not exist. On a docs page (``own_page``), a bare ``§N``
    outside a reference chain cites that page itself. ``links_from``: the folder that relative Markdown links in
    ``text`` start from (``[cli.md](cli.md) §7`` cites cli.md's §7); None leaves links alone."""
    broken: list[Broken] = []
    cited: list[tuple[Path, str, str]] = []  # page, section, the reference as written
    chains: list[tuple[int, int]] = []
    references = [(ROOT / m.group("page"), m) for m in REFERENCE.finditer(text)]
    if links_from is not None:
        references += [
            ((links_from / m.group("target")).resolve(), m)
            for m in LINK_REFERENCE.finditer(text)
            if "://" not in m.group("target")
        ]
    for page, match in references:
        chains.append(match.span())
        if not page.is_file():
            broken.append(Broken(where, match.group(0), "no such page"))
            continue
        for section in CHAIN_SECTION.finditer(match.group("chain") or ""):
            cited.extend((page, number, match.group(0)) for number in section.groups() if number)
    if own_page is not None:
        for match in BARE_SECTION.finditer(text):
            if not any(start <= match.start() < end for start, end in chains):
                cited.extend((own_page, number, match.group(0)) for number in match.groups() if number)
    headings: dict[Path, set[str]] = {}
    for page, number, written in cited:
        if page not in headings:
            headings[page] = numbered_headings(page)
        if number not in headings[page]:
            broken.append(
                Broken(where, written, f"{page.relative_to(ROOT)} has no heading numbered {number}")
            )
    return broken


def markdown_pages() -> list[Path]:
    """The README and every page under docs/: the pages a reader follows links through."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def heading_anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(
        r"^#{1,6}\s+(.+?)\s*$", FENCE.sub("", page.read_text(encoding="utf-8")), re.MULTILINE
    )
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def broken_links(text: str, where: str, folder: Path) -> list[Broken]:
    """Relative Markdown links and images in ``text`` (outside code blocks) whose file, or heading anchor, is
    missing; ``folder`` is where they start from."""
    broken: list[Broken] = []
    for match in LINK.finditer(FENCE.sub("", text)):
        target = match.group("target")
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path_part, _, anchor = target.partition("#")
        path = (folder / path_part).resolve() if path_part else None
        if path is not None and not path.exists():
            broken.append(Broken(where, target, "no such file"))
        elif anchor and (path or folder).suffix == ".md" and anchor not in heading_anchors(path or folder):
            broken.append(Broken(where, target, f"no heading with the anchor #{anchor}"))
    return broken


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    broken = [
        b
        for page in markdown_pages()
        for b in broken_links(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)), page.parent)
    ]
    assert not broken, "broken links:\n" + "\n".join(f"{b.where}: {b.reference!r}: {b.why}" for b in broken)


README_PAGES = ("app.md", "cli.md", "server.md", "models.md", "CONTRIBUTING.md", "README.md")
README_MAX_LINES = 150


def test_the_readme_is_short_and_links_every_user_page_and_the_docs_index() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = readme.count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to a docs/ page"
    linked = {Path(m.group("target").partition("#")[0]).name for m in LINK.finditer(readme)}
    missing = [page for page in README_PAGES if page not in linked or not (DOCS / page).is_file()]
    assert not missing, f"README.md does not link docs/ page(s) {missing}"


def test_the_docs_index_lists_every_page() -> None:
    index = DOCS / "README.md"
    listed = {(DOCS / m.group("target")).resolve() for m in LINK.finditer(index.read_text(encoding="utf-8"))}
    unlisted = [
        str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md") if p != index and p.resolve() not in listed
    ]
    assert not unlisted, f"docs/README.md does not list {unlisted}"


def readme_test_command() -> str:
    """The line after the line after the marker, exactly as `.ci/run` extracts it with awk."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    at = lines.index("<!-- test-command -->")
    return lines[at + 2] if at + 2 < len(lines) else ""


def test_the_readme_keeps_the_ci_test_command_and_contributing_quotes_the_same_one() -> None:
    command = readme_test_command()
    assert command.startswith("python3 -m venv .venv") and "pytest" in command, command
    contributing = (DOCS / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert f"```bash\n{command}\n```" in contributing, "docs/CONTRIBUTING.md quotes another test command"


def test_every_docs_reference_names_an_existing_page_and_section() -> None:
    broken: list[Broken] = []
    for file in scanned_files():
        if file == Path(__file__).resolve():  # its examples are broken on purpose
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        own = file if file.is_relative_to(DOCS) and file.suffix == ".md" else None
        links_from = file.parent if file in markdown_pages() else None
        broken.extend(broken_references(text, str(file.relative_to(ROOT)), own, links_from))
    assert not broken, "broken docs references:\n" + "\n".join(
        f"{b.where}: {b.reference!r}: {b.why}" for b in broken
    )


def test_nothing_cites_the_old_spec_outside_the_repository() -> None:
    left = [
        f"{file.relative_to(ROOT)}:{number}: {line.strip()}"
        for file in scanned_files()
        if file not in (REWRITER, Path(__file__).resolve())
        for number, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if OLD_SPEC.search(line)
    ]
    assert not left, (
        "references to families.md / reference_notes.md (not in the repository) remain; "
        "run `python tests/tools/rewrite_spec_references.py`:\n" + "\n".join(left)
    )


@pytest.mark.parametrize("family", sorted(p.stem for p in (ROOT / "model_specs").glob("*.json")))
def test_each_family_page_lists_every_option_of_its_spec(family: str) -> None:
    spec = json.loads((ROOT / "model_specs" / f"{family}.json").read_text(encoding="utf-8"))
    page = (DOCS / "families" / f"{family}.md").read_text(encoding="utf-8")
    options = {name for kind in ("session_options", "request_options") for name in spec[kind]}
    missing = sorted(name for name in options if f"`{name}`" not in page)
    assert not missing, (
        f"docs/families/{family}.md does not describe option(s) {missing} of model_specs/{family}.json"
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("see docs/families/parakeet_tdt.md §99", "no heading numbered 99"),
        ("see docs/families/parakeet_tdt.md §7.4, §7.9", "no heading numbered 7.9"),
        ("see docs/reference_parity.md §2.1-2.9", "no heading numbered 2.9"),
        ("see docs/no_such_page.md §1", "no such page"),
    ],
)
def test_a_reference_to_a_missing_section_or_page_is_reported(text: str, why: str) -> None:
    broken = broken_references(text, "example")
    assert [b.why for b in broken if why in b.why], broken


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("see [the CLI](cli.md) §99", "no heading numbered 99"),
        ("see [x](no_such_page.md) §1", "no such page"),
    ],
)
def test_a_linked_reference_to_a_missing_section_or_page_is_reported(text: str, why: str) -> None:
    broken = broken_references(text, "example", links_from=DOCS)
    assert [b.why for b in broken if why in b.why], broken


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[gone](no_such_file.md)", "no such file"),
        ("![shot](screenshots/none.png)", "no such file"),
        ("[cli](cli.md#no-such-heading)", "no heading with the anchor"),
    ],
)
def test_a_broken_link_is_reported(text: str, why: str) -> None:
    assert [b.why for b in broken_links(text, "example", DOCS) if why in b.why]


def test_valid_links_pass() -> None:
    text = "[cli](cli.md#7-when-a-worker-dies), ![x](screenshots/overlay.png), [web](https://example.com)\n```\n[a](b)\n```"
    assert broken_links(text, "example", DOCS) == []


def test_valid_references_pass() -> None:
    text = "docs/families/confucius4_r2t2.md §7, §8 and `docs/reference_parity.md` §2.1-2.2; docs/gguf_packages.md"
    assert broken_references(text, "example") == []
