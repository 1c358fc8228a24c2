/* The review page: y accept, n reject with a reason, e correct and accept; flicker and synchronised zoom.
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

  /* Flicker and synchronised zoom, as on the workbench. */
  let flickering = false;
  const first = $("img-a").getAttribute("src");
  const second = $("img-b").getAttribute("src");
  function flicker() {
    flickering = !flickering;
    $("img-a").setAttribute("src", flickering ? second : first);
    $("flicker-note").textContent = flickering ? " showing image 2" : "";
    $("viewer-a").classList.toggle("flicker", flickering);
  }
  const zoom = { scale: 1, x: 50, y: 50 };
  function renderZoom() {
    for (const img of [$("img-a"), $("img-b")]) {
      img.style.transformOrigin = `${zoom.x}% ${zoom.y}%`;
      img.style.transform = zoom.scale === 1 ? "" : `scale(${zoom.scale})`;
    }
  }
  function setZoom(scale) {
    zoom.scale = Math.min(8, Math.max(1, scale));
    if (zoom.scale === 1) { zoom.x = 50; zoom.y = 50; }
    renderZoom();
  }
  for (const box of document.querySelectorAll(".frame-box")) {
    const point = (event) => {
      const rect = box.getBoundingClientRect();
      zoom.x = ((event.clientX - rect.left) / rect.width) * 100;
      zoom.y = ((event.clientY - rect.top) / rect.height) * 100;
    };
    box.addEventListener("wheel", (event) => { event.preventDefault(); point(event); setZoom(zoom.scale * (event.deltaY < 0 ? 1.25 : 0.8)); }, { passive: false });
    box.addEventListener("mousemove", (event) => { if (zoom.scale > 1) { point(event); renderZoom(); } });
  }
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
    else if (key === "f") flicker();
    else if (key === "=" || key === "+") setZoom(zoom.scale * 1.25);
    else if (key === "-") setZoom(zoom.scale * 0.8);
    else if (key === "z") setZoom(1);
    else if (key === "?") $("keys-dialog").showModal();
    else handled = false;
    if (handled) event.preventDefault();
  });
})();
