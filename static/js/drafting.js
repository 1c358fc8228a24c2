/* Models that draft, people who decide (annotator/drafting): "Draft with a model" (g) asks the server, which asks the
   team's drafting model, for the question, answer and distractors of frames A and B, whatever the pair's source (the
   page's config names the source's addresses); the draft fills the editor, and
   the annotator edits it or discards it (the texts from before come back). The submit names the draft, so the pair
   records it and what was changed. When some models answer drafts in the background, the question as it stands is
   sent to them a moment after each change, and the editor shows "k of n models wrong" before submitting.
   Uses workbench.js's window.sbWorkbench; the browser never talks to a model (API keys stay on the server). */
(() => {
  "use strict";
  const config = JSON.parse(document.getElementById("workbench-config").textContent);
  const drafting = config.drafting || { drafters: [], background: 0, deadline_ms: 70000 };
  const wb = window.sbWorkbench;
  const csrf = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"];
  const $ = (id) => document.getElementById(id);
  const ANSWER_DELAY_MS = 1500;
  if (!wb) return;

  async function post(url, body, timeoutMs) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    try {
      const response = await fetch(url, {
        method: "POST", credentials: "same-origin", signal: controller.signal,
        headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
        body: JSON.stringify(body),
      });
      let data = null;
      try { data = await response.json(); } catch (_) { data = null; }
      return { ok: response.ok, status: response.status, data };
    } catch (error) {
      return { ok: false, status: 0, data: null, timedOut: controller.signal.aborted };
    } finally {
      clearTimeout(timer);
    }
  }
  const refusal = (result) => (result.data ? window.sbRefusalMessages(result.data, result.status).join(" ") : `HTTP ${result.status}`);

  /* --- Draft with a model. --- */
  const status = (text, cls = "muted") => { const el = $("draft-status"); el.textContent = text; el.className = `draft-status small ${cls}`; };
  let asking = false;
  async function draftWithModel() {
    if (!drafting.drafters.length) {
      // The drafting bar is hidden then: say it where the annotator looks.
      if (window.sbToast) window.sbToast("No model may draft questions: a coordinator chooses them on the Models page.");
      return;
    }
    if (asking) return;
    const state = wb.state;
    if (!state.category) return status("Pick a category first (Shift+1–9, 0).", "error");
    if (state.a === null || state.b === null) return status("Set frame A and frame B first (keys a and b).", "error");
    // A question the person typed (not the model's last draft as it came) is theirs: replace it only when they say so.
    const typed = (state.question || "").trim();
    const drafted = state.model_draft_from && same(state.model_draft_from.question, typed);
    if (typed && !drafted && !window.confirm(`Replace your question “${typed.length > 80 ? typed.slice(0, 80) + "…" : typed}” with a model's draft? (Discard draft brings it back.)`)) {
      return status("Kept your question: nothing was asked of the model.");
    }
    const chooser = $("draft-endpoint");
    const endpoint = chooser ? Number(chooser.value) : drafting.drafters[0].id;
    const name = (drafting.drafters.find((d) => d.id === endpoint) || drafting.drafters[0]).name;
    asking = true;
    $("draft-model").disabled = true;
    $("drafting").classList.add("busy");
    status(`Asking ${name}…`);
    const result = await post(config.urls.model_draft,
      { category: state.category, index_a: state.a, index_b: state.b, endpoint }, drafting.deadline_ms);
    asking = false;
    $("draft-model").disabled = false;
    $("drafting").classList.remove("busy");
    if (!result.ok) {
      if (result.status === 0) return status(result.timedOut ? `${name} gave no draft in time: write it yourself, or try again.` : "The server did not answer.", "error");
      return status(refusal(result), "error");
    }
    const d = result.data;
    const binary = !!(wb.template() && wb.template().binary);
    // What was there before, so "discard draft" puts it back.
    const before = wb.state.model_draft_from && wb.state.model_draft_from.before
      ? wb.state.model_draft_from.before
      : { question: state.question, answer: state.answer, distractors: state.distractors.slice(), answer_frame: state.answer_frame };
    const fields = { question: d.question, model_draft: d.id };
    if (binary) {
      if (!wb.template().derived) fields.answer_frame = d.answer_frame;
    } else {
      fields.answer = d.answer;
      fields.distractors = d.distractors.slice();
    }
    fields.model_draft_from = { name: d.endpoint_name, model: d.model_id, question: d.question, answer: d.answer,
      distractors: d.distractors, answer_frame: d.answer_frame, before };
    wb.fill(fields);
    status(`Draft from ${d.endpoint_name} in ${(d.latency_ms / 1000).toFixed(1)} s: edit it, or discard it.`, "saved");
  }

  function discard() {
    const from = wb.state.model_draft_from;
    const before = (from && from.before) || { question: "", answer: "", distractors: [""], answer_frame: "" };
    wb.fill({ ...before, distractors: (before.distractors || [""]).slice(), model_draft: null, model_draft_from: null });
    status("Draft discarded: the texts from before are back.");
  }

  const same = (x, y) => (x || "").trim().replace(/\s+/g, " ").toLowerCase() === (y || "").trim().replace(/\s+/g, " ").toLowerCase();
  function renderRecord() {
    const from = wb.state.model_draft_from;
    const record = $("draft-record");
    record.hidden = !(wb.state.model_draft && from);
    if (record.hidden) return;
    const binary = !!(wb.template() && wb.template().binary);
    const changedFields = [];
    if (!same(wb.state.question, from.question)) changedFields.push("question");
    if (binary ? (from.answer_frame && wb.state.answer_frame !== from.answer_frame && !wb.template().derived) : !same(wb.state.answer, from.answer)) changedFields.push("answer");
    if (!binary) {
      const norm = (list) => list.filter((t) => t && t.trim()).map((t) => t.trim().toLowerCase()).sort().join("\n");
      if (norm(wb.state.distractors) !== norm(from.distractors || [])) changedFields.push("distractors");
    }
    $("draft-record-text").textContent = `Model draft from ${from.name}` +
      (changedFields.length ? ` · you changed: ${changedFields.join(", ")}` : " · unchanged so far");
  }

  /* --- Background answers: "k of n models wrong". --- */
  let answerTimer = null;
  let asked = "";
  let sequence = 0;
  function answerPayload() {
    const state = wb.state;
    const t = wb.template();
    if (!t || state.a === null || state.b === null || !state.question.trim()) return null;
    if (t.binary) {
      if (!t.derived && !state.answer_frame) return null;
      return { category: state.category, index_a: state.a, index_b: state.b, question: state.question, answer_frame: t.derived ? "" : state.answer_frame };
    }
    const distractors = state.distractors.filter((d) => d && d.trim());
    if (!state.answer.trim() || !distractors.length) return null;
    return { category: state.category, index_a: state.a, index_b: state.b, question: state.question, answer: state.answer, distractors };
  }
  async function askModels() {
    const payload = answerPayload();
    const text = $("model-answers-text");
    const list = $("model-answers-list");
    if (!payload) {
      asked = "";
      text.textContent = "Models answer the question once it, the answer and a distractor are written.";
      text.className = "muted";
      list.innerHTML = "";
      return;
    }
    const key = JSON.stringify(payload);
    if (key === asked) return;
    asked = key;
    const mine = ++sequence;
    text.textContent = `Asking ${drafting.background} model${drafting.background === 1 ? "" : "s"}…`;
    text.className = "muted";
    const result = await post(config.urls.model_answers, payload, drafting.deadline_ms);
    if (mine !== sequence) return; // a newer question was sent since
    if (!result.ok) {
      asked = "";
      text.textContent = result.status === 0 ? "The models gave no answer in time." : refusal(result);
      text.className = "error";
      return;
    }
    const r = result.data;
    const failed = r.failed ? ` (${r.failed} failed)` : "";
    text.textContent = `${r.wrong} of ${r.answered} model${r.answered === 1 ? "" : "s"} wrong${failed}`;
    text.className = r.wrong ? "model-answers-hard" : "muted";
    list.innerHTML = "";
    for (const m of r.models) {
      const li = document.createElement("li");
      li.className = `verdict-${m.verdict}`;
      li.textContent = m.verdict === "failed" ? `${m.name}: no answer (${m.message})` : `${m.name}: ${m.verdict}, chose “${m.chose}”`;
      list.appendChild(li);
    }
  }
  function scheduleAnswers() {
    if (!drafting.background) return;
    clearTimeout(answerTimer);
    answerTimer = setTimeout(askModels, ANSWER_DELAY_MS);
  }

  /* --- Wiring. --- */
  $("draft-model").addEventListener("click", draftWithModel);
  $("draft-discard").addEventListener("click", discard);
  document.addEventListener("workbench:change", () => {
    // A submit empties the editor (and the draft with it); a category changed after the draft keeps it, recorded.
    renderRecord();
    scheduleAnswers();
  });
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || document.querySelector("dialog[open]")) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target.matches && target.matches("input, textarea, select")) return;
    if (event.key === "g") { event.preventDefault(); draftWithModel(); }
  });
  renderRecord();
  scheduleAnswers();
})();
