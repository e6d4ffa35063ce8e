// The inbox page: waiting threads with each call's preview, a decision per call, the batch
// submitted to the admin API and the model's answer shown; and a chat view that streams a
// turn's events. Plain JavaScript, no build step, nothing loaded from elsewhere.
//
// Everything the model or a file wrote is put on the page as text (textContent), never as
// HTML, and written out as the terminal does (text.js, `visible`): `el` passes every text,
// string child and shown attribute through it. The admin token is typed once and kept in
// sessionStorage (this tab only); it is sent as a bearer header and never put in a URL.
"use strict";

const TOKEN_KEY = "fsagent.adminToken";
const $ = (selector, root = document) => root.querySelector(selector);

// Attributes a person reads (a tooltip, what a screen reader says): written out like text.
// Others (data-call, value) keep their raw value: the page looks calls up and answers by it.
const SHOWN_ATTRIBUTES = new Set(["title", "aria-label", "placeholder"]);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = visible(value);
    else if (value === true) node.setAttribute(key, "");
    else if (value !== false && value != null) {
      node.setAttribute(key, SHOWN_ATTRIBUTES.has(key) ? visible(value, "") : value);
    }
  }
  for (const child of children) {
    if (typeof child === "string") node.append(visible(child));
    else if (child != null) node.append(child);
  }
  return node;
}

// --- the token ------------------------------------------------------------------------------

const token = () => sessionStorage.getItem(TOKEN_KEY);

function showTokenState() {
  const has = Boolean(token());
  $("#token-state").textContent = has ? "admin token set (this tab)" : "no admin token";
  $("#forget-token").hidden = !has;
}

function askForToken(why) {
  $("#token-panel").hidden = false;
  $("#token-error").textContent = visible(why || "");
  $("#token-input").focus();
}

$("#token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = $("#token-input").value.trim();
  if (!value) return;
  sessionStorage.setItem(TOKEN_KEY, value);
  $("#token-input").value = "";
  $("#token-panel").hidden = true;
  showTokenState();
  route();
});

$("#forget-token").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  showTokenState();
  route();
});

async function api(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  if (token()) headers["Authorization"] = `Bearer ${token()}`;
  const response = await fetch(path, { ...options, headers });
  if (response.status === 401 || response.status === 403) {
    const body = await response.clone().json().catch(() => ({}));
    if (response.status === 401) sessionStorage.removeItem(TOKEN_KEY);
    showTokenState();
    askForToken(body.error || `refused (${response.status})`);
  }
  return response;
}

async function errorText(response) {
  const body = await response.json().catch(() => ({}));
  return body.error || `${response.status} ${response.statusText}`;
}

// --- reaching the server --------------------------------------------------------------------

// Whether the server answered the last request; the page says so, and recovers by itself.
function showReachable(ok, what = "") {
  const line = $("#server-state");
  line.hidden = ok;
  line.textContent = ok ? "" : `The server is unreachable${what ? ` (${what})` : ""}; retrying…`;
}

// fetch, with a network failure turned into a Response-like refusal the callers show.
async function reach(path, options) {
  try {
    const response = await api(path, options);
    showReachable(true);
    return response;
  } catch (error) {
    showReachable(false, error.message);
    return { ok: false, status: 0, unreachable: true, json: async () => ({ error: "the server is unreachable" }) };
  }
}

function ago(iso) {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return "";
  const seconds = Math.max(0, Math.round((Date.now() - then) / 1000));
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return `${Math.round(seconds / 86400)} days ago`;
}

function timeView(iso, prefix) {
  const node = el("time", { datetime: iso, title: new Date(iso).toLocaleString(), class: "age" });
  node.textContent = `${prefix} ${ago(iso)}`;
  node.dataset.prefix = prefix;
  return node;
}

setInterval(() => {
  for (const node of document.querySelectorAll("time.age")) {
    node.textContent = `${node.dataset.prefix} ${ago(node.getAttribute("datetime"))}`;
  }
}, 15000);

// --- the inbox ------------------------------------------------------------------------------

// A call's diff is drawn by diff.js (diffView, diffLine, diffJump).

const CUT = /more lines not shown/;

