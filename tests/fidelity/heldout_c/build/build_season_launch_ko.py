"""Story season_launch_ko: online game live-ops, ranked season launch (ko + en). Seed 9377."""

from common import A, T, U, bash, build, edit

MM = "config/matchmaking.toml"
GS = "config/gameserver.toml"
EV = "events/winter_2026.json"

blocks = [
    [
        U("안녕하세요~ 랭크 시즌 3 런칭 준비 시작할게요. 티켓 LIVE-5120. 매치메이커는 mm-prod-seoul (ap-northeast-2), "
          "설정은 config/matchmaking.toml 이랑 config/gameserver.toml, 이벤트는 events/winter_2026.json. 매칭 설정부터 보여줘"),
        A("matchmaking.toml 을 엽니다.", bash("cat " + MM)),
        T("[rating]\nalgorithm = \"Elo\"\ninitial_mmr_range = 100\nexpand_every_seconds = 15\n\n[queue]\nmax_wait_seconds = 60\nparty_size_max = 5\n"
          "ranked_min_level = 30\n\n[backend]\nmatchmaker = \"Open Match\"\nredis_pool_size = 16\n\n[staging]\nxp_multiplier = 5.0\n\n[production]\nxp_multiplier = 1.5",
          mark="s_xp"),
        A("현재: rating algorithm Elo, initial_mmr_range = 100, max_wait_seconds = 60, party_size_max = 5, ranked_min_level = 30, "
          "matchmaker Open Match, redis_pool_size = 16. Production xp_multiplier = 1.5 (5.0 은 staging 섹션 값)."),
    ],
    [
        U("지금 큐 대기시간 통계 좀 뽑아줘, 티어별로"),
        A("어제 하루 기준으로 집계합니다.", bash("psql -d telemetry -c \"select tier, percentile_cont(0.5) within group (order by wait_s) p50, percentile_cont(0.95) within group (order by wait_s) p95 from queue_events where day = current_date - 1 group by tier order by tier\"")),
        T("   tier    | p50 | p95\n-----------+-----+-----\n bronze    |  18 |  41\n silver    |  21 |  47\n gold      |  26 |  58\n platinum  |  34 |  77\n diamond   |  52 | 118\n master    |  88 | 240"),
        A("대기시간 통계: p50 18s(bronze)~88s(master), p95 는 diamond 118s, master 240s 로 master 구간이 max_wait 를 넘깁니다."),
    ],
    [
        U("https://ops.hanbit-games.kr/dash/matchmaking 에서도 master 대기 너무 길다. max_wait_seconds 90 으로 올려"),
        A("수정합니다.", edit(MM, "max_wait_seconds = 60", "max_wait_seconds = 90"), mark="maxwait"),
        T("Edited config/matchmaking.toml (1 line changed)"),
        A("max_wait_seconds = 90 적용."),
    ],
    [
        U("어제 동접 몇 명이었지?"),
        A("피크 동접을 조회합니다.", bash("curl -s 'https://ops.hanbit-games.kr/api/ccu?day=yesterday' | jq .peak")),
        T("48213"),
        A("어제 피크 동접 48,213명입니다."),
    ],
    [
        U("리더보드 지금 nightly SQL batch 로 도는데 시즌 중엔 실시간이었으면 좋겠어"),
        A("Proposal: 리더보드를 Redis sorted sets 로 옮기자. 매치 종료 시 ZADD, 조회는 ZREVRANGE 라서 실시간이고, nightly SQL batch 는 "
          "정산 검증용으로만 남기면 됨. 단점은 Redis 메모리 약 2GB 추가."),
        U("ㅇㅋ 그걸로 가자. Redis sorted sets", mark="leader"),
        A("네, 리더보드는 Redis sorted sets 로."),
    ],
    [
        U("만약 서버를 Agones 로 옮긴다고 치면, 이번 시즌에 영향 있어?", mark="h_agones"),
        A("이번 시즌에는 없어요. 옮긴다면 GameLift 플릿 설정과 매치메이커 할당 로직을 다시 짜야 해서 최소 한 분기 작업입니다."),
        U("그냥 가정이야. GameLift 유지"),
        A("넵."),
    ],
    [
        U("초기 MMR 범위 150 으로 하자"),
        A("ok, initial_mmr_range 150 으로 결정. 파일엔 조금 있다 반영할게요."),
        U("그리고 패치노트에 initial_mmr_range = 150 이랑 대기시간 변경 적어줘. 시간 날 때"),
        A("noted 👍"),
    ],
    [
        U("Can you set the range to 150 now in the toml"),
        A("반영합니다.", edit(MM, "initial_mmr_range = 100", "initial_mmr_range = 150")),
        T("Edited config/matchmaking.toml (1 line changed)"),
        A("initial_mmr_range = 150."),
    ],
    [
        U("시즌 오픈은 원래 12월 11일이었는데, 일단 12월 18일로 하자. 퍼블리셔 확인은 아직"),
        A("일단 12월 18일 (12월 11일 대신), 퍼블리셔 확인 대기."),
    ],
    [
        U("FlexMatch 쓰면 Open Match 보다 편하지 않나? 그냥 궁금해서", mark="q_flex"),
        A("FlexMatch 는 GameLift 와 붙어서 편하긴 한데 룰셋이 JSON DSL 이라 우리 커스텀 파티 로직을 못 옮겨요. Open Match 유지 추천."),
        U("ㅇㅇ 그대로"),
        A("OK."),
    ],
    [
        U("game server tick rate 60 으로 올려봐, 랭크는 반응성이 중요하니까"),
        A("gameserver.toml 수정.", edit(GS, "tick_rate = 30", "tick_rate = 60")),
        T("Edited config/gameserver.toml (1 line changed)"),
        A("tick_rate = 60."),
    ],
    [
        U("Also please take automatic screenshots of the new lobby for the trailer, 4K"),
        A("I can script it with the headless client once the lobby build is on staging."),
    ],
    [
        U("anti-cheat 로그 export 도 필요해, 보안팀이 달래"),
        A("어떤 포맷으로요? 기존 S3 export 재사용 가능해요."),
        U("음 보안팀이 자기들이 직접 뽑는대. cancel that"),
        A("OK, anti-cheat export 취소."),
    ],
    [
        U("Please write a migration for the old season-1 badges into the new profile schema"),
        A("Sure, I'll write it after the schema freeze on Thursday."),
    ],
    [
        U("시즌 끝나면 상위 1000명 보상 메일 보내는 것도 준비해줘"),
        A("네, 보상 메일 템플릿이랑 대상 쿼리 준비할게요."),
    ],
    [
        U("중간 정리 한번 해줘"),
        A("LIVE-5120 중간 정리 (현재 기준):\n- Rating: Elo, initial_mmr_range = 150, max_wait_seconds = 90, party_size_max = 5.\n"
          "- Game server: tick_rate = 60, GameLift.\n- 리더보드: Redis sorted sets.\n- 시즌 오픈: 12월 18일 (잠정).\n"
          "- 완료: 대기시간 통계, 동접 조회.\n- 남은 것: 패치노트, screenshots, badge 마이그레이션, 상위 1000명 보상 메일.\n- 취소: anti-cheat export."),
        U("맞아"),
        A("👌"),
    ],
    [
        U("Idea 있다고 했지? 시즌 리셋 관련"),
        A("Idea: 이번 시즌은 soft reset 대신 hard reset 으로 전원 MMR 초기화. 상위권 고착이 풀리고 배치 경쟁이 커져요."),
        U("ㄴㄴ hard reset 은 유저들 난리남. soft reset 그대로", mark="r_hard"),
        A("알겠습니다, soft reset 유지."),
    ],
    [
        U("예전 기획서에 이렇게 써있던데 맞아?\n> 랭크 큐는 계정 level 20 이상부터 입장 가능 (시즌1 기획서)"),
        A("그건 시즌1 문서예요. 지금 설정은 ranked_min_level = 30 입니다.", mark="d_level"),
    ],
    [
        U("랭크전에 bot backfill 켜져 있지?"),
        A("아니요, 랭크전에는 bot backfill 없습니다: no bots in ranked. 봇은 일반전과 튜토리얼에만.", mark="n_bots"),
        U("ㅇㅋ 확인"),
        A("👍"),
    ],
    [
        U("MMR 알고리즘 Elo 말고 Glicko-2 로 바꾸자. 기획팀이랑 합의함", mark="algo"),
        A("네, rating algorithm 을 Glicko-2 로. 기존 MMR 은 rating deviation 350 으로 변환해서 이관할게요."),
    ],
    [
        U("시즌1 땐 서버가 도쿄 ap-northeast-1 이었잖아, 지금 서울이지?"),
        A("네, 시즌1 은 ap-northeast-1 이었고 시즌2 부터 ap-northeast-2 (서울) 입니다.", mark="hist_region"),
    ],
    [
        U("지환님이 이벤트 드랍률 커밋했대, 봐줘"),
        A("커밋을 확인합니다.", bash("git show d81f5a2c70 -- " + EV)),
        T("commit d81f5a2c70e4b9a1c3f5d7e9b2a4c6e8f0a1b3c5\nAuthor: 박지환 <jihwan.park@hanbit-games.kr>\nDate:   Fri Dec 4 18:02:44 2026 +0900\n\n"
          "    winter event: lower legendary drop rate after economy review\n\n@@ -12,3 +12,3 @@\n   \"event\": \"winter_2026\",\n-  \"drop_rate_legendary\": 0.02,\n+  \"drop_rate_legendary\": 0.015,\n   \"duration_days\": 21",
          mark="drop"),
        A("지환님이 \"drop_rate_legendary\": 0.02 → \"drop_rate_legendary\": 0.015 로 낮췄어요 (commit d81f5a2c70, 경제 리뷰 결과)."),
        U("오케이"),
        A("ok"),
    ],
    [
        U("파티 최대 인원 4명으로, 5인 파티는 솔로 매칭 망가뜨림"),
        A("sed 로 변경.", bash("sed -i 's/party_size_max = 5/party_size_max = 4/' " + MM + " && grep -n party_size_max " + MM), mark="party"),
        T("8:party_size_max = 4"),
        A("party_size_max = 4."),
    ],
    [
        U("부하 테스트 한번 돌려줘, 5만 동시 큐"),
        A("locust 로 50k 큐 요청을 보냅니다.", bash("locust -f loadtest/queue.py --headless -u 50000 -r 2000 -t 5m --host https://mm-prod-seoul.internal 2>&1 | tail -5")),
        T("Type  Name            # reqs  # fails |  Avg   Min   Max  Med\nPOST  /v1/tickets     912344  18211(2.00%) |  840    12  30012  410\n"
          "ERROR redis.exceptions.ConnectionError: Too many connections (pool exhausted)\nERROR redis.exceptions.ConnectionError: Too many connections (pool exhausted)"),
        A("Redis 커넥션 풀이 고갈돼서 실패가 납니다. 풀을 늘리고 다시 돌릴게요.", edit(MM, "redis_pool_size = 16", "redis_pool_size = 64"), mark="pool"),
        T("Edited config/matchmaking.toml (1 line changed)"),
        A("redis_pool_size = 64 로 올렸고 재실행합니다.", bash("locust -f loadtest/queue.py --headless -u 50000 -r 2000 -t 5m --host https://mm-prod-seoul.internal 2>&1 | tail -2")),
        T("Type  Name            # reqs  # fails |  Avg   Min   Max  Med\nPOST  /v1/tickets     1187402  0(0.00%) |  212    9  1840  160"),
        A("부하 테스트 통과: 118만 요청, 실패 0, 평균 212ms."),
    ],
    [
        U("tick 60 하니까 서버 CPU 두배됨. tick rate 원래대로 돌려"),
        A("되돌립니다.", edit(GS, "tick_rate = 60", "tick_rate = 30"), mark="tick"),
        T("Edited config/gameserver.toml (1 line changed)"),
        A("tick_rate = 30 으로 복구."),
    ],
    [
        U("MMR 범위 150 너무 좁다. 200 으로"),
        A("변경.", edit(MM, "initial_mmr_range = 150", "initial_mmr_range = 200")),
        T("Edited config/matchmaking.toml (1 line changed)"),
        A("initial_mmr_range = 200."),
    ],
    [
        U("동접 몇 명이었는지 다시 알려줘, 보고서에 넣게"),
        A("다시 조회합니다.", bash("curl -s 'https://ops.hanbit-games.kr/api/ccu?day=2026-12-04' | jq .peak")),
        T("48213"),
        A("동일합니다: 피크 동접 48,213명."),
    ],
    [
        U("scratch that screenshot thing, cancel it — 마케팅팀이 외주 준대"),
        A("OK, screenshots 작업 취소."),
    ],
    [
        U("보안팀이 다시 anti-cheat 로그 export 해달래. 자기들 파이프라인이 안 된대"),
        A("알겠어요, anti-cheat 로그 export 다시 진행합니다. 기존 S3 export 재사용할게요."),
    ],
    [
        U("badge 마이그레이션은 없던 걸로 하자. 시즌1 배지는 그냥 아카이브로 보여주기로 했어"),
        A("네, 배지 마이그레이션은 안 합니다."),
    ],
    [
        U("보상 메일 말인데 상위 1000명 말고 상위 500명으로 바꿔줘"),
        A("네, 보상 메일 대상 상위 500명."),
    ],
    [
        U("리플레이 저장 기능은? 이번 시즌에 넣을 수 있어?"),
        A("서버 측 기록은 가능한데 저장 비용 산정이 필요해요."),
        U("그럼 다음 시즌으로 미루자"),
        A("네, 리플레이는 시즌 4 로."),
    ],
    [
        U("Redis 키 정리는? 시즌2 키들 남아있는데"),
        A("key TTL 정리는 시즌 오픈 후에 할게요. 지금 건드리면 시즌2 정산 검증에 필요한 키가 날아갈 수 있어요."),
    ],
    [
        U("MMR 범위 최종: 175. 더는 안 바꿈"),
        A("최종 반영.", edit(MM, "initial_mmr_range = 200", "initial_mmr_range = 175"), mark="range"),
        T("Edited config/matchmaking.toml (1 line changed)"),
        A("initial_mmr_range = 175."),
    ],
    [
        U("퍼블리셔 OK 받음. 12월 18일 확정!", mark="date"),
        A("🎉 시즌 3 오픈 12월 18일 확정."),
    ],
    [
        U("아 그리고 매치메이커 에러를 Slack 알림으로 연결해줘, #live-ops 채널"),
        A("네, 할게요."),
        U("ㄱㅅ"),
        A("넵"),
    ],
]


