"""Rewrite references to the old out-of-repository spec (families.md, reference_notes.md) into ``docs/``.

Mechanical and idempotent; run it from anywhere after merging a branch that still cites the old documents:

    python tests/tools/rewrite_spec_references.py          # rewrite in place, list what changed
    python tests/tools/rewrite_spec_references.py --check  # only list; exit 1 if anything would change

``tests/foundation/test_docs_references.py`` fails while an old reference is left, and checks that every
``docs/... §N`` names an existing page and heading. Once no branch cites the old documents, delete this script.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("app", "inference", "tests", "model_specs", "README.md")
SUFFIXES = {".py", ".md", ".json", ".sh", ".toml", ".txt"}

R2T2 = "docs/families/confucius4_r2t2.md"
PARAKEET = "docs/families/parakeet_tdt.md"
GGUF = "docs/gguf_packages.md"
ARCHITECTURE = "docs/architecture.md"
PARITY = "docs/reference_parity.md"

# Old families.md sections whose new home depends on the file that cites them (Phonon-2's §3 covers what is now
# split into §7.1-7.5; §2.6 into §6.1-6.4; §5 into the GGUF page's sections).
FILE_SECTIONS: dict[str, dict[str, tuple[str, str | None]]] = {
    "inference/families/parakeet_tdt/engine.py": {"3": (PARAKEET, "7.1")},
    "inference/families/parakeet_tdt/phonon_import.py": {"3": (PARAKEET, "7.2")},
    "inference/families/parakeet_tdt/install.py": {"3": (PARAKEET, "7.2")},
    "inference/models/phonon.py": {"3": (PARAKEET, "7.2")},
    "tests/parakeet_tdt/test_phonon_import.py": {"3": (PARAKEET, "7.2")},
    "tests/parakeet_tdt/phonon_variant.py": {"3": (PARAKEET, "7.2")},
    "inference/families/parakeet_tdt/hotwords.py": {"3": (PARAKEET, "7.3")},
    "tests/parakeet_tdt/test_hotwords.py": {"3": (PARAKEET, "7.3")},
    "inference/families/parakeet_tdt/rolling.py": {"3": (PARAKEET, "7.4")},
    "tests/parakeet_tdt/test_rolling.py": {"3": (PARAKEET, "7.4")},
    "inference/families/parakeet_tdt/text.py": {"3": (PARAKEET, "7.5")},
    "tests/parakeet_tdt/test_parakeet_text.py": {"3": (PARAKEET, "7.5")},
    "inference/families/parakeet_tdt/streaming.py": {"2.6": (PARAKEET, "6.4"), "3": (PARAKEET, "7.4")},
    "tests/parakeet_tdt/test_streaming.py": {"2.6": (PARAKEET, "6.4")},
    "inference/families/parakeet_tdt/options.py": {"2.6": (PARAKEET, "6.1")},
    "tests/parakeet_tdt/test_engine_options.py": {"2.6": (PARAKEET, "6.1")},
    "tests/reference/parakeet_tdt/make_fixtures.py": {"2.6": (PARAKEET, "6.2")},
    "inference/native/package_tensors.py": {"5": (GGUF, "2")},
    "inference/native/embedded_files.py": {"5": (GGUF, "3")},
}

# Literal rewrites applied before the general rule: phrases the rule cannot map (bare § numbers, quoted
# sub-headings, "step"/"point" numbering that docs/ does not have).
LITERALS: dict[str, list[tuple[str, str]]] = {
    "app/dictation/capture.py": [("— families.md)", f"— {R2T2} §12)")],
    "inference/families/confucius4_r2t2/frontend.py": [("(families.md §1.2 step 8)", f"({R2T2} §2)")],
    "inference/families/confucius4_r2t2/endpointing.py": [
        ('families.md §1.7 "110 s limit / endpointing"', f"{R2T2} §7.5")
    ],
    "tests/confucius4_r2t2/test_endpointing.py": [('(families.md §1.7 "endpointing")', f"({R2T2} §7.5)")],
    "inference/families/confucius4_r2t2/lsp.py": [("(§1.8 item", f"({R2T2} §8 item")],
    "inference/families/confucius4_r2t2/postprocess.py": [
        ("project decisions §1.8)", "project decisions §8)")
    ],
    "tests/confucius4_r2t2/test_r2t2_postprocess.py": [("(project decision §1.8.3)", f"({R2T2} §8 item 3)")],
    "tests/confucius4_r2t2/test_audio_tower.py": [("(§2.7)", f"({PARITY} §2.7)")],
    "inference/families/parakeet_tdt/frontend.py": [
        ("Where families.md and transformers could differ", "Where audio.cpp and transformers could differ")
    ],
    "inference/families/parakeet_tdt/streaming.py": [
        ('(families.md §2.6 "Buffered streaming")', f"({PARAKEET} §6.4)")
    ],
    "inference/families/parakeet_tdt/engine.py": [
        (
            "(families.md §3), else buffered long-form windows (§2.6)",
            f"({PARAKEET} §7.4), else buffered long-form windows (§6.4)",
        )
    ],
    "tests/demo_model/test_shipped_model.py": [("reference_notes §1.5 point 2", f"{PARITY} §1.5")],
    "tests/reference/demo_model/train.py": [("(reference_notes §1.5 pt 2)", f"({PARITY} §1.5)")],
}

SECTION = r"§\d+(?:\.\d+)*(?:-\d+(?:\.\d+)*)?"
SEPARATOR = r"(?:, |/| \+ | and )"
REFERENCE = re.compile(
    r"(?P<doc>(?:spec )?(?:families\.md|families(?= §))|reference_notes(?:\.md)?)"
    rf"(?P<chain>(?: {SECTION})(?:{SEPARATOR}{SECTION})*)?"
)
CHAIN_PART = re.compile(rf"(?P<sep>^ |{SEPARATOR})(?P<section>{SECTION})")


def families_target(section: str, path: str) -> tuple[str, str | None]:
    """Where an old families.md section lives now."""
    override = FILE_SECTIONS.get(path, {}).get(section)
    if override is not None:
        return override
    major, _, minor = section.partition(".")
    if major == "1":
        return R2T2, minor or None
    if major == "2":
        return PARAKEET, minor or None
    if major == "3":
        return PARAKEET, "7"
    if major == "4":
        return ARCHITECTURE, None
    if major == "5":
        return GGUF, None
    raise ValueError(f"{path}: families.md §{section} has no home in docs/")


def rewrite_reference(match: re.Match[str], path: str) -> str:
    notes = match.group("doc").startswith("reference_notes")
    chain = match.group("chain")
    if not chain:
        return PARITY if notes else _bare_families(path)
    out: list[str] = []
    previous_doc: str | None = None
    for part in CHAIN_PART.finditer(chain):
        old = part.group("section")[1:]
        if notes:
            doc, section = PARITY, old
        else:
            first, _, last = old.partition("-")
            doc, section = families_target(first, path)
            if last and section is not None:
                section = f"{section}-{families_target(last, path)[1]}"
        sep = part.group("sep")
        if doc == previous_doc:
            out.append(f"{sep}§{section}" if section else "")
        else:
            lead = "" if previous_doc is None else (", " if sep == "/" else sep)
            out.append(f"{lead}{doc}" + (f" §{section}" if section else ""))
        previous_doc = doc
    return "".join(out)


def _bare_families(path: str) -> str:
    """``families.md`` without a section: the family page of the citing file, else the docs index."""
    if "parakeet" in path or "phonon" in path:
        return PARAKEET
    if "confucius4_r2t2" in path:
        return R2T2
    return "docs/README.md"


def rewrite_text(text: str, path: str) -> str:
    for old, new in LITERALS.get(path, []):
        text = text.replace(old, new)
    return REFERENCE.sub(lambda m: rewrite_reference(m, path), text)


def candidate_files(root: Path) -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        top = root / name
        if top.is_file():
            files.append(top)
        elif top.is_dir():
            files.extend(p for p in sorted(top.rglob("*")) if p.is_file() and p.suffix in SUFFIXES)
    # This script and the test that looks for leftovers name the old documents on purpose.
    keep = {Path(__file__).resolve(), root / "tests" / "foundation" / "test_docs_references.py"}
    return [p for p in files if p.resolve() not in keep and "fixtures" not in p.relative_to(root).parts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="list what would change; exit 1 if anything would"
    )
    args = parser.parse_args(argv)
    changed = 0
    for file in candidate_files(ROOT):
        path = file.relative_to(ROOT).as_posix()
        text = file.read_text(encoding="utf-8")
        new = rewrite_text(text, path)
        if new == text:
            continue
        changed += 1
        for before, after in zip(text.splitlines(), new.splitlines(), strict=True):
            if before != after:
                print(f"{path}:\n  - {before.strip()}\n  + {after.strip()}")
        if not args.check:
            file.write_text(new, encoding="utf-8")
    print(f"{changed} file(s) {'would change' if args.check else 'rewritten'}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