// The preview, with the whole of it fetched on demand, a page at a time, and a split view.
function previewView(thread, call, lines) {
  const box = el("div", { class: "preview" });
  let shown = lines;
  let words = call.preview_words || {};
  // The marked characters (look-alikes, drawn whitespace, control characters) of these lines.
  let flags = (call.preview_first ? call.preview_first_flags : call.preview_flags) || {};
  let split = false;
  const body = el("div", { class: "preview-body" });
  const render = () => {
    const at = body.firstChild && body.firstChild.topLine ? body.firstChild.topLine() : null;
    const label = `what ${visible(call.name, "")} ${callPath(call.args)} would change (${visible(call.id, "")})`;
    body.replaceChildren(diffView(shown, words, split, at, flags, label));  // the same lines in view
  };
  const tools = el("div", { class: "preview-tools" });
  const totals = call.diff_totals;
  if (totals) {
    const count = (n) => n.toLocaleString("en-US");
    tools.append(el("span", { class: "diff-totals", title: "lines added and removed, in the whole diff" },
      el("span", { class: "added", text: `+${count(totals.added)}` }), " ",
      el("span", { class: "removed", text: `−${count(totals.removed)}` })));
  }
  const toggle = el("button", { type: "button", class: "split-toggle", text: "Side by side" });
  toggle.addEventListener("click", () => {
    split = !split;
    toggle.textContent = split ? "Unified" : "Side by side";
    render();
  });
  tools.append(toggle);
  if (lines.some((line) => CUT.test(line))) {
    const more = el("button", { type: "button", class: "whole-diff", text: "Show the whole diff" });
    const note = el("span", { class: "status" });
    more.addEventListener("click", async () => {
      more.disabled = true;
      const whole = [];
      const wholeWords = {};
      const wholeFlags = {};
      const ids = new Set();
      for (let offset = 0; ; ) {
        note.textContent = `loading… ${whole.length} lines`;
        const response = await reach(`/api/admin/approvals/${encodeURIComponent(thread)}/preview`, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ call_id: call.id, offset }),
        });
        if (!response.ok) {
          note.textContent = visible(await errorText(response));
          more.disabled = false;
          return;
        }
        const page = await response.json();
        whole.push(...page.lines);
        Object.assign(wholeWords, page.words || {});  // both by index in the whole diff
        Object.assign(wholeFlags, page.flags || {});
        ids.add(page.preview_id);
        offset += page.lines.length;
        if (offset >= page.total || !page.lines.length) break;
      }
      if (ids.size !== 1) {  // the file changed between two pages: they show no one state
        note.textContent = "it changed while it loaded: load it again";
        more.disabled = false;
        return;
      }
      call.preview_id = [...ids][0];  // a yes now binds to the whole diff on screen
      shown = whole;
      words = wholeWords;
      flags = wholeFlags;
      note.textContent = `the whole diff: ${whole.length} lines`;
      more.hidden = true;
      render();
    });
    tools.append(more, note);
  }
  render();
  box.append(tools, body);
  return box;
}

// The arguments as a person reads them: each one by name, text as text (not one JSON line).
function argsView(args) {
  const list = el("dl", { class: "args" });
  for (const [key, value] of Object.entries(args || {})) {
    const shown = typeof value === "string" ? value : JSON.stringify(value, null, 2);
    list.append(el("dt", { text: visible(key, "") }), el("dd", {}, el("pre", { class: "arg", text: shown })));
  }
  return list;
}

// Where a call acts, as drawn: a name, so every hidden character is written out, a newline too.
function callPath(args) {
  if (!args) return "";
  if (typeof args.path === "string") return visible(args.path, "");
  if (typeof args.source === "string" && typeof args.destination === "string") {
    return `${visible(args.source, "")} → ${visible(args.destination, "")}`;
  }
  return "";
}

const DECISION_LABELS = {
  approve: "Approve", reject: "Reject", edit: "Edit arguments", respond: "Answer instead",
};
const DECIDED = {
  approve: "approved", reject: "rejected", edit: "edited and approved", respond: "answered instead of",
};
// What the text box asks for: a reason the model reads, or the answer it reads in the call's place.
const TEXT_PROMPTS = {
  reject: "reason (the model reads it)",
  respond: "your answer, which the model reads instead of the result",
};

function editPreview(thread, call, editor) {
  const shown = el("div", { class: "edit-preview" });
  const button = el("button", { type: "button", class: "preview-edit", text: "Preview the edit" });
  let timer = null;
  const run = async () => {
    let args;
    try {
      args = JSON.parse(editor.value);
    } catch (error) {
      shown.replaceChildren(el("p", { class: "error", text: `not JSON: ${error.message}` }));
      return;
    }
    shown.replaceChildren(el("p", { class: "status", text: "working out the edited call's diff…" }));
    const response = await reach(`/api/admin/approvals/${encodeURIComponent(thread)}/preview`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ call_id: call.id, args }),
    });
    if (!response.ok) {
      shown.replaceChildren(el("p", { class: "error", text: await errorText(response) }));
      return;
    }
    const page = await response.json();
    // An edit is bound like a yes: to this preview of exactly these arguments (issue 41).
    call.edit_preview = { args: JSON.stringify(args), preview_id: page.preview_id };
    shown.replaceChildren(
      el("div", { class: "label", text: "What the edited call would change" }),
      el("pre", { class: "diff" }, ...page.lines.map((line, at) => diffLine(line, (page.flags || {})[at]))),
    );
  };
  button.addEventListener("click", run);
  editor.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(run, 700);
  });
  return { button, shown, run };
}

function callView(thread, call) {
  const name = `decision-${thread}-${call.id}`;
  const reason = el("input", {
    class: "reason", type: "text", placeholder: "reason (the model reads it)", hidden: true,
    "aria-label": `the reason or answer for ${call.id}`,
  });
  const editor = el("textarea", {
    class: "edit-args", rows: "8", hidden: true, "aria-label": `the edited arguments of ${call.id}`,
  });
  editor.value = jsonVisible(JSON.stringify(call.args, null, 2));
  const edit = editPreview(thread, call, editor);
  const editBox = el("div", { class: "edit-box", hidden: true }, editor, edit.button, edit.shown);
  const choices = el("fieldset", { class: "decision" }, el("legend", { class: "label", text: "Decision" }));
  for (const kind of call.allowed_decisions) {
    const input = el("input", { type: "radio", name, value: kind });
    input.addEventListener("change", () => {
      reason.hidden = !(kind in TEXT_PROMPTS);
      reason.placeholder = TEXT_PROMPTS[kind] || "";
      editBox.hidden = kind !== "edit";
      editor.hidden = kind !== "edit";
      if (kind === "edit" && !edit.shown.childElementCount) edit.run();
    });
    choices.append(el("label", {}, input, ` ${DECISION_LABELS[kind] || kind}`));
  }
  choices.append(reason);
  const path = callPath(call.args);
  return el(
    "div", { class: "call", "data-call": call.id },
    el("h3", {}, `${visible(call.name, "")} `, el("span", { class: "path", text: path }), " ",
      el("span", { class: "call-id", text: visible(call.id, "") })),
    el("details", { class: "args-box" }, el("summary", { class: "label", text: "Arguments" }), argsView(call.args)),
    el("div", { class: "label", text: "What it would change" }),
    call.preview.length ? previewView(thread, call, call.preview_first || call.preview) : el("p", { class: "status", text: "(no preview)" }),
    choices,
    editBox,
  );
}

