#!/usr/bin/env python3
"""Rebuilds the tables of QKV Lab's experiment reports from their results.csv alone, with
Python's standard library only, and checks every rebuilt row against the report.

    python3 scripts/recompute.py                  # every report under docs/results/
    python3 scripts/recompute.py docs/results/X   # the reports in these folders

A reader who doubts a report needs neither Rust nor the saved runs: each table row is computed
again from the per-seed losses and accuracies in results.csv (mean ± sample standard deviation
over seeds; changes paired by seed against the table's reference run) and must appear, character
for character, in report.md (followed there, in the vision table, by paper 2's quoted figure).
Exit status 1 names each row that does not.
"""

import csv
import functools
import math
import operator
import re
import sys
from pathlib import Path


def mean_std(values):
    """Mean, sample standard deviation and count of the finite values; None if there are none."""
    v = [x for x in values if x is not None and math.isfinite(x)]
    if not v:
        return None
    # Summed left to right, as the Rust code does (Python 3.12's sum() compensates its rounding,
    # which could move a mean on a rounding boundary by one printed digit).
    mean = functools.reduce(operator.add, v, 0.0) / len(v)
    var = functools.reduce(operator.add, ((x - mean) ** 2 for x in v), 0.0) / (len(v) - 1) if len(v) > 1 else 0.0
    return mean, math.sqrt(var), len(v)


def round_half_away(x):
    return math.copysign(math.floor(abs(x) + 0.5), x)


def signed(value):
    """Two decimals with a sign; a change that rounds to zero is +0.00, never -0.00."""
    rounded = round_half_away(value * 100.0) / 100.0
    return f"{0.0 if rounded == 0.0 else rounded:+.2f}"


def scientific(x, digits):
    """Rust's {:.Ne}: 1.32e-4, not Python's 1.32e-04."""
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def pm(stat):
    """Mean ± std as the reports print them: small values (solved tasks' losses) in scientific
    notation."""
    if stat is None:
        return "-"
    m, s, n = stat
    if abs(m) < 0.01:
        return f"{scientific(m, 2)} ± {scientific(s, 1)}" if n > 1 else scientific(m, 2)
    return f"{m:.4f} ± {s:.4f}" if n > 1 else f"{m:.4f}"


def number(text):
    return float(text) if text not in ("", None) else None


UNITS = {
    "loss": lambda value, base: 100.0 * (value - base) / base,
    "perplexity": lambda value, base: 100.0 * (math.exp(value - base) - 1.0),
    "accuracy": lambda value, base: 100.0 * (value - base),
}


def paired(unit, rows, reference, column):
    """Each seed's change of `rows` against `reference` in the same seed: mean, std, count."""
    base = {r["seed"]: number(r[column]) for r in reference}
    changes = []
    for r in rows:
        value, ref = number(r[column]), base.get(r["seed"])
        if value is None or ref is None:
            continue
        change = UNITS[unit](value, ref)
        if math.isfinite(change):
            changes.append(change)
    return mean_std(changes)


def paired_cell(stat):
    if stat is None:
        return "-"
    m, s, n = stat
    return f"{signed(m)} ± {s:.2f}%" if n > 1 else f"{signed(m)}%"


def by_run(rows, study):
    """The runs of a study in the order the CSV first names them, each with its seeds' rows."""
    runs = {}
    for r in rows:
        if r["study"] == study:
            runs.setdefault(r["run"], []).append(r)
    return list(runs.items())


def studies(rows):
    return list(dict.fromkeys(r["study"] for r in rows))


def paper1(rows):
    """The main table: the headline study's runs (standard first), then the ablations' ("text")
    and the scale study's, all paired against standard seed by seed (where both have the seed)."""
    runs = by_run(rows, "headline") + by_run(rows, "text") + by_run(rows, "scale") + by_run(rows, "smaller")
    reference = runs[0][1]
    reference_params = float(reference[0]["total_params"])
    table = []
    for i, (name, list_) in enumerate(runs):
        params = float(list_[0]["total_params"])
        diverged = sum(1 for r in list_ if r["status"] != "finished")
        table.append(
            f"| {name} | {list_[0]['total_params']} | {100.0 * (params - reference_params) / reference_params:+.2f}% "
            f"| {list_[0]['weight_decay']} | {pm(mean_std(number(r['final_val_loss']) for r in list_))} "
            f"| {pm(mean_std(number(r['best_val_loss']) for r in list_))} "
            f"| {'reference' if i == 0 else paired_cell(paired('loss', list_, reference, 'best_val_loss'))} "
            f"| {diverged}/{len(list_)} |"
        )
    return table


