"""Notes for the line-vector tests (SQLite and the team index): one long note whose answer
to QUESTION is one line among unrelated ones, and a long diary."""

from __future__ import annotations

# One long note: a dozen unrelated lines and, in the middle, the one that answers QUESTION.
FILLER = [
    "Caroline: The pottery class on Thursday was full again, so we moved to the evening slot.",
    "Melanie: The kids painted the fence blue and then argued about the colour for an hour.",
    "Caroline: I finally finished the novel about the lighthouse keeper and his daughter.",
    "Melanie: Our neighbour lent us a ladder so we could clean the gutters before winter.",
    "Caroline: The museum had a new exhibition of old maps from the harbour district.",
    "Melanie: We tried the new bakery near the station; the rye bread is excellent.",
]
ANSWER = "Melanie: I signed up for a marathon in October and I run five mornings a week now."
QUESTION = "what race is Melanie training for"
NOTE = "# Session 4\n\n" + "\n".join(FILLER[:3] + [ANSWER] + FILLER[3:]) + "\n"


def long_note(n: int = 60) -> str:
    topics = ["harbour", "pottery", "bakery", "ladder", "museum", "fence", "novel", "garden"]
    return (
        "# Diary\n\n"
        + "\n".join(
            f"Entry {i}: we talked about the {topics[i % len(topics)]} for {i + 3} minutes today."
            for i in range(n)
        )
        + "\n"
    )