function decisionsOf(form, calls) {
  const decisions = {};
  for (const call of calls) {
    const box = form.querySelector(`.call[data-call="${CSS.escape(call.id)}"]`);
    const chosen = box.querySelector("input[type=radio]:checked");
    if (!chosen) throw new Error(`decide ${call.name} (${call.id}) first`);
    // A yes carries the preview it answers: the server binds it to that state, never to a
    // preview it served someone else since (issue 28), and refuses it when that changed.
    if (chosen.value === "approve") decisions[call.id] = { type: "approve", preview_id: call.preview_id };
    else if (chosen.value === "reject" || chosen.value === "respond") {
      decisions[call.id] = { type: chosen.value, message: $(".reason", box).value };
    } else if (chosen.value === "edit") {
      let args;
      try {
        args = JSON.parse($(".edit-args", box).value);
      } catch (error) {
        throw new Error(`the edited arguments of ${call.id} are not JSON: ${error.message}`);
      }
      // Bound to the edit's own preview of these very arguments; none yet is the server's 428.
      const previewed = call.edit_preview?.args === JSON.stringify(args);
      decisions[call.id] = { type: "edit", args, ...(previewed ? { preview_id: call.edit_preview.preview_id } : {}) };
    }
  }
  return { decisions };
}

// A question the model asked (ask_person): its text, and a choice or a free answer.
function questionView(thread, call) {
  const answer = call.choices.length
    ? el("select", { class: "answer-text", "aria-label": `your answer to ${call.id}` }, el("option", { value: "", text: "choose…" }),
        ...call.choices.map((choice) => el("option", { value: choice, text: choice })))
    : el("input", {
      class: "answer-text", type: "text", placeholder: "your answer", "aria-label": `your answer to ${call.id}`,
    });
  return el(
    "div", { class: "call", "data-call": call.id },
    el("h3", {}, "The model asks ", el("span", { class: "call-id", text: call.id })),
    el("p", { class: "question", text: call.question }),
    answer,
  );
}

function answersOf(form, calls) {
  const answers = {};
  for (const call of calls) {
    const box = form.querySelector(`.call[data-call="${CSS.escape(call.id)}"]`);
    const text = $(".answer-text", box).value.trim();
    if (!text) throw new Error(`answer the question ${call.id} first`);
    answers[call.id] = text;
  }
  return { answers };
}

function resultsView(results, decisions) {
  return el("ul", { class: "results" }, ...results.map((result) => {
    const decided = decisions[result.id];
    const letRun = decided && (decided.type === "approve" || decided.type === "edit");
    const what = `${result.tool} ${result.path || result.id}`;
    let line;
    if (letRun && result.failed) line = `✗ ${what}: approved, then failed: ${result.text}`;
    else if (letRun) line = `✓ ${what}: done`;
    else line = `${what}: ${result.text}`;
    return el("li", { class: letRun && result.failed ? "error" : "", text: line });
  }));
}

// Said with a 428 (an approval that names no preview) or a 412 (its preview no longer shows
// what is there): the thread is drawn again from a fresh preview, and asked again.
const LOOK_AGAIN = new Set([412, 428]);

async function lookAgain(article, thread, said) {
  const { response } = await fetchListing(thread);  // this thread whatever the page holds of it
  const approvals = response.ok ? (await response.json()).approvals : [];
  const fresh = approvals.find((item) => item.thread === thread);
  if (!fresh) return false;
  const view = threadView(fresh, said);
  article.replaceWith(view);
  drawn.set(thread, view);
  listingTag = null;  // the page is no longer the listing that tag names
  return true;
}

// A Dismiss button that removes `target`: an outcome stays until the reviewer has read it.
function dismissButton(target) {
  const button = el("button", { type: "button", class: "dismiss", text: "Dismiss" });
  button.addEventListener("click", () => {
    target.remove();
    showDecidedCount();
    showNewCount();
  });
  return button;
}

// Said when a refresh draws a thread again because what it waits on changed (its etag):
// whatever was chosen or typed in it was for the state before.
const CHANGED_ON_PAGE = "⚠ This changed while it was on the page: the preview below is what is " +
  "there now. Decide again; nothing was run.";

// What the server's 412/428 line says happened (core/changes/binding.py words it).
function changedHeadline(said) {
  if (said.includes("belongs to another call")) {
    return "⚠ The decision was sent with another call's preview; nothing changed here. " +
      "Look at this call's preview below and decide again. Nothing was run.";
  }
  if (said.includes("changed since you looked")) {
    return "⚠ This changed since you looked: look again at the preview below and decide again. " +
      "Nothing was run.";
  }
  return "⚠ This was not previewed: look at the preview below and decide again. Nothing was run.";
}

function changedNotice(said) {
  const notice = said === CHANGED_ON_PAGE
    ? el("div", { class: "changed error", role: "alert" }, el("p", { text: said }))
    : el("div", { class: "changed error", role: "alert" },
      el("p", { text: changedHeadline(said) }),
      el("p", { class: "status", text: `The server said: ${said}` }));
  notice.append(dismissButton(notice));
  return notice;
}

