"""Story ota_firmware_pt: IoT fleet firmware OTA rollout (ESP-IDF, MQTT, hawkBit) (pt-BR + en). Seed 8233."""

from common import A, T, U, bash, build, edit

SDK = "firmware/sdkconfig.defaults"
ROLL = "deploy/ota/rollout.yaml"

blocks = [
    [
        U("Bom dia! Bora começar o rollout do firmware novo, ticket FW-882. Frota de sensores ESP32-C3 em Wi-Fi, "
          "config em firmware/sdkconfig.defaults e o plano do rollout em deploy/ota/rollout.yaml. Broker é Mosquitto "
          "em mqtt.frotas-sensores.com.br. mostra o rollout.yaml"),
        A("Abrindo o plano de rollout.", bash("cat " + ROLL)),
        T("fleet: sensores-frio\nserver: hawkBit\ntransport: full image OTA\nstaging:\n  canary_percent: 50\n  wave_size: 20\n  max_failure_rate: 0.2\n"
          "production:\n  canary_percent: 2\n  wave_size: 100\n  max_failure_rate: 0.05\n  pause_between_waves: 30m\nmqtt:\n  keepalive: 120\n  qos: 1", mark="s_canary"),
        A("Produção: canary_percent: 2, wave_size: 100, max_failure_rate: 0.05, pausa de 30m entre ondas; mqtt keepalive: 120. "
          "Os valores maiores são da seção staging. Servidor OTA: hawkBit, imagem completa (full image OTA)."),
    ],
    [
        U("lista as versões de firmware na frota, quero saber de onde partimos"),
        A("Consulto o hawkBit por versão instalada.", bash("curl -s -u $HB 'https://ota.frotas-sensores.com.br/rest/v1/targets?limit=5000' | jq -r '.content[].installedVersion' | sort | uniq -c")),
        T("   2211 2.11.3\n   1480 2.12.0\n    302 2.12.1\n     37 null"),
        A("Versões na frota: 2211 em 2.11.3, 1480 em 2.12.0, 302 em 2.12.1, 37 sem versão reportada (provavelmente offline)."),
    ],
    [
        U("quantos dispositivos offline agora?"),
        A("Conto os que não reportam há mais de 24h.", bash("curl -s -u $HB 'https://ota.frotas-sensores.com.br/rest/v1/targets?q=lastControllerRequestAt=lt=${YDAY}&limit=0' | jq .total")),
        T("37"),
        A("37 dispositivos offline (sem contato há mais de 24h)."),
    ],
    [
        U("as imagens são de 1.4MB, na rede celular dos galpões isso dói"),
        A("Proposta: usar delta OTA (esp_delta_ota) em vez de full image OTA. O patch entre 2.12.x e a 2.14 fica na faixa de 200-300KB; "
          "custo: precisamos guardar a imagem base de cada versão no servidor e o dispositivo precisa de um pouco mais de RAM no update."),
        U("fechado, delta OTA. mas só das versões 2.12.x, as 2.11 vão com imagem inteira mesmo", mark="delta"),
        A("Ok: delta OTA a partir das 2.12.x; 2.11.3 recebe imagem completa."),
    ],
    [
        U("e se a gente usasse LoRaWAN em vez de Wi-Fi nesses galpões? só pensando alto", mark="h_lora"),
        A("Seria outro hardware (rádio LoRa) e OTA por LoRaWAN é lentíssimo, dias por imagem. Não ajuda neste rollout."),
        U("sim sim, era hipótese. segue Wi-Fi"),
        A("Ok, Wi-Fi."),
    ],
    [
        U("watchdog tá resetando durante a escrita da flash, vi no log do piloto. aumenta o timeout do task WDT pra 10"),
        A("Vejo o valor atual.", bash("grep -n TASK_WDT " + SDK)),
        T("41:CONFIG_ESP_TASK_WDT_EN=y\n42:CONFIG_ESP_TASK_WDT_TIMEOUT_S=5\n43:CONFIG_ESP_TASK_WDT_PANIC=y"),
        A("Mudo de 5 para 10 segundos.", edit(SDK, "CONFIG_ESP_TASK_WDT_TIMEOUT_S=5", "CONFIG_ESP_TASK_WDT_TIMEOUT_S=10"), mark="wdt"),
        T("Edited firmware/sdkconfig.defaults (1 line changed)"),
        A("CONFIG_ESP_TASK_WDT_TIMEOUT_S=10 aplicado."),
    ],
    [
        U("ondas: 100 é pouco, vamos de 250"),
        A("Anotado: wave_size 250 decidido. Atualizo o rollout.yaml?"),
        U("sim. e escreve o e-mail para a operação avisando que vai em ondas de 250 devices a cada 30m, quando der"),
        A("ok, noted."),
    ],
    [
        U("Can you set the wave to 250 in the yaml now, como combinado"),
        A("Aplicando.", edit(ROLL, "  wave_size: 100", "  wave_size: 250")),
        T("Edited deploy/ota/rollout.yaml (1 line changed)"),
        A("wave_size: 250 em produção."),
    ],
    [
        U("data do rollout: tínhamos falado 8 de dezembro. por enquanto põe 15 de dezembro, falta o ok do cliente"),
        A("Ok, data provisória 15 de dezembro (no lugar de 8 de dezembro), aguardando o cliente."),
    ],
    [
        U("AWS IoT Jobs não seria melhor que o hawkBit pra isso? pergunta honesta", mark="q_iot"),
        A("Para 4 mil dispositivos o hawkBit dá conta, e migrar para AWS IoT Jobs significaria reprovisionar certificados em toda a frota. "
          "Eu ficaria no hawkBit."),
        U("ok, fica hawkBit"),
        A("👍"),
    ],
    [
        U("faz o build de release da 2.14.0 no CI"),
        A("Disparo o job.", bash("curl -s -X POST https://ci.frotas-sensores.com.br/job/firmware-release/buildWithParameters?TAG=v2.14.0 && sleep 1 && curl -s https://ci.frotas-sensores.com.br/job/firmware-release/lastBuild/consoleText | tail -6")),
        T("[412] idf.py build\n[412] Linking CXX executable sensores.elf\n[412] Error: app partition is too small for binary sensores.bin size 0x1e2a40:\n"
          "[412]   - Part 'ota_0' 0/16 @ 0x20000 size 0x1e0000 (overflow 0x2a40)\n[412] Build step 'Execute shell' marked build as failure"),
        A("O binário estourou a partição ota_0 por 0x2a40 bytes. Troco a otimização do compilador para tamanho, o ganho de "
          "performance não importa nesses sensores.", edit(SDK, "CONFIG_COMPILER_OPTIMIZATION_PERF=y", "CONFIG_COMPILER_OPTIMIZATION_SIZE=y"), mark="optsize"),
        T("Edited firmware/sdkconfig.defaults (1 line changed)"),
        A("Relanço o build.", bash("curl -s -X POST https://ci.frotas-sensores.com.br/job/firmware-release/buildWithParameters?TAG=v2.14.0 && curl -s https://ci.frotas-sensores.com.br/job/firmware-release/412/consoleText | tail -3")),
        T("[412] sensores.bin binary size 0x1c7f10 bytes. Smallest app partition is 0x1e0000 bytes. 0x180f0 bytes (5%) free.\n[412] Archiving artifacts\n[412] Finished: SUCCESS"),
        A("Build de release ok: https://ci.frotas-sensores.com.br/job/firmware-release/412 , sensores.bin com 5% de folga na partição."),
    ],
    [
        U("keepalive do mqtt: baixa pra 30, quero detectar queda mais rápido"),
        A("Altero no rollout.yaml.", edit(ROLL, "  keepalive: 120", "  keepalive: 30")),
        T("Edited deploy/ota/rollout.yaml (1 line changed)"),
        A("keepalive: 30."),
    ],
    [
        U("Please also write a script to bulk-rename devices in hawkBit to the new naming scheme (galpao-NN-sensor-NNN)"),
        A("Sure. I'll do it after the canary, the naming affects the target filters."),
    ],
    [
        U("também quero o changelog em espanhol pro cliente do Chile"),
        A("Ok, traduzo o changelog em espanhol depois do release notes final."),
    ],
    [
        U("e um teste de soak de 72h com 20 dispositivos antes da produção?"),
        A("Dá pra rodar no rack de teste; 72h atrasa o canário em três dias."),
        U("então não, cancel the soak, não temos 3 dias"),
        A("Ok, soak cancelado."),
    ],
    [
        U("resumo de onde estamos pfv"),
        A("Resumo FW-882 (agora):\n- Broker: Mosquitto em mqtt.frotas-sensores.com.br, keepalive: 30.\n- Rollout produção: canary_percent: 2, wave_size: 250, max_failure_rate: 0.05.\n"
          "- Delta OTA a partir da 2.12.x; CONFIG_ESP_TASK_WDT_TIMEOUT_S=10; build de release 412 ok.\n- Data: 15 de dezembro (provisória).\n"
          "- Feito: versões na frota, offline (37), build de release.\n- Pendente: e-mail para a operação (ondas de 250), script de rename, changelog em espanhol.\n- Cancelado: soak 72h."),
        U("isso"),
        A("Ok."),
    ],
    [
        U("Ideia sua de ontem, Zephyr, explica de novo?"),
        A("Ideia: migrar o firmware de ESP-IDF para Zephyr, que tem MCUboot e updates assinados prontos e roda em outros chips."),
        U("não, Zephyr não. time todo sabe ESP-IDF e não é hora de reescrever", mark="r_zephyr"),
        A("Entendido, continuamos em ESP-IDF."),
    ],
    [
        U("a Juliana commitou algo no sdkconfig, confere"),
        A("Mostrando o commit.", bash("git show 3c7d1e9a04 -- " + SDK)),
        T("commit 3c7d1e9a04f2b6c8d0e1a3b5c7d9e2f4a6b8c0d1\nAuthor: Juliana Prado <juliana@frotas-sensores.com.br>\nDate:   Fri Dec 4 16:40:12 2026 -0300\n\n"
          "    sdkconfig: disable bluetooth, frees 40KB heap for the OTA buffer\n\n@@ -77,1 +77,1 @@\n-CONFIG_BT_ENABLED=y\n+CONFIG_BT_ENABLED=n", mark="bt"),
        A("Juliana trocou CONFIG_BT_ENABLED=y por CONFIG_BT_ENABLED=n (commit 3c7d1e9a04): libera 40KB de heap para o buffer de OTA."),
        U("bom. fica assim"),
        A("Ok."),
    ],
    [
        U("no README antigo tá assim, ainda vale?\n> Firmware downloads are served over plain HTTP on port 8080 (README, fw 1.x)"),
        A("Não. Isso é da época 1.x; hoje o download é com mTLS on 8443 no servidor OTA, com certificado por dispositivo.", mark="d_http"),
    ],
    [
        U("decidimos com arquitetura: o broker vai ser EMQX, não mais Mosquitto. o cluster novo já tá de pé", mark="broker"),
        A("Ok, broker EMQX. O hostname mqtt.frotas-sensores.com.br já aponta pro cluster novo?"),
        U("sim"),
        A("Perfeito."),
    ],
    [
        U("a taxa de falha aceitável tem que ser menor, 2%"),
        A("Ajusto com sed.", bash("sed -i 's/max_failure_rate: 0.05/max_failure_rate: 0.02/' " + ROLL + " && grep -n max_failure_rate " + ROLL), mark="failrate"),
        T("7:  max_failure_rate: 0.2\n11:  max_failure_rate: 0.02"),
        A("Produção agora com max_failure_rate: 0.02 (a linha 7 é staging, não mexi)."),
    ],
    [
        U("onda de 250 tá lenta, sobe pra 500"),
        A("Alterando.", edit(ROLL, "  wave_size: 250", "  wave_size: 500")),
        T("Edited deploy/ota/rollout.yaml (1 line changed)"),
        A("wave_size: 500."),
    ],
    [
        U("quantos dispositivos offline? mesmo número de antes?"),
        A("Reconsulto.", bash("curl -s -u $HB 'https://ota.frotas-sensores.com.br/rest/v1/targets?q=lastControllerRequestAt=lt=${YDAY}&limit=0' | jq .total")),
        T("37"),
        A("Sim, continuam 37 offline."),
    ],
    [
        U("keepalive 30 gerou reconexão demais no galpão 7, volta pro valor de antes"),
        A("Voltando.", edit(ROLL, "  keepalive: 30", "  keepalive: 120"), mark="keepalive"),
        T("Edited deploy/ota/rollout.yaml (1 line changed)"),
        A("keepalive: 120 de novo."),
    ],
    [
        U("os sensores pegam hora por GPS time né?"),
        A("Não, não usam GPS time: não há módulo GPS na placa. A hora vem por SNTP do gateway do galpão.", mark="n_time"),
        U("ah é, SNTP"),
        A("Isso."),
    ],
    [
        U("lembra que em 2021 a frota era toda ESP8266? alguns clientes ainda perguntam"),
        A("Sim, historicamente era ESP8266; foi toda substituída em 2023. Hoje são 100% ESP32-C3.", mark="hist_esp8266"),
    ],
    [
        U("esquece o script de renomear os devices, não precisa mais: o cliente vai manter os nomes atuais"),
        A("Tá bom, sem script de renomear."),
    ],
    [
        U("drop the Spanish changelog too, cancel it — o cliente do Chile lê inglês"),
        A("Ok, changelog em espanhol cancelado."),
    ],
    [
        U("Quero um painel com a taxa de sucesso do OTA por hora"),
        A("Ok, vou montar no Grafana com as métricas do hawkBit."),
        U("na verdade taxa de sucesso por 15 minutos, por hora esconde os picos"),
        A("Entendido: taxa de sucesso do OTA em janelas de 15 minutos."),
    ],
    [
        U("OTA via Bluetooth pros dispositivos sem Wi-Fi, dá pra fazer?"),
        A("Dá, mas precisa reativar o BT que a Juliana acabou de desligar."),
        U("então deixa pra Q1, depois do rollout"),
        A("Ok, OTA via Bluetooth fica para o Q1."),
    ],
    [
        U("e o coredump upload pro servidor quando crasha?"),
        A("Prefiro deixar o coredump upload para depois do rollout: mexe na partição e agora a ota_0 está no limite. Faço depois."),
    ],
    [
        U("o cliente voltou atrás: quer o soak sim, mas 24h com 10 dispositivos"),
        A("Ok, soak de volta: 24h, 10 dispositivos no rack de teste antes do canário."),
    ],
    [
        U("onda: 400 e não se fala mais nisso. 500 sobrecarrega o servidor"),
        A("Final: 400.", edit(ROLL, "  wave_size: 500", "  wave_size: 400"), mark="wave"),
        T("Edited deploy/ota/rollout.yaml (1 line changed)"),
        A("wave_size: 400."),
    ],
    [
        U("cliente deu ok: 15 de dezembro confirmado, definitivo", mark="date"),
        A("Ótimo: rollout em 15 de dezembro, confirmado."),
    ],
    [
        U("ah, e rotaciona o certificado do broker, vence em janeiro"),
        A("Beleza, vou fazer."),
        U("valeu"),
        A("De nada."),
    ],
]


