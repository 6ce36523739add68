"""Prompts for make_smollm2_golden.py. Every text here was written for Pagoda's tests.

Each case: name, kind ("text" = raw text fed as is, no BOS; "chat" = messages rendered with the
GGUF's chat template and add_generation_prompt=True), and the text or the messages.
"""

LONG_ESSAY = """The town of Vellmoor sits at the bottom of a narrow valley, where two rivers meet before they run together toward the sea. For most of its history it was known for nothing in particular. Farmers brought barley and wool down from the hills, merchants carried salt and iron up from the coast, and the people in between made a modest living by feeding, housing and occasionally cheating both groups. The town had a market square, a stone church with a crooked spire, three inns of uneven reputation, and a bridge that everybody agreed was too old and nobody agreed to pay for.

The bridge is where this story begins. It had been built of timber on stone piers by a carpenter whose name was lost within a generation, and it had been repaired so many times that no single plank could claim to be original. Every spring the meltwater rose against the piers, and every spring someone predicted that this would be the year the whole thing washed away. The council met, argued about taxes, and postponed the question until autumn. In autumn the river was low, the harvest was in, and the bridge looked perfectly adequate, so the question was postponed again.

In the year of the long rains, the prediction finally came true. The water rose for eleven days without stopping. On the twelfth night a section of the central span cracked with a sound that people later compared to a musket shot, and by morning there was a gap of twenty feet between the two halves of the town. The baker lived on one side and the mill was on the other. The doctor lived on one side and most of his patients lived on the other. Children who had walked to school together for years now waved at each other across brown water that moved faster than a horse could gallop.

At first the townspeople treated the disaster as an inconvenience. A ferryman named Osric, who had spent thirty years carrying goods along the river, offered to carry people across it instead. He charged a copper coin per passenger and two for anyone with a goat. Within a week he had more money than he had earned in the previous year, and within a month he had bought a second boat and hired his nephew to row it. Some people grumbled about the price, but the boats were reliable, the river was slowly falling, and most families decided that they could live with the arrangement until the council made up its mind.

The council, however, discovered that the disaster had made its decision harder rather than easier. Before the flood the question had been whether to repair an old bridge. Now it was whether to build a new one, and if so, where, of what material, and at whose expense. The merchants wanted a wide stone bridge strong enough for heavy wagons. The farmers wanted something cheap and quick so that they could bring the harvest to market. Osric, who had quietly become one of the wealthiest men in town, suggested that perhaps there was no need for a bridge at all, since the ferry service was working so well.

It was a schoolteacher, Maren Hollis, who finally broke the deadlock, and she did it with arithmetic. She spent three evenings in the church archive reading old tax records, and another two counting traffic at the ferry landing. Then she stood up at a council meeting with a sheet of paper and explained, slowly and patiently, what the town was actually paying. Every family that crossed the river twice a day spent more on fares in a single year than its share of a new stone bridge would cost over twenty years. The merchants were losing trade to a rival town downstream. The farmers were selling their grain late and cheap. The only person who profited from the broken bridge was the ferryman, and even he, she pointed out, would earn more by running a toll gate on a new bridge than by rowing in the rain for the rest of his life.

Nobody had thought about the problem in those terms before. The numbers were not complicated, but they had never been written down in one place, and seeing them together changed the tone of the conversation. Within a month the council had approved a plan. The bridge would be built of stone, with three arches instead of five so that floodwater could pass more easily. It would be paid for by a small tax on every wagon that crossed it, collected at a gate on the eastern bank, and Osric would be offered the job of keeping the gate.

Construction took two summers. Masons came from the coast, quarrymen cut stone from the hills, and half the young men in the valley found work hauling blocks and mixing mortar. When the final keystone was set, the whole town gathered on both banks to watch. Maren Hollis was asked to cross first, and she did so carrying the sheet of paper that had started it all, which she later framed and hung in the schoolroom.

The bridge still stands. The river has flooded many times since then, and each time the water has rushed harmlessly through the wide arches. Osric kept the toll gate until he was very old, and he liked to tell travelers that he had been in favor of the bridge from the beginning. Nobody in Vellmoor ever contradicted him, partly out of kindness and partly because, by then, it no longer seemed to matter. What people remembered was simpler: that a problem everyone had learned to live with had been solved the moment someone took the trouble to count."""

