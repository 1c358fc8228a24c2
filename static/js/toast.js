/* Toasts: a short note after each submit and decision, in its own live region (never the autosave status), that
   fades after a few seconds. `sbToast(text)` shows one now; `sbToast.next(text)` shows it on the next page, for a
   script that navigates (the review page going to the next pair). A success message of the server's redirect
   arrives in the element already (base.html) and fades the same way. */
(() => {
  "use strict";
  const KEY = "sb-toast-next";
  const SHOW_MS = 6000;
  let timer = null;
  function element() { return document.getElementById("toast"); }
  function show(text, kind = "ok") {
    const box = element();
    if (!box || !text) return;
    box.textContent = text;
    box.className = `toast toast-${kind}`;
    box.hidden = false;
    clearTimeout(timer);
    timer = setTimeout(() => { box.classList.add("fading"); timer = setTimeout(() => { box.hidden = true; }, 600); }, SHOW_MS);
  }
  function next(text, kind = "ok") {
    try { sessionStorage.setItem(KEY, JSON.stringify({ text, kind })); } catch (_) { /* private mode: no toast */ }
  }
  window.sbToast = Object.assign(show, { next });
  document.addEventListener("DOMContentLoaded", () => {
    const box = element();
    if (!box) return;
    box.addEventListener("click", () => { box.hidden = true; });
    let stored = null;
    try { stored = JSON.parse(sessionStorage.getItem(KEY) || "null"); sessionStorage.removeItem(KEY); } catch (_) { stored = null; }
    if (stored && stored.text) show(stored.text, stored.kind);
    else if (!box.hidden && box.textContent.trim()) show(box.textContent.trim(), box.dataset.kind || "ok");
  });
})();
