#!/usr/bin/env python3
"""Checks the web console of a running worker as a person would, in headless
Chromium (Debian's /usr/bin/chromium, driven by playwright), and saves
screenshots of each view.

  console-check.py --url http://127.0.0.1:PORT/ --admin-key KEY \
      --expect 'match-superb-owl-2026=Owls 2 – 1 Hawks · full time · last goal: Lin' \
      --screenshots docs

The worker must be bound to loopback (the read views need no key there) and
know KEY with the ingest, read and admin scopes. Steps: the activities list
shows each expected activity with its Lock Screen text; the activity page
shows the same text on its Lock Screen preview, a push history, and its
tokens, each with its last outcome (delivered with the final `end`); the
demo's push-to-start audience lists its two tokens with their type and the
start each was sent, which links to the activity and its type; the
channels view answers (empty in the demo); the rule
playground explains a goal event and diffs a changed goal rule on the
demo's traffic; an `end` sent before its activity had a
state is dead-lettered, then replayed with the Replay button once the
activity exists, and the activity is seen ended. Any step that does not
happen within its deadline, and any script error or Content-Security-Policy
violation in the page, fails the check (exit status 1).

  console-check.py --url http://<non-loopback address>:PORT/ --read-key KEY \
      --expect ACTIVITY=TEXT --screenshots DIR

checks instead a worker bound to a non-loopback address (`0.0.0.0`), opened
through that address: the console asks for a key, refuses a wrong one with
the worker's reason, and with KEY (the `read` scope) shows the activities.
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect, sync_playwright

DEADLINE_MS = 60_000


def call(base, method, path, key, body=None):
    """One request to the worker's API; returns (status, JSON body)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base.rstrip("/") + path, data=data, method=method)
    request.add_header("Authorization", "Bearer " + key)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def wait_for(what, condition, timeout=DEADLINE_MS / 1000):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


def step(name):
    print("console-check: " + name, flush=True)


