"""Domain code: notes. It never starts tasks or threads; background work is enqueued or published."""

from __future__ import annotations

from dataclasses import dataclass

from corral.runtime import Runtime


@dataclass
class Note:
    id: int
    owner: str
    text: str


NOTES: dict[int, Note] = {}
SEARCH_INDEX: dict[str, set[int]] = {}


async def create_note(runtime: Runtime, *, owner: str, text: str) -> Note:
    note = Note(id=len(NOTES) + 1, owner=owner, text=text)
    NOTES[note.id] = note
    # The outbox: subscribers (corpus.index, webhook.fanout) become jobs through the relay.
    await runtime.publish("note.created", {"note_id": note.id})
    await runtime.enqueue("owner.notify", owner=owner, subject=f"note {note.id} saved")
    return note


def search(word: str) -> set[int]:
    return SEARCH_INDEX.get(word.lower(), set())
