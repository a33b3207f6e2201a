#!/usr/bin/python3
"""Plot weft-perf results (--json or --csv files) into one PNG.

The figure has two panels side by side: bandwidth (GB/s) against message
size, and latency (median half round trip, with a min..p99 band) against
message size. Each run label gets one colour; each bandwidth test gets its
own line style.

  scripts/plot-perf.py weft.json raw.json -o perf.png
  scripts/plot-perf.py --tests bw,bibw --bw-scale log run.csv -o perf.png

Needs Debian's python3-matplotlib (scripts/lib/install-deps.sh installs it).
Exit status: 0 written, 1 unreadable or invalid input, 2 bad usage.
"""

import argparse
import csv
import json
import math
import os
import re
import sys

EXIT_INPUT = 1
EXIT_USAGE = 2

BW_TESTS = ("bw", "bibw", "rate", "grouped")
LATENCY_TEST = "latency"
PANELS = ("both", "bw", "latency")
NUMBER_FIELDS = ("count", "time_us", "bw_gbps", "mmsgs", "min_us", "median_us", "avg_us", "p99_us")

# Colours stay distinguishable in print; line styles tell the tests apart.
RUN_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
TEST_STYLES = {"bw": "-", "bibw": "--", "rate": ":", "grouped": "-."}
GROUP_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*")
BINARY_UNITS = ("", "K", "M", "G", "T")
MAX_SIZE_TICKS = 10
FIGURE_SIZE_IN = (13.0, 5.0)
FIGURE_DPI = 100


class InputError(Exception):
    """A result file that cannot be read or does not look like weft-perf output."""


class Run:
    """One weft-perf run: its label, the file it came from, and its result rows."""

    def __init__(self, label, path, rows):
        self.label = label
        self.path = path
        self.rows = rows  # dicts: test, size, group, and the NUMBER_FIELDS present


# ---------------------------------------------------------------- JSON input


def _json_number(value, where):
    if value is None:
        return None
    # bool is an int in Python but never a measurement.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: expected a number, got {json.dumps(value)}")
    return float(value) if math.isfinite(value) else None


def _json_size(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value != int(value) or value <= 0:
        raise InputError(f"{where}: expected a positive integer size, got {json.dumps(value)}")
    return int(value)


def _json_rows(results, where):
    if not isinstance(results, list):
        raise InputError(f"{where}: expected a list of results")
    rows = []
    for i, result in enumerate(results):
        at = f"{where}[{i}]"
        if not isinstance(result, dict):
            raise InputError(f"{at}: expected an object")
        test = result.get("test")
        if not isinstance(test, str) or not test:
            raise InputError(f"{at}.test: missing or not a string")
        if "size" not in result:
            raise InputError(f"{at}.size: missing")
        row = {"test": test, "size": _json_size(result["size"], f"{at}.size"), "group": None}
        if result.get("group") is not None:
            row["group"] = _json_size(result["group"], f"{at}.group")
        for field in NUMBER_FIELDS:
            if field in result:
                row[field] = _json_number(result[field], f"{at}.{field}")
        rows.append(row)
    return rows


def _label_from_facts(facts, fallback):
    """A run's label: its own, else transport and provider, else the file name."""
    label = facts.get("label")
    if isinstance(label, str) and label.strip():
        return label.strip()
    parts = [str(facts[k]) for k in ("transport", "provider") if facts.get(k) not in (None, "")]
    return " ".join(parts) if parts else fallback


def load_json(path, text):
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: invalid JSON: {e.msg} (column {e.colno})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a JSON object at the top level")
    tool = doc.get("tool")
    if tool is not None and tool != "weft-perf":
        raise InputError(f"{path}: key 'tool' is {json.dumps(tool)}, not \"weft-perf\"")
    stem = os.path.basename(path)
    if "runs" in doc:  # format 2: one entry per run
        if not isinstance(doc["runs"], list):
            raise InputError(f"{path}: key 'runs' must be a list")
        runs = []
        for i, run in enumerate(doc["runs"]):
            if not isinstance(run, dict):
                raise InputError(f"{path}: key runs[{i}] must be an object")
            if "results" not in run:
                raise InputError(f"{path}: key runs[{i}].results is missing")
            rows = _json_rows(run["results"], f"{path}: key runs[{i}].results")
            runs.append(Run(_label_from_facts(run, f"{stem} run {i + 1}"), path, rows))
        return runs
    if "results" in doc:  # format 1: the facts and results of one run at the top level
        return [Run(_label_from_facts(doc, stem), path, _json_rows(doc["results"], f"{path}: key results"))]
    raise InputError(f"{path}: neither 'runs' nor 'results' key found; not weft-perf --json output")


# ----------------------------------------------------------------- CSV input

# "# label=weft 0.1 (tcp;ofi_rxm, lo) transport=plugin": values may hold
# spaces, so a fact ends where the next "key=" begins.
_FACT_SPLIT = re.compile(r"\s+(?=[A-Za-z_][\w.-]*=)")


def _comment_facts(comment):
    facts = {}
    for part in _FACT_SPLIT.split(comment.lstrip("#").strip()):
        key, sep, value = part.partition("=")
        if sep:
            facts[key.strip()] = value.strip()
    return facts


def _csv_number(text, where):
    if text.strip() == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}: expected a number, got {text!r}") from None
    return value if math.isfinite(value) else None


