"""Section references into docs/ resolve: every ``docs/<page>.md §N`` in the repository names an existing page and
an existing numbered heading, nothing cites the old out-of-repository spec, and each family page lists its options."""

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


def broken_references(text: str, where: str, own_page: Path | None = None) -> list[Broken]:
    """References in ``text`` whose page or section does not exist. On a docs page (``own_page``), a bare ``§N``
    outside a reference chain cites that page itself."""
    broken: list[Broken] = []
    cited: list[tuple[Path, str, str]] = []  # page, section, the reference as written
    for match in REFERENCE.finditer(text):
        page = ROOT / match.group("page")
        if not page.is_file():
            broken.append(Broken(where, match.group(0), "no such page"))
            continue
        for section in CHAIN_SECTION.finditer(match.group("chain") or ""):
            cited.extend((page, number, match.group(0)) for number in section.groups() if number)
    if own_page is not None:
        chains = [m.span() for m in REFERENCE.finditer(text)]
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


def test_every_docs_reference_names_an_existing_page_and_section() -> None:
    broken: list[Broken] = []
    for file in scanned_files():
        if file == Path(__file__).resolve():  # its examples are broken on purpose
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        own = file if file.is_relative_to(DOCS) and file.suffix == ".md" else None
        broken.extend(broken_references(text, str(file.relative_to(ROOT)), own))
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


def test_valid_references_pass() -> None:
    text = "docs/families/confucius4_r2t2.md §7, §8 and `docs/reference_parity.md` §2.1-2.2; docs/gguf_packages.md"
    assert broken_references(text, "example") == []
