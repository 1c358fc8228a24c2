// Participant pages (no inline script: the Content-Security-Policy allows scripts from our static files only).
// - [data-enter-clicks]: Enter follows that link (practice feedback, practice done);
// - #answer-form: active time while the tab is visible, one answer only, keys 1-N choose an option.
(() => {
  const enterTarget = document.querySelector("[data-enter-clicks]");
  if (enterTarget) {
    document.addEventListener("keydown", (e) => { if (e.key === "Enter") enterTarget.click(); });
  }
  const form = document.getElementById("answer-form");
  if (!form) return;
  // Active time: only while the tab is visible, so a break in another tab does not count.
  const buttons = Array.from(form.querySelectorAll("button.p-option"));
  let active = 0, since = document.visibilityState === "visible" ? performance.now() : null, sent = false;
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden" && since !== null) { active += performance.now() - since; since = null; }
    else if (document.visibilityState === "visible" && since === null) { since = performance.now(); }
  });
  form.addEventListener("submit", (event) => {
    if (sent) { event.preventDefault(); return; }
    sent = true;
    const total = active + (since !== null ? performance.now() - since : 0);
    form.elements.active_ms.value = Math.round(total);
    const chosen = event.submitter;
    setTimeout(() => buttons.forEach((b) => { b.disabled = true; if (b === chosen) b.classList.add("chosen"); }), 0);
  });
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey || sent) return;
    const n = Number(event.key);
    if (Number.isInteger(n) && n >= 1 && n <= buttons.length) { event.preventDefault(); form.requestSubmit(buttons[n - 1]); }
  });
})();