// "already decided by admin at 2026-…": a refusal that names who decided, and when.
const ALREADY_DECIDED = /already decided by (\S+) at (\S+?)(?:;|$)/;

// A decided thread leaves the waiting list for the Decided one (newest first), saying who
// decided and when; its outcome stays there until the reviewer dismisses it (issue 32).
function moveToDecided(article, by, at, where) {
  article.classList.add("decided");
  article.classList.remove("focused", "new");
  $(".badge.new", article)?.remove();
  const when = at ? ` at ${at}` : "";
  const line = el("p", { class: "decided-by" },
    el("span", { class: "badge done", text: "decided" }),
    ` by ${by}${when}${where === "elsewhere" ? " (not by this tab)" : ""}`);
  $("details", article).prepend(line);
  $("#decided").prepend(article);
  showDecidedCount();
  markSeen(article);
}

function showDecidedCount() {
  const count = $("#decided").childElementCount;
  $("#decided-box").hidden = count === 0;
  $("#decided-count").textContent = `${count}`;
}

function threadView(item, changed = null) {
  const asking = item.kind === "question";
  const result = el("div", { class: "result" });
  const submit = el("button", {
    type: "submit", class: "submit", text: asking ? "Send the answer" : "Submit decisions",
  });
  const view = asking ? questionView : callView;
  const batch = asking ? null : el(
    "div", { class: "batch-bar" },
    el("input", {
      class: "batch-reason", type: "text", placeholder: "one reason for the whole batch (the model reads it)",
      "aria-label": `one reason for the whole batch of ${item.thread}`,
    }),
    el("button", { type: "button", class: "approve-all", text: "Approve all" }),
    el("button", { type: "button", class: "reject-all", text: "Reject all" }),
  );
  const form = el("form", { class: "batch" }, ...item.calls.map((call) => view(item.thread, call)), batch, submit);
  const article = el("article", { class: "thread", "data-thread": item.thread, tabindex: "-1" });
  const decideAll = (kind) => {
    const why = batch ? $(".batch-reason", batch).value : "";
    for (const box of form.querySelectorAll(".call")) {
      const input = box.querySelector(`input[type=radio][value=${kind}]`);
      if (!input) continue;
      input.checked = true;
      input.dispatchEvent(new Event("change"));
      if (kind === "reject") $(".reason", box).value = why;
    }
    form.requestSubmit();
  };
  article.decideAll = asking ? () => {} : decideAll;
  if (batch) {
    $(".approve-all", batch).addEventListener("click", () => decideAll("approve"));
    $(".reject-all", batch).addEventListener("click", () => decideAll("reject"));
  }
  form.addEventListener("change", () => {
    if (result.querySelector(".error")) result.replaceChildren();  // answered: the hint goes
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    result.replaceChildren();
    let body;
    try {
      body = asking ? answersOf(form, item.calls) : decisionsOf(form, item.calls);
    } catch (error) {
      result.append(el("p", { class: "error", text: error.message }));
      return;
    }
    submit.disabled = true;
    result.append(el("p", { class: "status", text: "Resuming the thread…" }));
    const response = await reach(`/api/admin/approvals/${encodeURIComponent(item.thread)}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    result.replaceChildren();
    if (!response.ok) {
      const said = await errorText(response);
      if (LOOK_AGAIN.has(response.status) && await lookAgain(article, item.thread, said)) return;
      submit.disabled = false;  // it can be sent again
      // The outcome stays until the reviewer dismisses it, even when the thread leaves the
      // server's list (the loser of a two-tab race read its message for 0.1 s, issue 32).
      article.classList.add("kept");
      result.append(el("p", { class: "error", role: "alert", text: said }), dismissButton(article));
      // Decided by someone else (another tab, the terminal): the thread is in the Decided
      // list with who and when, as the server said it; its message stays there.
      const other = ALREADY_DECIDED.exec(said);
      if (other) {
        form.hidden = true;
        moveToDecided(article, other[1], other[2], "elsewhere");
      }
      return;
    }
    const outcome = await response.json();
    form.hidden = true;
    moveToDecided(article, outcome.decided_by || "admin", outcome.decided_at || "", "here");
    const byId = Object.fromEntries(item.calls.map((call) => [call.id, call]));
    const decided = item.calls.map((call) => {
      if (asking) return el("li", { text: `answered ${call.id}: ${body.answers[call.id]}` });
      const decision = body.decisions[call.id];
      const why = decision.message ? `: ${decision.message}` : "";
      const path = callPath(decision.args || byId[call.id].args);
      return el("li", { text: `${DECIDED[decision.type]} ${visible(call.name, "")} ${path} (${visible(call.id, "")})${why}` });
    });
    const failed = (outcome.results || []).some((r) => r.failed && !asking &&
      ["approve", "edit"].includes(body.decisions[r.id]?.type));
    result.append(
      el("ul", { class: "decided" }, ...decided),
      resultsView(outcome.results || [], asking ? {} : body.decisions),
      el("p", { class: failed ? "error" : "status",
        text: `Decided (${outcome.status}). The run ended: ${outcome.run}${failed ? "; an approved call failed" : ""}.` }),
      el("div", { class: "label", text: "Answer" }),
      el("div", { class: "answer", text: outcome.answer || "(no answer)" }),
    );
    if (outcome.error) result.append(el("p", { class: "error", text: outcome.error }));
    if (outcome.run === "pending") {
      result.append(el("p", { class: "status", text: "It waits again: the inbox lists it anew." }));
    }
    result.append(dismissButton(article));  // the outcome stays until it is read
    refreshSoon();
  });
  const paths = item.calls.map((call) => callPath(call.args) || visible(call.name, "")).join(", ");
  const summary = el(
    "summary", {},
    el("span", { class: "thread-name", text: item.thread }), " ",
    el("span", { class: "kind", text: asking ? "question" : `${item.calls.length} call(s): ${paths}` }), " ",
    item.since ? timeView(item.since, "paused") : null,
  );
  article.append(
    el("details", { open: true },
      summary,
      el("p", { class: "links" }, el("a", { href: `#chat/${encodeURIComponent(item.thread)}`, class: "thread-link", text: "the thread's history" })),
      el("p", { class: "request" }, el("span", { class: "label", text: "Request " }), item.request || "(none)"),
      item.reason ? el("p", { class: "reason-said" }, el("span", { class: "label", text: "The model said " }), item.reason) : null,
      item.problem ? el("p", { class: "error", text: `Cannot resume: ${item.problem}` }) : null,
      changed === null ? null : changedNotice(changed),
      form,
      result),
  );
  article.dataset.key = keyOf(item);
  article.dataset.etag = item.etag || "";  // the entry it was drawn from (web/listing.py)
  article.dataset.since = item.since || "";
  // Looked at once the reviewer works in it (a click, a key, focus): no longer new.
  for (const kind of ["focusin", "pointerdown"]) article.addEventListener(kind, () => markSeen(article));
  article.dataset.search = `${item.thread} ${item.request || ""} ${paths} ${item.calls.map((c) => c.name).join(" ")}`.toLowerCase();
  return article;
}

let loading = null;
// A change came while a fetch was on its way: that fetch's answer may be older than the
// change, so one more follows it (issue 32: reusing the running fetch drew "6 waiting" while
// 7 waited, until someone clicked Refresh).
let again = false;

async function loadInbox() {
  if (loading) {
    again = true;
    return loading;
  }
  loading = (async () => {
    do {
      again = false;
      await fetchInbox();
    } while (again);
  })();
  try {
    return await loading;
  } finally {
    loading = null;
  }
}

// `nodes` as `list`'s children, in order, moving only what is out of place: a node taken out
// of the page loses its scroll position, so a diff the reviewer scrolled would jump back to
// its top on every refresh. What has to move gets its diffs' positions back.
function placeInOrder(list, nodes) {
  nodes.forEach((node, i) => {
    if (list.children[i] === node) return;
    const tops = [...node.querySelectorAll("pre.diff-scroll")].map((pre) => [pre, pre.scrollTop]);
    list.insertBefore(node, list.children[i] || null);
    for (const [pre, top] of tops) pre.scrollTop = top;
  });
  while (list.children.length > nodes.length) list.lastElementChild.remove();
}

// A batch: its thread and its calls. A thread waiting on new calls is a new batch.
function keyOf(item) {
  return `${item.thread} ${item.calls.map((call) => call.id).join(",")}`;
}

// What the page drew of the server's listing (issue 43): each waiting thread's article, which
// holds the etag of the entry it was drawn from, and the listing's ETag. A refresh sends them
// (`known`, If-None-Match) and the server answers only the threads whose entry changed, which
// are drawn again; the rest are left as they are, with what the reviewer chose, typed, opened
// or scrolled in them. A new preview_id is a new entry, so a diff drawn for a state that is
// gone is always drawn again (docs/reviewing.md).
const drawn = new Map();  // thread -> its article, or null: listed but not drawn (decided here)
let listingTag = null;  // the ETag of the listing the page is, or null once it drew otherwise
const KNOWN_LIMIT = 6000;  // characters: past that, ask for the whole listing (a URL's bounds)

function held(article) {
  return article && article.isConnected && !article.classList.contains("decided");
}

// The listing, but only what changed from what the page holds (save `except`'s thread), and
// the listing's ETag it named (null: none).
async function fetchListing(except = null) {
  const known = [...drawn].filter(([thread, article]) => thread !== except && held(article))
    .map(([thread, article]) => `${encodeURIComponent(thread)}:${article.dataset.etag}`);
  const tag = except === null && known.length === drawn.size ? listingTag : null;
  const query = known.join(",");
  const path = query.length > KNOWN_LIMIT ? "/api/admin/approvals"
    : `/api/admin/approvals?known=${encodeURIComponent(query)}`;
  const response = await reach(path, { headers: tag ? { "If-None-Match": tag } : {} });
  return { response, tag };
}

async function fetchInbox() {
  const status = $("#inbox-status");
  const list = $("#approvals");
  if (!token()) {
    list.replaceChildren();
    drawn.clear();
    listingTag = null;
    status.textContent = "Enter the admin token to see what waits.";
    askForToken();
    return;
  }
  if (!list.childElementCount) status.textContent = "Loading…";
  const { response, tag } = await fetchListing();
  if (response.status === 304) {
    // The listing is the one the page named; but if the page drew otherwise meanwhile (a
    // thread drawn again after a 412), it is no longer that listing: ask again.
    if (tag !== listingTag) again = true;
    else showWaiting(drawn.size);  // nothing to draw
    return;
  }
  if (!response.ok) {
    if (!response.unreachable) status.textContent = visible(await errorText(response));
    return;
  }
  const answer = await response.json();
  const items = new Map(answer.approvals.map((item) => [item.thread, item]));
  // A batch in the Decided list is decided, whatever an answer that left before that says.
  const decided = new Set([...$("#decided").children].map((a) => a.dataset.key));
  const before = new Map(drawn);
  const wanted = [];
  drawn.clear();
  for (const { thread, etag } of answer.threads) {
    const item = items.get(thread);
    const old = before.get(thread);
    if (decided.has(item ? keyOf(item) : old?.dataset.key)) {
      drawn.set(thread, null);
      continue;
    }
    // Not sent: the entry is the one the page named. Held no more meanwhile (drawn again
    // after a 412, dismissed): ask again, with what the page holds now.
    if (!item && !(held(old) && old.dataset.etag === etag)) {
      for (const [name, article] of before) drawn.set(name, article);
      listingTag = null;
      again = true;
      return;
    }
    const key = item ? keyOf(item) : old.dataset.key;
    let article = old;
    if (item && !(held(old) && old.dataset.etag === item.etag)) {
      // The same batch drawn before, whose entry changed: drawn again, and said so.
      const same = held(old) && old.dataset.key === key;
      article = threadView(item, same ? CHANGED_ON_PAGE : null);
      if (!seenKeys().has(key)) markNew(article);
      // Arrived while this page was open (not what its first load found): say so.
      if (drawnOnce && !same) notifyArrival(item, article);
    }
    drawn.set(thread, article);
    wanted.push(article);
  }
  listingTag = response.headers.get("ETag");
  drawnOnce = true;
  // Gone from the server, or drawn again: a refused decision stays, with its message, until
  // dismissed (unless its batch is drawn again); what was decided elsewhere goes.
  const wantedKeys = new Set(wanted.map((a) => a.dataset.key));
  const kept = [...list.querySelectorAll("article.thread")]
    .filter((a) => a.matches(".kept") && !wanted.includes(a) && !wantedKeys.has(a.dataset.key));
  // New ones first, the newest on top: an arrival is never drawn below a long diff.
  const fresh = wanted.filter((a) => a.classList.contains("new"))
    .sort((a, b) => (b.dataset.since || "").localeCompare(a.dataset.since || ""));
  const rest = wanted.filter((a) => !a.classList.contains("new"));
  placeInOrder(list, [...fresh, ...rest, ...kept]);
  showWaiting(answer.threads.length);
  showNewCount();
  applyFilter();
}

function showWaiting(count) {
  $("#inbox-status").textContent = count ? `${count} thread(s) waiting.` : "Nothing waits for approval.";
}

// --- what is new ----------------------------------------------------------------------------

// The calls this browser's reviewer has looked at (localStorage: it outlives the tab, so
// "new" means new since they last looked, not since the page loaded).
const SEEN_KEY = "fsagent.seenApprovals";
const TITLE = "fsagent inbox";
let drawnOnce = false;

function seenKeys() {
  try {
    return new Set(JSON.parse(localStorage.getItem(SEEN_KEY) || "[]"));
  } catch {
    return new Set();
  }
}

function markNew(article) {
  article.classList.add("new");
  // Said in words, not by colour alone.
  $("summary", article).prepend(el("span", { class: "badge new", text: "new" }), " ");
}

function markSeen(article) {
  if (!article.classList.contains("new") && seenKeys().has(article.dataset.key)) return;
  article.classList.remove("new");
  $(".badge.new", article)?.remove();
  const keys = [...seenKeys()].filter((key) => key !== article.dataset.key);
  keys.push(article.dataset.key);
  localStorage.setItem(SEEN_KEY, JSON.stringify(keys.slice(-500)));
  showNewCount();
}

// The tab's title carries how many are new: "(2) fsagent inbox".
function showNewCount() {
  const count = document.querySelectorAll("#approvals article.thread.new").length;
  document.title = count ? `(${count}) ${TITLE}` : TITLE;
  $("#new-count").textContent = count ? `${count} new` : "";
}

// Desktop notifications, when the reviewer asks for them (the button): one per approval that
// arrives while the page is open, whether or not the tab is in front (a reviewer looking at
// the tab sees the badge anyway; one who is not is the one the notification is for).
function showNotifyState() {
  const button = $("#notify");
  if (!("Notification" in window)) {
    button.hidden = true;
    return;
  }
  const granted = Notification.permission === "granted";
  button.disabled = granted || Notification.permission === "denied";
  button.textContent = granted ? "Notifications on"
    : Notification.permission === "denied" ? "Notifications blocked" : "Notify me of new approvals";
}

$("#notify").addEventListener("click", async () => {
  await Notification.requestPermission();
  showNotifyState();
});

function notifyArrival(item, article) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  const what = item.kind === "question" ? "a question"
    : item.calls.map((call) => callPath(call.args) || visible(call.name, "")).join(", ");
  const note = new Notification(`fsagent: ${visible(item.thread, "")} waits for approval`, {
    body: what, tag: article.dataset.key,
  });
  note.onclick = () => {
    window.focus();
    article.focus();
  };
}

