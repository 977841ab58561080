#!/usr/bin/env bash
# Turns compare.sh output (../shared/bench-public/compare.sh, one line per program:
# "NAME a=MEDIAN ... | jw/a=RATIO ...") into a table of jwmalloc's ratio to each peer
# (above 1: jwmalloc ahead) and a PNG bar chart of it (gnuplot).
# Usage: plot.sh COMPARE_OUTPUT OUT_DIR      writes OUT_DIR/ratios.dat and OUT_DIR/ratios.png
# Errors: a missing input file, or no compare.sh line in it, exits 2 with a one-line message.
set -eu
in=${1:?usage: plot.sh COMPARE_OUTPUT OUT_DIR}; out=${2:?usage: plot.sh COMPARE_OUTPUT OUT_DIR}
[ -r "$in" ] || { echo "plot.sh: cannot read $in" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not installed" >&2; exit 2; }
mkdir -p "$out"
# Columns: program, then jw/peer for every peer named on the first line, in its order.
awk -F'|' 'NF == 2 { n = split($2, r, " "); if (!hdr) { h = "program"; for (i = 1; i <= n; i++) { split(r[i], kv, "=");
    h = h " " kv[1] }; print h; hdr = 1 } split($1, w, " "); line = w[1];
  for (i = 1; i <= n; i++) { split(r[i], kv, "="); line = line " " (kv[2] == "-" ? "NaN" : kv[2]) } print line }' \
  "$in" > "$out/ratios.dat"
[ "$(wc -l < "$out/ratios.dat")" -gt 1 ] || { echo "plot.sh: no compare.sh lines in $in" >&2; exit 2; }
ncol=$(head -1 "$out/ratios.dat" | wc -w)
gnuplot <<GP
set terminal pngcairo size 1000,480 font ",10"
set output "$out/ratios.png"
set title "jwmalloc throughput / peer's (median of interleaved runs; above 1: jwmalloc ahead)"
set style data histograms; set style histogram clustered gap 1; set style fill solid 0.8 border -1
set boxwidth 0.9; set ylabel "jw / peer"; set grid ytics; set xtics rotate by -30
set logscale y 2; set yrange [0.25:16]; set key top left
f(x) = 1
plot for [i=2:$ncol] "$out/ratios.dat" using i:xtic(1) title columnheader(i), f(x) with lines lc rgb "black" dt 2 notitle
GP
echo "$out/ratios.png"
