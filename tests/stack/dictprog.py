# A real, unmodified workload for the stack tests: builds a large dict, says
# "ready", answers one query per line of stdin, then prints a checksum.
# argv[1]: "plain" (default), "fork" (the checksum is also computed by a fork
# child), "exec" (says "ready", reads one line, prints a checksum, then execs
# itself as "plain": the line lets a test swap the first image out before it
# reads its dict back and execs), "huge" (also a 48 MiB bytearray, a block
# over 4 MiB: grown, shrunk and summed with the rest).
import os, sys, hashlib
mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
n = int(os.environ.get("DICT_N", "200000"))
d = {("k%d" % i): ("v%d-" % i) * 8 for i in range(n)}
big = bytearray()
if mode == "huge":
    big = bytearray(b"".join(hashlib.sha256(b"%d" % i).digest() for i in range((40 << 20) // 32)))
    big.extend(big[: 8 << 20])  # realloc of a huge block: grows it
    del big[-(1 << 20):]         # and shrinks it
def checksum():
    h = hashlib.sha256()
    for k in sorted(d):
        h.update(k.encode()); h.update(d[k].encode())
    h.update(big)
    return h.hexdigest()
if mode == "exec":
    print("ready", flush=True)
    while os.read(0, 1) not in (b"\n", b""):  # one line, unbuffered: the rest is the next image's
        pass
    print("before exec", checksum(), flush=True)
    os.execv(sys.executable, [sys.executable, sys.argv[0], "plain"])
print("ready", flush=True)
for line in sys.stdin:
    print(line.strip(), d.get(line.strip(), "-"), flush=True)
if mode == "fork":
    pid = os.fork()
    if pid == 0:
        print("child", checksum(), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
print("sum", checksum(), flush=True)