function refreshSoon() {
  setTimeout(loadInbox, 50);
}

$("#refresh").addEventListener("click", loadInbox);

function applyFilter() {
  const words = $("#filter").value.trim().toLowerCase();
  // Both lists: what waits, and what was decided and is still shown.
  for (const article of document.querySelectorAll("#approvals article.thread, #decided article.thread")) {
    article.hidden = Boolean(words) && !article.dataset.search.includes(words);
  }
}

$("#filter").addEventListener("input", applyFilter);
$("#collapse-all").addEventListener("click", () => {
  for (const details of document.querySelectorAll("#inbox article.thread > details")) details.open = false;
});
$("#expand-all").addEventListener("click", () => {
  for (const details of document.querySelectorAll("#inbox article.thread > details")) details.open = true;
});

// The inbox follows the server: a stream of changes, and polling while the stream is down.
let live = null;
let pollTimer = null;

function setLive(text) {
  $("#live-state").textContent = text;
}

function startPolling() {
  if (!pollTimer) pollTimer = setInterval(loadInbox, 5000);
}

function stopPolling() {
  clearInterval(pollTimer);
  pollTimer = null;
}

async function follow() {
  if (live || !token()) return;
  const controller = new AbortController();
  live = controller;
  try {
    const response = await api("/api/admin/inbox", { signal: controller.signal });
    if (!response.ok) throw new Error(`${response.status}`);
    showReachable(true);
    stopPolling();
    setLive("live");
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = parseEvent(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (event.kind === "inbox") {
          $("#inbox-status").textContent = event.data.waiting
            ? `${event.data.waiting} thread(s) waiting.` : "Nothing waits for approval.";
          loadInbox();
        }
      }
    }
  } catch (error) {
    if (controller.signal.aborted) return;
    showReachable(false, error.message);
  } finally {
    if (live === controller) live = null;
  }
  if (controller.signal.aborted) return;
  setLive("polling");
  startPolling();
  setTimeout(follow, 3000);  // and try the stream again
}

