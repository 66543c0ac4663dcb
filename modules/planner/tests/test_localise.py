"""A task in plain words gets an allowlist from what it names, and the plan says how."""

from __future__ import annotations

from modules.planner.tests.factory import inbox_gap, must_plan

FILES = {
    "src/shapes/__init__.py": "",
    "src/shapes/area.py": "def circle_area(r):\n    return 3.14 * r * r\n",
    "src/shapes/render.py": "class Canvas:\n    pass\n",
    "tools/report.py": "def main():\n    pass\n",
    "tests/test_area.py": "def test_circle_area():\n    pass\n",
    "README.md": "# shapes\n",
}


def test_a_task_naming_a_function_allows_that_functions_file_and_says_why() -> None:
    gap = inbox_gap(title="Make circle_area() accept a diameter", body="It only takes r.")
    plan = must_plan([gap], files=FILES)
    assert "src/shapes/area.py" in plan.allowed_paths
    assert "tools/report.py" not in plan.allowed_paths
    assert not any(p in ("**", "*") for p in plan.allowed_paths)
    # a feature may add its test where the project keeps its tests
    assert "tests/**" in plan.allowed_paths
    [note] = [n for n in plan.notes if n.startswith("allowlist from the task's words")]
    assert "circle_area → src/shapes/area.py (defines it)" in note


def test_a_task_naming_a_module_or_a_file_allows_them() -> None:
    gap = inbox_gap(title="Give shapes.render a title", body="See `README.md` as well.")
    plan = must_plan([gap], files=FILES)
    assert {"src/shapes/render.py", "README.md"} <= set(plan.allowed_paths)
    [note] = [n for n in plan.notes if n.startswith("allowlist from the task's words")]
    assert "shapes.render → src/shapes/render.py" in note


def test_a_task_that_names_nothing_in_the_tree_falls_back_and_says_so() -> None:
    gap = inbox_gap(title="Make startup faster", body="It is slow.")
    plan = must_plan([gap], files=FILES)
    assert plan.allowed_paths == ()
    assert any(
        n.startswith("allowlist: no file of the tree matches the task's words") for n in plan.notes
    )
