// LiveDispatch console: reads the worker's API (/v1/…, /status, /metrics)
// and shows activities, their Lock Screens and push history, dead letters
// with replay, and a rule playground. No framework, no build step; every
// value from the server is put in the page as text, never as HTML.
"use strict";

const KEY_STORAGE = "livedispatch.apiKey";
const POLL_MS = 2000;

// ---- The API: one request at a time (the worker reads Kafka for each, one
// read at a time), the key from sessionStorage, 429 waited out.

let queue = Promise.resolve();

function api(path, options = {}) {
  const run = () => request(path, options, 0);
  const result = queue.then(run, run);
  queue = result.catch(() => undefined);
  return result;
}

async function request(path, options, attempt) {
  const headers = Object.assign({}, options.headers || {});
  const key = sessionStorage.getItem(KEY_STORAGE);
  if (key) headers["Authorization"] = "Bearer " + key;
  if (options.json !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method: options.method || "GET",
    headers,
    body: options.json !== undefined ? JSON.stringify(options.json) : undefined,
    cache: "no-store",
  });
  if (response.status === 429 && attempt < 5) {
    const wait = Math.min(5, Number(response.headers.get("Retry-After")) || 1);
    await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    return request(path, options, attempt + 1);
  }
  const type = response.headers.get("Content-Type") || "";
  const body = type.includes("json") ? await response.json() : await response.text();
  if (response.status === 401 || response.status === 403) promptForKey(key, (body && body.message) || response.statusText);
  else if (response.ok) document.getElementById("key-form").classList.remove("prompt");
  if (!response.ok) {
    const error = new Error((body && body.message) || response.status + " " + response.statusText);
    error.status = response.status;
    error.prompted = response.status === 401 || response.status === 403;
    error.body = body;
    throw error;
  }
  return body;
}

// A worker not bound to localhost answers its read views only with a key:
// ask for one, or say why the key given was refused.
function promptForKey(key, message) {
  const form = document.getElementById("key-form");
  form.classList.add("prompt");
  showNotice(key
    ? "The API key was refused: " + message + "."
    : "This worker is not bound to localhost, so its views need an API key with the read scope: paste it above (" + message + ").", true);
  document.getElementById("key-input").focus();
}

// ---- Small helpers for building the page from data.

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function time(seconds) {
  if (typeof seconds !== "number") return "–";
  return new Date(seconds * 1000).toLocaleTimeString([], { hour12: false });
}

function ago(seconds) {
  if (typeof seconds !== "number") return "";
  const delta = Math.max(0, Date.now() / 1000 - seconds);
  if (delta < 60) return Math.round(delta) + " s ago";
  if (delta < 3600) return Math.round(delta / 60) + " min ago";
  return Math.round(delta / 3600) + " h ago";
}

function failures(failed) {
  const entries = Object.entries(failed || {});
  if (entries.length === 0) return "–";
  return entries.map(([reason, count]) => count + " " + reason).join(", ");
}

function pushLine(push) {
  if (!push) return "–";
  const failed = Object.values(push.failed || {}).reduce((a, b) => a + b, 0);
  return "v" + push.version + " " + push.event + " → " + push.delivered + " delivered" + (failed ? ", " + failed + " failed" : "");
}

function showNotice(text, isError) {
  const notice = document.getElementById("notice");
  notice.textContent = text;
  notice.classList.toggle("error", Boolean(isError));
  notice.hidden = !text;
}

function stamp(id) {
  document.getElementById(id).textContent = "updated " + new Date().toLocaleTimeString([], { hour12: false });
}

// ---- Views, chosen by the URL's hash: #/activities, #/activity/<id>,
// #/audiences/<key>, #/channels, #/dead-letters, #/rules.

let timer = null;
let generation = 0;

