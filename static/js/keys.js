/* One keyboard contract on every page (issue 26), stated in each page's ? dialog and in docs/guides/keyboard.md:
   - Enter in a field never submits: a new line in a text box, nothing in a one-line field (no implicit submission).
     A sign-in form (data-enter-submits) and forms that only ask (method="get": search, filters) keep Enter.
   - Ctrl+Enter (⌘+Enter) submits from anywhere in a form: it presses the submit button nearest the field, the
     one of the part the field is in ("Reject with this reason" for the reason box), as a click would; a disabled
     button (a skip without a reason) does nothing. A page that gives Ctrl+Enter a meaning of its own (the pair
     workbench's submit) handles it first.
   - Esc leaves a field (and closes a dialog: the browser's own).
   - ? outside a field opens the page's list of keys (#keys-dialog), where the page has one.
   - Difference regions (regions.js, on the pair workbench and review): a selected box has the focus; Tab goes
     between boxes, arrows move it (Shift resizes), Delete removes it, Esc lets go; Ctrl+Z outside a field undoes
     the last change to the boxes; m draws with the mouse, r / Shift+R start a box on A / B.
   - A page key that asks the server for something slow (the pair workbench's g: draft with a model, drafting.js) shows
     that it is waiting and fills a field; it never submits. */
(() => {
  "use strict";
  const BUTTONS = "button:not([type]), button[type=submit], input[type=submit]";
  // Written out: a form with no method (a page's script sends it) reads as "get" through form.method.
  const enterKept = (form) => !form || (form.getAttribute("method") || "").toLowerCase() === "get"
    || form.hasAttribute("data-enter-submits");

  function nearestSubmit(field) {
    for (let part = field.parentElement; part; part = part.parentElement) {
      const button = [...part.querySelectorAll(BUTTONS)].find((b) => b.form === field.form && !b.closest("[hidden]"));
      if (button) return button;
      if (part === field.form) return null;
    }
    return null;
  }

  // Capture: before the page's own handlers and before the browser's implicit submission.
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.isComposing || event.ctrlKey || event.metaKey) return;
    const field = event.target;
    if (field.matches && field.matches("input:not([type=submit]):not([type=button]):not([type=reset]):not([type=image])")
        && !enterKept(field.form)) {
      event.preventDefault();
    }
  }, true);

  // Bubble, on window: after the page's handlers, which may have taken the key (defaultPrevented).
  window.addEventListener("keydown", (event) => {
    const field = event.target;
    if (event.defaultPrevented || !field.matches) return;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && field.form) {
      event.preventDefault();
      const button = nearestSubmit(field);
      if (button && !button.disabled) field.form.requestSubmit(button);
    } else if (event.key === "Escape" && field.matches("input, textarea, select") && !field.closest("dialog[open]")) {
      event.preventDefault();
      field.blur();
    } else if (event.key === "?" && !field.matches("input, textarea, select") && !document.querySelector("dialog[open]")) {
      const keys = document.getElementById("keys-dialog"); // the page's list of keys
      if (keys) { event.preventDefault(); keys.showModal(); }
    }
  });
})();
