// The node app of the stack evaluation (docs/design/stack.md): as dict_app.py,
// a Map of N string entries and Buffers (malloc'd backing stores).
const crypto = require("crypto");
const n = parseInt(process.env.APP_N || "300000");
const m = new Map();
for (let i = 0; i < n; i++) m.set("k" + i, ("v" + i + "-").repeat(6));
const bufs = [];
for (let i = 0; i < 192; i++) bufs.push(Buffer.alloc(256 * 1024, i % 251));
let seed = 0;
const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed; };
console.log("ready");
const rl = require("readline").createInterface({ input: process.stdin });
rl.on("line", (line) => {
  const w = line.trim().split(/\s+/);
  if (w[0] === "quit") { rl.close(); return; }
  const h = crypto.createHash("sha256");
  if (w[0] === "q") {
    seed = parseInt(w[1]);
    for (let i = 0; i < n / 20; i++) h.update(m.get("k" + (rnd() % n)));
    for (let i = 0; i < 16; i++) h.update(bufs[rnd() % bufs.length]);
  } else {
    for (const k of [...m.keys()].sort()) h.update(m.get(k));
  }
  console.log(w[0], h.digest("hex").slice(0, 16));
});