def f_size(rng):
    a = rng.randint(900, 1300)
    return [U(rng.choice(["tamanho do binário?", "idf.py size", "quanto ocupa a imagem"])),
            A("Rodando o relatório de tamanho.", bash("idf.py size")),
            T("Total sizes:\nUsed static DRAM:   %d bytes\nUsed static IRAM:   %d bytes\n      Flash code: %d bytes\n    Flash rodata: %d bytes\nTotal image size: %d bytes"
              % (rng.randint(30000, 60000), rng.randint(60000, 90000), a * 1000, rng.randint(200000, 400000), a * 1000 + 350000)),
            A("Dentro do esperado.")]


def f_pods(rng):
    r = rng.randint(1, 5)
    return [U(rng.choice(["servidor de update tá de pé?", "pods do ota", "kubectl get pods"])),
            A("Listando.", bash("kubectl -n ota get pods")),
            T("NAME                          READY   STATUS    RESTARTS   AGE\nupdate-server-7d9c8b5f4-2xk8q   1/1     Running   %d          %dd\n"
              "update-server-7d9c8b5f4-q7w2n   1/1     Running   0          %dd\nupdate-db-0                   1/1     Running   0          %dd" % (r, r + 3, r + 3, 40 + r)),
            A("Tudo rodando.")]


