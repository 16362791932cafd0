"""CRL3: the connection budget over small fixture projects, through the real `corral check`."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import run_corral
from corral.gates.rules import FAMILIES
from corral.gates.rules.connection_budget import ConnectionBudget

SEED_QUEUES = """
    from corral.runtime import Queue

    index = Queue("index", max_workers=4, timeout=30)
    notify = Queue("notify", max_workers=2, timeout=30)
    webhook = Queue("webhook", max_workers={webhook}, timeout=15, per_key=1)
    maintenance = Queue("maintenance", max_workers=1, timeout=600)
    fetch = Queue("fetch", max_workers=3, timeout=60)
"""
SEED_RUNTIME = """
    from corral.runtime import Runtime

    from app.queues import fetch, index, maintenance, notify, webhook

    runtime = Runtime(
        queues=[index, notify, webhook, maintenance, fetch],
        store="sqlite:///jobs.db",
        max_conns=40,
        relay=1,
    )
"""


def seed_project(project, webhook: int, config: str = "") -> object:
    return project(
        {
            "pyproject.toml": "[tool.corral]\n" + config,
            "app/__init__.py": "",
            "app/queues.py": SEED_QUEUES.format(webhook=webhook),
            "app/runtime.py": SEED_RUNTIME,
        }
    )


def test_seed_numbers_fit(project) -> None:
    root = seed_project(project, webhook=8)
    completed = run_corral("check", "--budget", cwd=root)
    assert completed.returncode == 0, completed.stdout
    assert (
        "index 4 + notify 2 + webhook 8 + maintenance 1 + fetch 3 + relay 1 = 19 <= 20 (max_conns 40 x reserve 0.5)"
        in completed.stdout
    )


def test_one_worker_too_many_is_reported_on_the_runtime_line_with_the_arithmetic(project) -> None:
    root = seed_project(project, webhook=10)
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 1
    (first,) = [line for line in completed.stdout.splitlines() if " CRL30" in line]
    assert first.startswith("app/runtime.py:5:11: CRL301 ")
    assert (
        "index 4 + notify 2 + webhook 10 + maintenance 1 + fetch 3 + relay 1 = 21 > 20 (max_conns 40 x reserve 0.5)"
        in first
    )
    # The budget table comes with a failing budget, unasked.
    assert "budget of app/runtime.py:5: OVER" in completed.stdout


def test_deployment_settings_from_config(project) -> None:
    assert run_corral("check", cwd=seed_project(project, webhook=8, config="processes = 2\n")).returncode == 1
    completed = run_corral("check", cwd=seed_project(project, webhook=30, config="max-conns = 100\n"))
    assert completed.returncode == 0, completed.stdout
    completed = run_corral("check", cwd=seed_project(project, webhook=8, config="reserve = 0.25\n"))
    assert "= 19 > 10 (max_conns 40 x reserve 0.25)" in completed.stdout


def test_the_usual_layout_with_include_is_budgeted_like_any_runtime(project) -> None:
    """`include=` (the job modules a worker imports at start) is no budget input: the gate reads the
    runtime's queues, relay and max_conns beside it, in both directions."""

    def layout(webhook: int) -> object:
        return project(
            {
                "pyproject.toml": "[tool.corral]\n",
                "app/__init__.py": "",
                "app/queues.py": SEED_QUEUES.format(webhook=webhook),
                "app/runtime.py": SEED_RUNTIME.replace(
                    "max_conns=40,", 'include=["app.jobs", "app.email_jobs"],\n        max_conns=40,'
                ),
                "app/jobs.py": """
                    from corral.runtime import JobContext

                    from app.queues import index


                    @index.job("index.page")
                    async def index_page(ctx: JobContext, page_id: int) -> None:
                        return None
                """,
                "app/email_jobs.py": """
                    from corral.runtime import JobContext

                    from app.queues import notify


                    @notify.job("notify.receipt", timeout=10)
                    async def send_receipt(ctx: JobContext, order_id: int) -> None:
                        return None
                """,
            }
        )

    fits = run_corral("check", "--budget", "--no-cache", cwd=layout(webhook=8))
    assert fits.returncode == 0, fits.stdout + fits.stderr
    assert "index 4 + notify 2 + webhook 8 + maintenance 1 + fetch 3 + relay 1 = 19 <= 20" in fits.stdout
    over = run_corral("check", "--no-cache", cwd=layout(webhook=10))
    assert over.returncode == 1
    assert [line.split(" ")[:2] for line in over.stdout.splitlines() if " CRL" in line] == [
        ["app/runtime.py:5:11:", "CRL301"]
    ]


