"""Sentence source for the demo model: a small probabilistic English grammar written by the project.

Sentences are lower-case words without punctuation, so the tokenizer and the model only have to learn
words. Every sentence carries a *structure id* (the production that made it: a frame, plus the clause kinds
and conjunction for compound sentences). `TEST_STRUCTURES` are never produced for training, so a held-out
split by structure measures sentence shapes the model has never heard, not only new word choices.
Everything is drawn from a seeded `random.Random`: the same seed gives the same text.
"""

from __future__ import annotations

import random
from collections.abc import Callable

# --- word lists -------------------------------------------------------------------------------------------

COUNT_NOUNS = """
year day week month hour minute morning evening night man woman child boy girl friend family mother
father brother sister baby teacher doctor student driver farmer worker king queen house home room door
window wall floor table chair bed kitchen garden street road city town village country school office shop
market bank station hotel church park river lake sea fire star tree flower field forest hill mountain
stone book letter paper page story word name number question answer idea plan problem reason place car
bus train boat plane bike ticket job game song picture film phone computer radio light box bag cup glass
plate bottle apple orange egg fish cake dog cat horse bird cow sheep animal hand head face eye ear arm
leg foot heart shirt coat hat shoe key clock map bridge island corner meeting party lesson class report
birthday holiday weekend message camera dollar pen bottle
""".split()

MASS_NOUNS = """
time people water air wind rain snow sun moon sky grass money food bread milk coffee tea rice soup sugar
salt meat music work news weather lunch dinner breakfast
""".split()

# Count nouns used in the singular only, to keep the vocabulary small enough for a tiny model.
SINGULAR_ONLY = set(
    """
morning evening night king queen home kitchen forest sea lake village country island corner hill mountain
stone river field bridge church hotel bank station market office street road city wall floor face head
baby mother father brother sister family farmer worker driver doctor teacher student lesson class report
birthday holiday weekend message camera pen heart fire star
""".split()
) - {"heart"}
IRREGULAR_PLURALS = {
    "man": "men",
    "woman": "women",
    "child": "children",
    "foot": "feet",
    "fish": "fish",
    "sheep": "sheep",
    "shelf": "shelves",
}


def plural(noun: str) -> str:
    if noun in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[noun]
    if noun.endswith(("s", "sh", "ch", "x")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


ADJECTIVES = """
good new old great big small long short high low young little large early late important right wrong easy
hard happy sad hot cold warm cool dark bright clean dirty quiet loud fast slow full empty heavy light rich
poor strong weak open closed green blue red white black yellow brown sweet fresh simple strange busy free
safe ready tired hungry kind nice beautiful famous quick careful funny lucky real different same
""".split()

# transitive verbs: base, past, third person singular, -ing
VERBS = [
    tuple(v.split())
    for v in """
see saw sees seeing|find found finds finding|take took takes taking|make made makes making
give gave gives giving|tell told tells telling|call called calls calling|ask asked asks asking
show showed shows showing|move moved moves moving|play played plays playing|read read reads reading
write wrote writes writing|bring brought brings bringing|buy bought buys buying|sell sold sells selling
open opened opens opening|close closed closes closing|carry carried carries carrying
watch watched watches watching|help helped helps helping|start started starts starting
stop stopped stops stopping|keep kept keeps keeping|meet met meets meeting|pay paid pays paying
send sent sends sending|build built builds building|cut cut cuts cutting|wash washed washes washing
cook cooked cooks cooking|clean cleaned cleans cleaning|paint painted paints painting|fix fixed fixes fixing
drive drove drives driving|visit visited visits visiting|follow followed follows following
learn learned learns learning|teach taught teaches teaching|change changed changes changing
check checked checks checking|count counted counts counting|draw drew draws drawing|pick picked picks picking
pull pulled pulls pulling|push pushed pushes pushing|fill filled fills filling|turn turned turns turning
hold held holds holding|need needed needs needing|want wanted wants wanting|like liked likes liking
love loved loves loving|get got gets getting|put put puts putting|eat ate eats eating|drink drank drinks drinking
lose lost loses losing|use used uses using|try tried tries trying|remember remembered remembers remembering
forget forgot forgets forgetting|leave left leaves leaving|catch caught catches catching|hear heard hears hearing
""".strip()
    .replace("\n", "|")
    .split("|")
]

# intransitive verbs: base, past, -ing
INTRANSITIVE = [
    tuple(v.split())
    for v in """
arrive arrived arriving|wait waited waiting|sleep slept sleeping|laugh laughed laughing|smile smiled smiling
talk talked talking|work worked working|stay stayed staying|listen listened listening|return returned returning
dance danced dancing|sing sang singing|jump jumped jumping|shout shouted shouting|agree agreed agreeing
come came coming|go went going|sit sat sitting|swim swam swimming|rain rained raining|cry cried crying
""".strip()
    .replace("\n", "|")
    .split("|")
]

NAMES = """
anna peter maria john sarah david emma james lucy thomas laura paul alice george helen frank nina oscar ruth
victor
""".split()

PRONOUNS = ["i", "you", "we", "they", "he", "she"]
OBJECT_PRONOUNS = {"i": "me", "you": "you", "we": "us", "they": "them", "he": "him", "she": "her"}
POSSESSIVES = ["my", "your", "our", "their", "his", "her"]
MODALS = ["will", "can", "should", "must", "could", "would", "might"]
ADVERBS = "quickly slowly quietly carefully always never often sometimes really usually soon already".split()
DEGREE = ["very", "too", "really", "quite", "so"]

UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split()
)
TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
ORDINALS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
    "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth".split()
)
TENS_ORDINALS = {"twenty": "twentieth", "thirty": "thirtieth"}
DAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
MONTHS = "january february march april may june july august september october november december".split()