def f_top(rng):
    return [U(rng.choice(["파드 리소스 어때?", "kubectl top", "매치메이커 파드 상태"])),
            A("리소스 사용량입니다.", bash("kubectl -n matchmaking top pods")),
            T("NAME                         CPU(cores)   MEMORY(bytes)\nfrontend-6b9f7c-xk2lp        %dm         %dMi\nfrontend-6b9f7c-9q8wt        %dm         %dMi\nmmf-ranked-5d7c9-7hz4m       %dm        %dMi"
              % (rng.randint(100, 400), rng.randint(200, 500), rng.randint(100, 400), rng.randint(200, 500), rng.randint(500, 1500), rng.randint(600, 1200))),
            A("여유 있습니다.")]


def f_redis(rng):
    return [U(rng.choice(["redis 메모리?", "레디스 상태", "redis info"])),
            A("메모리 정보.", bash("redis-cli -c info memory | head -4")),
            T("# Memory\nused_memory:%d\nused_memory_human:%.2fG\nused_memory_peak_human:%.2fG"
              % (rng.randint(3, 6) * 10 ** 9, rng.uniform(3, 6), rng.uniform(6, 7))),
            A("문제 없음.")]


def f_tests(rng):
    n = rng.randint(80, 140)
    return [U(rng.choice(["테스트 돌려줘", "테스트 통과해?", "run tests"])),
            A("실행합니다.", bash("go test ./... 2>&1 | tail -3")),
            T("ok  \tgithub.com/hanbit/mm/internal/queue\t%.3fs\nok  \tgithub.com/hanbit/mm/internal/party\t%.3fs\nok  \tgithub.com/hanbit/mm/internal/api\t%.3fs"
              % (rng.uniform(0.5, 3), rng.uniform(0.5, 3), rng.uniform(0.5, 3))),
            A("전부 통과 (%d개 테스트)." % n)]