function route() {
  clearTimeout(timer);
  generation += 1;
  showNotice("");
  const hash = location.hash || "#/activities";
  const [, view, ...rest] = hash.split("/");
  const name = { activity: "activity", audiences: "audiences", channels: "channels", "dead-letters": "dead-letters", rules: "rules" }[view] || "activities";
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== "view-" + name;
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("active", link.dataset.view === name || (name === "activity" && link.dataset.view === "activities"));
  }
  const current = generation;
  const poll = (load) => {
    const tick = async () => {
      try {
        await load();
      } catch (error) {
        if (!error.prompted) showNotice(error.message, true);
      }
      if (current === generation) timer = setTimeout(tick, POLL_MS);
    };
    tick();
  };
  if (name === "activities") poll(loadActivities);
  else if (name === "activity") poll(() => loadActivity(decodeURIComponent(rest.join("/"))));
  else if (name === "dead-letters") poll(loadDeadLetters);
  else if (name === "channels") poll(loadChannels);
  else if (name === "audiences") {
    const key = decodeURIComponent(rest.join("/"));
    document.getElementById("audience-key").value = key;
    if (key) poll(() => loadAudience(key));
  }
}

async function loadChannels() {
  const list = await api("/v1/channels?limit=500");
  const rows = list.channels.map((channel) =>
    element("tr", { "data-activity": channel.activity_id },
      element("td", {}, element("a", { href: "#/activity/" + encodeURIComponent(channel.activity_id), text: channel.activity_id })),
      element("td", { class: "mono", text: channel.channel_id }),
      element("td", { text: channel.environment }),
      element("td", { text: channel.storage_policy }),
      element("td", { text: channel.app || "–" }),
      element("td", { text: time(channel.created_at) })));
  fill(document.querySelector("#channels tbody"), rows);
  document.getElementById("channels-empty").hidden = rows.length > 0;
  stamp("channels-updated");
}

async function loadAudience(key) {
  let view;
  try {
    view = await api("/v1/audiences/" + encodeURIComponent(key) + "?limit=500");
  } catch (error) {
    if (error.status !== 404) throw error;
    document.getElementById("audience-count").textContent = "(0)";
    fill(document.querySelector("#audience-tokens tbody"), []);
    showNotice("Kafka holds no push-to-start token of this audience.", false);
    return;
  }
  showNotice("");
  document.getElementById("audience-count").textContent = "(" + view.count + ")";
  fill(document.querySelector("#audience-tokens tbody"), view.items.map((token) =>
    element("tr", { "data-token": token.token },
      element("td", { class: "mono", title: token.token, text: token.token.slice(0, 16) + "…" }),
      element("td", { text: token.attributes_type }),
      element("td", { text: token.app || "–" }),
      element("td", { text: token.device || "–" }),
      element("td", { text: token.environment || "production" }),
      element("td", { text: time(token.registered_at) }),
      element("td", { class: "starts" }, ...(token.starts.length ? token.starts.map((start) =>
        element("div", {}, element("a", { href: "#/activity/" + encodeURIComponent(start.activity_id), text: start.activity_id }), " " + ago(start.at)))
        : ["none"])))));
  stamp("audience-updated");
}

async function loadActivities() {
  const filter = document.getElementById("activity-filter").value.trim();
  const list = await api("/v1/activities?limit=200" + (filter ? "&query=" + encodeURIComponent(filter) : ""));
  const rows = list.activities.map((activity) =>
    element("tr", { "data-activity": activity.activity_id },
      element("td", {}, element("a", { href: "#/activity/" + encodeURIComponent(activity.activity_id), text: activity.activity_id })),
      element("td", { class: "lock-text", text: activity.lock_screen || "–" }),
      element("td", { class: "number", text: activity.version ?? "–" }),
      element("td", {}, element("span", { class: activity.ended ? "badge ended" : "badge live", text: activity.ended ? "ended" : "live" })),
      element("td", { class: "number", text: activity.tokens ?? "–" }),
      element("td", { class: "last-push", text: pushLine(activity.last_push) })));
  fill(document.querySelector("#activities tbody"), rows);
  document.getElementById("activities-empty").hidden = rows.length > 0;
  stamp("activities-updated");
}