function unfollow() {
  if (live) live.abort();
  live = null;
  stopPolling();
  setLive("");
}

// Keyboard: j/k move between waiting threads, a approves the whole batch, r rejects it.
let focused = -1;

function visibleThreads() {
  return [...document.querySelectorAll("#approvals article.thread:not(.decided)")].filter((a) => !a.hidden);
}

function focusThread(index) {
  const threads = visibleThreads();
  if (!threads.length) return;
  focused = Math.max(0, Math.min(index, threads.length - 1));
  for (const article of document.querySelectorAll("#approvals article.focused")) article.classList.remove("focused");
  const article = threads[focused];
  article.classList.add("focused");
  article.focus();
  article.scrollIntoView({ block: "nearest" });
}

// The list of keys (? opens it, Escape closes it: a modal <dialog> does that by itself).
function showKeys() {
  const dialog = $("#keys-help");
  if (!dialog.open) dialog.showModal();
}

$("#show-keys").addEventListener("click", showKeys);
$("#close-keys").addEventListener("click", () => $("#keys-help").close());

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target.closest("input, textarea, select, dialog")) return;
  if (event.key === "?") {
    showKeys();
    event.preventDefault();
    return;
  }
  if ($("#inbox").hidden) return;
  const threads = visibleThreads();
  const current = threads.indexOf(document.querySelector("#approvals article.focused"));
  if (event.key === "/") $("#filter").focus();
  else if (event.key === "j") focusThread(current + 1);
  else if (event.key === "k") focusThread(current < 0 ? 0 : current - 1);
  else if (event.key === "n" || event.key === "p") diffJump(current >= 0 ? threads[current] : document, event.key === "n" ? 1 : -1);
  else if ((event.key === "a" || event.key === "r") && current >= 0) {
    threads[current].decideAll(event.key === "a" ? "approve" : "reject");
  } else return;
  event.preventDefault();
});

