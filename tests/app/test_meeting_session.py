"""Meeting mode's session model, export and journal (Qt-free): two streams numbering their segments from 0 kept
apart and labelled "You"/"Others", interleaved by when their speech started; exports and the autosave journal
carry the labels; a journal from before meeting mode still loads."""

from __future__ import annotations

import json
from pathlib import Path

from app.live.export import export_session
from app.live.journal import SessionJournal, read_session
from app.live.overlay_text import FadeMark, split_at_mark
from app.live.paragraphs import paragraph_lead, starts_paragraph
from app.live.session import SessionChange, SessionModel
from app.live.speakers import OTHERS, YOU, SpeakerEvent, merge_finals
from inference.contract import Delta, Done, Segment, Snapshot, SpeechEnd, StreamEvent, Transcript


def said(speaker: str, segment_id: int, text: str, start: float, end: float) -> list[SpeakerEvent]:
    return [
        SpeakerEvent(speaker, Delta(text, segment_id, start, end)),
        SpeakerEvent(speaker, SpeechEnd(segment_id, start, end, text.strip())),
    ]


def conversation() -> list[StreamEvent | SpeakerEvent]:
    """Others speak from 0.5 s; you answer at 3 s; your next words (5.0 s) are committed before theirs that
    started at 4.2 s (their segment was longer)."""
    return [
        *said(OTHERS, 0, "emma closed the bottle", 0.5, 2.5),
        *said(YOU, 0, "there are twenty hearts", 3.0, 4.0),
        *said(YOU, 1, " in the garden", 5.0, 5.8),
        *said(OTHERS, 1, " and sang", 4.2, 6.5),
    ]


def test_two_streams_are_kept_apart_labelled_and_ordered_by_their_start() -> None:
    session = SessionModel()
    changes: list[SessionChange] = []
    session.subscribe(changes.append)
    session.apply(conversation())
    assert [(s.speaker, s.text.strip()) for s in session.segments] == [
        (OTHERS, "emma closed the bottle"),
        (YOU, "there are twenty hearts"),
        (OTHERS, "and sang"),
        (YOU, "in the garden"),
    ]
    assert len({s.segment_id for s in session.segments}) == 4  # both streams' segment 0 and 1, apart
    assert any(change.rewritten for change in changes)  # "and sang" went before "in the garden": redraw
    assert session.labelled_text == (
        "Others: emma closed the bottle\nYou: there are twenty hearts\nOthers: and sang\nYou: in the garden"
    )


def test_provisional_text_says_whose_it_is() -> None:
    session = SessionModel()
    session.apply(said(OTHERS, 0, "emma closed", 0.5, 1.5))
    session.apply([SpeakerEvent(YOU, Snapshot("there are", 0, 2.0, 2.5))])
    assert session.provisional_text == "You: there are"
    session.apply([SpeakerEvent(OTHERS, Snapshot("the bottle", 1, 2.1, 2.6))])
    assert session.provisional_text == "You: there are Others: the bottle"
    session.apply(
        [SpeakerEvent(YOU, Delta("there are", 0, 2.0, 2.5))]
    )  # your snapshot committed, theirs stays
    assert session.provisional_text == "Others: the bottle"


def test_each_speaker_s_final_tail_is_adopted_and_the_merged_transcript_ends_the_meeting() -> None:
    session = SessionModel()
    session.apply(said(YOU, 0, "there are twenty", 1.0, 2.0))
    your_final = Transcript(
        "there are twenty hearts", segments=[Segment("there are twenty hearts", 1.0, 2.4)]
    )
    their_final = Transcript("emma sang", segments=[Segment("emma sang", 0.2, 0.9)])
    session.apply([SpeakerEvent(YOU, Done(your_final)), SpeakerEvent(OTHERS, Done(their_final))])
    assert session.labelled_text == "Others: emma sang\nYou: there are twenty hearts"
    merged = merge_finals({YOU: your_final, OTHERS: their_final})
    assert merged.text == "Others: emma sang\nYou: there are twenty hearts"
    session.apply([Done(merged)])
    assert session.final is merged
    assert session.labelled_text == "Others: emma sang\nYou: there are twenty hearts"  # nothing twice


