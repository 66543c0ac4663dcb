"""The fitness corpus shipped in the kernel (kernel/loop/fitness-corpus.json.xz, built by
bench/real_fixes/corpus.py from the real fixes): it reads whole, and every case is one the
replay can score."""

from __future__ import annotations

import tomllib
from pathlib import Path

from bench.real_fixes.corpus import held_back, held_back_file
from domain import AnalysisInput
from kernel.isolation.paths import Paths
from kernel.loop import corpus

CASES = Path(__file__).resolve().parents[2] / "bench" / "real_fixes" / "cases.toml"
FEATURES = CASES.with_name("features.toml")


def test_the_shipped_corpus_reads_whole_and_every_case_can_be_scored() -> None:
    shipped = corpus.read(corpus.SHIPPED, "shipped")
    assert shipped.problems == []
    fixes = [c["id"] for c in tomllib.loads(CASES.read_text(encoding="utf-8"))["case"]]
    features = [c["id"] for c in tomllib.loads(FEATURES.read_text(encoding="utf-8"))["case"]]
    # all 32 real fixes and the 13 real features (issue 40), in their files' order
    assert [c.id for c in shipped.cases] == [*fixes, *features]
    for case in shipped.cases:
        feature = case.id in features
        assert case.part == ("shipped-features" if feature else "shipped"), case.id
        assert case.kind == ("feature" if feature else "fix") and case.base == ""
        # a feature's new files (its test, a docs page) are not in the tree it starts from
        assert case.fixed and (feature or set(case.fixed) <= set(case.files)), case.id
        assert any(not f.startswith("tests/") for f in case.fixed), case.id
        assert case.gap in {g.key for g in case.report.gaps}, case.id
        assert case.gap.startswith("inbox:" if feature else "pytest:"), case.id
        assert case.analysis is not None, case.id
        AnalysisInput.model_validate(case.analysis.model_dump(mode="json"))
        assert all(k in shipped.blobs for k in case.files.values()), case.id


def test_the_shipped_cases_name_no_path_outside_their_own_tree() -> None:
    shipped = corpus.read(corpus.SHIPPED, "shipped")
    for case in shipped.cases:
        assert case.analysis is not None
        said = case.analysis.model_dump_json() + case.report.model_dump_json()
        for outside in ("/tmp/", "/var/tmp/", "/work/", "/.git/seed"):
            assert outside not in said, (case.id, outside)


def test_cases_are_held_back_every_kth_and_written_where_the_kernel_reads_them(
    tmp_path: Path,
) -> None:
    ids = [f"c{i}" for i in range(1, 33)]
    assert held_back(ids, 0) == set()
    assert held_back(ids, 4) == {"c8", "c16", "c24", "c32"}
    assert held_back(ids, 5) == {"c6", "c12", "c18", "c24", "c30"}
    assert held_back(ids[:3], 5) == {"c1", "c2", "c3"}
    paths = Paths(root=tmp_path, common=tmp_path / ".git")
    assert held_back_file(paths.state) == corpus.held_back(paths)


def test_a_corpus_read_again_is_the_file_as_it_is_now(tmp_path: Path) -> None:
    # read once per file and kept while the file stays the same: a rewrite is read afresh,
    # and what a caller does with the cases it got changes nothing the next caller gets
    shipped = corpus.read(corpus.SHIPPED, "shipped")
    texts = corpus.texts(shipped.cases[0], shipped.blobs)
    place = tmp_path / "held-back.json.xz"
    corpus.write(place, [(shipped.cases[0], texts)])
    first = corpus.read(place, "held-back")
    first.cases.clear()
    assert [c.id for c in corpus.read(place, "held-back").cases] == [shipped.cases[0].id]
    corpus.write(place, [(shipped.cases[1], texts), (shipped.cases[2], texts)])
    again = corpus.read(place, "held-back")
    assert [c.id for c in again.cases] == [c.id for c in shipped.cases[1:3]]
    place.unlink()
    assert corpus.read(place, "held-back").cases == []