async function loadActivity(id) {
  let view;
  try {
    view = await api("/v1/activities/" + encodeURIComponent(id));
  } catch (error) {
    if (error.status !== 404) throw error;
    document.getElementById("activity-title").textContent = id;
    showNotice("Kafka holds nothing of this activity (yet).", false);
    return;
  }
  showNotice("");
  document.getElementById("activity-title").textContent = view.activity_id;
  const state = view.state || {};
  const type = document.getElementById("activity-type");
  type.textContent = state.attributes_type ? "type " + state.attributes_type : "type unknown";
  type.title = state.attributes_type ? "The app's ActivityAttributes type, from the activity's start" : "No start named the activity's type";
  renderLockScreen(view, state);
  document.getElementById("activity-state").textContent = JSON.stringify(state.content_state ?? {}, null, 2);

  fill(document.querySelector("#pushes tbody"), (view.pushes || []).map((push) =>
    element("tr", {},
      element("td", { class: "number", text: "v" + push.version }),
      element("td", { text: push.event }),
      element("td", { text: time(push.completed_at) }),
      element("td", { class: "number", text: push.commands }),
      element("td", { class: "number", text: push.delivered }),
      element("td", { text: failures(push.failed) }))));

  // The polled view shows the first page; paging stops the refresh of the table.
  if (!tokenCursor.has(id)) renderTokens(id, view.tokens);

  // The owner's answer leaves dead letters out: they are read from Kafka.
  const letters = view.dead_letters
    ?? (await api("/v1/dead-letters?" + new URLSearchParams({ activity: id, limit: "10" })).catch(() => ({ dead_letters: [] }))).dead_letters;
  fill(document.querySelector("#activity-dead-letters tbody"), letters.map((entry) =>
    element("tr", {},
      element("td", { class: "mono", text: entry.id }),
      element("td", { text: entry.dead_letter.reason }),
      element("td", { text: entry.dead_letter.message }))));
  stamp("activity-updated");
}

// ---- An activity's tokens, a page at a time (GET …/tokens?cursor=), each
// with how the last push to it ended.

const tokenCursor = new Map();

function renderTokens(id, page) {
  document.getElementById("token-count").textContent = "(" + page.count + ")";
  fill(document.querySelector("#tokens tbody"), page.items.map((token) =>
    element("tr", { "data-token": token.token },
      element("td", { class: "mono", title: token.token || "", text: String(token.token || "").slice(0, 16) + "…" }),
      element("td", { text: token.environment || "production" }),
      element("td", { text: time(token.registered_at) }),
      element("td", { text: time(token.expires_at) }),
      outcomeCell(token.last_outcome))));
  const next = document.getElementById("tokens-next");
  next.hidden = !page.next_cursor;
  next.onclick = () => loadTokenPage(id, page.next_cursor).catch((error) => showNotice(error.message, true));
  const first = document.getElementById("tokens-first");
  first.hidden = !tokenCursor.has(id);
  first.onclick = () => {
    tokenCursor.delete(id);
    loadActivity(id).catch((error) => showNotice(error.message, true));
  };
}

async function loadTokenPage(id, cursor) {
  const page = await api("/v1/activities/" + encodeURIComponent(id) + "/tokens?" + new URLSearchParams({ cursor, limit: "100" }));
  tokenCursor.set(id, cursor);
  renderTokens(id, page);
}

// "delivered v5 (end)" or "failed v5 (update): BadDeviceToken", and when;
// a derived outcome is the activity's newest push, which the token got.
function outcomeCell(outcome) {
  if (!outcome) return element("td", { class: "outcome muted", text: "no push yet" });
  const what = outcome.result + " v" + outcome.version + " (" + outcome.kind + ")" + (outcome.reason ? ": " + outcome.reason : "");
  return element("td", {
    class: "outcome " + outcome.result, "data-result": outcome.result,
    title: outcome.derived ? "the activity's newest push, completed for every token" : "recorded for this token",
    text: what + " · " + time(outcome.at),
  });
}