def _csv_size(text, where):
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{where}: expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise InputError(f"{where}: expected a positive integer, got {text!r}")
    return value


def load_csv(path, text):
    stem = os.path.basename(path)
    header = None
    comment_label = None  # from the latest "# label=..." line, for files without a label column
    runs = {}  # label -> Run, in first-seen order
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):
            facts = _comment_facts(line)
            if facts:
                comment_label = _label_from_facts(facts, comment_label or stem)
            continue
        fields = next(csv.reader([line]))
        names = [f.strip() for f in fields]
        if header is None or names == header:  # weft-perf may repeat the header per run
            header = names
            for required in ("test", "size"):
                if required not in header:
                    raise InputError(f"{path}:{lineno}: header has no '{required}' column")
            if "bw_gbps" not in header and "median_us" not in header:
                raise InputError(f"{path}:{lineno}: header has neither 'bw_gbps' nor 'median_us' column")
            continue
        if len(fields) < len(header):
            raise InputError(f"{path}:{lineno}: {len(fields)} fields, header has {len(header)}")
        values = dict(zip(header, fields))  # extra columns beyond ours are ignored
        where = f"{path}:{lineno}"
        test = values["test"].strip()
        if not test:
            raise InputError(f"{where}: empty 'test' field")
        row = {"test": test, "size": _csv_size(values["size"], f"{where}: column 'size'"), "group": None}
        if values.get("group", "").strip():
            row["group"] = _csv_size(values["group"], f"{where}: column 'group'")
        for field in NUMBER_FIELDS:
            if field in values:
                row[field] = _csv_number(values[field], f"{where}: column '{field}'")
        label = values.get("label", "").strip() or comment_label or stem
        runs.setdefault(label, Run(label, path, [])).rows.append(row)
    if header is None:
        raise InputError(f"{path}: no CSV header line (expected weft-perf --csv output)")
    return list(runs.values())


def load_file(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e.strerror if isinstance(e, OSError) else e}") from None
    if path.endswith(".json") or text.lstrip()[:1] in ("{", "["):
        runs = load_json(path, text)
    else:
        runs = load_csv(path, text)
    if not runs or not any(run.rows for run in runs):
        raise InputError(f"{path}: no result rows")
    return runs


# ------------------------------------------------------------------- labels


def dedupe_labels(runs):
    """Makes labels unique: a label used in two files gets the file name appended."""
    files_per_label = {}
    for run in runs:
        files_per_label.setdefault(run.label, set()).add(run.path)
    seen = {}
    for run in runs:
        if len(files_per_label[run.label]) > 1:
            run.label = f"{run.label} ({os.path.basename(run.path)})"
        count = seen.get(run.label, 0) + 1
        seen[run.label] = count
        if count > 1:  # same label and same file name (different directories)
            run.label = f"{run.label} #{count}"


def apply_label_overrides(runs, overrides, parser):
    """--label KEY=TEXT renames the run labelled KEY, or the runs of input file KEY."""
    for override in overrides:
        # Try each "=" in turn: file paths and labels may hold one themselves.
        for pos in [m.start() for m in re.finditer("=", override)]:
            key, text = override[:pos], override[pos + 1:]
            by_label = [r for r in runs if r.label == key]
            by_file = [r for r in runs if key in (r.path, os.path.basename(r.path))]
            if by_label:
                for run in by_label:
                    run.label = text
                break
            if by_file:
                for run in by_file:
                    # Several runs in one file keep their own labels after the new text.
                    run.label = f"{text}: {run.label}" if len(by_file) > 1 else text
                break
        else:
            parser.error(f"--label {override!r}: no run label or input file matches the text before '='")


# ------------------------------------------------------------------ figure