def f_latency(rng):
    rows = "\n".join("%-14s %5d %5d" % (e, rng.randint(5, 40), rng.randint(40, 200)) for e in ("/v1/tickets", "/v1/assignments", "/v1/profile", "/v1/party", "/v1/party/invite", "/v1/lobby", "/v1/inventory", "/v1/shop/catalog", "/v1/friends", "/v1/mail", "/healthz", "/metrics"))
    return [U(rng.choice(["API 지연시간?", "latency 어때", "p50/p99 보여줘"])),
            A("최근 1시간 지연시간.", bash("promtool query instant http://prom:9090 'histogram_quantile(0.99, ...)' | column -t")),
            T("endpoint        p50   p99\n" + rows),
            A("정상 범위입니다.")]


def f_gitlog(rng):
    h = ["%010x" % rng.getrandbits(40) for _ in range(3)]
    return [U(rng.choice(["최근 커밋?", "git log", "오늘 뭐 들어갔어"])),
            A("최근 커밋입니다.", bash("git log --oneline -3")),
            T("%s lobby: fix party invite race\n%s ci: bump go to 1.23\n%s docs: queue diagram" % tuple(h)),
            A("시즌 설정과 무관한 커밋들입니다.")]



def f_gotest_v(rng):
    names = ["TestTicketCreate", "TestTicketCancelIdempotent", "TestPartyJoin", "TestPartyLeaderLeaves", "TestAssignmentTimeout",
             "TestRegionLatencyFilter", "TestTierBuckets", "TestBackoffJitter", "TestProfileCache", "TestRatingUpdateDraw",
             "TestTicketExtensionsRoundTrip", "TestPartyMaxSizeRejected", "TestQueueDrainOnShutdown", "TestAssignmentRetry", "TestRegionFallback",
             "TestTierPromotionBoundary", "TestProfileCacheEviction", "TestShardHashStable", "TestTicketSearchFields", "TestMetricsLabels"]
    lines = []
    for n in names:
        lines.append("=== RUN   %s" % n)
        lines.append("--- PASS: %s (%.2fs)" % (n, rng.uniform(0, 0.4)))
    lines.append("PASS")
    lines.append("ok  \tgithub.com/hanbit/mm/internal/queue\t%.3fs" % rng.uniform(1, 4))
    return [U(rng.choice(["큐 패키지 테스트 자세히", "go test -v 로 돌려줘", "테스트 하나하나 보여줘"])),
            A("verbose 로 실행합니다.", bash("go test -v ./internal/queue/ 2>&1 | tail -42")),
            T("\n".join(lines)),
            A("큐 패키지 테스트 전부 통과.")]