PREPOSITIONS_OF_PLACE = ["in", "on", "at", "by", "near", "under", "behind", "next to", "inside", "outside"]

# Words only used inside fixed phrases of the frames below.
FUNCTION = """
the a an and or but because if so then when while although there here this that these those is are was were
it not no yes to of for with from about into over after before until do does did am hello hi thank thanks please sorry okay what where who why how which many much some all more every
one last next this how today tonight yesterday tomorrow now later again morning afternoon evening night
noon midnight half past quarter hundred thousand plus minus oclock am me back let us summer winter have
""".split()


def _cardinal_words() -> list[str]:
    return UNITS + TENS + ["hundred", "thousand"]


VOCABULARY: tuple[str, ...]  # filled in at the end of the module from everything the frames can say

# --- numbers, dates and times ---------------------------------------------------------------------------


def cardinal(n: int) -> str:
    """English words for 0 <= n < 10000 ("three hundred and twelve", "twenty three")."""
    if not 0 <= n < 10000:
        raise ValueError(n)
    if n < 20:
        return UNITS[n]
    if n < 100:
        tens, unit = divmod(n, 10)
        return TENS[tens - 2] + (f" {UNITS[unit]}" if unit else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return f"{UNITS[hundreds]} hundred" + (f" and {cardinal(rest)}" if rest else "")
    thousands, rest = divmod(n, 1000)
    tail = "" if not rest else (f" and {cardinal(rest)}" if rest < 100 else f" {cardinal(rest)}")
    return f"{UNITS[thousands]} thousand{tail}"


def ordinal(n: int) -> str:
    """1 <= n <= 31: "first" ... "twenty first" ... "thirty first"."""
    if not 1 <= n <= 31:
        raise ValueError(n)
    if n < 20:
        return ORDINALS[n - 1]
    tens, unit = divmod(n, 10)
    return TENS_ORDINALS[TENS[tens - 2]] if not unit else f"{TENS[tens - 2]} {ORDINALS[unit - 1]}"


def _number(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.45:
        return cardinal(rng.randint(2, 12))
    if roll < 0.8:
        return cardinal(rng.randint(13, 99))
    if roll < 0.95:
        return cardinal(rng.randint(100, 999))
    return cardinal(rng.choice([1000, 2000, 5000, rng.randint(1001, 9999)]))


def _clock(rng: random.Random) -> str:
    hour = rng.randint(1, 12)
    roll = rng.random()
    if roll < 0.3:
        return f"{cardinal(hour)} {rng.choice(['fifteen', 'thirty', 'forty five', 'twenty', 'ten', 'fifty'])}"
    if roll < 0.45:
        return f"{cardinal(hour)} oclock"
    if roll < 0.6:
        return f"half past {cardinal(hour)}"
    if roll < 0.75:
        return f"quarter {rng.choice(['past', 'to'])} {cardinal(hour)}"
    if roll < 0.85:
        return f"{cardinal(hour)} in the {rng.choice(['morning', 'afternoon', 'evening'])}"
    if roll < 0.93:
        return cardinal(hour)
    return rng.choice(["noon", "midnight"])


def _date(rng: random.Random) -> str:
    day, month = ordinal(rng.randint(1, 31)), rng.choice(MONTHS)
    roll = rng.random()
    if roll < 0.3:
        return f"on {rng.choice(DAYS)} the {day} of {month}"
    if roll < 0.55:
        return f"on the {day} of {month}"
    if roll < 0.75:
        return f"on {month} the {day}" if rng.random() < 0.5 else f"on {month} {day}"
    if roll < 0.9:
        return f"in {month}"
    return f"in {cardinal(rng.randint(2000, 2030))}"


def _when(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(
            [
                "today",
                "tonight",
                "yesterday",
                "tomorrow",
                "now",
                "later",
                "again",
                "last night",
                "this morning",
                "this evening",
                "this afternoon",
                "next week",
                "last year",
                "every day",
                "after lunch",
                "before dinner",
                "at the weekend",
                "in the summer",
                "in the winter",
                "right now",
                "last month",
                "next year",
            ]
        )
    if roll < 0.6:
        return (
            f"on {rng.choice(DAYS)}"
            if rng.random() < 0.6
            else f"{rng.choice(['next', 'last', 'every'])} {rng.choice(DAYS)}"
        )
    if roll < 0.8:
        return f"at {_clock(rng)}"
    return _date(rng)


# --- phrases ----------------------------------------------------------------------------------------------

PLURAL_NOUNS = [n for n in COUNT_NOUNS if n not in SINGULAR_ONLY]


def _noun(rng: random.Random) -> str:
    return rng.choice(COUNT_NOUNS)


def _plural(rng: random.Random) -> str:
    return plural(rng.choice(PLURAL_NOUNS))


def _noun_phrase(rng: random.Random, plural_ok: bool = True) -> str:
    roll = rng.random()
    if roll < 0.25:
        return f"the {_noun(rng)}"
    if roll < 0.42:
        return f"the {rng.choice(ADJECTIVES)} {_noun(rng)}"
    if roll < 0.52:
        noun = _noun(rng)
        return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"
    if roll < 0.6:
        return f"a {rng.choice([a for a in ADJECTIVES if a[0] not in 'aeiou'])} {_noun(rng)}"
    if roll < 0.7:
        return f"{rng.choice(POSSESSIVES)} {_noun(rng)}"
    if roll < 0.78:
        return rng.choice(["some", "the", "more", "no", "all the", "the"]) + " " + rng.choice(MASS_NOUNS)
    if roll < 0.9 and plural_ok:
        count = rng.choice(["two", "three", "some", "many", "these", "those", "the", "all the", _number(rng)])
        adjective = f"{rng.choice(ADJECTIVES)} " if rng.random() < 0.4 else ""
        return f"{count} {adjective}{_plural(rng)}"
    return rng.choice(
        [
            f"this {_noun(rng)}",
            f"that {_noun(rng)}",
            f"the {_noun(rng)} of the {_noun(rng)}",
            f"every {_noun(rng)}",
        ]
    )


def _person(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.5:
        return rng.choice(NAMES)
    if roll < 0.75:
        return f"{rng.choice(POSSESSIVES)} {rng.choice(['mother', 'father', 'friend', 'teacher', 'brother', 'sister', 'doctor', 'family'])}"
    return f"the {rng.choice(['man', 'woman', 'child', 'boy', 'girl', 'driver', 'teacher', 'doctor', 'king', 'queen'])}"


def _subject(rng: random.Random) -> tuple[str, bool]:
    """A subject and whether it takes third person singular verbs."""
    roll = rng.random()
    if roll < 0.45:
        pronoun = rng.choice(PRONOUNS)
        return pronoun, pronoun in ("he", "she")
    if roll < 0.85:
        return _person(rng), True
    return f"the {_plural(rng)}", False


def _object(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return rng.choice(list(OBJECT_PRONOUNS.values()) + ["it", "them"])
    if rng.random() < 0.15:
        return _person(rng)
    return _noun_phrase(rng)


def _prep_phrase(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.4:
        return f"{rng.choice(PREPOSITIONS_OF_PLACE)} the {_noun(rng)}"
    if roll < 0.55:
        return f"{rng.choice(['with', 'for', 'from', 'to', 'about'])} {_person(rng)}"
    if roll < 0.7:
        return f"{rng.choice(['with', 'for', 'from', 'about', 'of', 'into', 'over'])} {_noun_phrase(rng)}"
    if roll < 0.82:
        return rng.choice(
            [
                "at home",
                "at work",
                "at school",
                "in the city",
                "on the bus",
                "on the train",
                "by the sea",
                "by bus",
                "by train",
                "by car",
                "on foot",
                "in the park",
            ]
        )
    return _when(rng)


def _tail(rng: random.Random) -> str:
    """Zero, one or two optional trailing phrases (place, time, company)."""
    roll = rng.random()
    if roll < 0.35:
        return ""
    if roll < 0.85:
        return " " + _prep_phrase(rng)
    return f" {_prep_phrase(rng)} {_when(rng)}"


# --- clauses (each returns text; the kind is part of the structure id) ------------------------------------


def _be(third: bool, subject: str, past: bool) -> str:
    if subject == "i":
        return "was" if past else "am"
    if third:
        return "was" if past else "is"
    return "were" if past else "are"


def cl_past(rng: random.Random) -> str:
    subject, _ = _subject(rng)
    return f"{subject} {rng.choice(VERBS)[1]} {_object(rng)}{_tail(rng)}"


def cl_intr(rng: random.Random) -> str:
    subject, _ = _subject(rng)
    return f"{subject} {rng.choice(INTRANSITIVE)[1]}{_tail(rng)}"


def cl_present(rng: random.Random) -> str:
    subject, third = _subject(rng)
    verb = rng.choice(VERBS)
    adverb = f"{rng.choice(ADVERBS)} " if rng.random() < 0.3 else ""
    return f"{subject} {adverb}{verb[2] if third else verb[0]} {_object(rng)}{_tail(rng)}"


def cl_progressive(rng: random.Random) -> str:
    subject, third = _subject(rng)
    past = rng.random() < 0.4
    if rng.random() < 0.5:
        return f"{subject} {_be(third, subject, past)} {rng.choice(VERBS)[3]} {_object(rng)}{_tail(rng)}"
    return f"{subject} {_be(third, subject, past)} {rng.choice(INTRANSITIVE)[2]}{_tail(rng)}"


def cl_modal(rng: random.Random) -> str:
    subject, _ = _subject(rng)
    if rng.random() < 0.7:
        return f"{subject} {rng.choice(MODALS)} {rng.choice(VERBS)[0]} {_object(rng)}{_tail(rng)}"
    return f"{subject} {rng.choice(MODALS)} {rng.choice(INTRANSITIVE)[0]}{_tail(rng)}"


def cl_negative(rng: random.Random) -> str:
    subject, third = _subject(rng)
    roll = rng.random()
    if roll < 0.35:
        return f"{subject} did not {rng.choice(VERBS)[0]} {_object(rng)}{_tail(rng)}"
    if roll < 0.55:
        aux = "does" if third else "do"
        return f"{subject} {aux} not {rng.choice(VERBS)[0]} {_object(rng)}"
    if roll < 0.75:
        return f"{subject} {rng.choice(['will', 'can', 'could', 'should'])} not {rng.choice(INTRANSITIVE)[0]}{_tail(rng)}"
    return f"{subject} {_be(third, subject, rng.random() < 0.5)} not {rng.choice(ADJECTIVES)}"


def cl_copula(rng: random.Random) -> str:
    roll = rng.random()
    degree = f"{rng.choice(DEGREE)} " if rng.random() < 0.4 else ""
    if roll < 0.5:
        thing = _noun_phrase(rng, plural_ok=False)
        return f"{thing} {rng.choice(['is', 'was'])} {degree}{rng.choice(ADJECTIVES)}{_tail(rng)}"
    if roll < 0.75:
        subject, third = _subject(rng)
        return f"{subject} {_be(third, subject, rng.random() < 0.5)} {degree}{rng.choice(ADJECTIVES)}"
    return f"it {rng.choice(['is', 'was'])} {degree}{rng.choice(ADJECTIVES)} {rng.choice(['today', 'outside', 'here', 'in the room', 'this morning'])}"


def cl_there(rng: random.Random) -> str:
    if rng.random() < 0.4:
        noun = _noun(rng)
        return f"there {rng.choice(['is', 'was'])} {'an' if noun[0] in 'aeiou' else 'a'} {noun} {rng.choice(PREPOSITIONS_OF_PLACE)} the {_noun(rng)}"
    return f"there {rng.choice(['are', 'were'])} {_number(rng)} {_plural(rng)}{_tail(rng)}"


CLAUSES: dict[str, Callable[[random.Random], str]] = {
    "past": cl_past,
    "intr": cl_intr,
    "present": cl_present,
    "progressive": cl_progressive,
    "modal": cl_modal,
    "negative": cl_negative,
    "copula": cl_copula,
    "there": cl_there,
}
CONJUNCTIONS = [
    "because",
    "but",
    "so",
    "and",
    "or",
    "when",
    "while",
    "although",
    "if",
    "until",
    "after",
    "before",
]
# Conjunctions that may open a sentence ("if it rains we will stay at home").
FRONTING = ["if", "when", "while", "although", "because", "after", "before"]

# --- frames: top-level productions -------------------------------------------------------------------------

Frame = Callable[[random.Random], tuple[str, str]]  # -> (text, structure id)


def f_clause(rng: random.Random) -> tuple[str, str]:
    kind = rng.choice(list(CLAUSES))
    return CLAUSES[kind](rng), f"clause:{kind}"


def f_compound(rng: random.Random) -> tuple[str, str]:
    first, second, conj = rng.choice(list(CLAUSES)), rng.choice(list(CLAUSES)), rng.choice(CONJUNCTIONS)
    return f"{CLAUSES[first](rng)} {conj} {CLAUSES[second](rng)}", f"compound:{first}:{conj}:{second}"


def f_fronted(rng: random.Random) -> tuple[str, str]:
    first, second, conj = rng.choice(list(CLAUSES)), rng.choice(list(CLAUSES)), rng.choice(FRONTING)
    then = " then" if conj == "if" and rng.random() < 0.3 else ""
    return f"{conj} {CLAUSES[first](rng)}{then} {CLAUSES[second](rng)}", f"fronted:{conj}:{first}:{second}"


def _command(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return f"{rng.choice(['go', 'come', 'sit', 'wait', 'stay', 'listen'])} {rng.choice(['here', 'there', 'now', 'outside', 'inside', 'with me', 'at home', 'back'])}"
    return f"{rng.choice(VERBS)[0]} {_object(rng)}"


def f_imperative(rng: random.Random) -> tuple[str, str]:
    roll = rng.random()
    if roll < 0.4:
        return f"{rng.choice(['please ', '', ''])}{_command(rng)}{_tail(rng)}", "imperative:simple"
    if roll < 0.7:
        return f"{_command(rng)} and {_command(rng)}{_tail(rng)}", "imperative:two_verbs_and"
    if roll < 0.85:
        return f"{_command(rng)} then {_command(rng)}", "imperative:two_verbs_then"
    return f"do not {_command(rng)}{_tail(rng)}", "imperative:negative"


def f_imperative_clause(rng: random.Random) -> tuple[str, str]:
    conj, kind = (
        rng.choice(["if", "when", "before", "after", "because", "so", "while"]),
        rng.choice(list(CLAUSES)),
    )
    if rng.random() < 0.5 and conj not in ("because", "so"):
        return f"{conj} {CLAUSES[kind](rng)} {_command(rng)}", f"imperative_clause:fronted:{conj}:{kind}"
    return f"{_command(rng)} {conj} {CLAUSES[kind](rng)}", f"imperative_clause:{conj}:{kind}"


def f_yes_no(rng: random.Random) -> tuple[str, str]:
    subject, third = _subject(rng)
    roll = rng.random()
    if roll < 0.3:
        return f"did {subject} {rng.choice(VERBS)[0]} {_object(rng)}{_tail(rng)}", "yes_no:did"
    if roll < 0.5:
        return f"{'does' if third else 'do'} {subject} {rng.choice(VERBS)[0]} {_object(rng)}", "yes_no:do"
    if roll < 0.75:
        return (
            f"{rng.choice(['can', 'could', 'will', 'would', 'should'])} {subject} "
            f"{rng.choice(VERBS)[0]} {_object(rng)}{_tail(rng)}"
        ), "yes_no:modal"
    be = {"am": "am", "is": "is", "are": "are", "was": "was", "were": "were"}[
        _be(third, subject, rng.random() < 0.4)
    ]
    if rng.random() < 0.5:
        return f"{be} {subject} {rng.choice(ADJECTIVES)}", "yes_no:be"
    return f"{be} {subject} {rng.choice(VERBS)[3]} {_object(rng)}", "yes_no:be_progressive"


def f_wh(rng: random.Random) -> tuple[str, str]:
    subject, third = _subject(rng)
    roll = rng.random()
    if roll < 0.25:
        wh = rng.choice(["what", "where", "when", "why", "how", "who"])
        return f"{wh} did {subject} {rng.choice(VERBS)[0]}{_tail(rng)}", "wh:did"
    if roll < 0.4:
        wh = rng.choice(["where", "when", "why", "how"])
        return (
            f"{wh} {rng.choice(['can', 'will', 'should', 'could'])} {subject} {rng.choice(VERBS)[0]} {_object(rng)}",
            "wh:modal",
        )
    if roll < 0.55:
        wh = rng.choice(["where", "why", "how", "what", "when"])
        return f"{wh} {_be(third, subject, rng.random() < 0.4)} {subject}{_tail(rng)}", "wh:be"
    if roll < 0.7:
        return f"how many {_plural(rng)} {rng.choice(['are', 'were'])} there{_tail(rng)}", "wh:how_many"
    if roll < 0.8:
        return f"who {rng.choice(VERBS)[1]} {_object(rng)}", "wh:who_subject"
    if roll < 0.9:
        return f"which {_noun(rng)} {rng.choice(['is', 'was'])} {rng.choice(ADJECTIVES)}", "wh:which"
    return rng.choice(
        [
            "what time is it",
            "what day is it today",
            "what is your name",
            "how are you",
            "where are you",
            "what is the date today",
            f"how much is the {_noun(rng)}",
            f"when is the {rng.choice(['meeting', 'party', 'lesson', 'train', 'bus'])}",
        ]
    ), "wh:fixed"


def _list(rng: random.Random, maker: Callable[[random.Random], str]) -> str:
    items = [maker(rng) for _ in range(rng.randint(2, 4))]
    conj = rng.choice(["and", "and", "or"])
    return " ".join(items[:-1]) + f" {conj} {items[-1]}"


def f_list(rng: random.Random) -> tuple[str, str]:
    roll = rng.random()
    if roll < 0.35:
        subject, _ = _subject(rng)
        return f"{subject} {rng.choice(VERBS)[1]} {_list(rng, _noun_phrase)}", "list:object"
    if roll < 0.6:
        return (
            f"{rng.choice(['please ', ''])}{rng.choice(['buy', 'bring', 'get', 'take', 'find'])} {_list(rng, _noun_phrase)}",
            "list:command",
        )
    if roll < 0.8:
        return (
            f"{_list(rng, lambda r: r.choice(NAMES))} {rng.choice(INTRANSITIVE)[1]}{_tail(rng)}",
            "list:subject",
        )
    return f"do you want {_list(rng, lambda r: r.choice(MASS_NOUNS))}", "list:question"


def f_numbers(rng: random.Random) -> tuple[str, str]:
    roll = rng.random()
    digits = " ".join(rng.choice(UNITS[:10]) for _ in range(rng.randint(3, 8)))
    if roll < 0.25:
        return (
            f"{rng.choice(['my', 'the', 'your', 'her'])} {rng.choice(['number', 'phone number', 'room', 'ticket number'])} is {digits}",
            "numbers:digits",
        )
    if roll < 0.4:
        return digits, "numbers:bare_run"
    if roll < 0.6:
        return (
            f"{rng.choice(['it costs', 'that is', 'we need', 'i have', 'she paid'])} {_number(rng)} {rng.choice(['dollars', 'minutes', 'hours', 'days', 'people', _plural(rng)])}",
            "numbers:amount",
        )
    if roll < 0.75:
        a, b = rng.randint(1, 50), rng.randint(1, 50)
        op, value = rng.choice([("plus", a + b), ("minus", abs(a - b))])
        return (
            f"{cardinal(max(a, b) if op == 'minus' else a)} {op} {cardinal(min(a, b) if op == 'minus' else b)} is {cardinal(value)}",
            "numbers:sum",
        )
    if roll < 0.88:
        start = rng.randint(1, 90)
        return " ".join(cardinal(start + i) for i in range(rng.randint(3, 6))), "numbers:count"
    return (
        f"count from {cardinal(rng.randint(1, 10))} to {cardinal(rng.randint(11, 100))}",
        "numbers:count_from",
    )


def f_date_time(rng: random.Random) -> tuple[str, str]:
    roll = rng.random()
    if roll < 0.25:
        return (
            f"the {rng.choice(['meeting', 'party', 'lesson', 'class', 'game'])} is {_date(rng)}",
            "date:event",
        )
    if roll < 0.4:
        return f"my birthday is {_date(rng)}", "date:birthday"
    if roll < 0.55:
        return f"it is {_clock(rng)}", "time:it_is"
    if roll < 0.75:
        return (
            f"the {rng.choice(['train', 'bus', 'plane', 'boat', 'film', 'shop'])} "
            f"{rng.choice(['leaves', 'arrives', 'opens', 'closes', 'starts'])} at {_clock(rng)}"
        ), "time:schedule"
    if roll < 0.88:
        return f"see you {_when(rng)}", "time:see_you"
    return (
        f"today is {rng.choice(DAYS)} the {ordinal(rng.randint(1, 31))} of {rng.choice(MONTHS)}",
        "date:today",
    )


def f_social(rng: random.Random) -> tuple[str, str]:
    roll = rng.random()
    if roll < 0.3:
        return (
            f"{rng.choice(['hello', 'hi', 'good morning', 'good evening'])} {rng.choice(NAMES)} {rng.choice(['how are you', 'nice to see you', 'welcome home', 'come in'])}",
            "social:greeting",
        )
    if roll < 0.55:
        return f"{rng.choice(['thank you', 'thanks'])} for {_noun_phrase(rng)}", "social:thanks"
    if roll < 0.75:
        return (
            f"sorry {rng.choice(['i am late', 'i forgot', 'we are busy', 'i can not come', 'about the ' + _noun(rng)])}",
            "social:sorry",
        )
    return (
        f"{rng.choice(['yes', 'no', 'okay'])} {rng.choice(['please', 'thank you', 'that is fine', 'let us go', rng.choice(NAMES)])}",
        "social:short",
    )


def f_random_words(rng: random.Random) -> tuple[str, str]:
    """Training only: random strings of vocabulary words, so every word is heard outside any frame."""
    return " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(3, 10))), "random_words"


FRAMES: dict[str, tuple[float, Frame]] = {
    "clause": (0.18, f_clause),
    "compound": (0.16, f_compound),
    "fronted": (0.07, f_fronted),
    "imperative": (0.1, f_imperative),
    "imperative_clause": (0.05, f_imperative_clause),
    "yes_no": (0.09, f_yes_no),
    "wh": (0.08, f_wh),
    "list": (0.06, f_list),
    "numbers": (0.07, f_numbers),
    "date_time": (0.06, f_date_time),
    "social": (0.03, f_social),
    "random_words": (0.05, f_random_words),
}


def f_arithmetic(rng: random.Random) -> tuple[str, str]:
    """Grammar 2, training only: "plus" and "minus" outside the held-out sums ("A plus B is C"), which were
    grammar 1's only production of the two words (so training heard them only inside random word strings)."""
    a, b = rng.randint(1, 50), rng.randint(1, 50)
    op = rng.choice(["plus", "minus"])
    roll = rng.random()
    if roll < 0.45:
        first, second = (max(a, b), min(a, b)) if op == "minus" else (a, b)
        return (
            f"{rng.choice(['what is', 'how much is'])} {cardinal(first)} {op} {cardinal(second)}",
            "arithmetic:what_is",
        )
    if roll < 0.7:
        return (
            f"it {rng.choice(['is', 'was'])} minus {cardinal(rng.randint(1, 30))} "
            f"{rng.choice(['outside', 'today', 'tonight', 'this morning', 'in the city', 'at home'])}"
        ), "arithmetic:minus_temperature"
    return (
        f"{rng.choice(['it costs', 'that is', 'we need', 'i have', 'she paid'])} {cardinal(a)} dollars plus "
        f"{cardinal(b)} {rng.choice(['dollars', 'minutes', 'hours', 'days', 'people'])}"
    ), "arithmetic:amount_plus"


# Grammar revisions: 1 made the data4 corpus (and stays the default, so data4 is reproducible); 2 adds the
# training-only arithmetic frame. Held-out splits are always drawn from revision 1 (make_data.py).
GRAMMARS: dict[int, dict[str, tuple[float, Frame]]] = {
    1: FRAMES,
    2: {**FRAMES, "arithmetic": (0.04, f_arithmetic)},
}

# Structures never produced for training. Each is a new *shape* made of parts the model hears elsewhere:
# whole productions (a two-verb command with "then", a bare run of digits, a progressive yes/no question,
# "today is DAY the ORD of MONTH") and compound/fronted sentences whose clause-kind/conjunction combination
# never occurs in training (every one of their clause kinds and conjunctions does).
TEST_STRUCTURES: frozenset[str] = frozenset(
    {
        "imperative:two_verbs_then",
        "numbers:bare_run",
        "yes_no:be_progressive",
        "date:today",
        "wh:modal",
        "list:question",
        "numbers:sum",
        "imperative_clause:fronted:if:present",
        *(
            f"compound:{a}:{conj}:{b}"
            for a, conj, b in [
                ("negative", "because", "copula"),
                ("copula", "so", "modal"),
                ("present", "but", "negative"),
                ("past", "although", "there"),
                ("modal", "if", "present"),
                ("progressive", "when", "past"),
                ("there", "so", "modal"),
                ("intr", "while", "progressive"),
                ("negative", "but", "past"),
                ("past", "because", "negative"),
                ("copula", "because", "negative"),
                ("modal", "because", "copula"),
            ]
        ),
        *(
            f"fronted:{conj}:{a}:{b}"
            for conj, a, b in [
                ("although", "negative", "past"),
                ("if", "present", "modal"),
                ("because", "copula", "negative"),
                ("when", "intr", "progressive"),
                ("while", "past", "there"),
                ("if", "negative", "modal"),
            ]
        ),
    }
)


def make_sentence(rng: random.Random, include_random: bool = True, grammar: int = 1) -> tuple[str, str]:
    """One sentence and its structure id."""
    frames = GRAMMARS[grammar]
    names = [n for n in frames if include_random or n != "random_words"]
    name = rng.choices(names, weights=[frames[n][0] for n in names])[0]
    text, structure = frames[name][1](rng)
    return " ".join(text.split()), structure


def make_sentences(
    seed: int, count: int, exclude: set[str] | None = None, held_out: bool = False, grammar: int = 1
) -> list[tuple[str, str]]:
    """`count` distinct (text, structure id) pairs not in `exclude`, reproducible from `seed`: from the
    training structures, or (held_out=True) only from TEST_STRUCTURES; `grammar` picks the revision
    (GRAMMARS)."""
    rng = random.Random(seed)
    seen = set(exclude or ())
    out: list[tuple[str, str]] = []
    tries = 0
    while len(out) < count:
        tries += 1
        if tries > 1000 * count + 100_000:
            raise RuntimeError("the grammar cannot produce enough distinct sentences")
        text, structure = make_sentence(rng, include_random=not held_out, grammar=grammar)
        if (structure in TEST_STRUCTURES) != held_out or text in seen:
            continue
        seen.add(text)
        out.append((text, structure))
    return out


def _collect_vocabulary() -> tuple[str, ...]:
    words = set(COUNT_NOUNS) | set(MASS_NOUNS) | {plural(n) for n in PLURAL_NOUNS} | set(ADJECTIVES)
    words |= {w for verb in VERBS for w in verb} | {w for verb in INTRANSITIVE for w in verb}
    words |= set(NAMES) | set(PRONOUNS) | set(OBJECT_PRONOUNS.values()) | set(POSSESSIVES) | set(MODALS)
    words |= set(ADVERBS) | set(DEGREE) | set(_cardinal_words()) | set(ORDINALS) | set(TENS_ORDINALS.values())
    words |= set(DAYS) | set(MONTHS) | set(FUNCTION) | {w for p in PREPOSITIONS_OF_PLACE for w in p.split()}
    words |= {
        "dollars",
        "good",
        "nice",
        "see",
        "welcome",
        "fine",
        "go",
        "date",
        "outside",
        "inside",
        "near",
        "behind",
        "next",
        "can",
        "phone",
        "quite",
        "afternoon",
        "by",
        "foot",
        "number",
        "costs",
        "leaves",
        "arrives",
        "opens",
        "closes",
        "starts",
        "paid",
        "minutes",
        "hours",
        "days",
        "people",
        "hundred",
    }
    return tuple(sorted(words))


VOCABULARY = _collect_vocabulary()
