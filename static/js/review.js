/* The review page: y accept, n reject with a reason, e correct and accept; the comparison viewer is compare.js.
   Decisions carry the pair's version, so a pair changed by its author meanwhile answers 409 with a message. */
(() => {
  "use strict";
  const config = JSON.parse(document.getElementById("review-config").textContent);
  const csrf = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"];
  const $ = (id) => document.getElementById(id);
  const pair = config.pair;

  function showErrors(messages) {
    const list = $("errors");
    list.innerHTML = "";
    for (const message of messages) {
      const li = document.createElement("li");
      li.textContent = message;
      list.appendChild(li);
    }
  }

  let sending = false;
  async function decide(decision, extra = {}) {
    if (sending) return;
    sending = true;
    let result;
    try {
      const response = await fetch(`/api/pairs/${pair.id}/review/`, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
        body: JSON.stringify({ decision, version: pair.version, ...extra }),
      });
      result = { ok: response.ok, status: response.status, data: await response.json().catch(() => ({})) };
    } catch (_) {
      result = { ok: false, status: 0, data: {} };
    }
    sending = false;
    if (result.ok) {
      $("pair-status").textContent = result.data.pair.status;
      $("pair-status").className = `badge badge-${result.data.pair.status}`;
      window.location.assign(result.data.next_url);
      return;
    }
    if (result.status === 0) return showErrors(["The server did not answer; try again."]);
    const data = result.data || {};
    const messages = [];
    if (data.errors) for (const [field, list] of Object.entries(data.errors)) for (const m of [].concat(list)) messages.push(field === "detail" ? m : `${field}: ${m}`);
    showErrors(messages.length ? messages : [data.detail || `Refused (${result.status}).`]);
  }

  const decideBox = $("decide");
  const rejectForm = $("reject-form");
  const correctForm = $("correct-form");
  const open = (form) => { if (!form) return; form.hidden = false; decideBox.hidden = true; form.querySelector("input, textarea").focus(); };
  const close = () => { for (const form of [rejectForm, correctForm]) if (form) form.hidden = true; if (decideBox) decideBox.hidden = false; };
  const accept = () => {
    if (pair.problem) return showErrors([pair.problem]);
    decide("accept");
  };
  if (decideBox) {
    $("accept").addEventListener("click", accept);
    $("reject").addEventListener("click", () => open(rejectForm));
    $("correct").addEventListener("click", () => open(correctForm));
    $("cancel-reject").addEventListener("click", close);
    $("cancel-correct").addEventListener("click", close);
    rejectForm.addEventListener("submit", (event) => { event.preventDefault(); decide("reject", { reason: $("reject-reason").value }); });
    $("reject-reason").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); rejectForm.requestSubmit(); }
    });
    correctForm.addEventListener("submit", (event) => {
      event.preventDefault();
      decide("correct", { corrections: {
        question: $("c-question").value, answer: $("c-answer").value,
        distractors: [...correctForm.querySelectorAll(".c-distractor")].map((input) => input.value),
      } });
    });
  }

  /* The comparison viewer (compare.js): image 1 and image 2 of the pair, as the participant gets them. */
  const frames = $("review-frames");
  const text = (value) => { const span = document.createElement("span"); span.textContent = value; return span.innerHTML; };
  Compare.create(document.querySelector("[data-compare]")).set({
    a: { src: frames.dataset.aSrc, label: text(frames.dataset.aLabel) },
    b: { src: frames.dataset.bSrc, label: text(frames.dataset.bLabel) },
  });
  $("show-keys").addEventListener("click", () => $("keys-dialog").showModal());

  document.addEventListener("keydown", (event) => {
    if (document.querySelector("dialog[open]")) return;
    const target = event.target;
    if (target.matches && target.matches("input, textarea, select")) {
      if (event.key === "Escape") { target.blur(); close(); event.preventDefault(); }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    let handled = true;
    const key = event.key;
    if (key === "y" && decideBox && !decideBox.hidden) accept();
    else if (key === "n" && decideBox && !decideBox.hidden) open(rejectForm);
    else if (key === "e" && decideBox && !decideBox.hidden) open(correctForm);
    else if (key === "?") $("keys-dialog").showModal();
    else handled = false;
    if (handled) event.preventDefault();
  });
})();
