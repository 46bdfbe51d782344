"""Prints the scientific corpus's record (graphs, breaks, first-call seconds per function
and backend) after the run; the rows travel as user_properties, so -n 2 keeps them."""


def pytest_terminal_summary(terminalreporter):
    rows = []
    for report in terminalreporter.stats.get("passed", []):
        rows += [v for k, v in getattr(report, "user_properties", ()) if k == "scientific"]
    if not rows:
        return
    tr = terminalreporter
    tr.section("scientific corpus: graphs, breaks, first call (translate + compile)")
    tr.write_line(f"{'function':26} {'backend':7} {'graphs':>6} {'breaks':>6} {'first call':>10}")
    for name, backend, graphs, breaks, first in sorted(rows):
        tr.write_line(f"{name:26} {backend:7} {graphs:>6} {breaks:>6} {first:>9.2f}s")