// The Lock Screen as the device shows it: the server renders the text
// (the same renderer as `make run`'s terminal lines); headline first.
function renderLockScreen(view, state) {
  const text = view.lock_screen || "(no state yet)";
  const [headline, ...detail] = text.split(" · ");
  document.getElementById("lock-screen").dataset.text = text;
  document.getElementById("lock-time").textContent = new Date().toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hour12: false });
  document.getElementById("lock-app").textContent = (state.attributes_type || "Live Activity").replace(/ActivityAttributes$/, "") + " · v" + (view.version ?? 0);
  document.getElementById("lock-headline").textContent = headline;
  document.getElementById("lock-detail").textContent = detail.join(" · ");
  document.getElementById("lock-ended").hidden = !view.ended;
}

async function loadDeadLetters() {
  const form = document.getElementById("dead-letter-filter");
  const query = new URLSearchParams({ limit: "100" });
  for (const name of ["activity", "reason"]) {
    const value = form.elements[name].value.trim();
    if (value) query.set(name, value);
  }
  const list = await api("/v1/dead-letters?" + query);
  const rows = list.dead_letters.map((entry) => {
    const letter = entry.dead_letter;
    const origin = letter.origin;
    const status = element("span", { class: "replay-status", text: replayed.get(entry.id) || "" });
    const button = element("button", {
      type: "button", class: "replay", text: "Replay",
      onclick: () => replay(entry.id, button, status),
    });
    // A dead letter cut to fit keeps only a prefix of its record: not replayable.
    // One without a record but with a token is a push failure: the worker
    // re-registers an update token, or says why it cannot.
    const truncated = Boolean(letter.details && letter.details.truncated);
    const replayable = origin ? origin.value !== undefined : Boolean(letter.token);
    if (!replayable || truncated) button.disabled = true;
    if (truncated) button.title = "Only a prefix of the original record is kept; replay it from its topic.";
    return element("tr", { "data-id": entry.id, "data-activity": letter.activity_id || "" },
      element("td", { class: "mono", text: entry.id }),
      element("td", { text: time(letter.dead_lettered_at) }),
      element("td", {}, element("span", { class: "badge reason", text: letter.reason })),
      element("td", {}, letter.activity_id ? element("a", { href: "#/activity/" + encodeURIComponent(letter.activity_id), text: letter.activity_id }) : "–"),
      element("td", { class: "message", text: letter.message }),
      element("td", { class: "mono", text: origin ? origin.topic + " " + origin.partition + "@" + origin.offset : "–" }),
      element("td", {}, button, status));
  });
  fill(document.querySelector("#dead-letters tbody"), rows);
  document.getElementById("dead-letters-empty").hidden = rows.length > 0;
  stamp("dead-letters-updated");
}

const replayed = new Map();

async function replay(id, button, status) {
  button.disabled = true;
  try {
    const answer = await api("/v1/dead-letters/" + encodeURIComponent(id) + "/replay", { method: "POST" });
    replayed.set(id, "replayed to " + answer.topic);
    // The list may have been redrawn while the replay ran: mark the row now shown.
    const shown = document.querySelector('#dead-letters tr[data-id="' + CSS.escape(id) + '"] .replay-status');
    for (const span of new Set([status, shown])) if (span) span.textContent = replayed.get(id);
    showNotice("Dead letter " + id + " replayed to " + answer.topic + ".", false);
  } catch (error) {
    status.textContent = error.message;
    button.disabled = false;
  }
}

// ---- Rule playground.

