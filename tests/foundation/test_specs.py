"""model_specs/*.json follow the documented schema; options validate, coerce and canonicalise."""

from __future__ import annotations

import copy
import json
import re

import pytest

from inference.errors import ModelError, UsageError
from inference.models.spec import (
    OPTION_TYPES,
    FamilySpec,
    load_all_specs,
    load_family_spec,
    parse_family_spec,
)
from inference.paths import model_specs_dir

FAMILIES = sorted(p.stem for p in model_specs_dir().glob("*.json"))


def option_problems(spec: FamilySpec) -> list[str]:
    """What makes a spec's options unusable or undocumented (the parser checks types and defaults only)."""
    problems = []
    for kind, options in (("session", spec.session_options), ("request", spec.request_options)):
        names: dict[str, str] = {}
        for option in options.values():
            where = f"{spec.family} {kind} option {option.name!r}"
            if option.type not in OPTION_TYPES:
                problems.append(f"{where}: type {option.type!r}")
            if not option.description.strip():
                problems.append(f"{where}: no description")
            if option.type == "enum" and (
                not option.choices or len(set(option.choices)) != len(option.choices)
            ):
                problems.append(f"{where}: choices {option.choices!r}")
            if option.choices and option.type != "enum":
                problems.append(f"{where}: choices on a {option.type} option")
            if option.default is None and not option.nullable:
                problems.append(f"{where}: a null default on an option that refuses null")
            else:
                canonical = option.coerce(option.default)  # raises for a default outside the option's range
                if type(canonical) is not type(option.default) or canonical != option.default:
                    problems.append(f"{where}: default {option.default!r} is not in canonical form")
            for name in (option.name, *option.aliases):
                if name in names:
                    problems.append(f"{where}: {name!r} already names option {names[name]!r}")
                names[name] = option.name
    return problems


def test_every_spec_file_loads_as_its_family() -> None:
    specs = load_all_specs()
    assert FAMILIES and sorted(specs) == FAMILIES
    for stem, spec in specs.items():
        assert spec.family == stem and spec.name and spec.languages, stem


def test_options_have_a_type_a_description_and_valid_canonical_defaults() -> None:
    for spec in load_all_specs().values():
        assert option_problems(spec) == []


def test_the_option_check_catches_a_broken_spec() -> None:
    data = _raw("parakeet_tdt")
    data["session_options"]["left_context_sec"]["description"] = " "
    data["session_options"]["right_context_sec"]["aliases"] = ["left_context_sec"]
    data["request_options"]["hotwords"]["nullable"] = False
    data["request_options"]["hotwords_score"]["default"] = 2  # an int where the option canonicalises to 2.0
    problems = option_problems(parse_family_spec(data))
    assert len(problems) == 4, problems
    assert any("'left_context_sec': no description" in p for p in problems)
    assert any("'right_context_sec': 'left_context_sec' already names option" in p for p in problems)
    assert any("'hotwords': a null default" in p for p in problems)
    assert any("'hotwords_score': default 2 is not in canonical form" in p for p in problems)


@pytest.mark.parametrize("family", FAMILIES)
def test_defaults_pass_validation_unchanged(family: str) -> None:
    spec = load_family_spec(family)
    for kind, validate in (
        ("session", spec.validate_session_options),
        ("request", spec.validate_request_options),
    ):
        defaults = {name: value for name, value in spec.defaults(kind).items() if value is not None}
        assert validate(defaults) == defaults
        as_text = {name: str(v).lower() if isinstance(v, bool) else str(v) for name, v in defaults.items()}
        assert validate(as_text) == defaults, (
            "the command line's text of each default reads back as the default"
        )


@pytest.mark.parametrize("family", FAMILIES)
def test_an_unknown_option_is_refused_naming_the_known_ones(family: str) -> None:
    spec = load_family_spec(family)
    kinds = [
        ("session", spec.validate_session_options, spec.session_options),
        ("request", spec.validate_request_options, spec.request_options),
    ]
    for kind, validate, options in kinds:
        with pytest.raises(UsageError) as err:
            validate({"no_such_option": "1"})
        assert f"unknown {kind} option 'no_such_option' for {family}" in err.value.message
        assert all(name in (err.value.fix or "") for name in options)


