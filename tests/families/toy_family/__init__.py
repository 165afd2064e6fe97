"""A model family that lives outside ``inference/``: tone-alphabet speech (one pure tone per letter, silence
between words), decoded by a trivial deterministic model whose codebook is in ``model/``.

Nothing outside this folder names it: ``CAPTIONEER_FAMILY_PATH`` pointing here is all Captioneer needs to
detect, load, list, install and stream it (tests/families/test_toy_family.py shows each)."""
