"""Whisper on CTranslate2 (the folders faster-whisper uses): numpy log-mel frontend, ``ctranslate2.models.Whisper``
for encoding and greedy/beam decoding, language detection, translate task, initial prompt, word timestamps from
CTranslate2's cross-attention alignment, long files in 30 s windows."""
