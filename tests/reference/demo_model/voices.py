"""espeak-ng voice sets for the demo corpus, built only from combinations that really sound different.

espeak-ng 1.51 silently ignores some `BASE+VARIANT` spellings: every `en-gb+VARIANT` (even an unknown
variant name) renders byte-identical to plain `en-gb`, so a "held-out variant" on that base is really the
training voice. The voice file's own path (`gmw/en+VARIANT`) does apply the variant, so the British base is
spelled `gmw/en` here. Whatever the cause, every candidate is rendered once (a fixed sentence at fixed
speed/pitch) and its PCM hashed: a candidate whose render equals an earlier one is dropped, and a held-out
voice must differ from every training voice. The render function is a parameter so the logic is testable
without espeak-ng.

    python tests/reference/demo_model/voices.py --report voices.json   # survey + the chosen sets
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

Render = Callable[[str], bytes]

FINGERPRINT_TEXT = "the quick brown fox jumps over the lazy dog at seven fifteen"

# `gmw/en` is espeak-ng's British English voice (`en-gb`), spelled by its file so variants apply.
TRAIN_BASES = ["en-us", "gmw/en", "en-gb-x-rp", "en-gb-scotland", "en-us-nyc", "en-gb-x-gbclan"]
TRAIN_VARIANTS = [
    "",
    "m1",
    "m2",
    "m3",
    "m4",
    "m5",
    "m6",
    "f1",
    "f2",
    "f3",
    "f4",
    "klatt",
    "klatt2",
    "Alex",
    "Annie",
    "Gene",
    "Lee",
    "max",
    "paul",
    "Andy",
    "Jacky",
    "Alicia",
    "Andrea",
    "AnxiousAndy",
    "Denis",
    "Diogo",
    "Gene2",
    "Henrique",
    "Hugo",
    "Marco",
    "Mario",
    "Michael",
    "Mike",
    "Nguyen",
    "RicishayMax",
    "RicishayMax2",
    "RicishayMax3",
    "Storm",
    "Tweaky",
    "adam",
    "announcer",
    "antonio",
    "aunty",
    "benjamin",
    "boris",
    "caleb",
    "ed",
    "fast",
    "grandma",
    "grandpa",
    "gustave",
    "iven",
    "iven2",
    "iven3",
    "iven4",
    "kaukovalta",
    "klatt4",
    "klatt5",
    "klatt6",
    "marcelo",
    "michel",
    "miguel",
    "pablo",
    "pedro",
    "quincy",
    "rob",
    "robert",
    "sandro",
    "shelby",
    "steph",
    "steph2",
    "steph3",
    "travis",
    "victor",
    "zac",
]
# Held out: variants never used in training, on the training bases ...
TEST_VARIANTS = ["m7", "f5", "john", "linda", "klatt3"]
# ... and base voices + variants never used in training. Left out everywhere: near-copies of held-out
# variants (edward2, anikaRobot) and effects voices (robosoft*, whisper*, Demonic, UniRobot, croak).
UNSEEN_BASES = ["en-029", "en-gb-x-gbcwmd"]
UNSEEN_VARIANTS = ["", "m8", "edward", "david", "anika", "norbert", "belinda"]
# A second unseen-voice set (the `unseen_fresh` confirmation split of data5): the unseen bases with the held-out
# test variants, combinations in no other set (neither base nor variant is heard in training).
FRESH_VARIANTS = ["m7", "f5", "john", "linda", "klatt3"]


def voice_name(base: str, variant: str) -> str:
    """The espeak-ng `-v` argument for a base voice and an optional variant."""
    return f"{base}+{variant}" if variant else base


def espeak_render(voice: str, text: str = FINGERPRINT_TEXT) -> bytes:
    """espeak-ng's WAV output for `text` at fixed speed, pitch and word gap."""
    return subprocess.run(
        ["espeak-ng", "--stdout", "-v", voice, "-s", "160", "-p", "50", "-g", "0", text],
        check=True,
        capture_output=True,
    ).stdout


def fingerprint(audio: bytes) -> str:
    return hashlib.sha256(audio).hexdigest()