def f_events(rng):
    lines = ["TIME      TYPE     REASON            OBJECT                         MESSAGE"]
    for _ in range(22):
        lines.append("%02d:%02d:%02d  Normal   %-16s  pod/frontend-6b9f7c-%05d       %s" % (rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59),
                     rng.choice(["Pulled", "Created", "Started", "Scheduled"]), rng.randint(10000, 99999), rng.choice(["Container image pulled", "Created container", "Started container", "Successfully assigned"])))
    return [U(rng.choice(["클러스터 이벤트 뭐 있어?", "k8s events", "최근 이벤트 확인"])),
            A("최근 이벤트입니다.", bash("kubectl -n matchmaking get events --sort-by=.lastTimestamp | tail -10")),
            T("\n".join(lines)),
            A("정상적인 롤링 재시작 이벤트뿐입니다.")]

fillers = [f_top, f_redis, f_tests, f_latency, f_gitlog, f_gotest_v, f_events]
goodbye = [U("오늘은 여기까지! 수고했어요"), A("수고하셨습니다, 내일 봬요!")]

facts = [
    {"subject": "rating algorithm", "current": ["Glicko-2"], "superseded": ["Elo"], "not_changes": [],
     "category": "explicit_change", "mark": "algo"},
    {"subject": "season 3 launch date", "current": ["12월 18일"], "superseded": ["12월 11일"], "not_changes": [],
     "category": "explicit_change", "mark": "date"},
    {"subject": "queue max wait", "current": ["max_wait_seconds = 90"], "superseded": ["max_wait_seconds = 60"], "not_changes": [],
     "category": "change_in_tool_edit", "mark": "maxwait"},
    {"subject": "max party size", "current": ["party_size_max = 4"], "superseded": ["party_size_max = 5"], "not_changes": [],
     "category": "change_in_tool_sed", "mark": "party"},
    {"subject": "legendary drop rate", "current": ["\"drop_rate_legendary\": 0.015"], "superseded": ["\"drop_rate_legendary\": 0.02"],
     "not_changes": [], "category": "change_in_git_diff", "mark": "drop"},
    {"subject": "leaderboard store", "current": ["Redis sorted sets"], "superseded": ["nightly SQL batch"], "not_changes": [],
     "category": "accepted_proposal", "mark": "leader"},
    {"subject": "game server tick rate", "current": ["tick_rate = 30"], "superseded": ["tick_rate = 60"], "not_changes": [],
     "category": "revert", "mark": "tick"},
    {"subject": "initial MMR range", "current": ["initial_mmr_range = 175"],
     "superseded": ["initial_mmr_range = 100", "initial_mmr_range = 150", "initial_mmr_range = 200", "range to 150", "범위 150"],
     "not_changes": [], "category": "multi_revision", "mark": "range"},
    {"subject": "matchmaker Redis pool", "current": ["redis_pool_size = 64"], "superseded": ["redis_pool_size = 16"], "not_changes": [],
     "category": "change_by_assistant_action", "mark": "pool"},
    {"subject": "game server hosting", "current": ["GameLift"], "superseded": [], "not_changes": ["Agones"],
     "category": "not_change_hypothetical", "mark": "h_agones"},
    {"subject": "matchmaker", "current": ["Open Match"], "superseded": [], "not_changes": ["FlexMatch"],
     "category": "not_change_question", "mark": "q_flex"},
    {"subject": "season MMR reset", "current": ["soft reset"], "superseded": [], "not_changes": ["hard reset"],
     "category": "not_change_rejected_proposal", "mark": "r_hard"},
    {"subject": "ranked entry level", "current": ["ranked_min_level = 30"], "superseded": [], "not_changes": ["level 20"],
     "category": "not_change_quoted_doc", "mark": "d_level"},
    {"subject": "bots in ranked", "current": ["no bots in ranked"], "superseded": [], "not_changes": ["bot backfill"],
     "category": "not_change_negation", "mark": "n_bots"},
    {"subject": "game server region", "current": ["ap-northeast-2"], "superseded": [], "not_changes": ["ap-northeast-1"],
     "category": "not_change_historical", "mark": "hist_region"},
    {"subject": "production XP multiplier", "current": ["xp_multiplier = 1.5"], "superseded": [], "not_changes": ["xp_multiplier = 5.0"],
     "category": "not_change_staging_value", "mark": "s_xp"},
]