def t_975(df):
    """The 97.5% quantile of Student's t, by bisection on its tail."""
    low, high = 0.0, 1000.0
    for _ in range(200):
        middle = (low + high) / 2.0
        low, high = (middle, high) if upper_tail(middle, df) > 0.025 else (low, middle)
    return (low + high) / 2.0


def paper1_budget(rows):
    """The training-budget table: the headline's two runs and each budget study's, shortest first:
    steps, tokens, seeds, each run's best loss, the gap paired by seed and its 95% interval."""
    lengths = [("headline", "standard", "wq-identity")]
    for study in studies(rows):
        if study.startswith("budget-"):
            steps = study[len("budget-") :]
            lengths.append((study, f"standard, {steps} steps", f"wq-identity, {steps} steps"))
    if len(lengths) < 2:
        return []
    table = []
    for study, standard, identity in lengths:
        of = lambda name: [r for r in rows if r["study"] == study and r["run"] == name]
        gap = paired("loss", of(identity), of(standard), "best_val_loss")
        interval = "-"
        if gap is not None and gap[2] > 1:
            half = t_975(gap[2] - 1) * gap[1] / math.sqrt(gap[2])
            interval = f"{signed(gap[0] - half)}% to {signed(gap[0] + half)}%"
        tokens = mean_std(float(r["tokens"]) for r in of(standard))[0]
        steps = int(of(standard)[0]["steps"])
        table.append((steps,
            f"| {steps} | {tokens / 1e6:.2f}M | {0 if gap is None else gap[2]} "
            f"| {pm(mean_std(number(r['best_val_loss']) for r in of(standard)))} "
            f"| {pm(mean_std(number(r['best_val_loss']) for r in of(identity)))} | {paired_cell(gap)} | {interval} |"))
    return [row for _, row in sorted(table)]


def paper2(rows):
    """One table per study: costs, and loss and perplexity paired against the first study's first
    run (the control study's runs saw its batches seed by seed)."""
    table = []
    reference = by_run(rows, studies(rows)[0])[0][1]
    reference_kv = float(reference[0]["kv_cache_bytes_per_token"])
    for s, study in enumerate(studies(rows)):
        for i, (name, list_) in enumerate(by_run(rows, study)):
            kv = list_[0]["kv_cache_bytes_per_token"]
            cells = ["reference", "reference"] if (s, i) == (0, 0) else [
                paired_cell(paired(unit, list_, reference, "best_val_loss")) for unit in ("loss", "perplexity")
            ]
            table.append(
                f"| {name} | {list_[0]['total_params']} | {kv} B | {100.0 * (1.0 - float(kv) / reference_kv):.1f}% "
                f"| {pm(mean_std(number(r['best_val_loss']) for r in list_))} | {cells[0]} | {cells[1]} |"
            )
    return table


def paper2_synthetic(rows):
    """Per task, accuracy by variant and length, with each variant's paired change in points; and,
    where results.csv has them, whole lists, steps to 99% and symmetry."""
    tasks = {}
    for study in studies(rows):
        task, _, length = study.rpartition("-L")
        tasks.setdefault(task, []).append(study)
    table = []
    for task, settings in tasks.items():
        names = [name for name, _ in by_run(rows, settings[0])]
        for row, name in enumerate(names):
            cells = []
            for study in settings:
                list_ = [r for r in rows if r["study"] == study and r["run"] == name]
                reference = [r for r in rows if r["study"] == study and r["run"] == names[0]]
                stat = mean_std(100.0 * a for a in (number(r["accuracy"]) for r in list_) if a is not None)
                cell = "-" if stat is None else (f"{stat[0]:.2f}% ± {stat[1]:.2f}" if stat[2] > 1 else f"{stat[0]:.2f}%")
                change = paired("accuracy", list_, reference, "accuracy")
                if row > 0 and change is not None:
                    cell += f" (Δ {signed(change[0])} pt)"
                cells.append(cell)
            table.append(f"| {name} | " + " | ".join(cells) + " |")
        if "sequence_accuracy" in rows[0]:
            table += [f"| {name} | " + " | ".join(progress_cell(rows, study, name) for study in settings) + " |" for name in names]
    return table


GRID_STUDY = re.compile(r"^(?P<task>[a-z]+)-L\d+-\d+x\d+x\d+$")