def test_exports_carry_the_labels(tmp_path: Path) -> None:
    session = SessionModel()
    session.apply(conversation())
    text = export_session(session, tmp_path / "m.txt").read_text()
    assert text.splitlines()[:2] == ["Others: emma closed the bottle", "You: there are twenty hearts"]
    srt = export_session(session, tmp_path / "m.srt").read_text()
    assert "00:00:00,500 --> 00:00:02,500\nOthers: emma closed the bottle" in srt
    assert "You: there are twenty hearts" in srt
    vtt = export_session(session, tmp_path / "m.vtt").read_text()
    assert "<v You>there are twenty hearts</v>" in vtt and "<v Others>and sang</v>" in vtt
    data = json.loads(export_session(session, tmp_path / "m.json").read_text())
    assert [(s["speaker"], s["text"]) for s in data["segments"]][:2] == [
        (OTHERS, "emma closed the bottle"),
        (YOU, "there are twenty hearts"),
    ]
    assert Transcript.from_json(data).segments[0].speaker == OTHERS


def test_the_journal_keeps_the_labels_and_reads_back_the_same_meeting(tmp_path: Path) -> None:
    live = SessionModel()
    journal = SessionJournal(tmp_path, "Demo", "Microphone + What this computer plays", sync=lambda _fd: None)
    events = conversation()
    live.apply(events)
    journal.record(events)
    journal.record_final_tail(2, "twice", YOU)
    journal.close()
    lines = [json.loads(line) for line in journal.path.read_text().splitlines()]
    assert {line.get("speaker") for line in lines if line["type"] == "delta"} == {YOU, OTHERS}
    saved, restored = read_session(journal.path)
    assert [(s.speaker, s.text.strip()) for s in restored.segments][:4] == [
        (s.speaker, s.text.strip()) for s in live.segments
    ]
    assert restored.segments[-1].speaker == YOU and restored.segments[-1].text.strip() == "twice"
    assert saved.text.startswith("Others: emma closed the bottle\nYou: there are twenty hearts")


def test_a_journal_from_before_meeting_mode_still_loads(tmp_path: Path) -> None:
    old = tmp_path / "2026-12-01T11-52-03.jsonl"
    old.write_text(
        "\n".join(
            json.dumps(line)
            for line in (
                {"type": "session", "version": 1, "started": 1764589923.1, "model": "Demo", "source": "Mic"},
                {"type": "delta", "segment_id": 0, "text": "hello", "start_s": 0.1, "end_s": 1.2, "at": 1.0},
                {
                    "type": "speech_end",
                    "segment_id": 0,
                    "text": "hello",
                    "start_s": 0.1,
                    "end_s": 1.2,
                    "at": 2,
                },
                {"type": "delta", "segment_id": 1, "text": " world", "start_s": 2.0, "end_s": 2.5, "at": 3.0},
                {"type": "closed", "at": 4.0},
            )
        )
        + "\n"
    )
    saved, model = read_session(old)
    assert saved.text == "hello world" and saved.closed
    assert [s.speaker for s in model.segments] == [None, None]
    assert model.to_transcript().text == "hello world"


def test_a_journal_line_with_a_damaged_speaker_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "2026-12-01T11-52-03.jsonl"
    lines = [
        {"type": "session", "version": 1, "started": 1764589923.1, "model": "Demo", "source": "Mic"},
        {"type": "delta", "segment_id": 0, "text": "kept", "start_s": 0.1, "end_s": 1.2, "speaker": YOU},
        {"type": "delta", "segment_id": 1, "text": " lost", "start_s": 2.0, "end_s": 2.5, "speaker": ["x"]},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    saved, _model = read_session(path)
    assert saved.text == "You: kept"


def test_each_change_of_speaker_starts_a_labelled_paragraph() -> None:
    session = SessionModel()
    session.apply(conversation())
    assert [starts_paragraph(session, i) for i in range(4)] == [False, True, True, True]
    assert [paragraph_lead(session, i) for i in range(4)] == ["Others: ", "You: ", "Others: ", "You: "]
    before, after = split_at_mark(session, FadeMark(2, 5, open=True))  # faded while "You" was speaking
    assert before == "Others: emma closed the bottle You: there"
    assert after == " are twenty hearts Others: and sang You: in the garden"


def test_the_caption_text_shows_who_said_what(qtbot) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QWidget

    from app.views.caption_view import CaptionView

    parent = QWidget()
    qtbot.addWidget(parent)
    view = CaptionView(parent, 12, "system", timestamps=False)
    session = SessionModel()
    view.show_session(session)
    session.subscribe(view.on_change)
    session.apply(said(OTHERS, 0, "emma closed the bottle", 0.5, 2.5))
    session.apply([SpeakerEvent(YOU, Snapshot("there are", 0, 3.0, 3.5))])
    assert view.plain_text() == "Others: emma closed the bottle\nYou: there are"
    for event in conversation()[2:]:
        session.apply([event])
    assert view.plain_text() == (
        "Others: emma closed the bottle\nYou: there are twenty hearts\nOthers: and sang\nYou: in the garden"
    )