def size_text(size):
    """8, 1K, 64K, 1M: binary units, as weft-perf's -b/-e options take them."""
    unit = 0
    while size >= 1024 and size % 1024 == 0 and unit < len(BINARY_UNITS) - 1:
        size //= 1024
        unit += 1
    return f"{size}{BINARY_UNITS[unit]}"


def size_ticks(sizes):
    """Powers of two covering sizes, thinned so at most MAX_SIZE_TICKS remain."""
    low = math.floor(math.log2(min(sizes)))
    high = math.ceil(math.log2(max(sizes)))
    step = max(1, math.ceil((high - low + 1) / MAX_SIZE_TICKS))
    return [2 ** e for e in range(low, high + 1, step)]


def series(rows, test, group, metric):
    """Sorted (sizes, rows) for one test (and group) with a usable metric; the last row per size wins."""
    by_size = {}
    for row in rows:
        if row["test"] == test and row["group"] == group and (row.get(metric) or 0) > 0:
            by_size[row["size"]] = row
    sizes = sorted(by_size)
    return sizes, [by_size[s] for s in sizes]


def bandwidth_lines(runs, tests):
    """(label, colour, style, marker, sizes, values) per line of the bandwidth panel."""
    lines = []
    show_test = tests != ["bw"]
    for index, run in enumerate(runs):
        colour = RUN_COLOURS[index % len(RUN_COLOURS)]
        for test in tests:
            if test == "grouped":
                groups = sorted({r["group"] for r in run.rows if r["test"] == "grouped" and r["group"]})
                keys = [(g, f"{run.label}, grouped n={g}", GROUP_MARKERS[i % len(GROUP_MARKERS)])
                        for i, g in enumerate(groups)]
            else:
                keys = [(None, f"{run.label}, {test}" if show_test else run.label, "o")]
            for group, label, marker in keys:
                sizes, rows = series(run.rows, test, group, "bw_gbps")
                if sizes:
                    lines.append((label, colour, TEST_STYLES[test], marker, sizes,
                                  [r["bw_gbps"] for r in rows]))
    return lines


def latency_lines(runs):
    """(label, colour, sizes, medians, lows, highs) per run; lows/highs None without min/p99."""
    lines = []
    for index, run in enumerate(runs):
        sizes, rows = series(run.rows, LATENCY_TEST, None, "median_us")
        if not sizes:
            continue
        colour = RUN_COLOURS[index % len(RUN_COLOURS)]
        medians = [r["median_us"] for r in rows]
        has_band = all((r.get("min_us") or 0) > 0 and (r.get("p99_us") or 0) > 0 for r in rows)
        lows = [r["min_us"] for r in rows] if has_band else None
        highs = [r["p99_us"] for r in rows] if has_band else None
        lines.append((run.label, colour, sizes, medians, lows, highs))
    return lines


def format_size_axis(axis, sizes, ticker):
    axis.set_xscale("log", base=2)
    axis.xaxis.set_major_locator(ticker.FixedLocator(size_ticks(sizes)))
    axis.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: size_text(int(round(x)))))
    axis.xaxis.set_minor_locator(ticker.NullLocator())
    axis.set_xlabel("message size (bytes)")
    axis.grid(True, which="major", alpha=0.3)


def format_log_values(axis, ticker):
    """Plain numbers (0.1, 5, 20) instead of 10^x; minor ticks labelled only across few decades."""

    class PlainLogFormatter(ticker.LogFormatter):
        # LogFormatter decides which ticks get a label; the label itself is plain.
        def __call__(self, value, pos=None):
            return f"{value:g}" if super().__call__(value, pos) else ""

    axis.yaxis.set_major_formatter(PlainLogFormatter())
    axis.yaxis.set_minor_formatter(PlainLogFormatter(minor_thresholds=(2, 0.5)))


def draw_empty(axis, note):
    axis.text(0.5, 0.5, note, ha="center", va="center", transform=axis.transAxes,
              fontsize=12, color="#666666")
    axis.set_xticks([])
    axis.set_yticks([])


def draw_bandwidth(axis, lines, tests, scale, ticker):
    axis.set_title("bandwidth")
    if not lines:
        draw_empty(axis, f"no {'/'.join(tests)} results")
        return
    for label, colour, style, marker, sizes, values in lines:
        axis.plot(sizes, values, color=colour, linestyle=style, marker=marker, markersize=3.5,
                  linewidth=1.6, label=label)
    format_size_axis(axis, [s for line in lines for s in line[4]], ticker)
    axis.set_yscale(scale)
    if scale == "linear":
        axis.set_ylim(bottom=0)
    else:
        format_log_values(axis, ticker)
    axis.set_ylabel("bandwidth (GB/s)")
    axis.legend(fontsize=8, loc="best")


