// Caption workbench and caption review: debounced autosave (kept in the browser too) with heartbeat, and the
// keyboard (c or Enter: the text box, Ctrl+Enter submit, x skip outside the text, Esc leaves the text; y/e/n on the
// review page, where Enter in a field decides nothing). The two images are in the comparison viewer (compare.js).
(function () {
  "use strict";

  const csrf = () => (document.querySelector("input[name=csrfmiddlewaretoken]") || {}).value || "";
  const typing = (el) => el && (el.tagName === "TEXTAREA" || el.tagName === "INPUT" || el.isContentEditable);

  // --- Workbench: autosave (kept in the browser too), counter, Ctrl+Enter, x skip. ---
  function initWorkbench(form) {
    if (!form) return;
    const text = form.querySelector("textarea[name=text]");
    const count = form.querySelector("[data-count]");
    const saveState = form.querySelector("[data-save-state]");
    const min = Number(form.dataset.min), max = Number(form.dataset.max);
    const dialog = document.getElementById("skip-dialog");
    let timer = null, lastSaved = text.value, submitting = false;
    // Each save names the draft version it was based on; a 409 means another tab saved since (issue 17): stop
    // saving, keep this tab's text, and let the annotator choose.
    let version = Number(form.dataset.draftVersion) || 0;
    let conflict = false;
    const conflictBox = form.querySelector("[data-draft-conflict]");
    const conflictText = conflictBox.querySelector("[data-conflict-text]");
    const loadNewer = conflictBox.querySelector("[data-action=load-newer]");
    const keepMine = conflictBox.querySelector("[data-action=keep-mine]");
    const stashKey = `caption-stash-${form.dataset.draftUrl}`;
    const quote = (value) => (value.trim() ? `“${value.length > 80 ? value.slice(0, 80) + "…" : value}”` : "an empty text");
    function showConflict() {
      conflict = true;
      conflictText.textContent = "The draft changed in another tab. This tab's text is kept here and not saved until you choose.";
      loadNewer.hidden = false;
      keepMine.textContent = "Keep this tab's";
      conflictBox.hidden = false;
      saveState.classList.add("save-error");
      saveState.textContent = "Not saved: the draft changed in another tab";
    }
    // "Load the newer draft": the page comes back with the saved one; this tab's text waits in sessionStorage,
    // one click from being put back.
    loadNewer.addEventListener("click", () => {
      sessionStorage.setItem(stashKey, text.value);
      window.location.reload();
    });
    keepMine.addEventListener("click", () => {
      const stashed = sessionStorage.getItem(stashKey);
      if (stashed !== null) { text.value = stashed; sessionStorage.removeItem(stashKey); updateCount(); }
      conflict = false;
      conflictBox.hidden = true;
      save(true, true); // without a version: written over the other tab's draft, knowingly
    });
    if (sessionStorage.getItem(stashKey) !== null) {
      conflictText.textContent = `Loaded the newer draft. This tab's text was ${quote(sessionStorage.getItem(stashKey))}.`;
      loadNewer.hidden = true;
      keepMine.textContent = "Back to this tab's text";
      conflictBox.hidden = false;
    }
    // This browser's copy of the last typed text and the draft version it was based on (see workbench.js): a
    // reload before the save reached the server shows it, not the older saved draft, and saves it.
    const localKey = `subtlebench:caption-draft:${form.dataset.user}:${form.dataset.draftUrl}`;
    let sending = null; // the text of the save in flight: a saved draft equal to it is this browser's own
    const remember = () => { try { localStorage.setItem(localKey, JSON.stringify({ text: text.value, base: version, sent: sending })); } catch (_) { /* off */ } };
    const forget = () => { try { localStorage.removeItem(localKey); } catch (_) { /* off */ } };
    let local = null;
    try { local = JSON.parse(localStorage.getItem(localKey) || "null"); } catch (_) { local = null; }
    const newerHere = local && typeof local.text === "string" &&
      (Number(local.base) >= version || (local.sent !== null && local.sent === text.value));
    if (newerHere && sessionStorage.getItem(stashKey) === null) {
      if (local.text !== text.value) {
        text.value = local.text;
        saveState.textContent = "Draft restored";
        setTimeout(() => save(true), 0);
      }
    } else if (local) forget();
    function updateCount() {
      const n = text.value.trim().length;
      count.textContent = `${n} / ${max}`;
      count.classList.toggle("error", n > 0 && n < min);
    }
    async function save(force, overwrite = false) {
      if (submitting || conflict || (!force && text.value === lastSaved)) return;
      const value = text.value;
      saveState.textContent = "Saving…";
      sending = value;
      remember();
      try {
        const response = await fetch(form.dataset.draftUrl, {
          method: "POST",
          // Accept: a refused request (a control character) answers the JSON error body, not the error page.
          headers: { "X-CSRFToken": csrf(), "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
          body: new URLSearchParams(overwrite ? { text: value } : { text: value, version }),
        });
        const data = await response.json();
        sending = null;
        if (response.status === 409) return showConflict();
        if (!response.ok) throw Object.assign(new Error(window.sbRefusalMessages(data, response.status).join(" ")), { refused: true });
        lastSaved = value;
        version = data.version;
        if (text.value === value) forget(); else remember();
        saveState.classList.remove("save-error");
        saveState.textContent = "Saved " + new Date(data.saved).toLocaleTimeString();
        const lease = document.querySelector("[data-lease]");
        if (lease) lease.textContent = "Lease until " + new Date(data.lease_until).toLocaleTimeString();
      } catch (error) {
        sending = null;
        saveState.classList.add("save-error");
        saveState.textContent = "Not saved: " + error.message;
        // Offline: the text stays here (and in this browser's copy); try again shortly. A refusal is shown, not retried.
        if (!error.refused) { clearTimeout(timer); timer = setTimeout(() => save(false), 3000); }
      }
    }
    text.addEventListener("input", () => {
      remember();
      updateCount();
      clearTimeout(timer);
      timer = setTimeout(() => save(false), 800);
    });
    // The autosave renews the lease; this keeps it alive while someone studies the images without typing.
    setInterval(() => save(true), 60000);
    form.addEventListener("submit", () => { submitting = true; clearTimeout(timer); forget(); });
    // Stop and release: the text on screen goes with it (kept as the draft), so no save follows the page out.
    const releaseForm = document.getElementById("release-form");
    releaseForm.addEventListener("submit", () => {
      releaseForm.elements.text.value = text.value;
      submitting = true;
      clearTimeout(timer);
      forget();
    });
    // Leaving with unsaved text: sendBeacon delivers the save after the page is gone. It cannot set headers, so
    // the CSRF token travels in the form body (csrfmiddlewaretoken), which Django's CSRF check reads for a POST.
    window.addEventListener("pagehide", () => {
      if (submitting || conflict || text.value === lastSaved || !navigator.sendBeacon) return;
      navigator.sendBeacon(form.dataset.draftUrl, new URLSearchParams({ text: text.value, version, csrfmiddlewaretoken: csrf() }));
    });
    document.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !dialog.open) {
        event.preventDefault();
        if (!submitting) form.requestSubmit();
      } else if (!dialog.open && !typing(event.target) && !event.ctrlKey && !event.metaKey && !event.altKey
                 && (event.key === "c" || event.key === "Enter") && !event.target.closest("button, a")) {
        // As on the pair workbench, the text box is not focused on load (f, s, +, - are the viewer's keys):
        // c or Enter goes to it.
        event.preventDefault();
        text.focus();
        text.setSelectionRange(text.value.length, text.value.length);
      } else if (event.key === "Escape" && !dialog.open && typing(document.activeElement)) {
        // Esc only leaves the text (or closes a dialog, natively): it never opens Skip.
        event.preventDefault();
        document.activeElement.blur();
      } else if (event.key === "x" && !dialog.open && !typing(document.activeElement) &&
                 !event.ctrlKey && !event.metaKey && !event.altKey) {
        event.preventDefault();
        openSkip();
      }
    });
    // A skip takes a reason chosen or typed: nothing is filled in for the annotator, and "Skip" stays disabled
    // (so Enter in the dialog does nothing) until there is one.
    const skipReason = dialog.querySelector("#skip-reason");
    const skipConfirm = dialog.querySelector("[data-action=confirm-skip]");
    const skipStop = dialog.querySelector("[data-action=confirm-skip-stop]");
    const updateSkip = () => { skipConfirm.disabled = skipStop.disabled = !skipReason.value.trim(); };
    skipReason.addEventListener("input", updateSkip);
    function openSkip() {
      skipReason.value = "";
      updateSkip();
      dialog.showModal();
      skipReason.focus();
    }
    form.querySelector("[data-action=skip]").addEventListener("click", openSkip);
    dialog.addEventListener("click", (event) => {
      const reason = event.target.closest("[data-reason]");
      if (reason) { skipReason.value = reason.dataset.reason; updateSkip(); }
      if (event.target.closest("[data-action=close]")) dialog.close();
    });
    dialog.querySelector("form").addEventListener("submit", (event) => {
      if (!skipReason.value.trim()) event.preventDefault();
    });
    updateCount();
  }

  // --- Review: y accept, e edit (Ctrl+Enter saves), n reject (Enter sends the reason). ---
  function initReview(form) {
    if (!form) return;
    const editBox = form.querySelector(".edit-box"), rejectBox = form.querySelector(".reject-box");
    const editText = editBox.querySelector("textarea"), reason = rejectBox.querySelector("input");
    function open(box, field) {
      [editBox, rejectBox].forEach((b) => {
        b.hidden = b !== box;
        b.querySelector("textarea, input").disabled = b !== box;
      });
      field.focus();
    }
    form.addEventListener("click", (event) => {
      const action = event.target.closest("[data-action]");
      if (!action) return;
      if (action.dataset.action === "edit") open(editBox, editText);
      if (action.dataset.action === "reject") open(rejectBox, reason);
    });
    // Enter in a field never decides (the browser would send the form with its first button, Accept): keys.js
    // stops it on every page; Ctrl+Enter presses the open box's own button; y / e / n outside the fields.
    document.addEventListener("keydown", (event) => {
      if (typing(document.activeElement) || event.ctrlKey || event.metaKey || event.altKey) return;
      if (event.key === "y") { event.preventDefault(); form.querySelector("#accept-button").click(); }
      else if (event.key === "e") { event.preventDefault(); open(editBox, editText); }
      else if (event.key === "n") { event.preventDefault(); open(rejectBox, reason); }
    });
  }

  initWorkbench(document.getElementById("caption-form"));
  initReview(document.getElementById("review-form"));
})();
