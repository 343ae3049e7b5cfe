// Times pi's own compaction code (@mariozechner/pi-coding-agent, installed in tests/pi_reference)
// on one pi session file, the way pi runs it: the whole session parsed into memory once, then
// per round the threshold check, prepareCompaction (the plan) and buildSessionContext.
//
// Usage: node bench/pi_engine_bench.mjs SESSION.jsonl ROUNDS KEEP RESERVE WINDOW
// Prints JSON: median and minimum milliseconds per operation, the first call of each (JIT cold, as
// pi's first plan after loading a session), plus what pi decided (a sanity check).
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pkgDir = join(here, "..", "tests", "pi_reference", "node_modules", "@mariozechner", "pi-coding-agent");
const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
const compaction = await import(pathToFileURL(join(pkgDir, "dist", "core", "compaction", "compaction.js")).href);
const sessions = await import(pathToFileURL(join(pkgDir, "dist", "core", "session-manager.js")).href);

const [file, roundsArg, keepArg, reserveArg, windowArg] = process.argv.slice(2);
const rounds = Number(roundsArg);
const settings = { enabled: true, reserveTokens: Number(reserveArg), keepRecentTokens: Number(keepArg) };
const window = Number(windowArg);

const t0 = process.hrtime.bigint();
const all = sessions.parseSessionEntries(readFileSync(file, "utf8"));
sessions.migrateSessionEntries(all);
const entries = all.filter((e) => e.type !== "session");
const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;

// [median, minimum] milliseconds over `rounds` calls after one warm-up call.
function timed(fn) {
  fn();
  const times = [];
  for (let i = 0; i < rounds; i++) {
    const start = process.hrtime.bigint();
    fn();
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  return [times[Math.floor(times.length / 2)], times[0]];
}

const thresholdCheck = () => {
  const messages = sessions.buildSessionContext(entries).messages;
  const tokens = compaction.estimateContextTokens(messages).tokens;
  return { tokens, compact: compaction.shouldCompact(tokens, window, settings) };
};
const plan = () => compaction.prepareCompaction(entries, settings);
const build = () => sessions.buildSessionContext(entries);

// first calls, in a fresh process: each operation's first run (the JIT has not seen it yet)
const first_ms = {};
function first(name, fn) {
  const start = process.hrtime.bigint();
  const result = fn();
  first_ms[name] = Number(process.hrtime.bigint() - start) / 1e6;
  return result;
}
const prep = first("plan", plan);
const decision = first("threshold_check", thresholdCheck);
first("context_view", build);
const out = {
  package: `${pkg.name}@${pkg.version}`,
  entries: entries.length,
  load_ms: loadMs,
  context_messages: build().messages.length,
  context_tokens: decision.tokens,
  should_compact: decision.compact,
  messages_to_summarize: prep ? prep.messagesToSummarize.length : 0,
  first_kept_entry_id: prep ? prep.firstKeptEntryId : null,
  first_ms,
  ms: {},
  min_ms: {},
};
for (const [name, fn] of [["threshold_check", thresholdCheck], ["plan", plan], ["context_view", build]]) {
  [out.ms[name], out.min_ms[name]] = timed(fn);
}
process.stdout.write(JSON.stringify(out));