def check_key_prompt(page, base, read_key, expected, shot):
    """A worker not bound to loopback: the console asks for a key, refuses a
    wrong one with the worker's reason, and shows the activities with the
    right one."""
    step("key prompt")
    page.goto(base)
    notice = page.locator("#notice")
    expect(notice).to_contain_text("not bound to localhost")
    expect(notice).to_contain_text("read scope")
    expect(page.locator("#key-form")).to_have_class("key prompt")
    expect(page.locator("#activities tbody tr")).to_have_count(0)
    shot("console-key-prompt.png")

    step("a wrong key is refused")
    page.fill("#key-input", "not-" + read_key)
    page.locator("#key-form button[type=submit]").click()
    expect(notice).to_contain_text("The API key was refused: the API key is not known to this worker")
    expect(page.locator("#activities tbody tr")).to_have_count(0)

    step("the read key shows the activities")
    page.fill("#key-input", read_key)
    page.locator("#key-form button[type=submit]").click()
    for activity, text in expected.items():
        row = page.locator(f'#activities tbody tr[data-activity="{activity}"]')
        expect(row.locator("td.lock-text")).to_have_text(text)
    expect(notice).to_be_hidden()
    expect(page.locator("#key-form")).to_have_class("key")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--admin-key")
    parser.add_argument("--read-key", help="check the key prompt of a worker not bound to loopback with this read key")
    parser.add_argument("--expect", action="append", default=[], help="ACTIVITY=LOCK SCREEN TEXT")
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    arguments = parser.parse_args()
    expected = dict(item.split("=", 1) for item in arguments.expect)
    if not expected:
        parser.error("give at least one --expect ACTIVITY=TEXT")
    if (arguments.admin_key is None) == (arguments.read_key is None):
        parser.error("give --admin-key (a worker on loopback) or --read-key (one that is not)")
    os.makedirs(arguments.screenshots, exist_ok=True)
    base = arguments.url

    def shot(name):
        path = os.path.join(arguments.screenshots, name)
        page.screenshot(path=path, full_page=True)
        step("saved " + path)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=arguments.chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1360, "height": 860})
        page.set_default_timeout(DEADLINE_MS)
        expect.set_options(timeout=DEADLINE_MS)
        problems = []
        page.on("pageerror", lambda error: problems.append("script error: " + str(error)))
        # A 429 is the worker asking to retry (one Kafka read at a time),
        # which the console does; a 401 is the key prompt's cause.
        expected_statuses = ["status of 429"] + (["status of 401"] if arguments.read_key is not None else [])
        page.on("console", lambda message: problems.append("console " + message.type + ": " + message.text)
                if message.type == "error" and not any(status in message.text for status in expected_statuses) else None)

        if arguments.read_key is not None:
            check_key_prompt(page, base, arguments.read_key, expected, shot)
            browser.close()
            if problems:
                raise AssertionError("the page reported problems:\n" + "\n".join(problems))
            step("all checks passed")
            return

        # The activities list, without a key (the worker is on loopback).
        step("activities list")
        page.goto(base)
        for activity, text in expected.items():
            row = page.locator(f'#activities tbody tr[data-activity="{activity}"]')
            expect(row.locator("td.lock-text")).to_have_text(text)
            expect(row.locator("td").nth(3)).to_have_text("ended")
            expect(row.locator("td.last-push")).to_contain_text("delivered")
            tokens = int(row.locator("td").nth(4).inner_text())
            assert tokens >= 1, f"{activity}: {tokens} tokens listed"
        expect(page.locator("#metric-phase .value")).to_have_text("ready")
        # The only worker owns every partition; nothing is moving.
        expect(page.locator("#metric-partitions .value")).not_to_have_text("0")
        expect(page.locator("#metric-partitions-restoring .value")).to_have_text("0")
        expect(page.locator("#metric-partitions-releasing .value")).to_have_text("0")
        # Its router routes every partition of the domain topics; none is handed over.
        expect(page.locator("#metric-routing .value")).not_to_have_text("0")
        expect(page.locator("#metric-handing-over .value")).to_have_text("0")
        page.wait_for_function("() => Number(document.querySelector('#metric-delivered .value')?.textContent) > 0")
        shot("console-activities.png")

        # One activity's page: the Lock Screen preview and the push history.
        activity, text = next(iter(expected.items()))
        step("activity page of " + activity)
        page.locator(f'#activities tbody tr[data-activity="{activity}"] a').click()
        expect(page.locator("#lock-screen")).to_have_attribute("data-text", text)
        headline = text.split(" · ")[0]
        expect(page.locator("#lock-headline")).to_have_text(headline)
        expect(page.locator("#lock-ended")).to_be_visible()
        expect(page.locator("#pushes tbody tr").first).to_contain_text("end")
        assert page.locator("#pushes tbody tr").count() >= 2, "the push history lists fewer than 2 pushes"
        # Each token's last outcome: the demo's devices all got the final `end`.
        tokens = page.locator("#tokens tbody tr")
        expect(tokens.first).to_be_visible()
        for index in range(tokens.count()):
            outcome = tokens.nth(index).locator("td.outcome")
            expect(outcome).to_have_attribute("data-result", "delivered")
            expect(outcome).to_contain_text("(end)")
        shot("console-activity.png")

        # The demo's push-to-start audience: its tokens, each with the type it
        # starts and the start the worker recorded; that activity's type.
        step("audience followers:owls")
        page.locator('nav a[data-view="audiences"]').click()
        page.fill("#audience-key", "followers:owls")
        page.get_by_role("button", name="Show").click()
        expect(page.locator("#audience-count")).to_have_text("(2)")
        rows = page.locator("#audience-tokens tbody tr")
        for index in range(2):
            expect(rows.nth(index).locator("td").nth(1)).to_have_text("SportsActivityAttributes")
            expect(rows.nth(index).locator("td.starts")).to_contain_text("match-owls-cup-2026")
        shot("console-audience.png")
        rows.first.locator("td.starts a").first.click()
        expect(page.locator("#activity-type")).to_have_text("type SportsActivityAttributes")

        # The channels view: the demo's in-process simulator manages no
        # channels, so it lists none (a channel's row is checked end to end
        # by the broadcast tests against the simulator process).
        step("broadcast channels")
        page.locator('nav a[data-view="channels"]').click()
        expect(page.locator("#channels-empty")).to_be_visible()
        expect(page.locator("#channels-updated")).not_to_be_empty()

        # The rule playground: a goal becomes an update of its match.
        step("rule playground")
        page.locator('nav a[data-view="rules"]').click()
        page.fill("#explain-topic", "sports.scores")
        page.fill("#explain-event", json.dumps({
            "type": "goal", "match_id": "console-check", "minute": 12, "scoring_team": "Owls", "scorer": "Ada",
            "score": {"home": 1, "away": 0}}))
        page.get_by_role("button", name="Explain").click()
        matched = page.locator("#explain-result .rule.matched")
        expect(matched.first.locator("pre.command")).to_contain_text('"activity_id": "match-console-check"')
        expect(page.locator("#explain-result .rule.not-matched").first.locator("li").first).to_be_visible()
        # The same goal rule with another alert title, tried on the demo's
        # traffic: the goals' activity shows the title change.
        step("rules diff on recent traffic")
        sports = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Config", "rules", "sports.yaml")
        with open(sports, encoding="utf-8") as file:
            text = file.read()
        changed = text.replace('title: "Goal for {{ event.scoring_team }}!"', 'title: "GOAL! {{ event.scoring_team }}"')
        assert changed != text, "the goal rule's alert title is not in Config/rules/sports.yaml"
        page.fill("#diff-file", "sports.yaml")
        page.fill("#diff-minutes", "60")
        page.fill("#diff-rules", changed)
        page.get_by_role("button", name="Diff").click()
        expect(page.locator("#diff-result .diff-summary")).to_contain_text("0 new rule errors")
        goals = page.locator('#diff-result [data-activity="match-superb-owl-2026"]')
        expect(goals.locator("li.field-change").first).to_contain_text('alert.title: "Goal for')
        expect(goals.locator("li.field-change").first).to_contain_text('"GOAL! ')
        shot("console-rules.png")

        # A dead letter replayed with the button, and seen to land: an update
        # after the activity's end is refused (`activity-ended`); its replay
        # goes back to `commands` and is refused again, so the activity
        # keeps its last state and its end.
        step("dead letter replay")
        target = "console-replay"

        def letters():
            return [entry for entry in call(base, "GET", f"/v1/dead-letters?activity={target}", arguments.admin_key)[1]["dead_letters"]
                    if entry["dead_letter"]["reason"] == "activity-ended"]

        status, answer = call(base, "POST", f"/v1/activities/{target}/update", arguments.admin_key,
                              {"content_state": {"status": "checked", "step": 1}})
        assert status == 202, f"update: {status} {answer}"
        wait_for("the activity's first state", lambda: call(
            base, "GET", f"/v1/activities/{target}", arguments.admin_key)[1].get("version") == 1)
        status, answer = call(base, "POST", f"/v1/activities/{target}/end", arguments.admin_key, {})
        assert status == 202, f"end: {status} {answer}"
        wait_for("the activity's end", lambda: call(
            base, "GET", f"/v1/activities/{target}", arguments.admin_key)[1].get("version") == 2)
        status, answer = call(base, "POST", f"/v1/activities/{target}/update", arguments.admin_key,
                              {"content_state": {"status": "late", "step": 2}})
        assert status == 202, f"late update: {status} {answer}"
        wait_for("the late update's dead letter", lambda: len(letters()) == 1)

        page.locator('nav a[data-view="dead-letters"]').click()
        row = page.locator(f'#dead-letters tbody tr[data-activity="{target}"]').first
        expect(row.locator(".badge.reason")).to_have_text("activity-ended")
        # Replay needs the admin scope: paste the key first.
        page.fill("#key-input", arguments.admin_key)
        page.locator("#key-form button[type=submit]").click()
        row = page.locator(f'#dead-letters tbody tr[data-activity="{target}"]').first
        row.get_by_role("button", name="Replay").click()
        expect(page.locator("#notice")).to_contain_text("replayed to livedispatch.commands")
        expect(row.locator(".replay-status")).to_have_text("replayed to livedispatch.commands")
        shot("console-dead-letters.png")
        wait_for("the replayed update's own dead letter", lambda: len(letters()) == 2)

        row.locator("a").click()
        expect(page.locator("#lock-ended")).to_be_visible()
        expect(page.locator("#pushes tbody tr").first).to_contain_text("end")
        expect(page.locator("#lock-screen")).to_have_attribute("data-text", "status: checked · step: 1")

        # The console's own answers: content type, caching, CSP.
        response = page.request.get(base)
        headers = response.headers
        assert headers["content-type"].startswith("text/html"), headers
        assert "script-src 'self'" in headers["content-security-policy"], headers
        assert headers["cache-control"] == "no-cache" and headers["etag"], headers
        assert page.request.get(base, headers={"If-None-Match": headers["etag"]}).status == 304

        browser.close()
        if problems:
            raise AssertionError("the page reported problems:\n" + "\n".join(problems))
    step("all checks passed")


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, PlaywrightError) as failure:
        print("console-check: FAILED: " + str(failure), file=sys.stderr, flush=True)
        sys.exit(1)