async function explain(event) {
  event.preventDefault();
  const result = document.getElementById("explain-result");
  let parsed;
  try {
    parsed = JSON.parse(document.getElementById("explain-event").value);
  } catch (error) {
    result.replaceChildren(element("p", { class: "error", text: "The event is not JSON: " + error.message }));
    return;
  }
  const body = { topic: document.getElementById("explain-topic").value.trim(), event: parsed };
  const key = document.getElementById("explain-key").value.trim();
  if (key) body.key = key;
  try {
    const answer = await api("/v1/rules/explain", { method: "POST", json: body });
    result.replaceChildren(...answer.rules.map((rule) =>
      element("div", { class: "rule " + rule.status, "data-rule": rule.rule },
        element("h3", {}, rule.rule + " ", element("span", { class: "badge " + rule.status, text: rule.status })),
        ...(rule.commands || []).map((command) => element("pre", { class: "json command", text: JSON.stringify(command, null, 2) })),
        (rule.reasons || []).length ? element("ul", {}, ...rule.reasons.map((reason) => element("li", { text: reason }))) : null)));
  } catch (error) {
    const problems = (error.body && error.body.problems) || [];
    result.replaceChildren(
      element("p", { class: "error", text: error.message }),
      ...problems.map((problem) => element("p", { class: "error", text: problem.pointer + ": " + problem.message })));
  }
}

// A changed rule file tried on recent traffic (POST /v1/rules/diff).
async function diffRules(event) {
  event.preventDefault();
  const result = document.getElementById("diff-result");
  const file = document.getElementById("diff-file").value.trim();
  const body = {
    files: { [file]: document.getElementById("diff-rules").value },
    minutes: Number(document.getElementById("diff-minutes").value) || 60,
  };
  result.replaceChildren(element("p", { class: "muted", text: "Reading the last " + body.minutes + " minutes…" }));
  try {
    const answer = await api("/v1/rules/diff", { method: "POST", json: body });
    const summary = answer.summary;
    const lines = [
      element("p", { class: "diff-summary", text: summary.events_read + " events read, " + summary.events_differing + " differ, " +
        summary.activities_affected + (summary.activities_affected_exact ? "" : " or more") + " activities affected; commands " +
        summary.commands_added + " added, " + summary.commands_removed + " removed, " + summary.commands_changed + " changed; " +
        summary.new_errors + " new rule errors" }),
    ];
    for (const failures of answer.new_errors) {
      lines.push(element("div", { class: "rule failed" },
        element("h3", {}, "rule " + (failures.rule || "?") + " now fails on " + failures.count + " events"),
        element("ul", {}, ...failures.examples.map((example) =>
          element("li", { text: example.event.topic + "[" + example.event.partition + "]@" + example.event.offset + ": " + example.reason })))));
    }
    for (const activity of answer.activities) {
      lines.push(element("div", { class: "rule matched", "data-activity": activity.activity_id },
        element("h3", {}, element("a", { href: "#/activity/" + encodeURIComponent(activity.activity_id), text: activity.activity_id }),
          " " + activity.events + " events: " + activity.changed + " changed, " + activity.added + " added, " + activity.removed + " removed"),
        element("ul", {}, ...activity.examples.flatMap((example) => [
          ...(example.fields || []).map((field) => element("li", { class: "field-change",
            text: example.kind + " " + field.path + ": " + JSON.stringify(field.before) + " → " + JSON.stringify(field.after) })),
          example.lock_screen ? element("li", { class: "muted", text: "Lock Screen: " + example.lock_screen.before + " → " + example.lock_screen.after }) : null,
        ]))));
    }
    result.replaceChildren(...lines);
  } catch (error) {
    const problems = (error.body && error.body.problems) || [];
    result.replaceChildren(
      element("p", { class: "error", text: error.message }),
      ...problems.map((problem) => element("p", { class: "error", text: problem.pointer + ": " + problem.message })));
  }
}

// ---- Key metrics, from /status and /metrics (Prometheus text).

