"""``anycode sessions pull``, ``anycode projects`` and ``anycode mirror lifecycle`` as a user runs
them (real processes; issue 26): machine B pulls machine A's history from the mirror into a
checkout of the same repository at another path, and an S3 mirror gets its expiry rule.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from core import LocalSessionStore, SessionManager
from tests.support.machines import checkout

ROOT = Path(__file__).resolve().parents[2]


def anycode(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "webui", *args], cwd=cwd or ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_pull_brings_the_other_machines_project_to_this_checkout(tmp_path):
    """Guards against machine B's checkout of the same repository not seeing A's pulled chats."""
    a_dir = checkout(tmp_path / "a" / "app", "git@example.org:team/app.git")
    b_dir = checkout(tmp_path / "b" / "elsewhere" / "app", "https://example.org/team/app")
    mirror = f"sqlite:///{tmp_path / 'mirror.db'}"
    a = SessionManager(LocalSessionStore(tmp_path / "a-data"))
    chat = a.create(a_dir, title="Fix the cache")
    a.add_messages(chat.key, [{"role": "user", "content": "the cache is stale"}])
    out = anycode("sessions", "migrate", "--to", mirror, "--no-progress", env={"ANYCODE_HOME": str(tmp_path / "a-data")})
    assert out.returncode == 0, out.stderr

    b_env = {"ANYCODE_HOME": str(tmp_path / "b-data"), "ANYCODE_MIRROR": mirror}
    out = anycode("sessions", "pull", "--json", env=b_env, cwd=b_dir)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["ok"] and any(chat.id in k for k in report["copied"]), report
    assert anycode("sessions", "pull", env=b_env, cwd=b_dir).stdout.startswith("Nothing new to pull; 1 already up to date here")

    shown = anycode("sessions", "show", chat.id[:8], env=b_env, cwd=b_dir)
    assert shown.returncode == 0 and "the cache is stale" in shown.stdout
    # The checkout at B's path is the same project: its list and search show A's chat, as the
    # page does (they said "No sessions yet." / "No matches." although the pull had copied it).
    listed = anycode("sessions", "list", env=b_env, cwd=b_dir)
    assert listed.returncode == 0 and "Fix the cache" in listed.stdout, listed.stdout
    found = anycode("sessions", "search", "stale", env=b_env, cwd=b_dir)
    assert found.returncode == 0 and "Fix the cache" in found.stdout, found.stdout
    listed = anycode("projects", "--json", env=b_env, cwd=b_dir)
    rows = json.loads(listed.stdout)
    assert [r["identity"] for r in rows] == ["git:example.org/team/app"]


def test_pull_without_a_mirror_is_one_sentence(tmp_path):
    out = anycode("sessions", "pull", env={"ANYCODE_HOME": str(tmp_path / "d"), "ANYCODE_MIRROR": ""})
    assert out.returncode == 1 and "no mirror is configured" in out.stderr and "Traceback" not in out.stderr


def test_mirror_lifecycle_puts_an_expiry_rule_on_the_s3_prefix(tmp_path):
    import boto3

    from tests.support.s3_server import CREDENTIALS, endpoint, fresh_s3_url

    url = fresh_s3_url()
    env = {**CREDENTIALS, "ANYCODE_S3_ENDPOINT": endpoint(), "ANYCODE_MIRROR": url}
    out = anycode("mirror", "lifecycle", "--days", "30", env=env)
    assert out.returncode == 0, out.stderr
    bucket = url[len("s3://"):].split("/", 1)[0]
    s3 = boto3.client("s3", endpoint_url=endpoint(), region_name="us-east-1",
                      aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"])
    [rule] = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert rule["Expiration"]["Days"] == 30 and rule["Filter"]["Prefix"] == "anycode/"
    refused = anycode("mirror", "lifecycle", "--days", "30", env={"ANYCODE_MIRROR": "redis://127.0.0.1:1/0"})
    assert refused.returncode == 1 and "ANYCODE_MIRROR_TTL_DAYS" in refused.stderr


class TestPullAfterBothMachinesWrote:
    """Guards against the fresh-user trial of issue 26 at the command line: after A and B both wrote
    in one chat on a shared mirror, ``sessions pull`` on A listed three histories (A's own twice),
    made B's the one in use, and a repeat pull kept adding copies."""

    def test_pull_twice_on_a_leaves_two_versions_with_a_own_in_use(self, tmp_path):
        from core.stores.mirror import MirroredSessionStore
        from core.stores.sql_store import SqlSessionStore
        from tests.support.storage import pull_into

        url = f"sqlite:///{tmp_path / 'mirror.db'}"
        SqlSessionStore(url).close()

        def machine(name):  # the layout the app itself uses: <data dir>/mirror/outbox.sqlite3
            return MirroredSessionStore(LocalSessionStore(tmp_path / name), SqlSessionStore(url, fsync=False),
                                        outbox_path=tmp_path / name / "mirror" / "outbox.sqlite3",
                                        retry_initial=0.02, poll_interval=0.05)

        a, b = machine("a-data"), machine("b-data")
        ma, mb = SessionManager(a), SessionManager(b)
        proj = tmp_path / "proj"
        proj.mkdir()
        chat = ma.create(proj)
        ma.add_messages(chat.key, [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}])
        assert a.flush(15)
        assert pull_into(SqlSessionStore(url, fsync=False), b).ok
        mb.add_messages(chat.key, [{"role": "user", "content": "from B"}])
        assert b.flush(15)
        ma.add_messages(chat.key, [{"role": "user", "content": "from A"}])
        assert a.flush(15) and a.outbox.diverged()
        a.close()
        b.close()

        env = {"ANYCODE_HOME": str(tmp_path / "a-data"), "ANYCODE_MIRROR": url}
        first = anycode("sessions", "pull", "--all-projects", env=env, cwd=proj)
        assert first.returncode == 0, first.stderr
        assert "kept as version" in first.stdout and "the version in use here is unchanged" in first.stdout, first.stdout
        again = anycode("sessions", "pull", "--all-projects", env=env, cwd=proj)
        assert again.returncode == 0, again.stderr
        assert again.stdout.startswith("Nothing new to pull;") and "the new part of" not in again.stdout, again.stdout
        assert "already holds, not copied again" in again.stdout and "kept as version" not in again.stdout

        listed = anycode("sessions", "versions", chat.id[:8], "--json", env=env, cwd=proj)
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)
        assert [(r["id"], r["current"]) for r in rows][0] == (chat.id, True) and len(rows) == 2, rows