def test_values_resolve_across_modules(project) -> None:
    root = project(
        {
            "pyproject.toml": "[tool.corral]\n",
            "settings.py": """
                import os

                INDEX_WORKERS = 4
                POOL = int(os.environ.get("DB_POOL", "20"))
                RELAY = 1
            """,
            "svc/__init__.py": "",
            "svc/limits.py": "from settings import INDEX_WORKERS\nWEBHOOK_WORKERS = INDEX_WORKERS * 2\n",
            "svc/jobs.py": """
                import settings
                from corral.runtime import Queue, Runtime

                from .limits import WEBHOOK_WORKERS

                index = Queue("index", max_workers=settings.INDEX_WORKERS, timeout=30)
                webhook = Queue("webhook", max_workers=WEBHOOK_WORKERS, timeout=15)
                QUEUES = [index, webhook, Queue("mail", max_workers=1, timeout=5)]
                runtime = Runtime(queues=QUEUES, store="sqlite://", max_conns=settings.POOL, relay=settings.RELAY)
            """,
        }
    )
    completed = run_corral("check", "--budget", cwd=root)
    assert completed.returncode == 1, completed.stdout
    assert "index 4 + webhook 8 + mail 1 + relay 1 = 14 > 10 (max_conns 20 x reserve 0.5)" in completed.stdout
    assert any(line.startswith("svc/jobs.py:9:11: CRL301 ") for line in completed.stdout.splitlines())


def test_each_runtime_sums_only_its_own_queues(project) -> None:
    root = project(
        {
            "api/jobs.py": """
                from corral.runtime import Queue, Runtime

                fast = Queue("fast", max_workers=5, timeout=5)
                runtime = Runtime(queues=[fast], store="sqlite://", max_conns=12)
            """,
            "crawler/jobs.py": """
                from corral.runtime import Queue, Runtime

                crawl = Queue("crawl", max_workers=6, timeout=60)
                runtime = Runtime(queues=[crawl], store="sqlite://", max_conns=12)
            """,
        }
    )
    completed = run_corral("check", "--format", "json", cwd=root)
    assert completed.returncode == 1
    document = json.loads(completed.stdout)
    assert [(f["path"], f["code"]) for f in document["findings"]] == [("crawler/jobs.py", "CRL301")]
    budgets = {entry["path"]: entry for entry in document["budget"]}
    assert budgets["api/jobs.py"]["ok"] is True
    assert budgets["api/jobs.py"]["total"] == 6 and budgets["api/jobs.py"]["limit"] == 6
    assert budgets["crawler/jobs.py"]["queues"] == [{"name": "crawl", "workers": 6}]
    assert budgets["crawler/jobs.py"]["ok"] is False


def test_unresolvable_values_are_findings_where_they_stand(project) -> None:
    root = project(
        {
            "app/queues.py": """
                import os
                from corral.runtime import Queue

                def workers():
                    return 4

                index = Queue("index", max_workers=workers(), timeout=30)
                mail = Queue("mail", max_workers=int(os.environ["MAIL_WORKERS"]), timeout=30)
            """,
            "app/runtime.py": """
                from corral.runtime import Runtime
                from app.queues import index, mail

                runtime = Runtime(queues=[index, mail], store="sqlite://")
            """,
            "app/dynamic.py": """
                from corral.runtime import Runtime

                def build(queues):
                    return Runtime(queues=queues, store="sqlite://")
            """,
        }
    )
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 1
    found = [
        line.split(": ")[0] + " " + line.split(" ")[1] for line in completed.stdout.splitlines() if "CRL30" in line
    ]
    assert "app/queues.py:7:1 CRL302" in found
    assert "app/queues.py:8:1 CRL302" in found
    assert "app/dynamic.py:4:1 CRL302" in found
    assert not any("CRL301" in line for line in found)


def test_no_runtime_no_budget(project) -> None:
    root = project({"app/x.py": "x = 1\n"})
    completed = run_corral("check", "--budget", cwd=root)
    assert completed.returncode == 0
    assert "No corral Runtime(...) declared" in completed.stdout


def test_the_arithmetic_the_runtime_boot_check_shares() -> None:
    from corral.runtime.budget import compute_budget

    budget = compute_budget([("index", 4), ("notify", 2), ("webhook", 10), ("maintenance", 1), ("fetch", 3)], 1, 40)
    assert not budget.ok
    assert budget.describe().endswith("= 21 > 20 (max_conns 40 x reserve 0.5)")


