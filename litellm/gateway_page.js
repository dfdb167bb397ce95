// GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
// vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
// The gateway's page (gateway_page.py, docs/page.md). Plain script, no library, no build step. Every text that comes
// from the gateway (models.yml names and descriptions included) is written with textContent, never as HTML.
"use strict";

const STORE = "llm-gateway-key"; // sessionStorage: this tab only, gone when it closes
const REFRESH_MS = 5000; // the admin's view asks /gateway/report again this long after its last answer
const PERSON_REFRESH_MS = 10000; // a person's view asks /gateway/me again (their usage and limits) this long after
const GOOD = new Set(["healthy", "loaded"]);
const WAIT = new Set(["loading", "draining", "asleep", "stopped", "starting"]);
const $ = (id) => document.getElementById(id);
let timer = null;

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function num(value, digits = 0) {
  return value === null || value === undefined ? "-" : Number(value).toLocaleString("en", {maximumFractionDigits: digits});
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) {
    if (cell instanceof Node) {
      const td = document.createElement("td");
      td.append(cell);
      tr.append(td);
    } else {
      const numeric = typeof cell === "number" || (typeof cell === "string" && /^[-\d.,%]+( ms)?$/.test(cell));
      tr.append(el("td", cell, numeric ? "num" : ""));
    }
  }
  return tr;
}

function fill(table, rows) {
  const body = $(table).querySelector("tbody");
  body.replaceChildren(...rows.map(row));
}

async function ask(path, key) {
  const answer = await fetch(path, {headers: {Authorization: "Bearer " + key}, cache: "no-store", credentials: "omit"});
  let body = null;
  try {
    body = await answer.json();
  } catch (err) {
    body = null;
  }
  return {status: answer.status, body};
}

function stateCell(state) {
  const cls = GOOD.has(state) ? "state-good" : WAIT.has(state) ? "state-wait" : "state-bad";
  const mark = GOOD.has(state) ? "\u2713 " : WAIT.has(state) ? "\u2026 " : "\u2717 "; // readable without colour
  const span = el("span", mark + state, "state " + cls);
  span.dataset.state = state;
  return span;
}

function yesNo(value) {
  return value ? "yes" : "no";
}

// --- the person's view ----------------------------------------------------------------------------------------------
function showModels(models) {
  fill(
    "models",
    models.map((m) => {
      const about = [m.description, m.aliases && m.aliases.length ? "also: " + m.aliases.join(", ") : ""];
      const kind = m.kind === "adapter" && m.base ? "adapter of " + m.base : m.kind + (m.hosted ? " (hosted)" : "") +
        (m.nodes ? ` (${m.nodes} nodes)` : "");
      return [m.name, kind, num(m.context), num(m.max_output_tokens), yesNo(m.tools), yesNo(m.reasoning),
        about.filter(Boolean).join(" \u00b7 ")];
    }),
  );
}

function showLimits(limits) {
  const names = {rpm: "requests a minute", tpm: "tokens a minute", parallel: "requests at a time",
    tokens_per_day: "tokens a day (UTC)", tokens_per_month: "tokens a month (UTC)",
    stored_responses: "bytes of stored responses"};
  const list = $("limits");
  list.replaceChildren();
  for (const [field, words] of Object.entries(names)) {
    list.append(el("dt", words), el("dd", limits[field] === null || limits[field] === undefined ? "no limit" : num(limits[field])));
  }
}

function tokensLine(row, limits) {
  // the same words as `make usage`: today and this month, of the budget when there is one, and what is left
  const part = (used, limit, words) =>
    limit === undefined || limit === null
      ? `${num(used)} tokens ${words}`
      : `${num(used)} of ${num(limit)} tokens ${words} (${num(Math.max(limit - used, 0))} left)`;
  const parts = [part(row.tokens_today, limits.day, "today"), part(row.tokens_this_month, limits.month, "this month")];
  if (row.stored_responses !== undefined && row.stored_responses !== null) {
    // /v1/responses kept for previous_response_id (docs/apis.md), of the stored_responses limit when there is one
    const most = limits.stored_bytes === undefined ? "" : ` of ${num(limits.stored_bytes)}`;
    parts.push(`${num(row.stored_responses)} stored responses (${num(row.stored_bytes || 0)}${most} bytes)`);
  }
  return parts.join(", ");
}