def draw_latency(axis, lines, ticker):
    axis.set_title("latency (median half round trip; band: min to p99)")
    if not lines:
        draw_empty(axis, "no latency results")
        return
    for label, colour, sizes, medians, lows, highs in lines:
        axis.plot(sizes, medians, color=colour, marker="o", markersize=3.5, linewidth=1.6, label=label)
        if lows is not None:
            axis.fill_between(sizes, lows, highs, color=colour, alpha=0.15, linewidth=0)
    format_size_axis(axis, [s for line in lines for s in line[2]], ticker)
    axis.set_yscale("log")
    format_log_values(axis, ticker)
    axis.set_ylabel("latency (µs)")
    axis.legend(fontsize=8, loc="best")


def default_title(runs):
    labels = [run.label for run in runs]
    if len(labels) > 3:
        return f"weft-perf: {len(labels)} runs"
    return "weft-perf: " + " vs ".join(labels)


def plot(runs, args):
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display; also keeps the output independent of the machine
        from matplotlib import pyplot, ticker
    except ImportError:
        raise InputError("python3-matplotlib is not installed (apt-get install python3-matplotlib)") from None

    bw = bandwidth_lines(runs, args.tests)
    latency = latency_lines(runs)
    if args.panels is None:  # default: both, dropping a panel with nothing to show
        panels = [p for p, lines in (("bw", bw), ("latency", latency)) if lines]
        if not panels:
            raise InputError(f"no {'/'.join(args.tests)} or latency results in "
                             + ", ".join(sorted({run.path for run in runs})))
    else:
        panels = ["bw", "latency"] if args.panels == "both" else [args.panels]

    width = FIGURE_SIZE_IN[0] if len(panels) == 2 else FIGURE_SIZE_IN[0] * 0.55
    figure, axes = pyplot.subplots(1, len(panels), figsize=(width, FIGURE_SIZE_IN[1]),
                                   dpi=FIGURE_DPI, squeeze=False)
    for axis, panel in zip(axes[0], panels):
        if panel == "bw":
            draw_bandwidth(axis, bw, args.tests, args.bw_scale, ticker)
        else:
            draw_latency(axis, latency, ticker)
    figure.suptitle(args.title if args.title is not None else default_title(runs))
    figure.tight_layout()
    try:
        # No Software/date chunks: the same input gives the same bytes.
        figure.savefig(args.output, format="png", metadata={"Software": None})
    except OSError as e:
        raise InputError(f"{args.output}: cannot write: {e.strerror}") from None
    finally:
        pyplot.close(figure)


# --------------------------------------------------------------------- main


def parse_tests(text):
    tests = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in tests if t not in BW_TESTS]
    if not tests or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown test {', '.join(unknown) or '(none)'}; choose from {','.join(BW_TESTS)}")
    return list(dict.fromkeys(tests))  # drop repeats, keep order


def build_parser():
    parser = argparse.ArgumentParser(
        prog="plot-perf.py",
        description="Plot weft-perf --json/--csv results: bandwidth and latency against message size.")
    parser.add_argument("files", nargs="+", metavar="FILE", help="weft-perf --json or --csv output")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.png", help="PNG file to write")
    parser.add_argument("--tests", type=parse_tests, default=["bw"], metavar="LIST",
                        help=f"bandwidth tests to draw, comma separated, from {','.join(BW_TESTS)} "
                             "(default: bw); grouped draws one line per group size")
    parser.add_argument("--panels", choices=PANELS, default=None,
                        help="panels to draw (default: both, leaving out one with no results; "
                             "named explicitly, an empty panel says so)")
    parser.add_argument("--bw-scale", choices=("linear", "log"), default="linear",
                        help="bandwidth axis scale (default: linear)")
    parser.add_argument("--title", default=None, help="figure title (default: built from the run labels)")
    parser.add_argument("--label", action="append", default=[], metavar="KEY=TEXT",
                        help="rename the runs of input file KEY, or the run labelled KEY; repeatable")
    return parser


def main(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        runs = [run for path in args.files for run in load_file(path)]
        dedupe_labels(runs)
        apply_label_overrides(runs, args.label, parser)
        dedupe_labels(runs)  # an override may have reused a label
        plot(runs, args)
    except InputError as e:
        print(f"plot-perf.py: error: {e}", file=sys.stderr)
        return EXIT_INPUT
    print(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