def f_serial(rng):
    n = rng.randint(100, 999)
    return [U(rng.choice(["log serial do piloto?", "o que o sensor do piloto tá cuspindo", "monitor serial pls"])),
            A("Lendo a serial.", bash("timeout 5 idf.py -p /dev/ttyUSB0 monitor --no-reset | tail -4")),
            T("\n".join("I (%d) app: temp=%.1f hum=%d door=%s\nI (%d) app: publish ok msg_id=%d\nI (%d) app: sleeping 60000 ms"
                         % (n + k * 60000, rng.uniform(-22, -15), rng.randint(40, 70), rng.choice(["closed", "open"]), n + k * 60000 + 12,
                            rng.randint(1000, 9999), n + k * 60000 + 15) for k in range(6))),
            A("Sensor publicando normalmente.")]


def f_tests(rng):
    n = rng.randint(20, 50)
    return [U(rng.choice(["roda os testes do provisionamento", "testes passam?", "pytest"])),
            A("Executando.", bash("cd tools && python -m pytest -q")),
            T("%s\n%d passed in %.2fs" % ("." * n, n, rng.uniform(2, 9))),
            A("Verde.")]


def f_gitlog(rng):
    h = ["%010x" % rng.getrandbits(40) for _ in range(3)]
    return [U(rng.choice(["últimos commits?", "git log", "o que entrou hoje"])),
            A("Últimos commits.", bash("git log --oneline -3")),
            T("%s app: debounce door sensor\n%s ci: cache idf tools\n%s docs: wiring photos" % tuple(h)),
            A("Nada que afete o rollout.")]



