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
      const done = { accept: "Accepted", reject: "Rejected", correct: "Corrected and accepted" }[decision] || "Decided";
      // The next page shows it (the address is the next pair's own, /review/pairs/<id>/, so a reload stays there).
      window.sbToast.next(`${done} pair ${pair.id}.`);
      window.location.assign(result.data.next_url);
      return;
    }
    if (result.status === 0) return showErrors(["The server did not answer; try again."]);
    const data = result.data || {};
    showErrors(window.sbRefusalMessages(data, result.status));
  }

  const decideBox = $("decide");
  const rejectForm = $("reject-form");
  const correctForm = $("correct-form");
  const open = (form) => {
    if (!form) return;
    form.hidden = false;
    decideBox.hidden = true;
    form.querySelector("input, textarea, select").focus();
    // The open form's buttons (Reject, Save) in view too, not below the fold under the text box (1440x900).
    form.querySelector(".decide").scrollIntoView({ block: "nearest" });
  };
  const close = () => { for (const form of [rejectForm, correctForm]) if (form) form.hidden = true; if (decideBox) decideBox.hidden = false; };
  const accept = () => {
    // Accept is off and its reason on screen already (#accept-off): y sends nothing the server would refuse.
    if (pair.problem) return $("accept-off") ? $("accept-off").classList.add("pulse") : showErrors([pair.problem]);
    // Boxes the reviewer moved, drew or removed are a correction: accepting keeps them (recorded in the history).
    if (regionsChanged()) decide("correct", { corrections: { regions: regionsAsImages() } });
    else decide("accept");
  };

  /* Difference regions (regions.js) over image 1 (a) and image 2 (b); a reviewer who may decide can correct them. */
  const regionsView = Regions.create(document.querySelector("[data-compare]"), {
    editable: !!decideBox,
    names: { a: "1", b: "2" },
    regions: pair.regions || [],
    onChange: () => {
      const note = $("regions-changed");
      if (note) note.hidden = !regionsChanged();
    },
  });
  const initialRegions = JSON.stringify(pair.regions || []);
  const regionsChanged = () => JSON.stringify(regionsView.get()) !== initialRegions;
  const regionsAsImages = () => regionsView.get().map(({ frame, ...box }) => ({ image: frame === "a" ? 1 : 2, ...box }));

  /* The correction form edits what the editor can: category, question, answer and distractors (1-4), or for a
     first/second-image category which image is the answer (a temporal one follows from the timestamps). */
  const MAX_DISTRACTORS = 4;
  const templates = config.templates || {};
  function distractorRow(text) {
    const row = document.createElement("div");
    row.className = "distractor";
    row.innerHTML = `<input class="c-distractor" list="c-choices"><button type="button" class="link" data-remove title="Remove this distractor">×</button>`;
    const input = row.querySelector("input");
    input.maxLength = Number($("c-distractors").dataset.maxlength) || 512;
    input.value = text;
    return row;
  }
  function distractorInputs() { return [...$("c-distractors").querySelectorAll(".c-distractor")]; }
  function renderCorrection() {
    const category = $("c-category").value;
    const t = templates[category] || {};
    const binary = !!t.binary;
    $("c-binary").hidden = !binary;
    $("c-texts").hidden = binary;
    $("c-hint").textContent = t.hint || (binary ? "Options: first image / second image." : "");
    $("c-question").placeholder = t.example ? `e.g. ${t.question}` : t.question || "";
    const derived = category === "temporal" && pair.later;
    for (const radio of correctForm.querySelectorAll("input[name=c-answer-image]")) {
      radio.disabled = !!derived;
      if (derived) radio.checked = radio.value === pair.later;
    }
    $("c-binary-note").textContent = derived ? "the later image, from the timestamps" : "";
    if (!binary && !distractorInputs().length) $("c-distractors").appendChild(distractorRow(""));
    distractorInputs().forEach((input, i) => input.setAttribute("aria-label", `Distractor ${i + 1}`));
    $("c-add-distractor").hidden = distractorInputs().length >= MAX_DISTRACTORS;
    $("c-choices").innerHTML = "";
    for (const choice of t.choices || []) {
      const option = document.createElement("option");
      option.value = choice;
      $("c-choices").appendChild(option);
    }
  }
  function corrections() {
    const category = $("c-category").value;
    const t = templates[category] || {};
    const out = { category, question: $("c-question").value };
    if (t.binary) {
      const chosen = correctForm.querySelector("input[name=c-answer-image]:checked");
      out.answer = chosen ? chosen.value : "";
      out.distractors = chosen ? [chosen.value === "first image" ? "second image" : "first image"] : [];
    } else {
      out.answer = $("c-answer").value;
      out.distractors = distractorInputs().map((input) => input.value);
    }
    if (regionsChanged()) out.regions = regionsAsImages();
    return out;
  }

  // Enter in a field never decides (keys.js, on every page): a form is sent only by its button, clicked or pressed
  // with Ctrl+Enter in a field (a submit event with that submitter).
  function onlyByButton(form, button, send) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (event.submitter === button && !button.disabled) send();
    });
  }

  if (decideBox) {
    $("accept").addEventListener("click", accept);
    $("reject").addEventListener("click", () => open(rejectForm));
    $("correct").addEventListener("click", () => open(correctForm));
    $("cancel-reject").addEventListener("click", close);
    $("cancel-correct").addEventListener("click", close);
    onlyByButton(rejectForm, $("send-reject"), () => decide("reject", {
      reason: $("reject-reason").value,
      guideline_version: $("reject-guideline") && $("reject-guideline").value ? Number($("reject-guideline").value) : null,
    }));
    onlyByButton(correctForm, $("save-correction"), () => decide("correct", { corrections: corrections() }));
    $("c-category").addEventListener("change", renderCorrection);
    $("c-add-distractor").addEventListener("click", () => {
      if (distractorInputs().length < MAX_DISTRACTORS) $("c-distractors").appendChild(distractorRow(""));
      renderCorrection();
      const inputs = distractorInputs();
      inputs[inputs.length - 1].focus();
    });
    $("c-distractors").addEventListener("click", (event) => {
      const remove = event.target.closest("[data-remove]");
      if (!remove) return;
      remove.closest(".distractor").remove();
      renderCorrection();
    });
    renderCorrection();
  }

  /* The comparison viewer (compare.js): image 1 and image 2 of the pair, as the participant gets them. */
  const frames = $("review-frames");
  Compare.create(document.querySelector("[data-compare]")).set({
    a: { src: frames.dataset.aSrc, label: frames.dataset.aLabel || "" },
    b: { src: frames.dataset.bSrc, label: frames.dataset.bLabel || "" },
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
    else handled = false;
    if (handled) event.preventDefault();
  });
})();
