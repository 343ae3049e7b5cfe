"""Story pg_upgrade_it: PostgreSQL major upgrade with Patroni + PgBouncer (it + en). Seed 7141."""

from common import A, T, U, bash, build, edit

PATRONI = "ops/patroni/patroni.yml"
BOUNCER = "ops/pgbouncer/pgbouncer.ini"

blocks = [
    [
        U("Ciao! Oggi partiamo con l'upgrade del cluster contabilità, ticket DBA-2291. Primario pg-prod-mil-01, "
          "gira su EC2 in eu-south-1, config Patroni in ops/patroni/patroni.yml e pgbouncer in ops/pgbouncer/pgbouncer.ini. "
          "Target per adesso PostgreSQL 15, siamo su 13. fammi vedere la config patroni"),
        A("Apro la sezione bootstrap/postgresql di Patroni.", bash("sed -n '1,40p' " + PATRONI)),
        T("scope: contabilita\nname: pg-prod-mil-01\nrestapi:\n  listen: 0.0.0.0:8008\nbootstrap:\n  dcs:\n    ttl: 30\n"
          "    loop_wait: 10\n    retry_timeout: 10\n    maximum_lag_on_failover: 1048576\n    postgresql:\n      use_pg_rewind: true\n"
          "      parameters:\n        max_connections: 200\n        max_wal_size: 2GB\n        wal_level: replica\n"
          "        statement_timeout: 30s\n        archive_command: 'pgbackrest --stanza=contabilita archive-push %p'"),
        A("Patroni: ttl: 30, loop_wait 10, max_connections: 200, max_wal_size: 2GB, statement_timeout: 30s. "
          "Archiviazione WAL con pgBackRest. Replica via streaming replication (wal_level replica, use_pg_rewind)."),
    ],
    [
        U("ok. il piano iniziale di Marco era fare pg_dumpall + restore sul nuovo cluster, ci mette una notte intera però"),
        A("Proposta: invece di pg_dumpall usiamo pg_upgrade --link sullo stesso volume. Con --link i file non vengono copiati, "
          "il downtime scende da ore a pochi minuti; il rovescio è che dopo l'avvio del nuovo cluster non si torna indietro "
          "sul vecchio data dir, quindi serve uno standby intatto come rete di sicurezza."),
        U("mi piace. vada per pg_upgrade --link, teniamo la replica 2 ferma come rete", mark="method"),
        A("Ok: metodo pg_upgrade --link, con la replica 2 fermata prima dell'upgrade come fallback."),
    ],
    [
        U("Prima di tutto: inventario delle estensioni installate in tutti i db, che alcune vanno aggiornate"),
        A("Interrogo pg_extension su ogni database.", bash("for d in $(psql -Atc \"select datname from pg_database where not datistemplate\"); do psql -d $d -Atc \"select '$d', extname, extversion from pg_extension\"; done")),
        T("contabilita|plpgsql|1.0\ncontabilita|pg_stat_statements|1.8\ncontabilita|pgcrypto|1.3\nfatture|plpgsql|1.0\n"
          "fatture|pg_trgm|1.5\nfatture|btree_gist|1.5\nreport|plpgsql|1.0\nreport|tablefunc|1.0\nreport|postgis|3.1.4"),
        A("Inventario estensioni fatto: pg_stat_statements, pgcrypto, pg_trgm, btree_gist, tablefunc e postgis 3.1.4 (report). "
          "postgis è l'unica che va aggiornata prima di pg_upgrade, le altre sono contrib e seguono la versione."),
    ],
    [
        U("quanti database ci sono in tutto sul cluster?"),
        A("Conto i database non-template.", bash("psql -Atc \"select count(*) from pg_database where not datistemplate\"")),
        T("4"),
        A("Sono 4 database: contabilita, fatture, report e postgres."),
    ],
    [
        U("e il pooler, pgcat sarebbe meglio di PgBouncer per noi? solo chiedendo", mark="q_pgcat"),
        A("Per il vostro carico no: pgcat ha sharding e load balancing delle letture, che qui non servono, e PgBouncer "
          "è già in produzione e monitorato. Resterei su PgBouncer."),
        U("ok si resta PgBouncer"),
        A("Bene, nessun cambio sul pooler."),
    ],
    [
        U("fammi vedere pgbouncer.ini"),
        A("Ecco.", bash("grep -v '^;' " + BOUNCER + " | sed '/^$/d'")),
        T("[databases]\ncontabilita = host=127.0.0.1 port=5432\nfatture = host=127.0.0.1 port=5432\n[pgbouncer]\nlisten_port = 6432\n"
          "auth_type = scram-sha-256\nauth_file = /etc/pgbouncer/userlist.txt\npool_mode = session\ndefault_pool_size = 25\n"
          "max_client_conn = 2000\nserver_idle_timeout = 600"),
        A("pool_mode = session, default_pool_size = 25, max_client_conn 2000, auth scram-sha-256 con userlist.txt."),
        U("session mode con 2000 client è il motivo per cui finiamo le connessioni. passalo a transaction"),
        A("Cambio il pool mode.", edit(BOUNCER, "pool_mode = session", "pool_mode = transaction"), mark="poolmode"),
        T("Edited ops/pgbouncer/pgbouncer.ini (1 line changed)"),
        A("Fatto: pool_mode = transaction. Attenzione ai prepared statement lato app, ma il vostro ORM li disabilita già."),
    ],
    [
        U("e il pool size... facciamo 40 va"),
        A("Ok, default_pool_size = 40 deciso; lo scrivo nel file quando tocchiamo di nuovo pgbouncer.ini?"),
        U("si. Poi scrivi nel runbook docs/runbook-upgrade.md i passi dell'upgrade e che il pool è default_pool_size = 40, quando hai tempo"),
        A("Noted, will do."),
    ],
    [
        U("mi serve anche una dashboard del lag di replica su grafana, tipo https://grafana.contabile-interno.it/d/pg-overview ma solo lag"),
        A("Posso clonare il pannello 'replication lag' dalla dashboard pg-overview in una nuova dashboard dedicata. Dimmi se procedo."),
        U("si dopo"),
        A("ok."),
    ],
    [
        U("Can you also write a script to compare row counts between old and new cluster after the upgrade? per tabella"),
        A("Sure, I'll draft scripts/compare_counts.py once we have the test restore running, so I can try it against real data."),
    ],
    [
        U("manutenzione: avevamo detto domenica 02:00. per ora mettiamo sabato 22:00, poi confermo con il business"),
        A("Ok, finestra di manutenzione per ora sabato 22:00 (al posto di domenica 02:00), da confermare.", mark=None),
    ],
    [
        U("una cosa: se passassimo ad Aurora invece di restare su EC2, l'upgrade sarebbe più semplice?", mark="h_aurora"),
        A("In teoria sì, Aurora fa major upgrade gestiti, ma vorrebbe dire migrare tutto il cluster, rifare HA e backup. "
          "È un progetto a parte, non una scorciatoia per questo upgrade."),
        U("infatti, era solo per dire. restiamo su EC2"),
        A("Chiaro, restiamo su EC2."),
    ],
    [
        U("Prima dell'upgrade vero voglio un restore di prova da pgBackRest su pg-staging"),
        A("Lancio il restore sul nodo di staging.", bash("ssh pg-staging 'sudo -u postgres pgbackrest --stanza=contabilita --delta restore && pg_ctl -D /var/lib/postgresql/13/main start'")),
        T("P00   INFO: restore command begin 2.48\nP00   INFO: repo1: restore backup set 20261204-010002F\nP00   INFO: restore size = 182.4GB, file total = 4127\n"
          "P00   INFO: restore command end: completed successfully (1432117ms)\nwaiting for server to start.... done\nserver started"),
        A("Restore di prova completato: backup 20261204-010002F, 182.4GB in ~24 min, istanza avviata su pg-staging."),
    ],
    [
        U("ah la dashboard del lag lascia stare, cancel that — il team SRE ne ha già una con gli alert"),
        A("Ok, niente dashboard del lag."),
    ],
    [
        U("ma quindi quanti database ci sono? me lo ridici che devo scriverlo nella mail al business"),
        A("Ricontrollo.", bash("psql -Atc \"select datname from pg_database where not datistemplate order by 1\"")),
        T("contabilita\nfatture\npostgres\nreport"),
        A("Sempre 4: contabilita, fatture, postgres, report."),
    ],
    [
        U("Idea tua di ieri? mi avevi accennato a repmgr"),
        A("Idea: potremmo sostituire Patroni con repmgr, che è più semplice da leggere e non richiede etcd. "
          "Il prezzo è che il failover diventa meno automatico e il fencing va gestito a mano."),
        U("no grazie, repmgr no. Patroni funziona e il team lo conosce", mark="r_repmgr"),
        A("Ok, resta Patroni."),
    ],
    [
        U("nel wiki vecchio c'è scritto questo, è ancora valido?\n> Archiviazione: archive_command usa WAL-E verso S3, retention 7 giorni (wiki DBA, 2018)", mark="d_wale"),
        A("No, è storia: l'archive_command attuale (visto sopra in patroni.yml) chiama pgBackRest. WAL-E non è più installato."),
    ],
    [
        U("Also can we set up a logical replication slot for Debezium, the data team wants CDC on fatture"),
        A("Possible, but a logical slot across pg_upgrade has to be dropped and recreated (slots are not migrated before 17). "
          "I'd do it after the upgrade."),
        U("hmm then forget Debezium for now, cancel it, too messy"),
        A("Ok, Debezium slot cancelled."),
    ],
    [
        U("PgBouncer: set the pool to 40 come deciso, e fammi vedere il diff"),
        A("Imposto il pool.", edit(BOUNCER, "default_pool_size = 25", "default_pool_size = 40"), mark=None),
        T("Edited ops/pgbouncer/pgbouncer.ini (1 line changed)"),
        A("default_pool_size = 40 nel file, pool_mode = transaction già impostato."),
    ],
    [
        U("statement_timeout abbassalo a 10s, che le query del report ci bloccano tutto"),
        A("Lo cambio nella config dinamica di Patroni.", bash("patronictl -c " + PATRONI + " edit-config -s \"postgresql.parameters.statement_timeout='10s'\" --force")),
        T("--- \n+++ \n@@ -9 +9 @@\n-statement_timeout: 30s\n+statement_timeout: 10s\nConfiguration changed"),
        A("statement_timeout: 10s applicato, nessun restart richiesto."),
    ],
    [
        U("Un alert su pool saturation per pgbouncer? quando cl_waiting supera l'80% del pool, su alertmanager"),
        A("Ok, lo scrivo come regola Prometheus su pgbouncer_exporter."),
        U("ok"),
        A("will do."),
    ],
    [
        U("riassunto di dove siamo?"),
        A("Recap DBA-2291 (stato attuale):\n- Target PostgreSQL 15, metodo pg_upgrade --link, replica 2 ferma come fallback.\n"
          "- PgBouncer: pool_mode = transaction, default_pool_size = 40.\n- Patroni: ttl: 30, max_connections: 200, statement_timeout: 10s.\n"
          "- Finestra: sabato 22:00 (provvisoria).\n- Fatto: inventario estensioni, restore di prova su pg-staging, conteggio database (4).\n"
          "- Da fare: runbook, alert pool saturation all'80%, script row counts.\n"
          "- Dropped: dashboard del lag, Debezium."),
        U("ok giusto"),
        A("👍"),
    ],
    [
        U("collega Luca ha pushato qualcosa su patroni, guarda"),
        A("Mostro l'ultimo commit.", bash("git show --stat -p 9e41c07d3a -- " + PATRONI)),
        T("commit 9e41c07d3a52b1f0c6e8a9d4b3f2e1d0c9b8a7f6\nAuthor: Luca Ferri <l.ferri@contabile-interno.it>\nDate:   Fri Dec 4 17:12:09 2026 +0100\n\n"
          "    patroni: longer ttl, etcd hiccups during backups\n\n ops/patroni/patroni.yml | 2 +-\n\n@@ -6,3 +6,3 @@ bootstrap:\n   dcs:\n-    ttl: 30\n+    ttl: 45\n     loop_wait: 10",
          mark="ttl"),
        A("Luca ha portato ttl: 30 → ttl: 45 (commit 9e41c07d3a) per i falsi failover durante i backup con etcd lento."),
        U("ok ha senso, teniamolo"),
        A("Ok."),
    ],
    [
        U("cambio di piani: il business vuole il supporto lungo, andiamo direttamente a PostgreSQL 16, non 15", mark="version"),
        A("Ok, target PostgreSQL 16. pg_upgrade --link da 13 a 16 è supportato; ricontrollo postgis: serve la 3.4 per la 16."),
    ],
    [
        U("max_connections va alzato, con il transaction pooling possiamo permettercelo. 400"),
        A("Modifico patroni.yml.", bash("sed -i 's/max_connections: 200/max_connections: 400/' " + PATRONI + " && grep -n max_connections " + PATRONI), mark="maxconn"),
        T("14:        max_connections: 400"),
        A("max_connections: 400 in patroni.yml; richiede restart, lo facciamo nella finestra."),
    ],
    [
        U("lancia il check di pg_upgrade sullo staging con la 16"),
        A("Eseguo pg_upgrade --check.", bash("ssh pg-staging 'sudo -u postgres /usr/lib/postgresql/16/bin/pg_upgrade --check -b /usr/lib/postgresql/13/bin -B /usr/lib/postgresql/16/bin -d /var/lib/postgresql/13/main -D /var/lib/postgresql/16/main --link'")),
        T("Performing Consistency Checks\n-----------------------------\nChecking cluster versions                                   ok\n"
          "Checking database user is the install user                  ok\nChecking for incompatible \"postgis\" version                 fatal\n\n"
          "Your installation contains postgis 3.1.4, upgrade it to 3.4 in the old cluster first.\nLOG:  checkpoints are occurring too frequently (14 seconds apart)\nHINT:  Consider increasing the configuration parameter \"max_wal_size\"."),
        A("Aggiorno postgis sul vecchio cluster e, già che ci sono, alzo max_wal_size: i checkpoint ogni 14 secondi rallentano l'ALTER EXTENSION.",
          edit(PATRONI, "max_wal_size: 2GB", "max_wal_size: 8GB"), mark="walsize"),
        T("Edited ops/patroni/patroni.yml (1 line changed)"),
        A("max_wal_size: 8GB (era troppo basso per la scrittura di questi giorni). Ora ALTER EXTENSION postgis.", bash("ssh pg-staging \"psql -d report -c 'ALTER EXTENSION postgis UPDATE' && sudo -u postgres /usr/lib/postgresql/16/bin/pg_upgrade --check -b /usr/lib/postgresql/13/bin -B /usr/lib/postgresql/16/bin -d /var/lib/postgresql/13/main -D /var/lib/postgresql/16/main --link | tail -3\"")),
        T("ALTER EXTENSION\nChecking for new cluster tablespace directories              ok\n\n*Clusters are compatible*"),
        A("Check superato: *Clusters are compatible*."),
    ],
    [
        U("bene. alziamo il pool a 60 ora che abbiamo 400 connessioni", mark=None),
        A("Imposto 60.", edit(BOUNCER, "default_pool_size = 40", "default_pool_size = 60")),
        T("Edited ops/pgbouncer/pgbouncer.ini (1 line changed)"),
        A("default_pool_size = 60."),
    ],
    [
        U("the report team says 10s kills their monthly job. rimetti statement_timeout com'era"),
        A("Torno al valore precedente.", bash("patronictl -c " + PATRONI + " edit-config -s \"postgresql.parameters.statement_timeout='30s'\" --force"), mark="timeout"),
        T("--- \n+++ \n@@ -9 +9 @@\n-statement_timeout: 10s\n+statement_timeout: 30s\nConfiguration changed"),
        A("statement_timeout: 30s di nuovo."),
    ],
    [
        U("settings dump per work_mem? non ricordo quale valore è dove"),
        A("Stampo le sezioni del file di override.", bash("cat ops/postgresql/overrides.conf")),
        T("[staging]\nwork_mem = 16MB\nmaintenance_work_mem = 256MB\neffective_cache_size = 8GB\n\n[production]\nwork_mem = 64MB\nmaintenance_work_mem = 2GB\neffective_cache_size = 48GB", mark="s_workmem"),
        A("Produzione: work_mem = 64MB. Il valore più basso è quello di staging."),
    ],
    [
        U("ripensandoci l'alert mettilo all'85%, l'80 suona per niente ogni lunedì mattina", mark="alert"),
        A("Ok, soglia dell'alert pool saturation all'85%."),
    ],
    [
        U("pg_repack sulle tabelle grosse di fatture lo facciamo ora?"),
        A("Si può fare prima o dopo; prima allunga la finestra."),
        U("dopo l'upgrade, a gennaio. non adesso"),
        A("Ok, pg_repack rimandato a dopo l'upgrade."),
    ],
    [
        U("e le statistiche? vacuumdb --analyze-in-stages lo lanci tu?"),
        A("Sì, ma solo dopo il primo avvio sul 16: prima non ha senso perché pg_upgrade non porta le statistiche. Lo rimando a dopo lo switch."),
    ],
    [
        U("Un'altra cosa: il DR in Irlanda ha automatic DR failover giusto?"),
        A("No: non c'è automatic DR failover. Patroni gestisce il failover solo dentro eu-south-1; il DR resta manual DR failover, "
          "con promozione a mano secondo la procedura.", mark="n_dr"),
        U("ah ok giusto, manuale."),
        A("Esatto."),
    ],
    [
        U("la replica tra primario e standby è logica?"),
        A("No, streaming replication fisica. Storicamente, nel 2019, usavate Slony per le migrazioni tra versioni, ma è stato dismesso.", mark="hist_slony"),
        U("vero, Slony che incubo"),
        A("😅"),
    ],
    [
        U("ok pool: fai 50 e chiudiamo, 60 è troppo per le repliche", mark=None),
        A("Imposto 50, valore finale.", edit(BOUNCER, "default_pool_size = 60", "default_pool_size = 50"), mark="pool"),
        T("Edited ops/pgbouncer/pgbouncer.ini (1 line changed)"),
        A("default_pool_size = 50."),
    ],
    [
        U("business confermato: sabato 22:00 è definitivo", mark="window"),
        A("Ottimo, finestra di manutenzione definitiva: sabato 22:00."),
    ],
    [
        U("il data team ha insistito, riapriamo Debezium: slot logico su fatture dopo l'upgrade"),
        A("Ok, Debezium di nuovo in lista: slot logico su fatture, dopo il passaggio al 16."),
    ],
    [
        U("lo script dei conteggi per tabella lascia perdere, non serve più: Luca ha già un job che fa il confronto"),
        A("Va bene, niente script dei conteggi."),
    ],
    [
        U("ah e userlist di pgbouncer, aggiungi il ruolo app_fatture_v2"),
        A("Ok, lo faccio dopo aver finito il check."),
        U("ok"),
        A("Ricevuto."),
    ],
]


