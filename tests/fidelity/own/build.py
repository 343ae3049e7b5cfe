#!/usr/bin/env python3
"""Builds our own request-life-cycle and filler-tail stories (issue 32), in the held-out format.

Why: the held-out sets are frozen and unseen; this set is ours to look at and tune on. It covers
request life cycles in many phrasings and five languages (asked; deferred by the user or the
assistant; cancelled with "forget the X", "no need for X after all", "drop that", German, French,
Chinese and Japanese equivalents; reopened; done only with a recorded outcome; "I'll do X next"
is NOT done; an answer identical to an earlier one still answers its request), and current values
whose last statement lies many compactions back behind a long tail of filler.

Deterministic (no randomness): ``python3 tests/fidelity/own/build.py`` rewrites
``stories/*.json``. Each story is checked: filler holds no fact value and no request match.
Scored by ``score.py`` here (the held-out rules, unchanged).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

FILLER = [
    (
        "bash",
        {"command": "ruff check src"},
        "All checks passed!\n12 files scanned in 0.41s",
        "Lint is clean.",
    ),
    (
        "bash",
        {"command": "df -h /data"},
        "Filesystem  Size  Used Avail Use% Mounted on\n/dev/nvme1  1.8T  1.1T  702G  61% /data",
        "Disk usage is at 61%, plenty of room.",
    ),
    (
        "bash",
        {"command": "pytest -q tests/unit"},
        "........................................ [ 67%]\n"
        "...................                      [100%]\n59 passed in 7.88s",
        "Unit tests pass (59).",
    ),
    (
        "bash",
        {"command": "git log --oneline -3"},
        "a81c2e0 tidy imports\n5d09b7f fix typo in docstring\n0c4417a bump linters",
        "Three small commits since yesterday.",
    ),
    (
        "bash",
        {"command": "uptime"},
        " 10:41:07 up 23 days,  4:02,  2 users,  load average: 0.71, 0.66, 0.59",
        "The build host is quiet.",
    ),
    (
        "bash",
        {"command": "du -sh logs/"},
        "3.7G\tlogs/",
        "Logs take 3.7G; rotation keeps that bounded.",
    ),
    (
        "bash",
        {"command": "python -m mypy src"},
        "Success: no issues found in 41 source files",
        "Type check is clean.",
    ),
    (
        "bash",
        {"command": "wc -l src/*.py | tail -1"},
        "  9184 total",
        "About nine thousand lines of source.",
    ),
    (
        "bash",
        {"command": "pip list --outdated | head -4"},
        "Package    Version Latest Type\n---------- ------- ------ -----\n"
        "certifi    2024.2  2024.8 wheel\nidna       3.6     3.7    wheel",
        "Two minor upgrades are pending; nothing urgent.",
    ),
    (
        "bash",
        {"command": "free -m"},
        "       total  used  free shared buff/cache available\n"
        "Mem:   64219 18034 30211    711      15973     44903",
        "Memory is fine, 44 GB available.",
    ),
    (
        "bash",
        {"command": "ls docs/"},
        "architecture.md  changelog.md  glossary.md  onboarding.md",
        "Docs folder has the usual four pages.",
    ),
    (
        "bash",
        {"command": "git status --short"},
        " M src/cli.py\n?? scratch/notes.txt",
        "One edited file and a scratch note.",
    ),
]


class Story:
    """Turns, facts and requests of one story, with turn indices recorded as events are added."""

    def __init__(self, name: str, domain: str, languages: list[str]) -> None:
        self.name, self.domain, self.languages = name, domain, languages
        self.turns: list[dict[str, Any]] = []
        self.facts: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.identifiers: list[str] = []
        self._filler = 0

    def user(self, text: str) -> int:
        self.turns.append({"role": "user", "text": text})
        return len(self.turns) - 1

    def say(self, text: str) -> int:
        self.turns.append({"role": "assistant", "text": text})
        return len(self.turns) - 1

    def tool(self, name: str, arguments: dict[str, Any], output: str, text: str = "") -> int:
        self.turns.append(
            {"role": "assistant", "text": text, "tool_call": {"name": name, "arguments": arguments}}
        )
        self.turns.append({"role": "tool", "text": output})
        return len(self.turns) - 2

    def filler(self, episodes: int) -> None:
        """``episodes`` routine tool runs, each followed by a one-line assistant note."""
        for _ in range(episodes):
            name, args, out, note = FILLER[self._filler % len(FILLER)]
            self._filler += 1
            self.user("Quick routine check, please.")
            self.tool(name, args, out)
            self.say(note)

    def fact(
        self, subject: str, category: str, current: list[str], at: int, superseded=(), not_changes=()
    ) -> None:
        self.facts.append(
            {
                "subject": subject,
                "category": category,
                "current": list(current),
                "superseded": list(superseded),
                "not_changes": list(not_changes),
                "changed_at_turn": at,
            }
        )

    def request(self, rid: str, category: str, final_state: str, match: list[str]) -> None:
        self.requests.append({"id": rid, "category": category, "final_state": final_state, "match": match})

    def check(self) -> None:
        """No filler turn holds a fact value or a request match (else the tail would state it)."""
        filler_text = json.dumps(FILLER, ensure_ascii=False)
        for f in self.facts:
            for v in (*f["current"], *f["superseded"], *f["not_changes"]):
                assert v not in filler_text, (self.name, v)
                assert any(v in json.dumps(t, ensure_ascii=False) for t in self.turns), (self.name, v)
        for r in self.requests:
            for m in r["match"]:
                assert m.lower() not in filler_text.lower(), (self.name, m)
                assert any(m.lower() in json.dumps(t, ensure_ascii=False).lower() for t in self.turns), (
                    self.name,
                    m,
                )
        for i in self.identifiers:
            assert any(i in json.dumps(t, ensure_ascii=False) for t in self.turns), (self.name, i)

    def as_json(self) -> dict[str, Any]:
        self.check()
        return {
            "name": self.name,
            "domain": self.domain,
            "languages": self.languages,
            "turns": self.turns,
            "facts": self.facts,
            "requests": self.requests,
            "identifiers": self.identifiers,
        }


def tile_server() -> Story:
    """A map tile service (en, de): cancellations in English and German, a reopened request."""
    s = Story("tile_server_de", "geo / web service", ["en", "de"])
    s.user(
        "We are building the map tile server for the city portal. "
        "Goal: serve vector tiles for the whole region fast."
    )
    s.say("Understood. I'll start from the existing repo layout in `tilesrv/`.")
    s.filler(2)
    a = s.user("Cache layer: we use Redis for rendered tiles. Tile size is 256 px for now.")
    s.say("Noted: Redis as tile cache, 256 px tiles.")
    s.filler(2)
    s.user("Please add a /healthz endpoint to the tile server so the load balancer can probe it.")
    s.say("Will do once the router refactor lands.")
    s.filler(2)
    s.user("Max zoom is zoom 14 for the first release.")
    s.say("OK, zoom 14 as the ceiling.")
    s.filler(1)
    s.tool(
        "read",
        {"path": "config/tilesrv.toml"},
        '[server]\nport = 8080\nworkers = 4\n[render]\nformat = "mvt"',
    )
    s.say("The config runs workers = 4 today.")
    s.filler(2)
    b = s.user("Statt Redis nehmen wir ab jetzt Varnish als Tile-Cache.")
    s.say("Verstanden: Varnish ersetzt Redis als Cache.")
    s.fact("cache_backend", "explicit_change", ["Varnish"], b, superseded=["Redis"])
    s.filler(2)
    c = s.user("Let's go with 512 px tiles instead of 256 px, the retina clients need it.")
    s.say("Switched the plan to 512 px tiles.")
    s.fact("tile_size", "explicit_change", ["512 px"], c, superseded=["256 px"])
    del a
    s.filler(2)
    s.user("Bitte erstelle einen Heatmap-Export der Kachelzugriffe.")
    s.say("Ich baue den Heatmap-Export nach dem Cache-Umbau.")
    s.filler(1)
    s.user("Add a Grafana panel for tile latency, please.")
    s.say("Sure, I'll add the Grafana panel.")
    s.filler(2)
    s.user("Max zoom goes up: zoom 16.")
    s.say("zoom 16 it is.")
    s.filler(1)
    d = s.tool(
        "edit",
        {"path": "config/tilesrv.toml", "old": "workers = 4", "new": "workers = 12"},
        "Edited config/tilesrv.toml (1 replacement).",
        "Raising the worker count for the bigger tiles.",
    )
    s.fact("worker_count", "change_in_tool_edit", ["workers = 12"], d, superseded=["workers = 4"])
    s.filler(2)
    s.user("Write a seed script for the demo tiles.")
    s.say("I'll prepare the seed script.")
    s.filler(1)
    s.user("Forget the seed script.")
    s.say("OK, dropping it.")
    s.filler(2)
    s.user("Den Heatmap-Export brauchen wir doch nicht.")
    s.say("Alles klar, kein Heatmap-Export.")
    s.request("heatmap", "cancelled_de", "cancelled", ["Heatmap-Export"])
    s.filler(1)
    s.user("No need for the Grafana panel after all, ops has one already.")
    s.say("Understood, no Grafana panel then.")
    s.request("grafana", "cancelled_no_need", "cancelled", ["Grafana panel"])
    s.filler(2)
    s.user("Run the load test against staging.")
    s.say("Staging is down right now, so I'll hold off on the load test until it is back up.")
    s.request("loadtest", "deferred_by_assistant", "deferred", ["load test"])
    s.filler(1)
    s.user("Let's park the CDN purge script for now, not today.")
    s.say("Parked.")
    s.request("cdn", "deferred_by_user", "deferred", ["CDN purge"])
    s.filler(2)
    e = s.user(
        "Region stays eu-central-1. If we ever moved to us-east-2 "
        "the latency for our users would double, so no change."
    )
    s.say("Right, staying in eu-central-1.")
    s.fact("region", "not_change_hypothetical", ["eu-central-1"], e, not_changes=["us-east-2"])
    s.filler(1)
    s.user("Rename the bucket prefix to tiles-v2/.")
    s.tool(
        "bash",
        {"command": "aws s3 mv s3://city-tiles/tiles/ s3://city-tiles/tiles-v2/ --recursive"},
        "move: 1204 objects",
    )
    s.say("Done: the bucket prefix is now tiles-v2/, 1204 objects moved, `aws s3 ls` confirms.")
    s.request("bucket", "done", "done", ["bucket prefix"])
    s.filler(1)
    s.user("Also export a CSV of tile errors.")
    s.user("Drop that, the error log is enough.")
    s.say("OK, no CSV of tile errors.")
    s.request("csv", "cancelled_drop_that", "cancelled", ["CSV of tile errors"])
    s.filler(2)
    f = s.user("Final: max zoom is zoom 18.")
    s.say("zoom 18 set as the maximum.")
    s.fact("max_zoom", "multi_revision", ["zoom 18"], f, superseded=["zoom 14", "zoom 16"])
    s.filler(1)
    s.user("Actually we do need the seed script after all, please write it.")
    s.say("Reopened: seed script is back on the list.")
    s.request("seed", "cancelled_then_reopened", "open", ["seed script"])
    s.filler(1)
    s.user("Write the migration notes for ops.")
    s.say("I'll write the migration notes next.")
    s.request("notes", "announced_not_done", "open", ["migration notes"])
    s.filler(1)
    s.user("What is the p95 render time right now?")
    s.say("The p95 render time is 84 ms on the benchmark set.")
    s.filler(2)
    s.user("Again, what is the p95 render time?")
    s.say("The p95 render time is 84 ms on the benchmark set.")
    s.request("p95", "done_identical_answer", "done", ["p95 render time"])
    s.filler(1)
    g = s.user("Das Timeout setzen wir auf 45 Sekunden, vorher waren es 20 Sekunden.")
    s.say("Timeout: 45 Sekunden.")
    s.fact("timeout", "explicit_change_de", ["45 Sekunden"], g, superseded=["20 Sekunden"])
    s.request("healthz", "open", "open", ["/healthz"])
    s.identifiers = ["tilesrv/", "config/tilesrv.toml", "tiles-v2/"]
    s.filler(22)
    return s


def invoice_ocr() -> Story:
    """An invoice OCR pipeline (fr, en): French cancellations and deferrals, sed and diff changes."""
    s = Story("invoice_ocr_fr", "document processing", ["fr", "en"])
    s.user(
        "On construit le pipeline OCR des factures fournisseurs. "
        "Objectif : extraire montant et TVA de chaque facture."
    )
    s.say("Compris. Je pars du dépôt `ocr-pipe/`.")
    s.filler(2)
    s.user("Le moteur OCR est Tesseract pour l'instant.")
    s.say("Noté : Tesseract.")
    s.filler(1)
    s.tool(
        "read",
        {"path": "ocr-pipe/config.yaml"},
        "scan:\n  dpi: 300\n  deskew: true\nstore:\n  bucket: invoices-raw",
    )
    s.say("Config actuelle : dpi: 300, bucket invoices-raw.")
    s.filler(2)
    s.user("Confidence threshold: 0.80 for accepting a field.")
    s.say("0.80 noted.")
    s.filler(1)
    s.user("Peux-tu générer le rapport PDF mensuel des erreurs ?")
    s.say("Oui, je le ferai après la migration.")
    s.filler(2)
    a = s.user("On passe à PaddleOCR, plus de Tesseract.")
    s.say("D'accord : PaddleOCR remplace Tesseract.")
    s.fact("ocr_engine", "explicit_change_fr", ["PaddleOCR"], a, superseded=["Tesseract"])
    s.filler(1)
    b = s.tool(
        "bash",
        {"command": "sed -i 's/dpi: 300/dpi: 400/' ocr-pipe/config.yaml && grep dpi ocr-pipe/config.yaml"},
        "  dpi: 400",
        "Raising the scan resolution for the small print.",
    )
    s.fact("dpi", "change_in_tool_sed", ["dpi: 400"], b, superseded=["dpi: 300"])
    s.filler(2)
    s.user("Raise the confidence threshold to 0.85.")
    s.say("0.85 it is.")
    s.filler(1)
    s.user("Set up email alerts for OCR failures.")
    s.say("I'll wire the email alerts.")
    s.filler(2)
    s.say("Proposal: switch the language pack to fra+deu, some invoices come from Germany.")
    c = s.user("Non, on garde fra+eng.")
    s.say("OK, fra+eng stays.")
    s.fact("language_pack", "not_change_rejected_proposal", ["fra+eng"], c, not_changes=["fra+deu"])
    s.filler(1)
    s.user("Laisse tomber le rapport PDF.")
    s.say("Très bien, pas de rapport PDF.")
    s.request("pdf", "cancelled_fr", "cancelled", ["rapport PDF"])
    s.filler(2)
    s.user("Add a retry queue for failed pages.")
    s.say("Noted; it needs the worker pool change first.")
    s.request("retry", "open", "open", ["retry queue"])
    s.filler(1)
    s.user("Le tableau de bord qualité, on verra plus tard, pas maintenant.")
    s.say("D'accord, reporté.")
    s.request("dashboard", "deferred_by_user_fr", "deferred", ["tableau de bord"])
    s.filler(2)
    d = s.tool(
        "bash",
        {"command": "git show HEAD -- ocr-pipe/config.yaml"},
        "commit 7f3e1aa\n--- a/ocr-pipe/config.yaml\n+++ b/ocr-pipe/config.yaml\n"
        "@@ -5,2 +5,2 @@\n store:\n-  bucket: invoices-raw\n+  bucket: invoices-ocr-in",
        "The storage bucket change is in HEAD.",
    )
    s.fact("bucket", "change_in_git_diff", ["invoices-ocr-in"], d, superseded=["invoices-raw"])
    s.filler(1)
    s.user("forget the email alerts, we use the pager instead")
    s.say("OK.")
    s.request("alerts", "cancelled_forget", "cancelled", ["email alerts"])
    s.filler(2)
    s.user("Deduplicate the vendor list.")
    s.tool("bash", {"command": "python dedup_vendors.py"}, "1318 vendors in, 1201 out -> vendors_dedup.csv")
    s.say("Done: vendor list deduplicated, 1318 → 1201, written to vendors_dedup.csv.")
    s.request("vendors", "done", "done", ["vendor list"])
    s.filler(1)
    s.user("Ajoute l'export Excel des montants.")
    s.say("Je l'ajoute.")
    s.filler(1)
    s.user("Oublie l'export Excel.")
    s.say("Compris, abandonné.")
    s.filler(2)
    e = s.user("Threshold again: 0.72, the 0.85 rejects too many good fields.")
    s.say("Threshold now 0.72.")
    s.fact("confidence", "multi_revision", ["0.72"], e, superseded=["0.80", "0.85"])
    s.filler(1)
    s.user("Benchmark PaddleOCR on the scanned set.")
    s.say("I'll run the benchmark on the scanned set next.")
    s.request("bench", "announced_not_done", "open", ["scanned set"])
    s.filler(1)
    s.user("How many invoices failed yesterday?")
    s.say("42 invoices failed yesterday, all from vendor ACME-7.")
    s.filler(2)
    s.user("Sorry, how many invoices failed yesterday?")
    s.say("42 invoices failed yesterday, all from vendor ACME-7.")
    s.request("failed", "done_identical_answer", "done", ["invoices failed"])
    s.filler(1)
    s.user("Finalement, on a besoin de l'export Excel, fais-le.")
    s.say("Rouvert : export Excel.")
    s.request("excel", "cancelled_then_reopened_fr", "open", ["export Excel"])
    f = s.tool(
        "read",
        {"path": "ocr-pipe/settings.ini"},
        "[production]\nbatch_size = 64\n[staging]\nbatch_size = 8",
        "Production batches 64 pages; staging only 8.",
    )
    s.fact("batch_size", "not_change_staging_value", ["batch_size = 64"], f, not_changes=["batch_size = 8"])
    s.identifiers = ["ocr-pipe/config.yaml", "vendors_dedup.csv", "ACME-7"]
    s.filler(22)
    return s


def mobile_sync() -> Story:
    """A mobile sync service (zh, ja, en): CJK changes and cancellations, a revert, an accepted proposal."""
    s = Story("mobile_sync_zh_ja", "mobile backend", ["zh", "ja", "en"])
    s.user("我们在做移动端的离线同步服务。目标：让 App 在断网后也能安全合并数据。")
    s.say("明白。我从 `syncd/` 目录开始。")
    s.filler(2)
    s.user("数据库用 MySQL。")
    s.say("好的，MySQL。")
    s.filler(1)
    s.user("同期間隔は 25 分にします。")
    s.say("了解、25 分です。")
    s.filler(1)
    s.user("Push in groups of 20.")
    s.say("Batching pushes in groups of 20.")
    s.filler(2)
    s.user("帮我画一个延迟分布图。")
    s.say("好的，稍后画。")
    s.filler(1)
    s.user("週次レポートを作ってください。")
    s.say("はい、作ります。")
    s.filler(2)
    a = s.user("改用 PostgreSQL，不再用 MySQL。")
    s.say("已切换计划：PostgreSQL。")
    s.fact("database", "explicit_change_zh", ["PostgreSQL"], a, superseded=["MySQL"])
    s.filler(1)
    s.user("Set max_retries=8 for the push client.")
    s.say("max_retries=8 set.")
    s.filler(2)
    b = s.user("同期間隔は 10 分に変更します。")
    s.say("同期間隔を 10 分に変更しました。")
    s.fact("sync_interval", "explicit_change_ja", ["10 分"], b, superseded=["25 分"])
    s.filler(1)
    s.user("不用做那个延迟分布图了。")
    s.say("好的，取消。")
    s.request("latency_plot", "cancelled_zh", "cancelled", ["延迟分布图"])
    s.filler(2)
    s.user("週次レポートはもう要りません。")
    s.say("承知しました。")
    s.request("weekly", "cancelled_ja", "cancelled", ["週次レポート"])
    s.filler(1)
    s.say("I suggest batching pushes in groups of 50, the gateway handles it.")
    c = s.user("好的，就这么办。")
    s.say("Pushes now go in groups of 50.")
    s.fact("push_batch", "accepted_proposal", ["groups of 50"], c, superseded=["groups of 20"])
    s.filler(2)
    d = s.user("Revert it: max_retries=3 again, 8 hammered the gateway.")
    s.say("Back to max_retries=3.")
    s.fact("max_retries", "revert", ["max_retries=3"], d, superseded=["max_retries=8"])
    s.filler(1)
    e = s.user("Auth stays on Keycloak. We are not switching to Auth0, that rumor is false.")
    s.say("Keycloak stays.")
    s.fact("auth", "not_change_negation", ["Keycloak"], e, not_changes=["Auth0"])
    s.filler(1)
    s.user("オフライン時の競合解決のテストを追加してください。")
    s.say("わかりました。")
    s.request("conflict", "open_ja", "open", ["競合解決"])
    s.filler(2)
    s.user("Profile the battery usage on Android.")
    s.say("I'll postpone the battery profiling until the test devices arrive next week.")
    s.request("battery", "deferred_by_assistant", "deferred", ["battery"])
    s.filler(1)
    s.user("把同步日志清理一下。")
    s.tool("bash", {"command": "syncd gc --older-than 30d"}, "deleted 3412 rows")
    s.say("完成：删除了 3412 条过期同步日志。")
    s.request("gc", "done_zh", "done", ["同步日志"])
    s.filler(1)
    s.user("Write the release checklist.")
    s.say("Next I'll write the release checklist.")
    s.request("checklist", "announced_not_done", "open", ["release checklist"])
    s.filler(1)
    s.user("推送通知的本地化先放一放，以后再说。")
    s.say("好的，以后再做。")
    s.request("l10n", "deferred_by_user_zh", "deferred", ["推送通知的本地化"])
    s.filler(1)
    f = s.user("Back in 2023 we used CouchDB for sync, just for the record.")
    s.say("Noted as history.")
    s.fact("old_store", "not_change_historical", ["PostgreSQL"], f, not_changes=["CouchDB"])
    s.filler(1)
    s.user("How many devices synced today?")
    s.say("1873 devices synced today.")
    s.filler(2)
    s.user("How many devices synced today? I lost the number.")
    s.say("1873 devices synced today.")
    s.request("devices", "done_identical_answer", "done", ["devices synced"])
    s.identifiers = ["syncd/", "max_retries"]
    s.filler(22)
    return s


def main() -> None:
    out = HERE / "stories"
    out.mkdir(exist_ok=True)
    for s in (tile_server(), invoice_ocr(), mobile_sync()):
        (out / f"{s.name}.json").write_text(
            json.dumps(s.as_json(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )
        print(s.name, len(s.turns), "turns", len(s.facts), "facts", len(s.requests), "requests")


if __name__ == "__main__":
    main()