def f_buildlog(rng):
    comps = ["esp_http_client", "esp_https_ota", "nvs_flash", "app_update", "driver", "esp_netif", "lwip", "mbedtls", "freertos", "main"]
    lines = []
    for i, c in enumerate(comps):
        lines.append("[%3d/%d] Building C object components/%s/CMakeFiles/__idf_%s.dir/src/%s.c.obj" % (900 + i * 7, 1012, c, c, c.split("_")[-1]))
    lines.append("[1012/1012] Generating binary image from built executable")
    lines.append("esptool.py v4.7.0")
    lines.append("Creating esp32c3 image...")
    lines.append("Successfully created esp32c3 image.")
    lines.append("Generated build/sensores.bin in %.1fs" % rng.uniform(60, 140))
    return [U(rng.choice(["compila local pra ver se não quebrou nada", "idf.py build", "builda aí"])),
            A("Compilando localmente.", bash("idf.py build 2>&1 | tail -15")),
            T("\n".join(lines)),
            A("Build local limpo.")]


def f_gateway(rng):
    lines = ["GATEWAY        CLIENTS  MSG/MIN  RSSI_AVG  UPTIME"]
    for g in range(1, 25):
        lines.append("galpao-%02d-gw   %7d  %7d  %8d  %dd" % (g, rng.randint(180, 520), rng.randint(200, 900), rng.randint(-78, -52), rng.randint(3, 90)))
    return [U(rng.choice(["como estão os gateways dos galpões?", "status dos gateways", "gateways ok?"])),
            A("Consultando a API dos gateways.", bash("gwctl status --all --format table")),
            T("\n".join(lines)),
            A("Todos os gateways respondendo, sinal médio aceitável.")]

