"""The fitness figures: each plan scored against what landed, the figures over a corpus, and
the cases read from a project's records (kernel/judging/fitness.py)."""

from __future__ import annotations

from pathlib import Path

from domain import AnalysisInput, GapReport, IterationOutcome, Measurements
from domain.fitness import CaseScore, Fitness, FitnessCase, FitnessFigures
from kernel.isolation.paths import Paths
from kernel.loop import corpus
from kernel.loop.corpus import history_cases, keep, kept, seen_before
from kernel.loop.fitness import figures, score
from kernel.loop.generations import GENERATION_REF, _next_number, fell, planning
from tests.support import git, make_repo
from tests.unit.factories import T0, gap, plan, record

FILES = ("calc.py", "util.py", "tests/test_calc.py", "README.md")


def _case(fixed: tuple[str, ...] = ("calc.py", "tests/test_calc.py")) -> FitnessCase:
    return FitnessCase(id="iter-0001", gap="ruff:calc.py:F401", fixed=fixed, now=T0)


def test_a_plan_that_allows_and_suspects_the_fixed_file_scores_full_marks() -> None:
    made = plan(gap(), allowed_paths=("calc.py", "tests/**"), suspect_files=("calc.py", "util.py"))
    s = score(_case(), made, "", FILES, prompt="x" * 120)
    assert (s.valid, s.chosen, s.recall, s.rank, s.allowed) == (True, True, True, 1, 2)
    assert s.precision == 1.0 and s.prompt_chars == 120


def test_a_fixed_file_left_out_of_the_allowlist_or_the_suspects_is_counted() -> None:
    made = plan(gap(), allowed_paths=("util.py", "tests/**"), suspect_files=("util.py", "calc.py"))
    s = score(_case(), made, "", FILES)
    assert (s.recall, s.rank, s.allowed, s.precision) == (False, 2, 2, 0.0)
    wide = plan(gap(), allowed_paths=("**",), suspect_files=("README.md",))
    s = score(_case(), wide, "", FILES)
    assert (s.recall, s.rank, s.allowed, s.precision) == (True, 0, 4, 0.5)


def test_narrowing_the_allowlist_past_the_fix_never_raises_the_precision() -> None:
    # the tests only: one file, and it was fixed; were precision the fixed share of whatever
    # was allowed, this would score 1.0 against the sufficient allowlist's 0.67, and a planner
    # that allows only tests would gain precision while it loses every source fix
    narrow = plan(gap(), allowed_paths=("tests/**",), suspect_files=("calc.py",))
    sufficient = plan(gap(), allowed_paths=("calc.py", "util.py", "tests/**"))
    low, high = score(_case(), narrow, "", FILES), score(_case(), sufficient, "", FILES)
    assert (low.recall, low.allowed, low.precision) == (False, 1, 0.0)
    assert (high.recall, high.allowed, high.precision) == (True, 3, 2 / 3)
    # a fix that adds a file: the new file counts among those allowed
    added = score(
        _case(fixed=("calc.py", "new.py")), plan(gap(), allowed_paths=("*.py",)), "", FILES
    )
    assert (added.recall, added.allowed, added.precision) == (True, 2, 2 / 3)


def test_a_case_that_did_not_land_scores_no_recall_and_another_gap_is_not_chosen() -> None:
    made = plan(gap("ruff:other.py:F401"), allowed_paths=("calc.py",))
    s = score(_case(fixed=()), made, "", FILES)
    assert (s.valid, s.chosen, s.recall, s.rank, s.precision) == (True, False, None, None, None)
    failed = score(_case(), None, "planner returned id iter-0009", FILES)
    assert (failed.valid, failed.error) == (False, "planner returned id iter-0009")


def test_figures_count_recall_ranks_and_precision_over_the_landed_cases_only() -> None:
    scores = [
        CaseScore(id="a", valid=True, chosen=True, recall=True, rank=1, precision=0.5),
        CaseScore(id="b", valid=True, chosen=True, recall=False, rank=3, precision=0.0),
        CaseScore(id="c", valid=True, chosen=False, prompt_chars=300),
        CaseScore(id="d", error="no plan"),
    ]
    f = figures(scores)
    assert (f.cases, f.landed, f.valid, f.chosen) == (4, 2, 0.75, 0.5)
    assert (f.recall, f.top1, f.top3, f.precision) == (0.5, 0.5, 1.0, 0.25)
    assert f.prompt_chars == 100.0


