"""Sentence source for the demo model: a small English grammar written by the project.

Sentences are lower-case words without punctuation, so the tokenizer and the model only have to
learn words. Everything is drawn from a seeded `random.Random`, so the same seed gives the same text.
"""

from __future__ import annotations

import random

NOUNS = """
time year day week month hour minute morning evening night today people man woman child boy girl
friend family mother father brother sister baby teacher doctor student driver farmer worker king
queen house home room door window wall floor table chair bed kitchen garden street road city town
village country world school office shop market bank station hotel church park river lake sea
water fire air wind rain snow sun moon star sky tree flower grass field forest hill mountain stone
book letter paper page story word name number question answer idea plan problem reason part place
way thing car bus train boat plane bike ticket money price job work game music song picture film
phone computer radio light box bag cup glass plate bottle food bread milk coffee tea apple orange
egg fish meat rice soup cake sugar salt dog cat horse bird cow sheep animal hand head face eye ear
mouth hair arm leg foot heart voice color shirt coat hat shoe key clock map bridge island corner
meeting party lesson class report news weather road bottle engine window garden
""".split()

ADJECTIVES = """
good new old great big small long short high low young little large early late important right
wrong easy hard happy sad hot cold warm cool dark bright clean dirty quiet loud fast slow full
empty heavy light rich poor strong weak open closed green blue red white black yellow brown sweet
fresh simple strange busy free safe ready tired hungry kind nice beautiful famous quick careful
""".split()

VERBS = """
see find take make give tell call ask show move play run walk read write bring buy sell open close
carry watch help start stop keep leave meet pay send build cut wash cook clean paint fix drive
visit answer follow learn teach change check count draw pick pull push fill turn hold carry
""".split()

PAST_VERBS = """
saw found took made gave told called asked showed moved played ran walked read wrote brought bought
sold opened closed carried watched helped started stopped kept left met paid sent built cut washed
cooked cleaned painted fixed drove visited answered followed learned taught changed checked counted
drew picked pulled pushed filled turned held
""".split()

INTRANSITIVE = """
arrived left waited slept laughed smiled talked worked stayed listened returned danced sang
jumped shouted agreed
""".split()

NAMES = """
anna peter maria john sarah david emma james lucy thomas laura paul alice george helen frank
nina oscar ruth victor
""".split()

PLACES = [
    "at home", "at work", "at school", "in the city", "in the park", "in the garden", "in the kitchen",
    "on the bus", "on the train", "by the river", "near the station", "at the market", "in the office",
    "on the bridge", "by the sea", "in the village",
]

TIMES = [
    "today", "yesterday", "tomorrow", "last night", "this morning", "this evening", "next week",
    "last year", "every day", "on monday", "on friday", "on sunday", "at noon", "in the summer",
    "in the winter", "after lunch", "before dinner", "right now", "later", "again",
]

ADVERBS = "quickly slowly quietly carefully always never often sometimes really very".split()

NUMBERS = """
one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred
""".split()

PRONOUNS = "i you we they he she".split()
MODALS = "will can should must could would".split()
QUESTION = "what where when why how".split()
FUNCTION = """
the a and or but because if so then there here this that these those is are was were it not my
your our their his her some many all no more most very too also only just with from for of to in on
at by about into over under after before yes hello thank please
""".split()

VOCABULARY: tuple[str, ...] = tuple(
    sorted(
        set(NOUNS + ADJECTIVES + VERBS + PAST_VERBS + INTRANSITIVE + NAMES + ADVERBS + NUMBERS + PRONOUNS
            + MODALS + QUESTION + FUNCTION + " ".join(PLACES + TIMES).split())
    )
)


def _noun_phrase(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.35:
        return f"the {rng.choice(NOUNS)}"
    if roll < 0.6:
        return f"the {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
    if roll < 0.75:
        return f"a {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
    if roll < 0.87:
        return f"{rng.choice(NUMBERS)} {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}s"
    return f"my {rng.choice(NOUNS)}"


def _subject(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(NAMES)
    if roll < 0.65:
        return rng.choice(PRONOUNS)
    return _noun_phrase(rng)


def _templates(rng: random.Random) -> str:
    kind = rng.randrange(10)
    if kind == 0:
        return f"{_subject(rng)} {rng.choice(PAST_VERBS)} {_noun_phrase(rng)} {rng.choice(TIMES)}"
    if kind == 1:
        return f"{_subject(rng)} {rng.choice(INTRANSITIVE)} {rng.choice(PLACES)}"
    if kind == 2:
        return f"please {rng.choice(VERBS)} {_noun_phrase(rng)} {rng.choice(PLACES)}"
    if kind == 3:
        return f"can you {rng.choice(VERBS)} {_noun_phrase(rng)} {rng.choice(TIMES)}"
    if kind == 4:
        return f"{rng.choice(QUESTION)} did {rng.choice(NAMES)} {rng.choice(VERBS)} {rng.choice(TIMES)}"
    if kind == 5:
        return f"{rng.choice(PRONOUNS)} {rng.choice(MODALS)} {rng.choice(VERBS)} {_noun_phrase(rng)}"
    if kind == 6:
        return f"{_noun_phrase(rng)} was very {rng.choice(ADJECTIVES)} {rng.choice(TIMES)}"
    if kind == 7:
        return (f"{_subject(rng)} {rng.choice(ADVERBS)} {rng.choice(PAST_VERBS)} {_noun_phrase(rng)} "
                f"and {rng.choice(INTRANSITIVE)}")
    if kind == 8:
        return f"there are {rng.choice(NUMBERS)} {rng.choice(NOUNS)}s {rng.choice(PLACES)}"
    return f"{rng.choice(['hello', 'thank you', 'yes', 'no'])} {rng.choice(NAMES)} {_templates(rng)}"


def make_sentence(rng: random.Random) -> str:
    """One sentence: mostly grammatical templates, some random word strings so every word is heard
    in many contexts (the model must not lean on the templates)."""
    if rng.random() < 0.25:
        return " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(3, 10)))
    return _templates(rng)


def make_sentences(seed: int, count: int, exclude: set[str] | None = None) -> list[str]:
    """`count` distinct sentences not in `exclude`, reproducible from `seed`."""
    rng = random.Random(seed)
    seen = set(exclude or ())
    out: list[str] = []
    while len(out) < count:
        text = " ".join(make_sentence(rng).split())
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out
