#!/usr/bin/env bash
# mstress-20T counts (2 runs each, interleaved), rptest-2T A/B (5 runs each, interleaved), peak-trough 2T/20T (5 each)
B=/tmp/bench-public; PT=/work/main/build/bin/jwb-peaktrough; TC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
echo "## mstress 20 50 25: /usr/bin/time (elapsed, system, max RSS, minor faults) and JWMALLOC_STATS's system calls and watermark lines"
for r in 1 2 3; do for l in main grace tc; do
  lib=/tmp/libjw-$l.so; [ $l = tc ] && lib=$TC
  out=$(cd $B && JWMALLOC_STATS=1 /usr/bin/time -f "%e s elapsed, %S s sys, %M KB max RSS, %R minor faults" env LD_PRELOAD=$lib ./mstress 20 50 25 2>&1 >/dev/null)
  echo "$l: $(echo "$out" | grep elapsed) | $(echo "$out" | grep -E 'system calls|past the' | sed 's/^ *//' | tr '\n' ' ')"
done; done
echo "## rptest 2 0 1 2 500 1000 100 8 16000: memory ops/CPU second"
for r in 1 2 3 4 5; do for l in main grace; do
  v=$(cd $B && LD_PRELOAD=/tmp/libjw-$l.so ./rptest 2 0 1 2 500 1000 100 8 16000 2>&1 | tr -d '.' | grep -Eo '[0-9]+ memory ops' | grep -Eo '[0-9]+')
  echo "$l $v"; done; done
echo "## jwb-peaktrough --steady 32M --cycles 3 --hold-ms 500: ops/s, backed bytes at the peak, after the trough, after the last trough"
for r in 1 2 3 4 5; do for t in 2 20; do for l in main grace; do
  LD_PRELOAD=/tmp/libjw-$l.so $PT --steady 32M --cycles 3 --hold-ms 500 --threads $t 2>&1 | grep jwbench |
   sed -E "s/.*(ops_per_s=[0-9.]+).*(as_peak_backed=[0-9]+).*(as_trough_backed=[0-9]+).*(as_trough_last_backed=[0-9]+).*/$l threads=$t \1 \2 \3 \4/"
done; done; done