def paper2_synthetic_beside_paper(rows):
    """Per task (the sweep's grid, not the probe) and run, the columns of "Beside paper 2's table"
    that are ours: mean accuracy over every setting and seed, and the change against Q-K-V paired
    by setting and seed (how many pairs are 1 point or more lower or higher). The paper's columns
    follow them in the report."""
    tasks = {}
    for study in studies(rows):
        match = GRID_STUDY.match(study)
        if match:
            tasks.setdefault(match["task"], []).append(study)
    table = []
    for task in ("reverse", "sort", "sub", "swap", "copy"):
        grid = tasks.get(task)
        if not grid:
            continue
        names = [name for name, _ in by_run(rows, grid[0])]
        for name in names:
            accuracies, changes = [], []
            for study in grid:
                reference = {r["seed"]: number(r["accuracy"]) for r in rows if r["study"] == study and r["run"] == names[0]}
                for r in rows:
                    if r["study"] != study or r["run"] != name or number(r["accuracy"]) is None:
                        continue
                    accuracies.append(number(r["accuracy"]))
                    if reference.get(r["seed"]) is not None:
                        changes.append(100.0 * (number(r["accuracy"]) - reference[r["seed"]]))
            mean = mean_std(accuracies)
            cell = "-" if mean is None else f"{100.0 * mean[0]:.2f}%"
            gap = mean_std(changes)
            if name == names[0] or gap is None:
                gap_cell = "-"
            else:
                lower = sum(1 for c in changes if c <= -1.0)
                higher = sum(1 for c in changes if c >= 1.0)
                gap_cell = f"{signed(gap[0])} pt (lower in {lower}, higher in {higher} of {len(changes)})"
            table.append(f"| {task} | {name} | {cell} | {gap_cell} |")
    return table


def progress_cell(rows, study, name):
    """Whole lists right (mean over seeds) · each seed's step to 99% (– never) · mean symmetry."""
    list_ = [r for r in rows if r["study"] == study and r["run"] == name]
    sequence = mean_std(100.0 * a for a in (number(r["sequence_accuracy"]) for r in list_) if a is not None)
    symmetry = mean_std(number(r["symmetry"]) for r in list_)
    steps = "/".join(r["steps_to_99pct"] or "–" for r in list_)
    return " · ".join(["-" if sequence is None else f"{sequence[0]:.2f}%", steps, "-" if symmetry is None else f"{symmetry[0]:.3f}"])


def paper2_vision(rows):
    """One table per study: best and final validation loss, the runs that overfit (final more than
    10% and 0.01 above best), validation and test accuracy, and the test accuracy (validation's where the
    set has no test split) paired against the study's first run; paper 2's MNIST column is quoted,
    not computed, and the baselines' rows are not in results.csv."""
    table = []
    for study in studies(rows):
        runs = by_run(rows, study)
        reference = runs[0][1]
        for i, (name, list_) in enumerate(runs):
            if i == 0:
                accuracy = "reference"
            else:
                change = paired("accuracy", list_, reference, DECIDED)
                accuracy = "-" if change is None else (
                    f"{signed(change[0])} pt ± {change[1]:.2f}" if change[2] > 1 else f"{signed(change[0])} pt"
                )
            judged = [
                number(r["final_val_loss"]) > 1.1 * number(r["best_val_loss"])
                and number(r["final_val_loss"]) - number(r["best_val_loss"]) > 0.01
                for r in list_
                if number(r["final_val_loss"]) is not None and number(r["best_val_loss"]) is not None
            ]
            table.append(
                f"| {name} | {list_[0]['total_params']} | {pm(mean_std(number(r['best_val_loss']) for r in list_))} "
                f"| {pm(mean_std(number(r['final_val_loss']) for r in list_))} | {sum(judged)} of {len(judged)} "
                f"| {percent(list_, 'accuracy')} | {percent(list_, 'test_accuracy')} | {accuracy} |"
            )
    return table


def percent(list_, column):
    stat = mean_std(number(r.get(column)) for r in list_)
    if stat is None:
        return "-"
    return f"{100.0 * stat[0]:.2f} ± {100.0 * stat[1]:.2f}%" if stat[2] > 1 else f"{100.0 * stat[0]:.2f}%"


# The accuracy a vision study is decided by: the test split's where results.csv has it.
DECIDED = "decided_accuracy"


def with_decided_accuracy(rows):
    for r in rows:
        test = r.get("test_accuracy")
        r[DECIDED] = test if test not in ("", None) else r["accuracy"]
    return rows