function showUsage(me) {
  const rows = me.usage || [];
  const perModel = rows.filter((r) => r.model !== "(budget)");
  const budget = rows.find((r) => r.model === "(budget)");
  fill("usage", perModel.map((r) => [r.model, num(r.requests), num(r.input_tokens), num(r.output_tokens)]));
  $("tokens").textContent = budget ? tokensLine(budget, budget.limits || {}) : "";
  $("usage-note").textContent = me.usage_error
    ? "The gateway's counters could not be read: " + me.usage_error
    : perModel.length ? "" : "No requests yet.";
}

function snippetTexts(base, models) {
  const chat = models.filter((m) => m.kind === "chat" || m.kind === "adapter");
  const agent = chat.find((m) => m.tools);
  const first = chat[0];
  const out = [];
  if (first) {
    out.push(["OpenAI SDK (Python)", [
      "from openai import OpenAI\n\n",
      `client = OpenAI(base_url="${base}/v1", api_key="`, null, "\")\n",
      `answer = client.chat.completions.create(\n    model="${first.name}",\n`,
      "    messages=[{\"role\": \"user\", \"content\": \"Say hello.\"}],\n)\n",
      "print(answer.choices[0].message.content)\n",
    ]]);
    out.push(["curl", [
      `curl ${base}/v1/chat/completions \\\n  -H "Authorization: Bearer `, null, "\" \\\n",
      "  -H \"Content-Type: application/json\" \\\n",
      `  -d '{"model": "${first.name}", "messages": [{"role": "user", "content": "Say hello."}]}'\n`,
    ]]);
  }
  if (agent) {
    out.push(["Claude Code (/v1/messages)", [
      `ANTHROPIC_BASE_URL=${base} ANTHROPIC_AUTH_TOKEN=`, null,
      ` \\\nANTHROPIC_MODEL=${agent.name} ANTHROPIC_DEFAULT_HAIKU_MODEL=${agent.name} \\\n`,
      "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude\n",
    ]]);
    out.push(["Codex CLI (/v1/responses): ~/.codex/config.toml, then GATEWAY_KEY=<your key> codex", [
      `# GATEWAY_KEY=`, null, " codex\n",
      `model = "${agent.name}"\nmodel_provider = "llm-gateway"\n`,
      agent.context ? `model_context_window = ${agent.context}\n` : "",
      `\n[model_providers.llm-gateway]\nname = "llm-gateway"\nbase_url = "${base}/v1"\n`,
      "env_key = \"GATEWAY_KEY\"\nwire_api = \"responses\"\n",
    ]]);
    const entries = chat.filter((m) => m.tools).map((m) => `        "${m.name}": {"tool_call": true, "reasoning": ${m.reasoning}` +
      (m.context && m.max_output_tokens ? `, "limit": {"context": ${m.context}, "output": ${m.max_output_tokens}}` : "") + "}");
    out.push(["opencode (/v1/chat/completions): opencode.json", [
      "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n",
      `  "model": "llm-gateway/${agent.name}",\n  "provider": {\n    "llm-gateway": {\n`,
      "      \"npm\": \"@ai-sdk/openai-compatible\",\n",
      `      "options": {"baseURL": "${base}/v1", "apiKey": "`, null, "\"},\n",
      "      \"models\": {\n" + entries.join(",\n") + "\n      }\n    }\n  }\n}\n",
    ]]);
  }
  return out;
}

function copyText(pre, button) {
  const text = pre.textContent;
  const done = () => { button.textContent = "Copied"; setTimeout(() => { button.textContent = "Copy"; }, 1500); };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, () => selectText(pre));
  } else {
    selectText(pre); // http on another host has no clipboard API: the text is selected for Ctrl+C
  }
}

function selectText(pre) {
  const range = document.createRange();
  range.selectNodeContents(pre);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}

function showSnippets(models, key) {
  const base = window.location.origin;
  const box = $("snippets");
  box.replaceChildren();
  const texts = snippetTexts(base, models);
  if (!texts.length) box.append(el("p", "No chat model is yours: nothing to connect to.", "hint"));
  for (const [title, parts] of texts) {
    const pre = el("pre");
    pre.tabIndex = 0;
    for (const part of parts) pre.append(part === null ? el("span", key, "secret") : document.createTextNode(part));
    const button = el("button", "Copy");
    button.type = "button";
    button.addEventListener("click", () => copyText(pre, button));
    const head = el("h3", title);
    head.append(button);
    const div = el("div", null, "snippet");
    div.dataset.snippet = title.split(" ")[0].toLowerCase();
    div.append(head, pre);
    box.append(div);
  }
}

function showPerson(me, key) {
  showModels(me.models || []);
  showLimits(me.limits || {});
  showUsage(me);
  showSnippets(me.models || [], key);
  $("person").hidden = false;
}

