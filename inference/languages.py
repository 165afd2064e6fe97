"""Languages by ISO 639 code or English name: ``--language German`` and ``--language de`` name the same language.

The names are the ISO 639 English names of the codes the model families list (``languages`` in model_specs/),
plus a few common alternative names; the lookup ignores case and surrounding spaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

from inference.errors import UsageError

NAMES = MappingProxyType(
    {
        "af": "afrikaans", "am": "amharic", "ar": "arabic", "as": "assamese", "az": "azerbaijani",
        "ba": "bashkir", "be": "belarusian", "bg": "bulgarian", "bn": "bengali", "bo": "tibetan",
        "br": "breton", "bs": "bosnian", "ca": "catalan", "cs": "czech", "cy": "welsh", "da": "danish",
        "de": "german", "el": "greek", "en": "english", "es": "spanish", "et": "estonian", "eu": "basque",
        "fa": "persian", "fi": "finnish", "fil": "filipino", "fo": "faroese", "fr": "french",
        "gl": "galician", "gu": "gujarati", "ha": "hausa", "haw": "hawaiian", "he": "hebrew", "hi": "hindi",
        "hr": "croatian", "ht": "haitian creole", "hu": "hungarian", "hy": "armenian", "id": "indonesian",
        "is": "icelandic", "it": "italian", "ja": "japanese", "jw": "javanese", "ka": "georgian",
        "kk": "kazakh", "km": "khmer", "kn": "kannada", "ko": "korean", "la": "latin", "lb": "luxembourgish",
        "ln": "lingala", "lo": "lao", "lt": "lithuanian", "lv": "latvian", "mg": "malagasy", "mi": "maori",
        "mk": "macedonian", "ml": "malayalam", "mn": "mongolian", "mr": "marathi", "ms": "malay",
        "mt": "maltese", "my": "burmese", "ne": "nepali", "nl": "dutch", "nn": "norwegian nynorsk",
        "no": "norwegian", "oc": "occitan", "pa": "punjabi", "pl": "polish", "ps": "pashto",
        "pt": "portuguese", "ro": "romanian", "ru": "russian", "sa": "sanskrit", "sd": "sindhi",
        "si": "sinhala", "sk": "slovak", "sl": "slovenian", "sn": "shona", "so": "somali", "sq": "albanian",
        "sr": "serbian", "su": "sundanese", "sv": "swedish", "sw": "swahili", "ta": "tamil", "te": "telugu",
        "tg": "tajik", "th": "thai", "tk": "turkmen", "tl": "tagalog", "tr": "turkish", "tt": "tatar",
        "uk": "ukrainian", "ur": "urdu", "uz": "uzbek", "vi": "vietnamese", "yi": "yiddish", "yo": "yoruba",
        "yue": "cantonese", "zh": "chinese",
    }
)  # fmt: skip
ALTERNATIVE_NAMES = MappingProxyType(
    {
        "castilian": "es", "flemish": "nl", "haitian": "ht", "mandarin": "zh", "moldavian": "ro",
        "moldovan": "ro", "myanmar": "my", "panjabi": "pa", "pushto": "ps", "sinhalese": "si",
        "valencian": "ca", "letzeburgesch": "lb", "farsi": "fa", "bokmal": "no",
    }
)  # fmt: skip


def language_code(value: str, known: Sequence[str], who: str = "this model") -> str:
    """The code among ``known`` that ``value`` names, as a code or an English name (any case); else a
    UsageError saying that ``who`` does not know it."""
    wanted = value.strip().lower()
    code = wanted if wanted in known else ALTERNATIVE_NAMES.get(wanted)
    if code is None:
        code = next((c for c in known if NAMES.get(c) == wanted), None)
    if code is None or code not in known:
        raise UsageError(
            f"{who} does not know the language {value!r}",
            f"give an ISO code or English name: {', '.join(f'{c} ({NAMES[c]})' if c in NAMES else c for c in known)}",
        )
    return code