// --- chat -----------------------------------------------------------------------------------

const THREAD_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const THREAD_NAME_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit";

function logLine(kind, text) {
  const line = el("div", { class: `line ${kind}`, text });
  $("#chat-log").append(line);
  return line;
}

function parseEvent(block) {
  let kind = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) kind = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
  }
  return { kind, data: data.length ? JSON.parse(data.join("\n")) : {} };
}

function showEvent(state, { kind, data }) {
  if (kind === "text") {
    if (!state.agent) state.agent = logLine("agent", "agent> ");
    state.agent.textContent += visible(data.text);  // character by character: deltas join
    return;
  }
  if (kind === "answer") {
    state.agent = null;
    return;
  }
  state.agent = null;
  if (kind === "route") logLine("tool", `⇢ route: ${data.route}`);
  else if (kind === "tool_call") logLine("tool", `→ ${data.tool}(${data.error ? "…" : JSON.stringify(data.args)})`);
  else if (kind === "tool_result") logLine(data.failed ? "bad" : "tool", `← ${data.text}`);
  else if (kind === "decision") logLine("tool", `${data.decision} ${data.tool} by ${data.by}: ${data.reason}`);
  else if (kind === "approval") {
    const names = data.calls.map((call) => call.name).join(", ");
    logLine("notice", `⚠ waiting for approval: ${names}; decide it in the inbox.`);
    state.pending = true;
    state.calls = data.calls.map((call) => call.id);
  } else if (kind === "notice") logLine("notice", data.text);
  else if (kind === "error") logLine("bad", `error: ${data.text}`);
  else if (kind === "done") {
    logLine("notice", `— ${data.status}`);
    if (data.status === "pending") state.pending = true;
  }
}

function historyLine(message, calls) {
  if (message.role === "user") return el("div", { class: "line you", text: `you> ${message.text}` });
  if (message.role === "assistant") {
    const lines = [];
    if (message.text) lines.push(el("div", { class: "line agent", text: `agent> ${message.text}` }));
    for (const call of message.tool_calls || []) {
      calls[call.id] = call;
      lines.push(el("div", { class: "line tool", text: `→ ${call.name}(${JSON.stringify(call.args)})` }));
    }
    return lines;
  }
  if (message.role === "tool") {
    return el("div", { class: `line ${message.failed ? "bad" : "tool"}`, text: `← ${message.text}` });
  }
  return null;
}