def f_df(rng):
    a, b = rng.randint(20, 70), rng.randint(11, 60)
    return [U(rng.choice(["spazio disco sul primario?", "quanto disco abbiamo", "df please"])),
            A("Controllo.", bash("df -h /var/lib/postgresql /var/log")),
            T("Filesystem      Size  Used Avail Use%% Mounted on\n/dev/nvme1n1    1.0T  %dG  %dG  %d%% /var/lib/postgresql\n/dev/nvme0n1p1   50G   %dG   %dG  %d%% /var/log"
              % (a * 10, 1000 - a * 10, a, b // 2, 50 - b // 2, b)),
            A("Spazio sufficiente su entrambi i volumi.")]


def f_act(rng):
    rows = "\n".join(" %-12s | %-6s | %3d" % (d, s, rng.randint(1, 90)) for d in ("contabilita", "fatture", "report")
                     for s in ("active", "idle"))
    return [U(rng.choice(["sessioni attive?", "chi è connesso adesso", "pg_stat_activity veloce"])),
            A("Raggruppo per database e stato.", bash("psql -c \"select datname, state, count(*) from pg_stat_activity group by 1,2 order by 1,2\"")),
            T("   datname    | state  | count\n--------------+--------+------\n" + rows),
            A("Niente di anomalo, nessuna sessione bloccata.")]


def f_log(rng):
    h = rng.randint(10, 23)
    lines = "\n".join("2026-12-05 %02d:%02d:%02d CET [%d] LOG:  checkpoint complete: wrote %d buffers" %
                      (h, rng.randint(0, 59), rng.randint(0, 59), rng.randint(2000, 9000), rng.randint(100, 4000)) for _ in range(4))
    return [U(rng.choice(["ultimi log?", "qualcosa di strano nei log", "tail del log pls"])),
            A("Ultime righe del log.", bash("tail -n 4 /var/log/postgresql/postgresql-13-main.log")),
            T(lines),
            A("Solo checkpoint regolari.")]


def f_patronictl(rng):
    lag = rng.randint(0, 9)
    return [U(rng.choice(["etcd sta bene?", "health di etcd", "etcd ok?"])),
            A("Controllo gli endpoint etcd.", bash("etcdctl endpoint health --cluster -w table")),
            T("+------------------------+--------+-------------+-------+\n|        ENDPOINT        | HEALTH |    TOOK     | ERROR |\n"
              "| http://10.0.1.21:2379  |   true | %d.%dms |       |\n| http://10.0.1.22:2379  |   true | 3.1ms |       |\n"
              "| http://10.0.1.23:2379  |   true | 2.7ms |       |" % (lag + 1, lag)),
            A("Tutti e tre i nodi etcd sani.")]


def f_tests(rng):
    n = rng.randint(30, 60)
    return [U(rng.choice(["lancia i test delle migration", "i test passano?", "run the tests"])),
            A("Eseguo la suite.", bash("cd app && python -m pytest -q tests/db")),
            T("%s\n%d passed in %.2fs" % ("." * n, n, rng.uniform(5, 30))),
            A("Tutti verdi.")]



def f_explain(rng):
    rows = rng.randint(1000, 90000)
    plan = [
        "Sort  (cost=%d.12..%d.40 rows=%d width=48) (actual time=%.3f..%.3f rows=%d loops=1)" % (rows, rows + 40, rows // 10, rng.uniform(100, 300), rng.uniform(300, 400), rows // 10),
        "  Sort Key: f.data_emissione DESC",
        "  Sort Method: quicksort  Memory: %dkB" % rng.randint(900, 4000),
        "  ->  Hash Join  (cost=%d.00..%d.55 rows=%d width=48) (actual time=%.3f..%.3f rows=%d loops=1)" % (rows // 3, rows, rows // 10, rng.uniform(20, 90), rng.uniform(90, 290), rows // 10),
        "        Hash Cond: (f.cliente_id = c.id)",
        "        ->  Index Scan using fatture_data_idx on fatture f  (actual time=0.021..%.3f rows=%d loops=1)" % (rng.uniform(40, 120), rows),
        "              Index Cond: (data_emissione >= '2026-11-01'::date)",
        "        ->  Hash  (actual time=%.3f..%.3f rows=%d loops=1)" % (rng.uniform(5, 15), rng.uniform(15, 20), rng.randint(3000, 9000)),
        "              Buckets: 16384  Batches: 1  Memory Usage: %dkB" % rng.randint(400, 900),
        "              ->  Seq Scan on clienti c  (actual time=0.008..%.3f rows=%d loops=1)" % (rng.uniform(2, 9), rng.randint(3000, 9000)),
        "Planning Time: %.3f ms" % rng.uniform(0.2, 2),
        "Execution Time: %.3f ms" % rng.uniform(300, 450),
    ]
    return [U(rng.choice(["la query delle fatture di novembre è lenta?", "explain della query mensile", "piano della query fatture"])),
            A("Eseguo EXPLAIN ANALYZE sulla query mensile.", bash("psql -d fatture -c 'EXPLAIN ANALYZE SELECT ... FROM fatture f JOIN clienti c ON ...'")),
            T("\n".join(plan)),
            A("Usa l'indice su data_emissione, il tempo va quasi tutto nel join; nulla da fare adesso.")]


def f_iostat(rng):
    lines = ["Device            r/s     w/s     rkB/s     wkB/s  await  aqu-sz  %util"]
    for _ in range(8):
        lines.append("nvme1n1   %9.1f %7.1f %9.1f %9.1f %6.2f %7.2f %6.1f" % (rng.uniform(50, 900), rng.uniform(100, 1500), rng.uniform(1000, 90000),
                     rng.uniform(1000, 60000), rng.uniform(0.1, 2), rng.uniform(0.1, 3), rng.uniform(10, 60)))
    return [U(rng.choice(["come va l'I/O del disco?", "iostat un attimo", "il disco è saturo?"])),
            A("Campiono iostat per 8 secondi.", bash("iostat -dx nvme1n1 1 8 | grep -E 'Device|nvme'")),
            T("\n".join(lines)),
            A("Latenze sotto i 2 ms, il disco non è un collo di bottiglia.")]

fillers = [f_df, f_act, f_log, f_patronictl, f_tests, f_explain, f_iostat]
goodbye = [U("ok per oggi basta, grazie!"), A("Perfetto, a domani.")]

facts = [
    {"subject": "upgrade target version", "current": ["PostgreSQL 16"], "superseded": ["PostgreSQL 15"], "not_changes": [],
     "category": "explicit_change", "mark": "version"},
    {"subject": "maintenance window", "current": ["sabato 22:00"], "superseded": ["domenica 02:00"],
     "not_changes": [], "category": "explicit_change", "mark": "window"},
    {"subject": "pool saturation alert threshold", "current": ["85%"], "superseded": ["80%"], "not_changes": [],
     "category": "explicit_change", "mark": "alert"},
    {"subject": "PgBouncer pool mode", "current": ["pool_mode = transaction"], "superseded": ["pool_mode = session"], "not_changes": [],
     "category": "change_in_tool_edit", "mark": "poolmode"},
    {"subject": "Patroni max_connections", "current": ["max_connections: 400"], "superseded": ["max_connections: 200"], "not_changes": [],
     "category": "change_in_tool_sed", "mark": "maxconn"},
    {"subject": "Patroni DCS ttl", "current": ["ttl: 45"], "superseded": ["ttl: 30"], "not_changes": [],
     "category": "change_in_git_diff", "mark": "ttl"},
    {"subject": "upgrade method", "current": ["pg_upgrade --link"], "superseded": ["pg_dumpall"], "not_changes": [],
     "category": "accepted_proposal", "mark": "method"},
    {"subject": "statement_timeout", "current": ["statement_timeout: 30s"], "superseded": ["statement_timeout: 10s"], "not_changes": [],
     "category": "revert", "mark": "timeout"},
    {"subject": "PgBouncer default_pool_size", "current": ["default_pool_size = 50"],
     "superseded": ["default_pool_size = 25", "default_pool_size = 40", "default_pool_size = 60", "pool to 40", "pool a 60"],
     "not_changes": [], "category": "multi_revision", "mark": "pool"},
    {"subject": "max_wal_size", "current": ["max_wal_size: 8GB"], "superseded": ["max_wal_size: 2GB"], "not_changes": [],
     "category": "change_by_assistant_action", "mark": "walsize"},
    {"subject": "hosting", "current": ["EC2"], "superseded": [], "not_changes": ["Aurora"],
     "category": "not_change_hypothetical", "mark": "h_aurora"},
    {"subject": "connection pooler", "current": ["PgBouncer"], "superseded": [], "not_changes": ["pgcat"],
     "category": "not_change_question", "mark": "q_pgcat"},
    {"subject": "HA manager", "current": ["Patroni"], "superseded": [], "not_changes": ["repmgr"],
     "category": "not_change_rejected_proposal", "mark": "r_repmgr"},
    {"subject": "WAL archiving tool", "current": ["pgBackRest"], "superseded": [], "not_changes": ["WAL-E"],
     "category": "not_change_quoted_doc", "mark": "d_wale"},
    {"subject": "DR failover", "current": ["manual DR failover"], "superseded": [], "not_changes": ["automatic DR failover"],
     "category": "not_change_negation", "mark": "n_dr"},
    {"subject": "replication", "current": ["streaming replication"], "superseded": [], "not_changes": ["Slony"],
     "category": "not_change_historical", "mark": "hist_slony"},
    {"subject": "production work_mem", "current": ["work_mem = 64MB"], "superseded": [], "not_changes": ["work_mem = 16MB"],
     "category": "not_change_staging_value", "mark": "s_workmem"},
]

requests = [
    {"id": "extension_inventory", "match": ["estensioni", "extension inventory"], "final_state": "done", "category": "done"},
    {"id": "test_restore", "match": ["restore di prova", "test restore"], "final_state": "done", "category": "done"},
    {"id": "database_count", "match": ["quanti database", "how many databases"], "final_state": "done",
     "category": "done_identical_answer"},
    {"id": "upgrade_runbook", "match": ["runbook"], "final_state": "open", "category": "open"},
    {"id": "pool_alert", "match": ["pool saturation", "saturazione del pool"], "final_state": "open", "category": "open"},
    {"id": "pg_repack", "match": ["pg_repack"], "final_state": "deferred", "category": "deferred_by_user"},
    {"id": "analyze_stages", "match": ["analyze-in-stages"], "final_state": "deferred", "category": "deferred_by_assistant"},
    {"id": "lag_dashboard", "match": ["dashboard del lag", "replication lag dashboard"], "final_state": "cancelled",
     "category": "cancelled"},
    {"id": "debezium_slot", "match": ["Debezium"], "final_state": "open", "category": "cancelled_then_reopened"},
    {"id": "userlist_role", "match": ["userlist"], "final_state": "open", "category": "announced_not_done"},
    {"id": "row_count_script", "match": ["row counts", "conteggi"], "final_state": "cancelled",
     "category": "cancel_in_other_language"},
]

identifiers = ["DBA-2291", "pg-prod-mil-01", PATRONI, BOUNCER, "9e41c07d3a", "https://grafana.contabile-interno.it/d/pg-overview",
               "eu-south-1"]

if __name__ == "__main__":
    build("pg_upgrade_it", "database operations (PostgreSQL major upgrade, Patroni, PgBouncer)", ["it", "en"], blocks,
          fillers, goodbye, facts, requests, identifiers, seed=7141, max_between=1)
