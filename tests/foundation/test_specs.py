"""model_specs/*.json follow the documented schema; options validate, coerce and canonicalise."""

from __future__ import annotations

import copy
import json

import pytest

from inference.errors import ModelError, UsageError
from inference.models.spec import load_all_specs, load_family_spec, parse_family_spec
from inference.paths import model_specs_dir


def test_every_family_spec_loads() -> None:
    specs = load_all_specs()
    assert set(specs) == {"parakeet_tdt", "confucius4_r2t2"}
    for spec in specs.values():
        assert spec.packages, spec.family
        assert sum(p.default for p in spec.packages) == 1, "exactly one default package per family"
        for option in [*spec.session_options.values(), *spec.request_options.values()]:
            assert option.description, option.name


def test_parakeet_defaults_match_the_spec() -> None:
    spec = load_family_spec("parakeet_tdt")
    session = spec.defaults("session")
    assert session["offline_mode"] == "full_context"
    assert session["audio_chunk_duration_sec"] == 2.0
    assert session["left_context_sec"] == 10.0 and session["right_context_sec"] == 2.0
    assert session["audio_chunk_threshold_sec"] == 30.0
    assert spec.defaults("request")["audio_chunk_mode"] == "auto"
    assert spec.request_options["hotwords_score"].default == 2.0


def test_r2t2_defaults_match_the_spec() -> None:
    spec = load_family_spec("confucius4_r2t2")
    session = spec.defaults("session")
    assert (session["chunk_size_ms"], session["unfixed_chunk_num"], session["unfixed_token_num"]) == (320.0, 2, 5)
    assert session["max_tokens"] == 32 and session["max_segment_seconds"] == 20.0
    assert session["vad_threshold"] == 0.4


def test_aliases_and_prefixes_canonicalise() -> None:
    spec = load_family_spec("parakeet_tdt")
    out = spec.validate_session_options(
        {"matmul_weight_type": "q8_0", "parakeet_tdt.full_context_max_duration_sec": "45", "left_context_sec": "0"}
    )
    assert out == {"weight_type": "q8_0", "audio_chunk_threshold_sec": 45.0, "left_context_sec": 0.0}
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
        spec.validate_session_options({"weight_type": "f16", "matmul_weight_type": "f32"})


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
        (lambda d: d["session_options"]["left_context_sec"].update(default=-1.0), "default of 'left_context_sec'"),
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
