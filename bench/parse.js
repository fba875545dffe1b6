// Node's JSON.parse over every line of a session file: the limit that
// BenchmarkLoadVsNode compares rein's Load with. Prints milliseconds.
const fs = require("fs");
const t0 = process.hrtime.bigint();
const text = fs.readFileSync(process.argv[2], "utf8");
let n = 0, start = 0;
for (;;) {
  const end = text.indexOf("\n", start);
  if (end < 0) break;
  const v = JSON.parse(text.slice(start, end));
  if (v.seq !== undefined) n++;
  start = end + 1;
}
const ms = Number(process.hrtime.bigint() - t0) / 1e6;
console.log(ms.toFixed(1), n);
