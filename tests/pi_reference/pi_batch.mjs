// Runs pi's own session and compaction code (@mariozechner/pi-coding-agent, pinned in package.json)
// on many generated sessions in one Node process, for the differential fuzz (tests/test_pi_fuzz.py).
//
// Usage: node pi_batch.mjs CASES.json  ->  JSON on stdout: {package, version, results: [...]}
// CASES.json: {"cases": [{"name", "objects": [header, ...entries], "leaf": id|null, "keeps": [..],
//                          "fork_leaf": id|null}]}
//
// Each case is loaded into a real SessionManager (in memory) the way pi loads a file: migration,
// index, labels, leaf = the last entry (or `leaf`, moved there with branch()). Then, on the
// branch pi would compact (getBranch()): per-entry estimates, the context (buildSessionContext),
// its estimate and serialization, and for every keep budget findCutPoint and prepareCompaction.
// With `fork_leaf`, the case is also forked with createBranchedSession and the new file returned.
// Indices are positions in the branch (root = 0). A case that throws reports {error}.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pkgDir = join(here, "node_modules", "@mariozechner", "pi-coding-agent");
const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
const load = (rel) => import(pathToFileURL(join(pkgDir, "dist", "core", ...rel.split("/"))).href);
const compaction = await load("compaction/compaction.js");
const sessions = await load("session-manager.js");
const messages = await load("messages.js");
const utils = await load("compaction/utils.js");

function open(objects) {
  const sm = sessions.SessionManager.inMemory("/work/project");
  const all = JSON.parse(JSON.stringify(objects));
  sessions.migrateSessionEntries(all);
  sm.fileEntries = all; // what setSessionFile() holds after loadEntriesFromFile()
  sm._buildIndex();
  return sm;
}

function boundaryStart(path) {
  for (let i = path.length - 1; i >= 0; i--) {
    if (path[i].type === "compaction") {
      const k = path.findIndex((e) => e.id === path[i].firstKeptEntryId);
      return k >= 0 ? k : i + 1;
    }
  }
  return 0;
}

const serialize = (msgs) => utils.serializeConversation(messages.convertToLlm(msgs));

function runCase(c) {
  const sm = open(c.objects);
  if (c.leaf) sm.branch(c.leaf);
  const path = sm.getBranch();
  const indexOf = new Map(path.map((e, i) => [e.id, i]));
  const context = sm.buildSessionContext().messages;
  const out = {
    name: c.name,
    leaf: sm.getLeafId(),
    path_ids: path.map((e) => e.id),
    entry_tokens: path.map((e) => (e.type === "message" ? compaction.estimateTokens(e.message) : null)),
    context: {
      roles: context.map((m) => m.role),
      tokens: context.map((m) => compaction.estimateTokens(m)),
      estimate: compaction.estimateContextTokens(context),
      serialized: serialize(context),
    },
    boundary_start: boundaryStart(path),
    results: [],
  };
  for (const keep of c.keeps) {
    const settings = { enabled: true, reserveTokens: 16384, keepRecentTokens: keep };
    const cut = compaction.findCutPoint(path, out.boundary_start, path.length, keep);
    const prep = compaction.prepareCompaction(path, settings);
    const row = {
      keep,
      cut: { first_kept_index: cut.firstKeptEntryIndex, turn_start_index: cut.turnStartIndex, is_split_turn: cut.isSplitTurn },
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
        previous_summary_chars: prep.previousSummary === undefined ? null : prep.previousSummary.length,
        read_files: lists.readFiles,
        modified_files: lists.modifiedFiles,
        serialized: serialize(prep.messagesToSummarize),
        serialized_prefix: serialize(prep.turnPrefixMessages),
      };
    }
    out.results.push(row);
  }
  if (c.fork_leaf) {
    const forked = open(c.objects);
    forked.createBranchedSession(c.fork_leaf);
    out.fork_objects = forked.fileEntries;
  }
  return out;
}

const { cases } = JSON.parse(readFileSync(process.argv[2], "utf8"));
const results = cases.map((c) => {
  try {
    return runCase(c);
  } catch (e) {
    return { name: c.name, error: String(e && e.stack ? e.stack : e) };
  }
});
process.stdout.write(JSON.stringify({ package: pkg.name, version: pkg.version, results }));