def t_central(t, df):
    """P(|T| < t) for Student's t with integer df >= 1 (Abramowitz & Stegun 26.7.3-4)."""
    theta = math.atan(t / math.sqrt(df))
    sin, cos = math.sin(theta), math.cos(theta)

    def series(first):
        total, term, k = 0.0, cos**first, first
        while k + 2 <= df:
            total += term
            term *= (k + 1) / (k + 2) * cos * cos
            k += 2
        return total

    return sin * series(0) if df % 2 == 0 else 2.0 / math.pi * (theta + sin * series(1))


def upper_tail(x, df):
    outside = 1.0 - t_central(abs(x), df)
    return outside / 2.0 if x >= 0 else 1.0 - outside / 2.0


def p_value(tested, stat):
    """The two-sided t-test of "differs from 0", or two one-sided tests of "within ±M%"."""
    mean, std, n = stat
    if tested == "differs from 0":
        if std == 0.0:
            return 1.0 if mean == 0.0 else 0.0
        return 2.0 * upper_tail(abs(mean) / (std / math.sqrt(n)), n - 1)
    margin = float(tested[len("within ±") :].removesuffix("%").removesuffix(" pt"))
    if std == 0.0:
        return 0.0 if abs(mean) < margin else 1.0
    error = std / math.sqrt(n)
    return max(upper_tail((mean + margin) / error, n - 1), upper_tail((margin - mean) / error, n - 1))


def holm(p_values):
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, largest = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        largest = max(largest, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = largest
    return adjusted


def corrected_tests(report, rows, unit, column="best_val_loss"):
    """The report's table of tests corrected together: each test named in it (A against B, what
    it tests) computed again from results.csv (`column`'s changes in `unit`), then Holm's
    correction over all of them."""
    tests = []
    for line in report.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and " against " in cells[0] and cells[1].startswith(("differs", "within")):
            tests.append(cells[:2])
    # Run names are unique across a report's studies; a head ratio ("GQA 2/8") is part of the name.
    runs = {}
    for r in rows:
        runs.setdefault(r["run"], []).append(r)
    stats = []
    for comparison, tested in tests:
        first, second = comparison.split(" against ")
        stats.append(paired(unit, runs[first], runs[second], column))
    adjusted = holm([p_value(tested, stat) for (_, tested), stat in zip(tests, stats)])
    return [
        f"| {comparison} | {tested} | {p_value(tested, stat):.4f} | {corrected:.4f} | {'yes' if corrected < 0.05 else 'no'} |"
        for (comparison, tested), stat, corrected in zip(tests, stats, adjusted)
    ]


KINDS = {
    "paper1": lambda report, rows: paper1(rows) + corrected_tests(report, rows, "loss") + paper1_budget(rows),
    "paper2": lambda report, rows: paper2(rows) + corrected_tests(report, rows, "perplexity"),
    "paper2-synthetic": lambda report, rows: paper2_synthetic_beside_paper(rows) + paper2_synthetic(rows),
    # The vision report's tests are of its first study (the digits); its later studies reuse the
    # run names.
    "paper2-vision": lambda report, rows: paper2_vision(with_decided_accuracy(rows))
    + corrected_tests(report, [r for r in rows if r["study"] == rows[0]["study"]], "accuracy", DECIDED),
}


def experiment_of(report):
    """The experiment a report was made by, from its quoted command."""
    for line in report.splitlines():
        if line.startswith("- command:"):
            words = line.split("`")[1].split()
            return words[words.index("experiment") + 1]
    raise ValueError("the report quotes no command")


def check(folder):
    folder = Path(folder)
    report = (folder / "report.md").read_text(encoding="utf-8")
    with open(folder / "results.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    experiment = experiment_of(report)
    if experiment not in KINDS:
        print(f"{folder}: no tables to rebuild for `qkv experiment {experiment}`")
        return True
    lines = set(report.splitlines())
    table = KINDS[experiment](report, rows)
    # A rebuilt row must begin a line of the report: cells quoted from a paper may follow it.
    missing = [row for row in table if not any(line.startswith(row) for line in lines)]
    for row in missing:
        print(f"{folder}: rebuilt from results.csv but not in report.md:\n  {row}")
    print(f"{folder}: {len(table) - len(missing)} of {len(table)} table rows rebuilt from results.csv match report.md")
    return not missing


def main(folders):
    if not folders:
        root = Path(__file__).resolve().parent.parent / "docs" / "results"
        folders = sorted(p.parent for p in root.glob("*/results.csv"))
    ok = all([check(folder) for folder in folders])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