LONG_CODE = '''"""A small job scheduler with priorities, dependencies and retries."""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Dict, Iterable, List, Optional


class JobState(Enum):
    PENDING = "pending"
    READY = "ready"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(order=True)
class _QueueEntry:
    priority: int
    sequence: int
    name: str = field(compare=False)


@dataclass
class Job:
    name: str
    action: Callable[[], object]
    priority: int = 0
    depends_on: List[str] = field(default_factory=list)
    max_attempts: int = 1
    attempts: int = 0
    state: JobState = JobState.PENDING
    result: object = None
    error: Optional[str] = None

    def can_retry(self) -> bool:
        return self.attempts < self.max_attempts


class CycleError(RuntimeError):
    """Raised when the dependency graph contains a cycle."""


class Scheduler:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._jobs: Dict[str, Job] = {}
        self._queue: List[_QueueEntry] = []
        self._sequence = 0
        self._clock = clock
        self._log: List[str] = []

    def add(self, job: Job) -> None:
        if job.name in self._jobs:
            raise ValueError(f"duplicate job name: {job.name!r}")
        self._jobs[job.name] = job

    def add_all(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            self.add(job)

    def _check_dependencies(self) -> None:
        for job in self._jobs.values():
            for dep in job.depends_on:
                if dep not in self._jobs:
                    raise KeyError(f"{job.name} depends on unknown job {dep}")
        visiting: set[str] = set()
        finished: set[str] = set()

        def visit(name: str, path: List[str]) -> None:
            if name in finished:
                return
            if name in visiting:
                cycle = " -> ".join(path + [name])
                raise CycleError(f"dependency cycle: {cycle}")
            visiting.add(name)
            for dep in self._jobs[name].depends_on:
                visit(dep, path + [name])
            visiting.remove(name)
            finished.add(name)

        for name in self._jobs:
            visit(name, [])

    def _push(self, job: Job) -> None:
        job.state = JobState.READY
        self._sequence += 1
        heapq.heappush(self._queue, _QueueEntry(-job.priority, self._sequence, job.name))

    def _dependencies_done(self, job: Job) -> bool:
        return all(self._jobs[d].state is JobState.DONE for d in job.depends_on)

    def _release_waiting(self) -> None:
        for job in self._jobs.values():
            if job.state is JobState.PENDING and self._dependencies_done(job):
                self._push(job)

    def run(self) -> Dict[str, JobState]:
        self._check_dependencies()
        self._release_waiting()
        while self._queue:
            entry = heapq.heappop(self._queue)
            job = self._jobs[entry.name]
            job.state = JobState.RUNNING
            job.attempts += 1
            started = self._clock()
            try:
                job.result = job.action()
            except Exception as exc:  # noqa: BLE001 - every failure is recorded
                job.error = f"{type(exc).__name__}: {exc}"
                if job.can_retry():
                    self._log.append(f"retry {job.name} after {job.error}")
                    self._push(job)
                else:
                    job.state = JobState.FAILED
                    self._log.append(f"failed {job.name}: {job.error}")
                continue
            elapsed = self._clock() - started
            job.state = JobState.DONE
            self._log.append(f"done {job.name} in {elapsed:.3f}s")
            self._release_waiting()
        return {name: job.state for name, job in self._jobs.items()}

    @property
    def log(self) -> List[str]:
        return list(self._log)


def main() -> None:
    counter = {"flaky": 0}

    def flaky() -> str:
        counter["flaky"] += 1
        if counter["flaky"] < 3:
            raise ConnectionError("temporary network problem")
        return "ok"

    scheduler = Scheduler()
    scheduler.add_all([
        Job("fetch", flaky, priority=5, max_attempts=4),
        Job("parse", lambda: {"rows": 42}, depends_on=["fetch"]),
        Job("report", lambda: "summary written", depends_on=["parse"], priority=1),
        Job("cleanup", lambda: None, priority=-1),
    ])
    states = scheduler.run()
    for name, state in sorted(states.items()):
        print(f"{name:10s} {state.value}")
    for line in scheduler.log:
        print(line)


if __name__ == "__main__":
    main()
'''

SYSTEM_DEFAULT = None  # the template inserts its own system prompt when the first message is not one