def test_cases_come_from_records_with_a_plan_and_a_base_the_landed_ones_with_their_files() -> None:
    g = gap()
    landed = record(g, 1, IterationOutcome.SUCCESS, None, base="a" * 40).model_copy(
        update={"plan": plan(g, 1), "commit": "b" * 40, "touched_files": ("calc.py",)}
    )
    failed = record(g, 2, base="b" * 40).model_copy(
        update={"plan": plan(g, 2), "touched_files": ("calc.py",)}
    )
    planless = record(g, 3, base="c" * 40).model_copy(update={"plan": None})
    cases = history_cases([landed, failed, planless])
    assert [(c.id, c.sequence, c.fixed, c.earlier) for c in cases] == [
        (landed.iteration_id, 1, ("calc.py",), 0),
        (failed.iteration_id, 2, (), 1),
    ]
    assert cases[1].report.gaps == (g,) and cases[1].gap == g.key


def test_a_long_history_replays_its_latest_iterations_only_and_reads_only_their_inputs() -> None:
    # an overnight daemon's history: every module change replays it twice, so it is bounded
    g = gap()
    many = [
        record(g, n, base="a" * 40).model_copy(update={"plan": plan(g, n)}) for n in range(1, 8)
    ]
    asked: list[str] = []
    cases = history_cases(many, lambda i: asked.append(i) or None, latest=3)
    assert [c.sequence for c in cases] == [5, 6, 7] and [c.earlier for c in cases] == [4, 5, 6]
    assert asked == [c.id for c in cases]
    assert history_cases(many, latest=0) == []


def test_the_planner_sees_the_earlier_records_as_briefs_as_the_loop_gives_them() -> None:
    g = gap()
    earlier = [
        record(g, 1, base="a" * 40),
        record(gap("ruff:x.py:F401"), 2),
    ]
    seen = seen_before(earlier, history_cases(earlier)[0].report)
    assert [r.iteration_id for r in seen] == [r.iteration_id for r in earlier]
    assert all(r.plan is None for r in seen)


def test_kept_inputs_are_read_back_and_a_damaged_one_is_as_none_kept(tmp_path: Path) -> None:
    paths = Paths(tmp_path, tmp_path / ".git")
    given = AnalysisInput(measurements=Measurements(), now=T0)
    report = GapReport(gaps=(gap(),), skipped=("ruff:other.py:F401",))
    keep(paths, "iter-0001-20260101-120000", given, report)
    assert kept(paths, "iter-0001-20260101-120000") == (given, report)
    g = gap()
    earlier = [record(g, 1, base="a" * 40)]
    [case] = history_cases(earlier, lambda i: kept(paths, i))
    assert (case.analysis, case.report) == (given, report)
    place = tmp_path / ".git" / "seed" / "fitness" / "inputs" / "iter-0001-20260101-120000.json.xz"
    place.write_bytes(b"not xz")
    assert kept(paths, "iter-0001-20260101-120000") is None
    [case] = history_cases(earlier, lambda i: kept(paths, i))
    assert case.analysis is None and case.report.gaps == (g,)
    assert kept(paths, "iter-0002-20260101-120000") is None


def _corpus_case(name: str = "shipped-1") -> FitnessCase:
    return FitnessCase(id=name, gap="ruff:calc.py:F401", fixed=("calc.py",), now=T0)


def test_a_corpus_round_trips_its_cases_and_their_files(tmp_path: Path) -> None:
    path = tmp_path / "corpus.json.xz"
    texts = {"calc.py": "x = 1\n", "pkg/util.py": "x = 1\n", "README.md": "# r\n"}
    corpus.write(path, [(_corpus_case(), texts), (_corpus_case("shipped-2"), {"a.py": ""})])
    read = corpus.read(path, "shipped")
    assert read.problems == [] and [c.id for c in read.cases] == ["shipped-1", "shipped-2"]
    first = read.cases[0]
    assert (first.part, first.base, first.fixed) == ("shipped", "", ("calc.py",))
    assert len(set(first.files.values())) == 2  # one text, one key
    dest = tmp_path / "out"
    assert corpus.materialise(first, read.blobs, dest) == sorted(texts)
    assert {p: (dest / p).read_text() for p in texts} == texts


def test_a_damaged_corpus_or_case_is_left_out_and_said_why(tmp_path: Path) -> None:
    path = tmp_path / "corpus.json.xz"
    path.write_bytes(b"not xz")
    read = corpus.read(path, "held-back")
    assert read.cases == [] and "not a corpus" in read.problems[0]
    assert corpus.read(tmp_path / "none.json.xz", "shipped").problems == []
    for bad in ("../outside.py", ".git/config", "/etc/passwd"):
        corpus.write(path, [(_corpus_case(), {bad: "x"}), (_corpus_case("good"), {"a.py": ""})])
        read = corpus.read(path, "shipped")
        assert [c.id for c in read.cases] == ["good"], bad
        assert "files it cannot hold" in read.problems[0]