function sumSeries(text, name, labelFilter) {
  let total = 0;
  let seen = false;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+|NaN)$/.exec(line.trim());
    if (!match || match[1] !== name) continue;
    if (labelFilter && !(match[2] || "").includes(labelFilter)) continue;
    const value = Number(match[3]);
    if (Number.isFinite(value)) {
      total += value;
      seen = true;
    }
  }
  return seen ? total : null;
}

// The partitions of a `{"topic": [partition, …]}` object of /status.
function partitionCount(byTopic) {
  return Object.values(byTopic || {}).reduce((total, partitions) => total + (Array.isArray(partitions) ? partitions.length : 0), 0);
}

async function loadMetrics() {
  try {
    const [status, text] = await Promise.all([
      fetch("/status", { cache: "no-store" }).then((r) => r.json()),
      fetch("/metrics", { cache: "no-store" }).then((r) => r.text()),
    ]);
    const pushes = sumSeries(text, "livedispatch_pushes_total");
    const delivered = sumSeries(text, "livedispatch_pushes_total", 'outcome="delivered"');
    const figures = [
      ["phase", status.phase, "metric-phase"],
      ["partitions owned", (status.owned || []).length, "metric-partitions"],
      ["partitions moving in", (status.restoring || []).length, "metric-partitions-restoring"],
      ["partitions moving out", (status.lingering || []).length + (status.releasing || []).length, "metric-partitions-releasing"],
      ["event partitions routed", partitionCount(status.routing), "metric-routing"],
      ["event partitions handed over", partitionCount(status.handing_over), "metric-handing-over"],
      ["in progress", status.in_progress, "metric-in-progress"],
      ["pushes delivered", delivered, "metric-delivered"],
      ["pushes not delivered", pushes === null ? null : pushes - (delivered || 0), "metric-failed"],
      ["activity pushes", sumSeries(text, "livedispatch_activity_pushes_completed_total"), "metric-completed"],
      ["events routed", sumSeries(text, "livedispatch_router_events_total"), "metric-events"],
      ["dead letters", sumSeries(text, "livedispatch_dead_letters_total"), "metric-dead-letters"],
    ];
    document.getElementById("metrics").replaceChildren(...figures.map(([label, value, id]) =>
      element("div", { class: "figure", id },
        element("span", { class: "value", text: value === null || Number.isNaN(value) ? "–" : String(value) }),
        element("span", { class: "label", text: label }))));
    if (status.paused) showNotice("The consumers are paused (back-pressure).", false);
  } catch (error) {
    document.getElementById("metrics").replaceChildren(element("div", { class: "figure", text: "metrics unavailable: " + error.message }));
  }
  setTimeout(loadMetrics, POLL_MS * 2);
}

// ---- Start.

function start() {
  const keyInput = document.getElementById("key-input");
  keyInput.value = sessionStorage.getItem(KEY_STORAGE) || "";
  document.getElementById("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = keyInput.value.trim();
    if (key) sessionStorage.setItem(KEY_STORAGE, key);
    else sessionStorage.removeItem(KEY_STORAGE);
    route();
  });
  document.getElementById("key-forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORAGE);
    keyInput.value = "";
    route();
  });
  document.getElementById("activity-filter").addEventListener("input", () => loadActivities().catch((error) => showNotice(error.message, true)));
  document.getElementById("dead-letter-filter").addEventListener("submit", (event) => {
    event.preventDefault();
    loadDeadLetters().catch((error) => showNotice(error.message, true));
  });
  document.getElementById("audience-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = document.getElementById("audience-key").value.trim();
    if (key) location.hash = "#/audiences/" + encodeURIComponent(key);
  });
  document.getElementById("explain-form").addEventListener("submit", explain);
  document.getElementById("diff-form").addEventListener("submit", diffRules);
  window.addEventListener("hashchange", route);
  route();
  loadMetrics();
}

document.addEventListener("DOMContentLoaded", start);
