"""Allocation-heavy Python program recorded for the evaluation suite's traces.

Deterministic (fixed seed). Run with PYTHONMALLOC=malloc so CPython's objects
come from malloc rather than its own arenas. Three parts: dict/str/json churn,
objects sorted and dropped, and producer/consumer threads (objects made in one
thread and freed in another).
"""
import json
import queue
import random
import sys
import threading

random.seed(4)
scale = int(sys.argv[1]) if len(sys.argv) > 1 else 1

# 1. dict / str / list / json churn
d = {}
for i in range(40000 * scale):
    key = "k%06d-%s" % (i, "x" * (i % 13))
    d[key] = [i, str(i * 7), {"v": i % 97}]
    if i % 5 == 0:
        d.pop("k%06d-%s" % (i // 2, "x" * ((i // 2) % 13)), None)
text = json.dumps(d)
back = json.loads(text)
words = text.split('"')
counts = {}
for w in words:
    counts[w[:6]] = counts.get(w[:6], 0) + 1
del d, back, words


# 2. objects: create, sort, drop in waves
class Item:
    __slots__ = ("name", "weight", "tags")

    def __init__(self, n):
        self.name = "item-%d" % n
        self.weight = random.random()
        self.tags = [n % 3, n % 5, "t%d" % (n % 11)]


for wave in range(4 * scale):
    items = [Item(n) for n in range(20000)]
    items.sort(key=lambda it: it.weight)
    keep = items[::10]
    del items
    summary = "".join(it.name[-1] for it in keep)

# 3. producer / consumer threads
q = queue.Queue(maxsize=256)
done = object()


def producer(seed):
    rnd = random.Random(seed)
    for i in range(15000 * scale):
        q.put({"id": i, "payload": [rnd.random() for _ in range(i % 9)], "s": "p%d" % i})
    q.put(done)


def consumer(out):
    total = 0
    while True:
        item = q.get()
        if item is done:
            break
        total += len(item["payload"]) + len(item["s"])
    out.append(total)


results = []
threads = [threading.Thread(target=producer, args=(s,)) for s in (1, 2)]
threads += [threading.Thread(target=consumer, args=(results,)) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(text), len(counts), len(summary), sum(results))
