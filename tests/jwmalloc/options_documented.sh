#!/usr/bin/env bash
# The options' documentation matches the options table
# (jwmalloc/common/option_table.h, printed by `jwmalloc options`): in each
# FILE's option tables (rows "| `JWMALLOC_NAME` | default | ... |"),
#   - every row of the table is documented, once;
#   - every JWMALLOC_ name documented is a row of the table;
#   - the default documented starts with the table's ("64M", "auto",
#     "the kernel's page", "unset"; a remark may follow).
# Usage: options_documented.sh JWMALLOC_TOOL FILE...
set -euo pipefail
TOOL=${1:?usage: options_documented.sh JWMALLOC_TOOL FILE...}
shift
[ $# -ge 1 ] || { echo "usage: options_documented.sh JWMALLOC_TOOL FILE..."; exit 2; }
T=$(mktemp -d /tmp/jwmalloc-optdoc-XXXXXX)
trap 'rm -rf "$T"' EXIT

"$TOOL" options >"$T/table" || { echo "options_documented: '$TOOL options' failed"; exit 1; }
[ "$(grep -vc '^#' "$T/table")" -ge 20 ] || { echo "options_documented: the table has too few rows"; exit 1; }

status=0
for f in "$@"; do
  awk -F'\t' -v file="$f" '
    # The table: name -> default.
    FILENAME == ARGV[1] { if ($0 !~ /^#/) { def[$1] = $3; rows[++n] = $1 } next }
    # A documentation row: | `JWMALLOC_NAME` | default | ...
    /^\| `JWMALLOC_[A-Z0-9_]+` \|/ {
      split($0, cell, "|")
      name = cell[2]; gsub(/[` ]/, "", name)
      d = cell[3]; gsub(/`/, "", d); sub(/^ +/, "", d); sub(/ +$/, "", d)
      seen[name]++
      if (!(name in def)) { printf "%s: %s is documented but is no row of the options table\n", file, name; bad = 1; next }
      want = def[name]
      if (substr(d, 1, length(want)) != want || (length(d) > length(want) && substr(d, length(want) + 1, 1) != " ")) {
        printf "%s: %s: documented default \"%s\", the table says \"%s\"\n", file, name, d, want; bad = 1
      }
    }
    END {
      for (i = 1; i <= n; i++) {
        if (!(rows[i] in seen)) { printf "%s: %s (options table) is not documented\n", file, rows[i]; bad = 1 }
        else if (seen[rows[i]] > 1) { printf "%s: %s is documented %d times\n", file, rows[i], seen[rows[i]]; bad = 1 }
      }
      exit bad
    }' "$T/table" "$f" || status=1
done
[ $status -eq 0 ] && echo "options_documented: ok ($(grep -vc '^#' "$T/table") options, $# files)"
exit $status
