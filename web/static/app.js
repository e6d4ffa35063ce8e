// The inbox page: waiting threads with each call's preview, a decision per call, the batch
// submitted to the admin API and the model's answer shown; and a chat view that streams a
// turn's events. Plain JavaScript, no build step, nothing loaded from elsewhere.
//
// Everything the model or a file wrote is put on the page as text (textContent), never as
// HTML. The admin token is typed once and kept in sessionStorage (this tab only); it is sent
// as a bearer header and never put in a URL.
"use strict";

const TOKEN_KEY = "fsagent.adminToken";
const $ = (selector, root = document) => root.querySelector(selector);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (value === true) node.setAttribute(key, "");
    else if (value !== false && value != null) node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child != null) node.append(child);
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
  $("#token-error").textContent = why || "";
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

// --- the inbox ------------------------------------------------------------------------------

function diffLine(line) {
  let kind = "";
  if (line.startsWith("+++") || line.startsWith("---")) kind = "meta";
  else if (line.startsWith("@@")) kind = "hunk";
  else if (line.startsWith("+")) kind = "add";
  else if (line.startsWith("-")) kind = "del";
  return el("span", { class: kind, text: line === "" ? " " : line });
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

function callView(thread, call) {
  const name = `decision-${thread}-${call.id}`;
  const reason = el("input", {
    class: "reason", type: "text", placeholder: "reason (the model reads it)", hidden: true,
  });
  const editor = el("textarea", { class: "edit-args", rows: "8", hidden: true });
  editor.value = JSON.stringify(call.args, null, 2);
  const choices = el("fieldset", { class: "decision" }, el("legend", { class: "label", text: "Decision" }));
  for (const kind of call.allowed_decisions) {
    const input = el("input", { type: "radio", name, value: kind });
    input.addEventListener("change", () => {
      reason.hidden = !(kind in TEXT_PROMPTS);
      reason.placeholder = TEXT_PROMPTS[kind] || "";
      editor.hidden = kind !== "edit";
    });
    choices.append(el("label", {}, input, ` ${DECISION_LABELS[kind] || kind}`));
  }
  choices.append(reason);
  const preview = el("pre", { class: "diff" }, ...call.preview.map(diffLine));
  return el(
    "div", { class: "call", "data-call": call.id },
    el("h4", {}, `${call.name} `, el("span", { class: "call-id", text: call.id })),
    el("div", { class: "label", text: "Arguments" }),
    el("pre", { class: "args", text: JSON.stringify(call.args, null, 2) }),
    el("div", { class: "label", text: "What it would change" }),
    call.preview.length ? preview : el("p", { class: "status", text: "(no preview)" }),
    choices,
    editor,
  );
}

function decisionsOf(form, calls) {
  const decisions = {};
  for (const call of calls) {
    const box = form.querySelector(`.call[data-call="${CSS.escape(call.id)}"]`);
    const chosen = box.querySelector("input[type=radio]:checked");
    if (!chosen) throw new Error(`decide ${call.name} (${call.id}) first`);
    if (chosen.value === "approve") decisions[call.id] = { type: "approve" };
    else if (chosen.value === "reject" || chosen.value === "respond") {
      decisions[call.id] = { type: chosen.value, message: $(".reason", box).value };
    } else if (chosen.value === "edit") {
      let args;
      try {
        args = JSON.parse($(".edit-args", box).value);
      } catch (error) {
        throw new Error(`the edited arguments of ${call.id} are not JSON: ${error.message}`);
      }
      decisions[call.id] = { type: "edit", args };
    }
  }
  return { decisions };
}

// A question the model asked (ask_person): its text, and a choice or a free answer.
function questionView(thread, call) {
  const answer = call.choices.length
    ? el("select", { class: "answer-text" }, el("option", { value: "", text: "choose…" }),
        ...call.choices.map((choice) => el("option", { value: choice, text: choice })))
    : el("input", { class: "answer-text", type: "text", placeholder: "your answer" });
  return el(
    "div", { class: "call", "data-call": call.id },
    el("h4", {}, "The model asks ", el("span", { class: "call-id", text: call.id })),
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

function threadView(item) {
  const asking = item.kind === "question";
  const result = el("div", { class: "result" });
  const submit = el("button", {
    type: "submit", class: "submit", text: asking ? "Send the answer" : "Submit decisions",
  });
  const view = asking ? questionView : callView;
  const form = el("form", { class: "batch" }, ...item.calls.map((call) => view(item.thread, call)), submit);
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
    const response = await api(`/api/admin/approvals/${encodeURIComponent(item.thread)}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    result.replaceChildren();
    if (!response.ok) {
      submit.disabled = false;
      result.append(el("p", { class: "error", text: await errorText(response) }));
      return;
    }
    const outcome = await response.json();
    form.hidden = true;
    const decided = item.calls.map((call) => {
      if (asking) return el("li", { text: `answered ${call.id}: ${body.answers[call.id]}` });
      const decision = body.decisions[call.id];
      const why = decision.message ? `: ${decision.message}` : "";
      return el("li", { text: `${DECIDED[decision.type]} ${call.id} (${call.name})${why}` });
    });
    result.append(
      el("ul", { class: "decided" }, ...decided),
      el("p", { class: "status", text: `Decided. The run ended: ${outcome.status}.` }),
      el("div", { class: "label", text: "Answer" }),
      el("div", { class: "answer", text: outcome.answer || "(no answer)" }),
    );
    if (outcome.error) result.append(el("p", { class: "error", text: outcome.error }));
    if (outcome.status === "pending") {
      result.append(el("p", { class: "status", text: "It waits for approval again: refresh." }));
    }
  });
  return el(
    "article", { class: "thread", "data-thread": item.thread },
    el("h3", { text: item.thread }),
    el("p", { class: "request" }, el("span", { class: "label", text: "Request " }), item.request || "(none)"),
    item.problem ? el("p", { class: "error", text: `Cannot resume: ${item.problem}` }) : null,
    form,
    result,
  );
}

async function loadInbox() {
  const status = $("#inbox-status");
  const list = $("#approvals");
  if (!token()) {
    list.replaceChildren();
    status.textContent = "Enter the admin token to see what waits.";
    askForToken();
    return;
  }
  status.textContent = "Loading…";
  const response = await api("/api/admin/approvals");
  if (!response.ok) {
    status.textContent = await errorText(response);
    list.replaceChildren();
    return;
  }
  const { approvals } = await response.json();
  status.textContent = approvals.length
    ? `${approvals.length} thread(s) waiting.`
    : "Nothing waits for approval.";
  list.replaceChildren(...approvals.map(threadView));
}

$("#refresh").addEventListener("click", loadInbox);

// --- chat -----------------------------------------------------------------------------------

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
    state.agent.textContent += data.text;
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
  } else if (kind === "error") logLine("bad", `error: ${data.text}`);
  else if (kind === "done") logLine("notice", `— ${data.status}`);
}

$("#chat-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const thread = $("#chat-thread").value.trim();
  const text = $("#chat-text").value.trim();
  if (!thread || !text) return;
  $("#chat-send").disabled = true;
  logLine("you", `you> ${text}`);
  $("#chat-text").value = "";
  try {
    const response = await api(`/api/threads/${encodeURIComponent(thread)}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify({ text }),
    });
    if (!response.ok) {
      logLine("bad", `error: ${await errorText(response)}`);
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const state = { agent: null };
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
    logLine("bad", `error: ${error.message}`);
  } finally {
    $("#chat-send").disabled = false;
  }
});

// --- views ----------------------------------------------------------------------------------

function route() {
  const chat = location.hash.startsWith("#chat");
  $("#chat").hidden = !chat;
  $("#inbox").hidden = chat;
  $("#nav-chat").classList.toggle("current", chat);
  $("#nav-inbox").classList.toggle("current", !chat);
  if (!chat) loadInbox();
}

window.addEventListener("hashchange", route);
showTokenState();
route();
