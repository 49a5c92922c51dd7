"""Whether SQL only reads."""

from __future__ import annotations

import pytest

from harness.approvals import SqlKind, classify_sql


@pytest.mark.parametrize(
    "sql",
    [
        "select 1",
        "SELECT * FROM pg_stat_activity WHERE state <> 'idle';",
        "show max_connections; explain select * from t",
        "with recent as (select * from orders) select count(*) from recent",
        "select 'delete from users' as text -- drop table x",
        "select $$ update t set a = 1 $$",
        "select /* drop /* nested */ table */ 1",
        'select "update" from "insert"',
        "begin; select 1; commit;",
        "\\dt\n\\x\nselect now();",
        "",
    ],
)
def test_reading_sql(sql: str) -> None:
    assert classify_sql(sql).kind is SqlKind.READ


@pytest.mark.parametrize(
    "sql",
    [
        "insert into t values (1)",
        "UPDATE pool SET size = 20 WHERE name = 'api'",
        "delete from sessions",
        "truncate jobs",
        "drop table t",
        "create index on t(a)",
        "alter system set max_connections = 500",
        "grant all on t to bob",
        "vacuum full t",
        "select 1; delete from t",
        "select * into backup from t",
        "explain analyze delete from t",
        "select pg_cancel_backend(42)",
        "select setval('s', 1)",
        "select * from t for update",
        "\\copy t from 'data.csv'",
        "E'\\'' ; drop table t",
    ],
)
def test_changing_sql(sql: str) -> None:
    verdict = classify_sql(sql)
    assert verdict.kind is SqlKind.WRITE
    assert verdict.statement


@pytest.mark.parametrize(
    "sql",
    [
        "\\i fix.sql",
        "\\! rm x",
        "select 'x' \\gexec",
        "\\o |sh",
        "select 1 \\g |sh",
        "\\copy t to program 'sh'",
        "\\o /workspace/.psqlrc",
        "\\setenv PAGER 'sh -c x'",
    ],
)
def test_sql_that_runs_text_the_policy_cannot_see_is_unknown(sql: str) -> None:
    assert classify_sql(sql).kind is SqlKind.UNKNOWN