def _parts(**parts: FitnessFigures) -> Fitness:
    return Fitness(parts=parts)


def test_a_figure_may_fall_by_one_case_of_those_it_is_over_not_by_two() -> None:
    was = FitnessFigures(cases=4, landed=4, ranked=2, valid=1.0, recall=1.0, top1=1.0)
    one = was.model_copy(update={"recall": 0.75, "top1": 0.5})
    two = was.model_copy(update={"recall": 0.5, "top1": 0.0})
    assert fell(_parts(shipped=was), _parts(shipped=one)) == []
    said = fell(_parts(shipped=was), _parts(shipped=two))
    assert said == [
        "shipped recall fell from 100% to 50% (over 4 case(s); the margin is one)",
        "shipped top1 fell from 100% to 0% (over 2 case(s); the margin is one)",
    ]
    # each part is held on its own: a gain on one does not pay for a loss on another
    better = was.model_copy(update={"precision": 1.0})
    lost = _parts(shipped=better, **{"held-back": two})
    assert [s.split(" fell")[0] for s in fell(_parts(shipped=was, **{"held-back": was}), lost)] == [
        "held-back recall",
        "held-back top1",
    ]


def test_a_change_is_a_generation_when_it_touches_any_code_the_module_server_runs() -> None:
    assert planning(["modules/planner/localise.py", "README.md"])
    assert planning(["modules/analyzers/rank.py"])
    # an adapter, the registry, a report or the domain is imported beside the planner
    for path in ("modules/agents/claude.py", "modules/registry.py", "modules/reports/x.py"):
        assert planning([path])
    assert planning(["domain/plan.py"])
    assert not planning(["README.md", "tests/test_x.py", "modulesx/a.py", "bench/modules/a.py"])


def test_a_generation_number_is_never_given_twice(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    kept = tmp_path / "generations.jsonl"
    assert _next_number(repo, kept) == 1
    head = git(repo, "rev-parse", "HEAD").strip()
    for n in (1, 2):
        git(repo, "update-ref", f"{GENERATION_REF}{n}", head)
    assert _next_number(repo, kept) == 3
    kept.write_text('{"number": 5}\nnot json\n')
    git(repo, "update-ref", "-d", f"{GENERATION_REF}2")  # a person deleted one
    assert _next_number(repo, kept) == 6


def test_features_are_a_part_of_their_own_and_a_fall_there_is_refused(tmp_path: Path) -> None:
    """Issue 40: recall on features is held apart from recall on fixes, so a planner that
    narrows allowlists cannot buy precision on fixes with the features it loses."""
    path = tmp_path / "corpus.json.xz"
    feature = _corpus_case("feature-1").model_copy(update={"kind": "feature"})
    corpus.write(path, [(_corpus_case(), {"calc.py": ""}), (feature, {"calc.py": ""})])
    read = corpus.read(path, "shipped")
    assert [(c.id, c.part) for c in read.cases] == [
        ("shipped-1", "shipped"),
        ("feature-1", "shipped-features"),
    ]
    was = FitnessFigures(cases=2, landed=2, valid=1.0, recall=1.0)
    fixes_better = was.model_copy(update={"precision": 1.0})
    lost = was.model_copy(update={"recall": 0.0})
    said = fell(
        _parts(shipped=was, **{"shipped-features": was}),
        _parts(shipped=fixes_better, **{"shipped-features": lost}),
    )
    assert said == [
        "shipped-features recall fell from 100% to 0% (over 2 case(s); the margin is one)"
    ]


def test_an_empty_allowlist_allows_every_file_and_a_forbidden_one_none() -> None:
    """As the guard reads a plan (issue 40): an empty allowlist is every file, so it recalls
    the fix at the lowest precision; a forbidden file is never allowed."""
    anything = plan(gap(), allowed_paths=())
    found = score(_case(fixed=("calc.py",)), anything, "", FILES)
    assert found.recall is True and found.allowed == len(FILES)
    assert found.precision == 1 / len(FILES)
    forbids = plan(gap(), allowed_paths=(), forbidden_paths=("calc.py",))
    assert score(_case(fixed=("calc.py",)), forbids, "", FILES).recall is False