async function showThread(name) {
  const response = await reach(`/api/threads/${encodeURIComponent(name)}`);
  if (response.status === 404) {
    $("#chat-log").replaceChildren(el("div", { class: "line notice", text: `thread '${name}' is new: say something.` }));
    return null;
  }
  if (!response.ok) {
    if (!response.unreachable) logLine("bad", `error: ${await errorText(response)}`);
    return null;
  }
  const thread = await response.json();
  const calls = {};
  const lines = thread.messages.flatMap((m) => historyLine(m, calls) || []);
  $("#chat-log").replaceChildren(
    el("div", { class: "line notice", text: `thread '${name}': ${thread.messages.length} messages, ${thread.status}` }),
    ...lines,
  );
  if (thread.status.startsWith("waiting")) {
    logLine("notice", `⚠ ${thread.status}: an admin decides it in the inbox; this view follows the thread.`);
  }
  return thread;
}

async function loadThreads() {
  const response = await reach("/api/threads");
  if (!response.ok) return;
  const { threads } = await response.json();
  $("#thread-list").replaceChildren(...threads.map((t) => el(
    "li", {}, el("a", { href: `#chat/${encodeURIComponent(t.name)}`, text: t.name }),
    el("span", { class: "status", text: ` ${t.status}, ${t.messages} messages` }),
  )));
}

// After a turn that paused, the view follows its thread until the answer comes.
let following = null;

// The rest of the story once the calls `ids` are decided, added below what the log says (the
// queued and waiting lines stay; issue 32: the view was drawn again without them): who
// decided each call and when, then what came after, then how it ended.
function tellTheRest(thread, ids) {
  const wanted = new Set(ids);
  for (const row of thread.decisions || []) {
    if (!wanted.has(row.call_id)) continue;
    const why = row.reason ? `: ${row.reason}` : "";
    logLine("notice", `✓ decided: ${row.decision} ${row.tool} (${row.call_id}) by ${row.by} at ${row.time}${why}`);
  }
  const asked = thread.messages.findLastIndex((m) =>
    (m.tool_calls || []).some((call) => wanted.has(call.id)));
  const calls = {};
  for (const line of thread.messages.slice(asked + 1).flatMap((m) => historyLine(m, calls) || [])) {
    $("#chat-log").append(line);
  }
  logLine("notice", `— the run ended; the thread is ${thread.status}`);
}

async function followThread(name, ids = []) {
  const mine = {};
  following = mine;
  logLine("notice", "Following the thread: the answer shows here once an admin decides.");
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 2000));
    if (following !== mine) return;
    const response = await reach(`/api/threads/${encodeURIComponent(name)}`);
    if (!response.ok) continue;  // unreachable for now: keep trying
    const thread = await response.json();
    if (!thread.running && !thread.status.startsWith("waiting")) {
      if (ids.length) tellTheRest(thread, ids);
      else await showThread(name);  // it ran when we came: nothing to add to, draw it whole
      loadThreads();
      return;
    }
  }
}

function threadProblem(name) {
  return THREAD_NAME.test(name) ? null : `a thread name is ${THREAD_NAME_RULE}; '${name}' is not`;
}

$("#chat-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const thread = $("#chat-thread").value.trim();
  const text = $("#chat-text").value.trim();
  if (!thread || !text) return;
  const problem = threadProblem(thread);
  if (problem) {
    logLine("bad", `error: ${problem}`);
    return;
  }
  if (location.hash !== `#chat/${encodeURIComponent(thread)}`) {
    history.replaceState(null, "", `#chat/${encodeURIComponent(thread)}`);
  }
  following = null;
  $("#chat-send").disabled = true;
  logLine("you", `you> ${text}`);
  const state = { agent: null, pending: false, calls: [] };
  try {
    const response = await api(`/api/threads/${encodeURIComponent(thread)}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify({ text }),
    });
    showReachable(true);
    $("#chat-text").value = "";
    if (!response.ok) {
      logLine("bad", `error: ${await errorText(response)}`);
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        showEvent(state, parseEvent(buffer.slice(0, end)));
        buffer = buffer.slice(end + 2);
      }
    }
  } catch (error) {
    showReachable(false, error.message);
    logLine("bad", `error: the server is unreachable (${error.message}); your message is kept, send it again`);
  } finally {
    $("#chat-send").disabled = false;
  }
  loadThreads();
  if (state.pending) followThread(thread, state.calls || []);
});

// --- views ----------------------------------------------------------------------------------

function route() {
  const chat = location.hash.startsWith("#chat");
  $("#chat").hidden = !chat;
  $("#inbox").hidden = chat;
  $("#nav-chat").classList.toggle("current", chat);
  $("#nav-inbox").classList.toggle("current", !chat);
  if (chat) {
    unfollow();
    following = null;
    loadThreads();
    const name = decodeURIComponent(location.hash.slice("#chat/".length));
    if (location.hash.startsWith("#chat/") && name) {
      $("#chat-thread").value = name;
      const problem = threadProblem(name);
      if (problem) $("#chat-log").replaceChildren(el("div", { class: "line bad", text: `error: ${problem}` }));
      else showThread(name).then((thread) => {
        if (thread && (thread.running || thread.status.startsWith("waiting"))) {
          followThread(name, thread.running ? [] : thread.pending.map((call) => call.id));
        }
      });
    }
    return;
  }
  loadInbox().then(follow);
}

window.addEventListener("hashchange", route);
showTokenState();
showNotifyState();
route();