fillers = [f_size, f_pods, f_serial, f_tests, f_gitlog, f_buildlog, f_gateway]
goodbye = [U("fechou, por hoje é isso. valeu!"), A("Valeu, até amanhã!")]

facts = [
    {"subject": "MQTT broker", "current": ["EMQX"], "superseded": ["Mosquitto"], "not_changes": [],
     "category": "explicit_change", "mark": "broker"},
    {"subject": "rollout date", "current": ["15 de dezembro"], "superseded": ["8 de dezembro"], "not_changes": [],
     "category": "explicit_change", "mark": "date"},
    {"subject": "task watchdog timeout", "current": ["CONFIG_ESP_TASK_WDT_TIMEOUT_S=10"], "superseded": ["CONFIG_ESP_TASK_WDT_TIMEOUT_S=5"],
     "not_changes": [], "category": "change_in_tool_edit", "mark": "wdt"},
    {"subject": "production max failure rate", "current": ["max_failure_rate: 0.02"], "superseded": ["max_failure_rate: 0.05"],
     "not_changes": [], "category": "change_in_tool_sed", "mark": "failrate"},
    {"subject": "Bluetooth in firmware", "current": ["CONFIG_BT_ENABLED=n"], "superseded": ["CONFIG_BT_ENABLED=y"], "not_changes": [],
     "category": "change_in_git_diff", "mark": "bt"},
    {"subject": "update transport", "current": ["delta OTA"], "superseded": ["full image OTA"], "not_changes": [],
     "category": "accepted_proposal", "mark": "delta"},
    {"subject": "MQTT keepalive", "current": ["keepalive: 120"], "superseded": ["keepalive: 30"], "not_changes": [],
     "category": "revert", "mark": "keepalive"},
    {"subject": "production wave size", "current": ["wave_size: 400"],
     "superseded": ["wave_size: 100", "wave_size: 250", "wave_size: 500", "ondas de 250", "wave to 250"], "not_changes": [],
     "category": "multi_revision", "mark": "wave"},
    {"subject": "compiler optimization", "current": ["CONFIG_COMPILER_OPTIMIZATION_SIZE=y"],
     "superseded": ["CONFIG_COMPILER_OPTIMIZATION_PERF=y"], "not_changes": [], "category": "change_by_assistant_action", "mark": "optsize"},
    {"subject": "device network", "current": ["Wi-Fi"], "superseded": [], "not_changes": ["LoRaWAN"],
     "category": "not_change_hypothetical", "mark": "h_lora"},
    {"subject": "OTA server", "current": ["hawkBit"], "superseded": [], "not_changes": ["AWS IoT Jobs"],
     "category": "not_change_question", "mark": "q_iot"},
    {"subject": "firmware framework", "current": ["ESP-IDF"], "superseded": [], "not_changes": ["Zephyr"],
     "category": "not_change_rejected_proposal", "mark": "r_zephyr"},
    {"subject": "download transport", "current": ["mTLS on 8443"], "superseded": [], "not_changes": ["port 8080"],
     "category": "not_change_quoted_doc", "mark": "d_http"},
    {"subject": "device time source", "current": ["SNTP"], "superseded": [], "not_changes": ["GPS time"],
     "category": "not_change_negation", "mark": "n_time"},
    {"subject": "fleet hardware", "current": ["ESP32-C3"], "superseded": [], "not_changes": ["ESP8266"],
     "category": "not_change_historical", "mark": "hist_esp8266"},
    {"subject": "production canary share", "current": ["canary_percent: 2"], "superseded": [], "not_changes": ["canary_percent: 50"],
     "category": "not_change_staging_value", "mark": "s_canary"},
]