def test_packages_have_one_default_and_well_formed_files() -> None:
    for spec in load_all_specs().values():
        assert sum(p.default for p in spec.packages) == 1, f"{spec.family}: exactly one default package"
        for package in spec.packages:
            assert package.format == "bundled" or package.files, package.id
            for file in package.files:
                assert file.sha256 is None or re.fullmatch("[0-9a-f]{64}", file.sha256), (
                    package.id,
                    file.path,
                )


def test_aliases_and_prefixes_canonicalise() -> None:
    spec = load_family_spec("parakeet_tdt")
    out = spec.validate_session_options(
        {
            "center_sec": "3",
            "parakeet_tdt.full_context_max_duration_sec": "45",
            "left_context_sec": "0",
        }
    )
    assert out == {
        "audio_chunk_duration_sec": 3.0,
        "audio_chunk_threshold_sec": 45.0,
        "left_context_sec": 0.0,
    }
    req = spec.validate_request_options({"hotword_lambda": "3.5", "keep_language_tags": "yes"})
    assert req == {"hotwords_score": 3.5, "keep_language_tags": True}


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"offline_mode": "sometimes"}, "one of full_context, long_form, auto"),
        ({"audio_chunk_duration_sec": "0"}, "[0.001, inf]"),
        ({"audio_chunk_duration_sec": "nan"}, "audio_chunk_duration_sec"),
        ({"weight_type": "q4_0"}, "native, f32, f16, bf16, q8_0"),
        ({"weight_context_mb": "1.5"}, "an integer"),
        ({"streaming_attention_mode": "chunked"}, "full_context"),
    ],
)
def test_invalid_session_values(options: dict[str, str], needle: str) -> None:
    spec = load_family_spec("parakeet_tdt")
    with pytest.raises(UsageError) as err:
        spec.validate_session_options(options)
    assert needle in str(err.value)


def test_exclusive_bounds() -> None:
    spec = load_family_spec("confucius4_r2t2")
    with pytest.raises(UsageError):
        spec.validate_session_options({"vad_threshold": "1"})
    with pytest.raises(UsageError):
        spec.validate_session_options({"max_segment_seconds": "0"})
    assert spec.validate_session_options({"max_segment_seconds": "110"}) == {"max_segment_seconds": 110.0}
    with pytest.raises(UsageError):
        spec.validate_session_options({"max_segment_seconds": "110.5"})


def test_alias_and_canonical_together_rejected() -> None:
    spec = load_family_spec("parakeet_tdt")
    with pytest.raises(UsageError, match="given twice"):
        spec.validate_session_options({"audio_chunk_duration_sec": "2", "center_sec": "3"})


def test_hotwords_size_limit() -> None:
    spec = load_family_spec("parakeet_tdt")
    with pytest.raises(UsageError, match="16384 bytes"):
        spec.validate_request_options({"hotwords": "x" * 16385})
    assert spec.validate_request_options({"hotwords": "x" * 16384})["hotwords"] == "x" * 16384


def _raw(family: str) -> dict:
    return json.loads((model_specs_dir() / f"{family}.json").read_text())


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.update(schema_version=2), "schema_version"),
        (lambda d: d["session_options"]["offline_mode"].update(type="list"), "invalid type"),
        (lambda d: d["session_options"]["offline_mode"].update(default="never"), "include its default"),
        (
            lambda d: d["session_options"]["left_context_sec"].update(default=-1.0),
            "default of 'left_context_sec'",
        ),
        (lambda d: d["packages"].append(copy.deepcopy(d["packages"][0])), "duplicate id"),
        (lambda d: d["packages"][0].update(format="zip"), "unknown format"),
        (lambda d: d.pop("packages"), "missing key 'packages'"),
    ],
)
def test_schema_violations_are_reported(mutate, needle: str) -> None:
    data = _raw("parakeet_tdt")
    mutate(data)
    with pytest.raises(ModelError) as err:
        parse_family_spec(data)
    assert needle in str(err.value)
