"""The whisper_ct2 catalog entries: CTranslate2 folders, installed as one folder each."""

from __future__ import annotations

from inference.models.spec import load_family_spec
from inference.models.store_layout import default_model_path, file_target


def test_the_catalog_lists_small_medium_and_turbo_with_small_as_default() -> None:
    spec = load_family_spec("whisper_ct2")
    packages = {p.id: p for p in spec.packages}
    assert set(packages) == {"whisper_ct2_small", "whisper_ct2_medium", "whisper_ct2_large_v3_turbo"}
    assert [p.id for p in spec.packages if p.default] == ["whisper_ct2_small"]
    for package in spec.packages:
        assert package.format == "ctranslate2" and package.license == "MIT"
        names = {f.path for f in package.files}
        assert {"config.json", "model.bin", "tokenizer.json"} <= names
        assert names & {"vocabulary.json", "vocabulary.txt"}
        targets = [file_target(package, f) for f in package.files]
        model_path = default_model_path(package, targets)
        assert all(t.startswith(model_path + "/") for t in targets)
