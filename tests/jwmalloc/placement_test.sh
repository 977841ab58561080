#!/bin/sh
# Placement (docs/design/frontend.md, "Placement", JWMALLOC_PLACEMENT=1):
# after a peak, the slabs in use fall back to the steady level. One thread, a short peak-trough
# (jwb-peaktrough, 4 MiB steady, 5x peak) of small blocks, every block
# replaced many times per hold (--hold-ops), reclamation off so that nothing
# depends on timing, and the page pool off (the empty pages it keeps on
# purpose would hide what placement does): the bytes of live ranges (the
# frontend's slabs) at the end of the trough must be within 1.1x those at the
# end of the steady phase. 1.02x with the root-ordered placement, 1.40x with
# JWMALLOC_PLACEMENT=0 (the live blocks stay spread over the peak's slabs). Mapped bytes and
# metadata are printed, not asserted (backend.md section 10: that 1.1x target
# is not met yet).
# With SIZES=mid (513 B-8 KiB: midend slabs and the frontend's largest
# classes) the same bound checks the midend's placement too (midend.md,
# "Placement"): 0.98x with placement, 1.31x without.
# Usage: placement_test.sh BUILD_DIR [SIZES]
set -eu
build=$1
sizes=${2:-small}
out=$(JWMALLOC_PLACEMENT=1 JWMALLOC_RECLAIM=0 JWMALLOC_POOL_PERCENT=0 JWMALLOC_POOL_MIN=0 LD_PRELOAD="$build/lib/libjwmalloc.so" \
      "$build/bin/jwb-peaktrough" --steady 4M --cycles 2 --hold-ops 2000000 --threads 1 --sizes "$sizes" 2>&1) || {
  echo "placement: jwb-peaktrough failed: $out"
  exit 1
}
get() { printf '%s\n' "$out" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
sl=$(get as_steady_live); tl=$(get as_trough_live)
sm=$(get as_steady_mapped); tm=$(get as_trough_mapped)
se=$(get as_steady_meta); te=$(get as_trough_meta)
if [ -z "$sl" ] || [ -z "$tl" ]; then
  echo "placement: no allocator figures in: $out"
  exit 1
fi
echo "placement ($sizes): live slabs steady $sl -> trough $tl bytes; mapped $sm -> $tm; metadata $se -> $te"
if [ $((tl * 10)) -gt $((sl * 11)) ]; then
  echo "placement: FAIL: slabs in use after the trough $tl > 1.1 x steady $sl"
  exit 1
fi
echo "placement: ok"
