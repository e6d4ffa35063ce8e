"""The model's questions (ask_person) at the terminal: each one shown with its choices, and
the person's answer read from a terminal or, strictly, from a pipe.

A pipe's next line is the answer. Under the same strict rules as approvals: when the question
offers choices the line must be one of them (its text or its number), and an empty line is
not an answer; either ends the run (exit 3) with the thread still waiting. End of a pipe
means no one can answer, and the model is told so. At a terminal any text answers (a choice
by number too), and Ctrl-D leaves the question waiting for later.
"""

from __future__ import annotations

from core.approval.decisions import AnswerValue
from core.approval.questions import QuestionCall, QuestionPayload
from terminal.console import Terminal
from terminal.review import NotAnAnswer

QUESTION_ANSWERS = "the answer's text, or with choices one of them (or its number)"


def question_lines(call: QuestionCall) -> list[str]:
    lines = [f"? The agent asks: {call.get('question', '')}"]
    lines += [f"    {number}. {choice}" for number, choice in enumerate(call["choices"], 1)]
    return lines


def chosen(line: str, choices: list[str]) -> str | None:
    """The choice a line names, by number or by its text; None if it names none."""
    text = line.strip()
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1]
    return text if text in choices else None


async def piped_answer(term: Terminal, call: QuestionCall) -> str | None:
    """The pipe's next line, checked; None at end of input."""
    line = await term.ask("  answer> ")
    if line is None:
        return None
    if not line.strip():
        raise NotAnAnswer("an empty line is not an answer to the question")
    if not call["choices"]:
        return line.strip()
    choice = chosen(line, call["choices"])
    if choice is None:
        offered = ", ".join(repr(choice) for choice in call["choices"])
        raise NotAnAnswer(f"{line.strip()!r} is not one of the choices ({offered})")
    return choice


async def person_answer(term: Terminal, call: QuestionCall) -> str | None:
    """Asked again until there is an answer; None at end of input (Ctrl-D)."""
    while True:
        line = await term.ask("  answer> ")
        if line is None:
            return None
        if line.strip():
            return chosen(line, call["choices"]) or line.strip()
        term.say("  type an answer (Ctrl-D leaves the question for later)")


async def answer_questions(term: Terminal, payload: QuestionPayload) -> AnswerValue | None:
    """The resume value for a question payload; None leaves the thread waiting (a person
    at a terminal ended input). NotAnAnswer when a piped line is not an answer."""
    calls = payload["calls"]
    by = "piped" if term.piped else "person"
    answers: dict[str, str | None] = {}
    for read in calls:
        # The choices as text, whatever a stored payload holds (read_question checks only
        # that they are a list).
        call: QuestionCall = {**read, "choices": [str(c) for c in read.get("choices") or []]}
        term.event("question", question=call.get("question", ""), choices=call["choices"])
        for line in question_lines(call):
            term.say(line)
        answer = await (piped_answer(term, call) if term.piped else person_answer(term, call))
        if answer is None and not term.piped:
            return None
        if answer is None:
            term.say("  (end of input: no one can answer; the model is told to decide itself)")
        answers[call["id"]] = answer
        decision = "answer" if answer is not None else "unanswered"
        term.event("decision", tool=call["name"], decision=decision, reason=answer or "", by=by)
    return {"answers": answers, "by": by}
