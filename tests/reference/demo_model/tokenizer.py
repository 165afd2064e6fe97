"""SentencePiece-style BPE `tokenizer.json` in the layout of the real Parakeet HF repos (docs/reference_parity.md §1.6).

<unk> = 0, <pad> = 1, then the learned pieces (▁ word marker, Metaspace prepend_scheme "always"),
and <blank> appended last as a special added token. No byte fallback: the corpus is lower-case ASCII.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers


def train_tokenizer(texts: list[str], vocab_size: int, path: Path) -> None:
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Strip(left=False, right=True), normalizers.Replace(Regex(" {2,}"), "▁")]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - 1, special_tokens=["<unk>", "<pad>"], show_progress=False
    )
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.add_special_tokens([AddedToken("<blank>", normalized=False, special=True)])
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))


def build_processor(tokenizer_path: Path):
    from transformers import ParakeetFeatureExtractor, ParakeetProcessor
    from transformers.models.parakeet.tokenization_parakeet import ParakeetTokenizer

    tokenizer = ParakeetTokenizer(
        tokenizer_object=Tokenizer.from_file(str(tokenizer_path)), unk_token="<unk>", pad_token="<pad>"
    )
    return ParakeetProcessor(
        ParakeetFeatureExtractor(feature_size=128), tokenizer, blank_token="<blank>", decoder_type="tdt"
    )
