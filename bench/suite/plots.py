"""PNG plots of the report, drawn by gnuplot (docs/design/bench.md, "Runner and
report"). Each function writes a data file and a gnuplot script beside the PNG
and runs gnuplot; it returns the PNG's file name, or None when gnuplot is
missing or failed (the report then says so)."""
import os
import shutil
import subprocess

COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
# One colour per allocator in every plot.
FIXED = {"jwmalloc": "#d62728", "glibc": "#1f77b4", "jemalloc": "#2ca02c", "jemalloc-1s": "#98df8a",
         "jwmalloc-fixed": "#ff9896",
         "mimalloc": "#ff7f0e", "tcmalloc": "#9467bd", "scudo": "#8c564b"}


def color(series, i):
    return FIXED.get(series, COLORS[(i + 5) % len(COLORS)])


def have_gnuplot():
    return shutil.which("gnuplot") is not None


def _run(out_dir, name, script, data_rows):
    if not have_gnuplot():
        return None
    os.makedirs(os.path.join(out_dir, "plots"), exist_ok=True)
    dat = os.path.join(out_dir, "plots", name + ".dat")
    gp = os.path.join(out_dir, "plots", name + ".gp")
    png = name + ".png"
    with open(dat, "w") as f:
        for row in data_rows:
            f.write(" ".join(row) + "\n")
    with open(gp, "w") as f:
        f.write(script.replace("@DAT@", dat).replace("@PNG@", os.path.join(out_dir, png)))
    try:
        p = subprocess.run(["gnuplot", gp], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if p.returncode != 0 or not os.path.exists(os.path.join(out_dir, png)):
        return None
    return png


def _q(s):
    return '"%s"' % s.replace('"', "'")


def _val(v):
    return "?" if v is None else "%.6g" % v


def bars(out_dir, name, title, ylabel, categories, series, values, log=False, ref_line=None, ymin=None):
    """Clustered bars: one cluster per category, one bar per series.
    values[(category, series)] -> number or None. ymin: the y axis's lower
    end (default 0; "*" lets gnuplot choose, for values below 0)."""
    series = [s for s in series if any(values.get((c, s)) is not None for c in categories)]
    if not series:
        return None
    rows = []
    for c in categories:
        rows.append([_q(c)] + [_val(values.get((c, s))) for s in series])
    width = max(900, 70 * len(categories) * max(1, len(series)) // 3 + 200)
    plots = []
    for i, s in enumerate(series):
        plots.append("'@DAT@' using %d:xtic(1) title %s lc rgb '%s'" % (i + 2, _q(s), color(s, i)))
    extra = ""
    if ref_line is not None:
        extra = "set arrow from graph 0, first %g to graph 1, first %g nohead dt 2 lc rgb '#000000'\n" % (
            ref_line, ref_line)
    script = """set terminal pngcairo size %d,480 noenhanced font 'sans,9'
set output '@PNG@'
set title %s
set ylabel %s
set datafile missing '?'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics rotate by -30
set key outside right top
set grid ytics
set yrange [%s:*]
%s%s
plot %s
""" % (width, _q(title), _q(ylabel), "*" if log else ("0" if ymin is None else str(ymin)),
       "set logscale y\n" if log else "", extra,
       ", ".join(plots))
    return _run(out_dir, name, script, rows)


def lines(out_dir, name, title, xlabel, ylabel, series_points, log_y=False, xtics=None):
    """One line per series; series_points: list of (series, [(x, y), ...])."""
    rows = []
    blocks = []
    for i, (s, pts) in enumerate(series_points):
        if not pts:
            continue
        for x, y in pts:
            rows.append(["%.6g" % x, _val(y)])
        rows.append([])
        rows.append([])
        blocks.append("'@DAT@' index %d using 1:2 with linespoints title %s lc rgb '%s' pt 7 ps 0.5" % (
            len(blocks), _q(s), color(s, i)))
    if not blocks:
        return None
    tics = ""
    if xtics:
        tics = "set xtics (%s)\n" % ", ".join("%s %g" % (_q(lbl), x) for lbl, x in xtics)
    script = """set terminal pngcairo size 900,480 noenhanced font 'sans,9'
set output '@PNG@'
set title %s
set xlabel %s
set ylabel %s
set datafile missing '?'
set key outside right top
set grid
%s%splot %s
""" % (_q(title), _q(xlabel), _q(ylabel), "set logscale y\n" if log_y else "", tics, ", ".join(blocks))
    return _run(out_dir, name, script, rows)