CASES = [
    # --- short ---------------------------------------------------------------------------
    ("short_the", "text", "The"),
    ("short_hello", "text", "Hello"),
    ("short_capital", "text", "The capital of France is"),
    ("short_once", "text", "Once upon a time,"),
    ("short_counting", "text", "1, 2, 3, 4, 5,"),
    ("short_newlines", "text", "Title:\n\n  - item one\n  - item two\n"),
    # --- medium --------------------------------------------------------------------------
    ("medium_science", "text",
     "Photosynthesis is the process by which green plants use sunlight, water and carbon dioxide "
     "to produce glucose and oxygen. It takes place mainly in the leaves, inside small structures "
     "called chloroplasts. The overall reaction can be summarized as follows:"),
    ("medium_story", "text",
     "The old lighthouse keeper climbed the spiral stairs for the last time. He had counted them "
     "every night for forty-one years: one hundred and twelve steps, each worn smooth in the middle. "
     "At the top he paused, looked out over the dark water, and"),
    ("medium_math", "text",
     "Question: A train leaves the station at 9:15 and travels 240 km at an average speed of 80 km/h. "
     "At what time does it arrive?\nAnswer: Let's think step by step."),
    ("medium_list", "text",
     "Here are five tips for writing clear technical documentation:\n1."),
    ("medium_numbers", "text",
     "In 2023 the company sold 1,234,567 units at $19.99 each; revenue grew 12.5% to about $24.7 million, "
     "compared with 21,950,000 dollars in 2022. The ratio 3/4 equals 0.75 and pi is roughly 3.14159"),
    # --- long (> 1000 tokens) ------------------------------------------------------------
    ("long_essay", "text", LONG_ESSAY + "\n\nIn one sentence, the lesson of this story is that"),
    ("long_code", "text", LONG_CODE + "\n\ndef test_scheduler_retries_flaky_job() -> None:\n"),
    # --- multilingual --------------------------------------------------------------------
    ("zh", "text", "北京是中华人民共和国的首都，也是全国的政治和文化中心。这座城市有三千多年的历史，"),
    ("ar", "text", "القاهرة هي عاصمة جمهورية مصر العربية وأكبر مدنها، وتقع على ضفاف نهر النيل. "),
    ("hi", "text", "भारत दक्षिण एशिया में स्थित एक विशाल देश है। इसकी राजधानी नई दिल्ली है और"),
    ("ru", "text", "Москва — столица России и крупнейший город страны. Она расположена на реке"),
    ("emoji", "text", "My favourite things: 🍕 pizza, 🐱 cats, 🌧️ rainy days, and 🎸 guitars! 😀👍🏽 Today I feel"),
    ("fr_de_mix", "text", "Le café était fermé, alors nous sommes allés au marché. Danach gingen wir über die Brücke und"),
    ("ja_ko", "text", "東京は日本の首都です。서울은 대한민국의 수도입니다. Both cities are"),
    # --- code ----------------------------------------------------------------------------
    ("code_python", "text",
     "def fibonacci(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n"),
    ("code_cpp", "text",
     "#include <vector>\n#include <algorithm>\n\n// Returns the k largest values of v in descending order.\n"
     "std::vector<int> top_k(std::vector<int> v, size_t k) {\n"),
    ("code_json", "text", "{\n  \"name\": \"pagoda\",\n  \"version\": \"0.1.0\",\n  \"dependencies\": {\n"),
    # --- chat (rendered with the GGUF chat template, add_generation_prompt=True) ----------
    ("chat_capital", "chat", [{"role": "user", "content": "What is the capital of France?"}]),
    ("chat_system", "chat", [
        {"role": "system", "content": "You are a terse assistant. Answer in at most one sentence."},
        {"role": "user", "content": "Why is the sky blue?"}]),
    ("chat_multiturn", "chat", [
        {"role": "user", "content": "Hi! Can you help me plan a short trip?"},
        {"role": "assistant", "content": "Of course! Where would you like to go, and for how many days?"},
        {"role": "user", "content": "Three days in Rome, in spring. What should I see first?"}]),
    ("chat_code", "chat", [
        {"role": "user", "content": "Write a Python function that checks whether a string is a palindrome."}]),
    ("chat_french", "chat", [
        {"role": "user", "content": "Bonjour ! Peux-tu m'expliquer ce qu'est la photosynthèse ?"}]),
    ("chat_long_summary", "chat", [
        {"role": "user", "content": "Summarize the following story in two sentences.\n\n" + LONG_ESSAY}]),
]