def test_configured_max_conns_stands_in_for_a_pool_sized_at_run_time(project) -> None:
    files = {
        "app/jobs.py": """
            import os
            from corral.runtime import Queue, Runtime

            index = Queue("index", max_workers=4, timeout=30)
            runtime = Runtime(queues=[index], store="sqlite://", max_conns=int(os.environ["DB_POOL"]))
        """
    }
    unproven = run_corral("check", cwd=project({**files, "pyproject.toml": "[tool.corral]\n"}))
    assert unproven.returncode == 1 and "CRL302" in unproven.stdout
    assert unproven.stdout.splitlines()[-1].startswith("Found 1 finding")  # the summary stays last
    configured = run_corral(
        "check", "--budget", cwd=project({**files, "pyproject.toml": "[tool.corral]\nmax-conns = 100\n"})
    )
    assert configured.returncode == 0, configured.stdout
    assert "index 4 + relay 1 = 5 <= 50 (max_conns 100 x reserve 0.5)" in configured.stdout


def test_a_warm_run_answers_the_project_checks_from_the_cache_and_sees_a_changed_dependency(project) -> None:
    """Every result served from the cache: the project checks' output is the stored one, and no rule module
    loads. A queue file edited since (the runtime's file, which depends on it, keeps its key): recomputed."""
    root = seed_project(project, webhook=10)
    cold = run_corral("check", "--format", "json", cwd=root)
    warm = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from corral.gates.cli.main import main; code = main(['check', '--format', 'json']); "
            "print(sorted(m for m in sys.modules if m.startswith('corral.gates.rules')), file=sys.stderr); "
            "sys.exit(code)",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert warm.returncode == cold.returncode == 1, warm.stderr
    assert warm.stderr.strip() == "[]", f"a warm run loaded rule modules: {warm.stderr}"
    assert json.loads(warm.stdout) == json.loads(cold.stdout)
    assert [finding["code"] for finding in json.loads(warm.stdout)["findings"]] == ["CRL301"]
    (root / "app" / "queues.py").write_text(textwrap.dedent(SEED_QUEUES.format(webhook=9)))
    fixed = run_corral("check", "--format", "json", cwd=root)
    assert fixed.returncode == 0, fixed.stdout
    assert json.loads(fixed.stdout)["findings"] == []


def test_a_cached_fact_that_does_not_read_back_costs_one_cold_run(project) -> None:
    root = seed_project(project, webhook=10)
    cold = run_corral("check", "--format", "json", cwd=root)
    (cache_file,) = (root / ".corral_cache").glob("results-*.json")
    document = json.loads(cache_file.read_text())
    damaged = 0
    # Each path's entry: [mtime ns, size, key, findings, facts, ...]; the facts are its fifth item.
    for entry in document["files"].values():
        for kind in entry[4] if len(entry) > 4 else ():
            entry[4][kind] = [{"not": "a field"}]
            damaged += 1
    assert damaged
    cache_file.write_text(json.dumps(document))
    (root / "app" / "__init__.py").write_text("# touched: the project checks must run again\n")
    again = run_corral("check", "--format", "json", cwd=root)
    assert again.returncode == cold.returncode == 1, again.stderr
    assert json.loads(again.stdout)["findings"] == json.loads(cold.stdout)["findings"]
    assert json.loads(again.stdout)["budget"] == json.loads(cold.stdout)["budget"]


def test_the_budget_table_is_printed_unasked_for_the_budget_rules_findings_only() -> None:
    # `corral check` tells them by their family, without loading the rules (see the next test).
    assert FAMILIES["CRL3"] == tuple(ConnectionBudget.codes)


def test_a_warm_text_run_of_a_project_with_job_kinds_and_no_runtime_loads_no_rule(project) -> None:
    root = project(
        {
            "pyproject.toml": "[tool.corral]\n",
            "app/__init__.py": "",
            "app/tasks.py": """
                from celery import shared_task
                @shared_task(time_limit=30)
                def index():
                    pass
                """,
        }
    )
    cold = run_corral("check", cwd=root)
    assert cold.returncode == 0, cold.stdout
    warm = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from corral.gates.cli.main import main; code = main(['check']); "
            "print(sorted(m for m in sys.modules if m.startswith('corral.gates.rules')), file=sys.stderr); "
            "sys.exit(code)",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert warm.returncode == 0, warm.stdout + warm.stderr
    assert warm.stdout == cold.stdout
    assert warm.stderr.strip() == "[]", f"a warm run loaded rule modules: {warm.stderr}"
    jobs = run_corral("check", "--format", "json", cwd=root)
    assert [kind["kind"] for kind in json.loads(jobs.stdout)["jobs"]] == ["index"]