@dataclass
class Dedupe:
    kept: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)  # voice -> the kept voice it renders identical to
    hashes: dict[str, str] = field(default_factory=dict)  # every candidate -> its render's hash


def dedupe(candidates: Iterable[str], render: Render, known: dict[str, str] | None = None) -> Dedupe:
    """Keep the first candidate of each distinct render; `known` (hash -> voice) counts as already kept."""
    owner = dict(known or {})
    result = Dedupe()
    for voice in candidates:
        digest = fingerprint(render(voice))
        result.hashes[voice] = digest
        if digest in owner:
            result.dropped[voice] = owner[digest]
        else:
            owner[digest] = voice
            result.kept.append(voice)
    return result


@dataclass
class VoiceSets:
    train: list[str]
    test: list[str]
    unseen: list[str]
    dropped: dict[str, str]
    hashes: dict[str, str]
    fresh: list[str] = field(default_factory=list)  # FRESH_VARIANTS on the unseen bases, when asked for

    def check(self) -> None:
        """Held-out voices must render differently from every training voice and from each other."""
        train_hashes = {self.hashes[v] for v in self.train}
        for split in (self.test, self.unseen, self.fresh):
            clash = [v for v in split if self.hashes[v] in train_hashes]
            if clash:
                raise ValueError(f"held-out voices render like training voices: {clash}")
        if {self.hashes[v] for v in self.test} & {self.hashes[v] for v in self.unseen}:
            raise ValueError("a test voice renders like an unseen voice")
        if {self.hashes[v] for v in self.fresh} & {self.hashes[v] for v in self.test + self.unseen}:
            raise ValueError("a fresh unseen voice renders like a test or unseen voice")


def build_voice_sets(
    render: Render,
    train_bases: list[str] = TRAIN_BASES,
    train_variants: list[str] = TRAIN_VARIANTS,
    test_variants: list[str] = TEST_VARIANTS,
    unseen_bases: list[str] = UNSEEN_BASES,
    unseen_variants: list[str] = UNSEEN_VARIANTS,
    fresh_variants: list[str] | None = None,
) -> VoiceSets:
    """Training voices first (plain bases before variants, so a no-op variant is the one dropped), then the
    held-out sets, each deduplicated against everything kept before it; `fresh_variants` (on the unseen
    bases) adds the `fresh` set, deduplicated against all of them."""
    if set(train_variants) & (set(test_variants) | set(unseen_variants)) - {""}:
        raise ValueError("a held-out variant is also a training variant")
    train_candidates = [voice_name(b, v) for v in train_variants for b in train_bases]
    train = dedupe(train_candidates, render)
    known = {h: v for v, h in train.hashes.items() if v in train.kept}
    test = dedupe([voice_name(b, v) for v in test_variants for b in train_bases], render, known)
    known.update({h: v for v, h in test.hashes.items() if v in test.kept})
    unseen = dedupe([voice_name(b, v) for v in unseen_variants for b in unseen_bases], render, known)
    fresh = Dedupe()
    if fresh_variants:
        if set(train_variants) & set(fresh_variants) - {""}:
            raise ValueError("a fresh unseen variant is also a training variant")
        known.update({h: v for v, h in unseen.hashes.items() if v in unseen.kept})
        fresh = dedupe([voice_name(b, v) for v in fresh_variants for b in unseen_bases], render, known)
    sets = VoiceSets(
        train.kept,
        test.kept,
        unseen.kept,
        {**train.dropped, **test.dropped, **unseen.dropped, **fresh.dropped},
        {**train.hashes, **test.hashes, **unseen.hashes, **fresh.hashes},
        fresh.kept,
    )
    sets.check()
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, required=True, help="JSON: kept sets, dropped voices, hashes")
    args = parser.parse_args()
    sets = build_voice_sets(espeak_render)
    args.report.write_text(json.dumps(sets.__dict__, indent=1) + "\n")
    print(
        f"train {len(sets.train)}, test {len(sets.test)}, unseen {len(sets.unseen)} voices; "
        f"dropped {len(sets.dropped)} identical renders"
    )
    for voice, same in sorted(sets.dropped.items()):
        print(f"  dropped {voice} (renders as {same})")


if __name__ == "__main__":
    main()