requests = [
    {"id": "fleet_versions", "match": ["versões na frota", "firmware versions"], "final_state": "done", "category": "done"},
    {"id": "release_build", "match": ["build de release", "release build"], "final_state": "done", "category": "done"},
    {"id": "offline_count", "match": ["dispositivos offline", "devices offline"], "final_state": "done",
     "category": "done_identical_answer"},
    {"id": "ops_email", "match": ["e-mail para a operação"], "final_state": "open", "category": "open"},
    {"id": "success_panel", "match": ["taxa de sucesso", "OTA success rate"], "final_state": "open", "category": "open"},
    {"id": "ota_bluetooth", "match": ["OTA via Bluetooth"], "final_state": "deferred", "category": "deferred_by_user"},
    {"id": "coredump_upload", "match": ["coredump"], "final_state": "deferred", "category": "deferred_by_assistant"},
    {"id": "spanish_changelog", "match": ["changelog em espanhol", "Spanish changelog"], "final_state": "cancelled",
     "category": "cancelled"},
    {"id": "soak_test", "match": ["soak"], "final_state": "open", "category": "cancelled_then_reopened"},
    {"id": "broker_cert", "match": ["certificado do broker", "broker cert"], "final_state": "open", "category": "announced_not_done"},
    {"id": "rename_script", "match": ["rename", "renomear"], "final_state": "cancelled", "category": "cancel_in_other_language"},
]

identifiers = ["FW-882", SDK, ROLL, "mqtt.frotas-sensores.com.br", "3c7d1e9a04",
               "https://ci.frotas-sensores.com.br/job/firmware-release/412", "v2.14.0"]

if __name__ == "__main__":
    build("ota_firmware_pt", "IoT fleet firmware (ESP32 OTA rollout, MQTT, hawkBit)", ["pt", "en"], blocks,
          fillers, goodbye, facts, requests, identifiers, seed=8233, max_between=1)
