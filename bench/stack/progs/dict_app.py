# The python3 app of the stack evaluation (docs/design/stack.md): builds a
# dict of N string entries, says "ready", then answers "q SEED" with a digest
# of 5% of the entries picked from SEED (a random part of the heap is
# touched), "sum" with a digest of everything, and ends at "quit" or EOF.
import hashlib, os, random, sys
n = int(os.environ.get("APP_N", "450000"))
d = {("k%d" % i): ("v%d-" % i) * 6 for i in range(n)}
print("ready", flush=True)
for line in sys.stdin:
    w = line.split()
    if not w or w[0] == "quit":
        break
    h = hashlib.sha256()
    if w[0] == "q":
        r = random.Random(int(w[1]))
        for _ in range(n // 20):
            k = "k%d" % r.randrange(n)
            h.update(d[k].encode())
    else:
        for k in sorted(d):
            h.update(d[k].encode())
    print(w[0], h.hexdigest()[:16], flush=True)
