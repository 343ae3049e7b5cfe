// Runs pi's own compaction functions (@mariozechner/pi-coding-agent, pinned in package.json) on a
// pi session file and prints JSON, so Python tests and benchmarks can compare against the reference.
//
// Usage: node pi_reference.mjs SESSION.jsonl [--keep 2000,5000,...] [--reserve 16384] [--bench N]
//
// Indices are 0-based positions among the file's entries, the session header not counted.
// pi migrates v1 files with random ids, so results name entries by index, never by id.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pkgDir = join(here, "node_modules", "@mariozechner", "pi-coding-agent");
const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
// prepareCompaction / estimateContextTokens are not re-exported from the package root: load the module file.
const compaction = await import(pathToFileURL(join(pkgDir, "dist", "core", "compaction", "compaction.js")).href);
const sessions = await import(pathToFileURL(join(pkgDir, "dist", "core", "session-manager.js")).href);
const messages = await import(pathToFileURL(join(pkgDir, "dist", "core", "messages.js")).href);
const utils = await import(pathToFileURL(join(pkgDir, "dist", "core", "compaction", "utils.js")).href);

const args = process.argv.slice(2);
const file = args[0];
function opt(name, fallback) {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
}
const keeps = opt("--keep", "2000,5000,10000,20000,50000").split(",").map(Number);
const reserve = Number(opt("--reserve", "16384"));
const benchRounds = Number(opt("--bench", "0"));

const all = sessions.parseSessionEntries(readFileSync(file, "utf8"));
sessions.migrateSessionEntries(all);
const entries = all.filter((e) => e.type !== "session");
const indexOf = new Map(entries.map((e, i) => [e.id, i]));

function boundaryStart(path) {
  for (let i = path.length - 1; i >= 0; i--) {
    if (path[i].type === "compaction") {
      const k = path.findIndex((e) => e.id === path[i].firstKeptEntryId);
      return k >= 0 ? k : i + 1;
    }
  }
  return 0;
}

const start = boundaryStart(entries);
const context = sessions.buildSessionContext(entries).messages;
const out = {
  package: pkg.name,
  version: pkg.version,
  entries: entries.length,
  boundary_start: start,
  entry_tokens: entries.map((e) => (e.type === "message" ? compaction.estimateTokens(e.message) : null)),
  context_messages: context.length,
  context_estimate: compaction.estimateContextTokens(context),
  results: [],
};
for (const keep of keeps) {
  const settings = { enabled: true, reserveTokens: reserve, keepRecentTokens: keep };
  const cut = compaction.findCutPoint(entries, start, entries.length, keep);
  const full = compaction.findCutPoint(entries, 0, entries.length, keep);
  const prep = compaction.prepareCompaction(entries, settings);
  const row = {
    keep_recent_tokens: keep,
    first_kept_index: cut.firstKeptEntryIndex,
    turn_start_index: cut.turnStartIndex,
    is_split_turn: cut.isSplitTurn,
    from_zero: { first_kept_index: full.firstKeptEntryIndex, turn_start_index: full.turnStartIndex, is_split_turn: full.isSplitTurn },
    prepare: null,
  };
  if (prep) {
    const lists = utils.computeFileLists(prep.fileOps);
    row.prepare = {
      first_kept_index: indexOf.get(prep.firstKeptEntryId),
      is_split_turn: prep.isSplitTurn,
      messages_to_summarize: prep.messagesToSummarize.length,
      turn_prefix_messages: prep.turnPrefixMessages.length,
      tokens_before: prep.tokensBefore,
      previous_summary_chars: prep.previousSummary ? prep.previousSummary.length : null,
      read_files: lists.readFiles,
      modified_files: lists.modifiedFiles,
      serialized: utils.serializeConversation(messages.convertToLlm(prep.messagesToSummarize)),
    };
  }
  out.results.push(row);
}
if (benchRounds > 0) {
  const keep = keeps[0];
  const settings = { enabled: true, reserveTokens: reserve, keepRecentTokens: keep };
  const time = (fn) => {
    fn();
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < benchRounds; i++) fn();
    return Number(process.hrtime.bigint() - t0) / 1e6 / benchRounds;
  };
  out.bench_ms = {
    rounds: benchRounds,
    threshold_check: time(() => {
      const ctx = sessions.buildSessionContext(entries).messages;
      compaction.shouldCompact(compaction.estimateContextTokens(ctx).tokens, 200000, settings);
    }),
    plan: time(() => compaction.prepareCompaction(entries, settings)),
    build_context: time(() => sessions.buildSessionContext(entries)),
  };
}
process.stdout.write(JSON.stringify(out));
