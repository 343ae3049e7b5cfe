// Times pi's own read of a session file (@mariozechner/pi-coding-agent, installed in tests/pi_reference):
// readFileSync, parseSessionEntries and migrateSessionEntries, what pi does when it opens a session.
//
// Usage: node bench/pi_load_bench.mjs SESSION.jsonl ROUNDS
// Prints JSON: every round's milliseconds and the number of entries read (a sanity check).
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pkgDir = join(here, "..", "tests", "pi_reference", "node_modules", "@mariozechner", "pi-coding-agent");
const sessions = await import(pathToFileURL(join(pkgDir, "dist", "core", "session-manager.js")).href);

const [file, roundsArg] = process.argv.slice(2);
const ms = [];
let entries = 0;
for (let i = 0; i < Number(roundsArg); i++) {
  const t0 = process.hrtime.bigint();
  const all = sessions.parseSessionEntries(readFileSync(file, "utf8"));
  sessions.migrateSessionEntries(all);
  entries = all.filter((e) => e.type !== "session").length;
  ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
process.stdout.write(JSON.stringify({ entries, ms }));