function refreshPerson(me) {
  // usage and limits only: the models and the snippets stay as they are (a snippet being copied is not redrawn)
  showLimits(me.limits || {});
  showUsage(me);
}

function refreshed(line, every) {
  $(line).textContent = "updated " + new Date().toLocaleTimeString() + "; refreshes every " + every / 1000 + " s";
}

// asks `path` every `every` ms, from the end of one answer to the next question: `show` draws an answer, `line`
// says when it was drawn or why it was not; a key no longer valid (401) signs the page out
async function poll(path, key, every, show, line) {
  try {
    const answer = await ask(path, key);
    if (answer.status === 401) return signedOut("That key is no longer valid for this gateway.");
    if (answer.status === 200 && answer.body) {
      show(answer.body);
      refreshed(line, every);
    } else $(line).textContent = "the gateway answered " + answer.status + "; trying again";
  } catch (err) {
    $(line).textContent = "the gateway did not answer (" + err + "); trying again";
  }
  timer = setTimeout(() => poll(path, key, every, show, line), every);
}

// --- the admin's view -----------------------------------------------------------------------------------------------
function showReport(rep) {
  const g = rep.gateway || {};
  $("gateway-line").textContent = `gateway ${g.state}: ${num(g.workers)} worker(s), ${num(g.requests_per_s, 1)} requests/s, ` +
    `${num(g.requests_total)} requests and ${num(g.errors_total)} backend errors since it started` +
    (g.error ? ` (${g.error})` : "");
  fill("stack", (rep.models || []).map((m) => [
    (m.adapter_of ? "\u2514 " + m.name : m.name) + (m.nodes ? ` (${m.nodes} nodes)` : ""),
    stateCell(m.state),
    num(m.requests_running), num(m.requests_waiting),
    m.kv_cache_usage === null || m.kv_cache_usage === undefined ? "-" : (100 * m.kv_cache_usage).toFixed(1) + "%",
    num(m.prompt_tokens_per_s, 1), num(m.generation_tokens_per_s, 1),
    m.ttft_p50_s === null || m.ttft_p50_s === undefined ? "-" : Math.round(1000 * m.ttft_p50_s) + " ms",
    num(m.gateway_requests_total), num(m.gateway_errors_total),
    GOOD.has(m.state) && !m.scaling ? "" : m.reason,  // a copy that follows the load: its model's range, last decision
  ]));
  const rows = $("stack").querySelectorAll("tbody tr");
  rows.forEach((tr, i) => { tr.dataset.model = (rep.models || [])[i].name; });
  fill("people", (rep.people || []).map((r) => r.model === "(budget)"
    ? [r.person, "(tokens)", "", "", "", tokensLine(r, r.limits || {})]
    : [r.person, r.model, num(r.requests), num(r.input_tokens), num(r.output_tokens), ""]));
}

// --- signing in and out ---------------------------------------------------------------------------------------------
function signedOut(message) {
  clearTimeout(timer);
  sessionStorage.removeItem(STORE);
  $("person").hidden = $("admin").hidden = $("sign-out").hidden = true;
  $("sign-in").hidden = false;
  $("who").textContent = "";
  $("sign-in-error").textContent = message || "";
  $("key").value = "";
  $("key").focus();
}

async function open(key) {
  $("sign-in-error").textContent = "";
  let answer;
  try {
    answer = await ask("/gateway/me", key);
  } catch (err) {
    return signedOut("The gateway did not answer: " + err);
  }
  if (answer.status === 401) return signedOut("That key is not valid for this gateway.");
  if (answer.status !== 200 || !answer.body) return signedOut("The gateway answered " + answer.status + ".");
  sessionStorage.setItem(STORE, key);
  const me = answer.body;
  $("sign-in").hidden = true;
  $("sign-out").hidden = false;
  $("who").textContent = me.admin ? "signed in as the admin (master key)" : "signed in as " + me.person;
  if (me.admin) {
    $("admin").hidden = false;
    poll("/gateway/report?interval=1", key, REFRESH_MS, showReport, "refreshed");
  } else {
    showPerson(me, key);
    refreshed("person-refreshed", PERSON_REFRESH_MS);
    timer = setTimeout(() => poll("/gateway/me", key, PERSON_REFRESH_MS, refreshPerson, "person-refreshed"), PERSON_REFRESH_MS);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("sign-in-form").addEventListener("submit", (event) => {
    event.preventDefault();
    open($("key").value.trim());
  });
  $("sign-out").addEventListener("click", () => signedOut(""));
  const kept = sessionStorage.getItem(STORE);
  if (kept) open(kept);
  else $("key").focus();
});
