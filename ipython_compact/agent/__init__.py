"""The RLM-style REPL agent: a turn loop whose one tool runs Python in a kernel, with compaction."""
