"""Language names for the forced-language prompt and their resolution (docs/families/confucius4_r2t2.md §1, §4)."""

from __future__ import annotations

from collections.abc import Sequence

from inference.errors import UsageError

AUTO = "Auto"

# Used when config.json has no ``support_languages`` list.
BUILTIN_LANGUAGES: tuple[str, ...] = (
    "Chinese",
    "English",
    "Cantonese",
    "Arabic",
    "German",
    "French",
    "Spanish",
    "Portuguese",
    "Indonesian",
    "Italian",
    "Korean",
    "Russian",
    "Thai",
    "Vietnamese",
    "Japanese",
    "Turkish",
    "Hindi",
    "Malay",
    "Dutch",
    "Swedish",
    "Danish",
    "Finnish",
    "Polish",
    "Czech",
    "Filipino",
    "Persian",
    "Greek",
    "Romanian",
    "Hungarian",
    "Macedonian",
)

ISO_TO_NAME: dict[str, str] = {
    "zh": "Chinese",
    "en": "English",
    "yue": "Cantonese",
    "ar": "Arabic",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "pt": "Portuguese",
    "id": "Indonesian",
    "it": "Italian",
    "ko": "Korean",
    "ru": "Russian",
    "th": "Thai",
    "vi": "Vietnamese",
    "ja": "Japanese",
    "tr": "Turkish",
    "hi": "Hindi",
    "ms": "Malay",
    "nl": "Dutch",
    "sv": "Swedish",
    "da": "Danish",
    "fi": "Finnish",
    "pl": "Polish",
    "cs": "Czech",
    "fil": "Filipino",
    "fa": "Persian",
    "el": "Greek",
    "hu": "Hungarian",
    "mk": "Macedonian",
    "ro": "Romanian",
}


def normalize_language_name(name: str) -> str:
    """First letter upper-case, the remaining ASCII letters lower-case (non-ASCII characters are kept)."""
    if not name:
        return name
    rest = "".join(ch.lower() if "A" <= ch <= "Z" else ch for ch in name[1:])
    return name[0].upper() + rest


def supported_languages(config_languages: Sequence[str] | None) -> tuple[str, ...]:
    """``Auto`` plus the checkpoint's list, or the built-in 30 when the config has none."""
    names = tuple(config_languages) if config_languages else BUILTIN_LANGUAGES
    return (AUTO, *names)


def resolve_language(value: str | None, supported: Sequence[str]) -> str:
    """Map a request's language (ISO code, name, ``Auto``/``none``/empty) to a prompt name; "" means automatic.

    ``supported`` is the output of :func:`supported_languages`.
    """
    text = (value or "").strip()
    lowered = text.lower()
    if lowered in ("", "auto", "none"):
        return ""
    name = ISO_TO_NAME.get(lowered) or normalize_language_name(text)
    if name not in supported or name == AUTO:
        choices = ", ".join(n for n in supported if n != AUTO)
        raise UsageError(
            f"language {value!r} ({name}) is not supported by this model",
            f"use Auto or one of: {choices} (ISO codes such as en, zh also work)",
        )
    return name