requests = [
    {"id": "queue_wait_stats", "match": ["대기시간 통계", "queue wait stats"], "final_state": "done", "category": "done"},
    {"id": "load_test", "match": ["부하 테스트", "load test"], "final_state": "done", "category": "done"},
    {"id": "peak_ccu", "match": ["동접", "concurrent users"], "final_state": "done", "category": "done_identical_answer"},
    {"id": "patch_notes", "match": ["패치노트", "patch notes"], "final_state": "open", "category": "open"},
    {"id": "reward_mail", "match": ["보상 메일", "reward mail"], "final_state": "open", "category": "open"},
    {"id": "replay_storage", "match": ["리플레이", "replay"], "final_state": "deferred", "category": "deferred_by_user"},
    {"id": "redis_key_ttl", "match": ["key TTL"], "final_state": "deferred", "category": "deferred_by_assistant"},
    {"id": "trailer_screenshots", "match": ["screenshot", "스크린샷"], "final_state": "cancelled", "category": "cancelled"},
    {"id": "anticheat_export", "match": ["anti-cheat"], "final_state": "open", "category": "cancelled_then_reopened"},
    {"id": "slack_alerts", "match": ["Slack 알림", "Slack alert"], "final_state": "open", "category": "announced_not_done"},
    {"id": "badge_migration", "match": ["badge", "배지"], "final_state": "cancelled", "category": "cancel_in_other_language"},
]

identifiers = ["LIVE-5120", "mm-prod-seoul", MM, GS, EV, "d81f5a2c70", "https://ops.hanbit-games.kr/dash/matchmaking"]

if __name__ == "__main__":
    build("season_launch_ko", "game live-ops (ranked season launch: matchmaking, events, leaderboard)", ["ko", "en"], blocks,
          fillers, goodbye, facts, requests, identifiers, seed=9377, max_between=1)
