"""`fsagent regress DIR`: replay every recorded case in a folder and compare transcripts.

A case is a folder with:
    input.txt       the piped session (prompts and answers)
    cassette.jsonl  the model's recorded responses (`--record`)
    expected.jsonl  the transcript the run must produce (`--transcript`)
    files/          optional: the sandbox's starting contents, copied fresh for each run
    args            optional: more fsagent flags, one line (e.g. `--approve yes`)
    exit_code       optional: the exit code the run must end with (default 0)
Each case runs as a real `fsagent` process with `--replay`, so no LM Studio is needed.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from core.errors import StartupError

AGENT = Path(__file__).resolve().parent.parent / "agent.py"
CASE_FILES = ("input.txt", "cassette.jsonl")


@dataclass
class CaseResult:
    name: str
    passed: bool
    exit_code: int
    events: int
    note: str


def run_cases(folder: Path, *, show: bool = False, update: bool = False) -> int:
    """Run every case in `folder` (or the case it is) and print the table; 1 if any failed."""
    cases = find_cases(folder)
    if not cases:
        raise StartupError(
            f"{folder}: no case folder (one with {' and '.join(CASE_FILES)}) found there"
        )
    results = [run_case(case, show=show, update=update) for case in cases]
    print_table(results)
    return 0 if all(result.passed for result in results) else 1


def packaged_examples() -> Path:
    """The recorded examples installed with fsagent (examples/ in a clone, shipped in the
    wheel as the fsagent_examples package's data)."""
    from importlib.resources import files

    return Path(str(files("fsagent_examples")))


def find_cases(folder: Path) -> list[Path]:
    if is_case(folder):
        return [folder]
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.iterdir() if is_case(path))


def is_case(folder: Path) -> bool:
    return all((folder / name).is_file() for name in CASE_FILES)


def run_case(case: Path, *, show: bool = False, update: bool = False) -> CaseResult:
    case = case.resolve()  # the run starts in its own folder
    with tempfile.TemporaryDirectory(prefix=f"fsagent-{case.name}-") as scratch:
        work = Path(scratch)
        root = work / "root"
        if (case / "files").is_dir():
            shutil.copytree(case / "files", root)
        else:
            root.mkdir()
        transcript = work / "transcript.jsonl"
        completed = subprocess.run(
            case_command(case, root, work, transcript),
            stdin=(case / "input.txt").open("rb"),
            capture_output=not show,
            cwd=root,
            check=False,
        )
        actual = transcript.read_text(encoding="utf-8") if transcript.exists() else ""
    if update:
        (case / "expected.jsonl").write_text(actual, encoding="utf-8")
        (case / "exit_code").write_text(f"{completed.returncode}\n", encoding="utf-8")
    return judge(case, actual, completed)


def case_command(case: Path, root: Path, work: Path, transcript: Path) -> list[str]:
    extra = (case / "args").read_text(encoding="utf-8") if (case / "args").exists() else ""
    return [
        sys.executable,
        str(AGENT),
        "--replay", str(case / "cassette.jsonl"),
        "--root", str(root),
        "--db", str(work / "threads.db"),
        "--thread", case.name,
        "--transcript", str(transcript),
        *shlex.split(extra),
    ]  # fmt: skip


def judge(case: Path, actual: str, completed: subprocess.CompletedProcess[bytes]) -> CaseResult:
    expected_file = case / "expected.jsonl"
    expected = expected_file.read_text(encoding="utf-8") if expected_file.exists() else None
    expected_code = expected_exit_code(case)
    events = len(actual.splitlines())

    def result(passed: bool, note: str) -> CaseResult:
        return CaseResult(case.name, passed, completed.returncode, events, note)

    if expected is None:
        return result(False, "no expected.jsonl (run with --update to write it)")
    if completed.returncode != expected_code:
        stderr = (completed.stderr or b"").decode(errors="replace").strip().splitlines()
        why = f": {stderr[-1]}" if stderr else ""
        return result(False, f"exit code {completed.returncode}, expected {expected_code}{why}")
    difference = first_difference(expected.splitlines(), actual.splitlines())
    return result(difference is None, difference or "")


def expected_exit_code(case: Path) -> int:
    path = case / "exit_code"
    return int(path.read_text(encoding="utf-8").strip()) if path.exists() else 0


def first_difference(expected: list[str], actual: list[str]) -> str | None:
    for number, (want, got) in enumerate(zip(expected, actual, strict=False), 1):
        if want != got:
            return f"event {number} differs: expected {clip(want)}, got {clip(got)}"
    if len(expected) != len(actual):
        return f"{len(actual)} events, expected {len(expected)}"
    return None


def clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… (+{len(text) - limit} chars)"


def print_table(results: list[CaseResult]) -> None:
    width = max([len("case")] + [len(r.name) for r in results])
    print(f"{'case':<{width}}  result  exit  events  note")
    for r in results:
        verdict = "pass" if r.passed else "FAIL"
        print(f"{r.name:<{width}}  {verdict:<6}  {r.exit_code:>4}  {r.events:>6}  {r.note}")
    passed = sum(r.passed for r in results)
    print(f"{passed} passed, {len(results) - passed} failed")
