/* Participant pages (issue 12): the full-screen image viewer with pinch zoom, the window check before consent,
   the answer form (active time, one answer, number keys), Enter on the practice pages, the completion code's copy
   button and the countdown to the completion URL. Each part runs where its markup is. No page has an inline
   script: the Content-Security-Policy allows scripts from our static files only. */
(() => {
  "use strict";

  // --- The full-screen viewer -----------------------------------------------------------------------------
  // The image fills the viewer's width; two fingers (or the wheel, or a double tap) zoom about their middle,
  // one finger or the mouse pans. Both images of a pair have the same size, so "Show the other image" keeps
  // the same zoom and place: flipping between them is how a small difference shows.
  function setUpViewer(viewer) {
    const stage = viewer.querySelector(".p-viewer-stage");
    const img = stage.querySelector("img");
    const label = viewer.querySelector(".label");
    const other = viewer.querySelector("[data-viewer-other]");
    const close = viewer.querySelector("[data-viewer-close]");
    const sources = Array.from(document.querySelectorAll("[data-viewer-open]"));
    const MAX_SCALE = 8;
    let current = 0, opener = null;
    let base = { w: 0, h: 0 }, view = { s: 1, x: 0, y: 0 };
    const pointers = new Map();
    let gesture = null, lastTap = 0;

    function minScale() { // "fit the whole image" may be smaller than "fill the width" for tall images
      return base.h > stage.clientHeight ? stage.clientHeight / base.h : 1;
    }
    function clamp() {
      const sw = stage.clientWidth, sh = stage.clientHeight;
      view.s = Math.min(MAX_SCALE, Math.max(minScale(), view.s));
      const w = base.w * view.s, h = base.h * view.s;
      view.x = w <= sw ? (sw - w) / 2 : Math.min(0, Math.max(sw - w, view.x));
      view.y = h <= sh ? (sh - h) / 2 : Math.min(0, Math.max(sh - h, view.y));
    }
    function render() {
      clamp();
      img.style.transform = `translate(${view.x}px, ${view.y}px) scale(${view.s})`;
      viewer.dataset.scale = view.s.toFixed(2);
    }
    function zoomAt(scale, cx, cy) {
      const rect = stage.getBoundingClientRect();
      const px = cx - rect.left, py = cy - rect.top;
      const next = Math.min(MAX_SCALE, Math.max(minScale(), scale));
      view.x = px - (px - view.x) * (next / view.s);
      view.y = py - (py - view.y) * (next / view.s);
      view.s = next;
      render();
    }
    function layout(keepView) {
      const ratio = img.naturalWidth ? img.naturalHeight / img.naturalWidth : 0.5625;
      base = { w: stage.clientWidth, h: stage.clientWidth * ratio };
      img.style.width = `${base.w}px`;
      img.style.height = `${base.h}px`;
      if (!keepView) view = { s: 1, x: 0, y: 0 };
      render();
    }
    function show(index, keepView) {
      current = index;
      const source = sources[index];
      label.textContent = source.dataset.label;
      if (other) other.textContent = `Show the ${sources[1 - index] ? sources[1 - index].dataset.label.toLowerCase() : ""}`;
      img.alt = source.dataset.label;
      img.onload = () => layout(keepView);
      img.src = source.querySelector("img").currentSrc || source.querySelector("img").src;
      if (img.complete && img.naturalWidth) layout(keepView);
    }
    function open(index, from) {
      opener = from;
      viewer.hidden = false;
      document.body.classList.add("p-viewing");
      show(index, false);
      close.focus();
    }
    function shut() {
      viewer.hidden = true;
      document.body.classList.remove("p-viewing");
      pointers.clear();
      gesture = null;
      if (opener) opener.focus();
    }

    sources.forEach((source, index) => source.addEventListener("click", () => open(index, source)));
    close.addEventListener("click", shut);
    if (other) other.addEventListener("click", () => show(1 - current, true));
    window.addEventListener("resize", () => { if (!viewer.hidden) layout(false); });
    document.addEventListener("keydown", (event) => {
      if (viewer.hidden) return;
      if (event.key === "Escape") { event.preventDefault(); shut(); }
      else if (event.key === "+" || event.key === "=") { event.preventDefault(); zoomAt(view.s * 1.25, innerWidth / 2, innerHeight / 2); }
      else if (event.key === "-") { event.preventDefault(); zoomAt(view.s / 1.25, innerWidth / 2, innerHeight / 2); }
      else if (event.key === "Tab") { event.preventDefault(); (document.activeElement === close && other ? other : close).focus(); }
      // Number keys must not answer the item behind the viewer.
      event.stopImmediatePropagation();
    }, true);

    stage.addEventListener("wheel", (event) => {
      event.preventDefault();
      zoomAt(view.s * (event.deltaY < 0 ? 1.2 : 1 / 1.2), event.clientX, event.clientY);
    }, { passive: false });
    stage.addEventListener("dblclick", (event) => {
      zoomAt(view.s > minScale() + 0.01 ? minScale() : 2.5, event.clientX, event.clientY);
    });

    function startGesture() {
      const points = Array.from(pointers.values());
      if (points.length >= 2) {
        const [a, b] = points;
        gesture = {
          kind: "pinch", scale: view.s, distance: Math.hypot(a.x - b.x, a.y - b.y) || 1,
          mid: { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 }, view: { ...view },
        };
      } else if (points.length === 1) {
        gesture = { kind: "pan", start: { ...points[0] }, view: { ...view } };
      } else {
        gesture = null;
      }
    }
    stage.addEventListener("pointerdown", (event) => {
      try { stage.setPointerCapture(event.pointerId); } catch (_) { /* a synthetic pointer has nothing to capture */ }
      pointers.set(event.pointerId, { x: event.clientX, y: event.clientY });
      startGesture();
    });
    stage.addEventListener("pointermove", (event) => {
      if (!pointers.has(event.pointerId) || !gesture) return;
      pointers.set(event.pointerId, { x: event.clientX, y: event.clientY });
      const points = Array.from(pointers.values());
      if (gesture.kind === "pinch" && points.length >= 2) {
        const [a, b] = points;
        const mid = { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 };
        const rect = stage.getBoundingClientRect();
        const next = Math.min(MAX_SCALE, Math.max(minScale(), gesture.scale * Math.hypot(a.x - b.x, a.y - b.y) / gesture.distance));
        // Keep the spot under the fingers' first middle under their middle now.
        const px = gesture.mid.x - rect.left, py = gesture.mid.y - rect.top;
        view.s = next;
        view.x = mid.x - rect.left - (px - gesture.view.x) * (next / gesture.view.s);
        view.y = mid.y - rect.top - (py - gesture.view.y) * (next / gesture.view.s);
        render();
      } else if (gesture.kind === "pan") {
        view.x = gesture.view.x + (event.clientX - gesture.start.x);
        view.y = gesture.view.y + (event.clientY - gesture.start.y);
        render();
      }
    });
    function lift(event) {
      if (!pointers.delete(event.pointerId)) return;
      if (event.type === "pointerup" && event.pointerType === "touch" && !pointers.size && gesture && gesture.kind === "pan") {
        const moved = Math.hypot(event.clientX - gesture.start.x, event.clientY - gesture.start.y);
        const now = performance.now();
        if (moved < 10 && now - lastTap < 320) { zoomAt(view.s > minScale() + 0.01 ? minScale() : 2.5, event.clientX, event.clientY); lastTap = 0; }
        else if (moved < 10) lastTap = now;
      }
      startGesture();
    }
    stage.addEventListener("pointerup", lift);
    stage.addEventListener("pointercancel", lift);
  }

  // --- The window check before consent ------------------------------------------------------------------
  // As jsPsych's browser-check does it: measure window.innerWidth/innerHeight, say what is needed, and check
  // again whenever the window is resized or the device turned; the consent form shows once the window fits.
  // The form sends what it measured, and the server holds it to the same minimum.
  function setUpScreenCheck(check) {
    const form = document.getElementById("consent-form");
    const minWidth = Number(check.dataset.minWidth) || 0, minHeight = Number(check.dataset.minHeight) || 0;
    const size = check.querySelector("[data-screen-size]");
    function pointer() {
      if (matchMedia("(pointer: coarse)").matches) return "coarse";
      if (matchMedia("(pointer: fine)").matches) return "fine";
      return "none";
    }
    function measure() {
      const width = window.innerWidth, height = window.innerHeight;
      const short = [];
      if (width < minWidth) short.push(`at least ${minWidth} px wide`);
      if (height < minHeight) short.push(`at least ${minHeight} px high`);
      check.hidden = short.length === 0;
      form.hidden = short.length > 0;
      size.textContent = `Your browser window is ${width} × ${height} px; this study needs a window ${short.join(" and ")}.`;
      // Turning the device helps only when the window, turned, would fit (an 844 px phone never fits 1024 px).
      check.querySelector("[data-sideways]").hidden = !(height >= minWidth && width >= minHeight);
      // The consent form, and the screen-out form ("I cannot make the window larger"), send what was measured.
      [form, document.getElementById("screen-out-form")].forEach((sent) => {
        if (!sent) return;
        sent.elements.viewport_width.value = width;
        sent.elements.viewport_height.value = height;
        sent.elements.pointer.value = pointer();
        sent.elements.touch_points.value = navigator.maxTouchPoints || 0;
      });
    }
    measure();
    window.addEventListener("resize", measure);
    window.addEventListener("orientationchange", measure);
    check.querySelector("[data-screen-retry]").addEventListener("click", measure);
    form.addEventListener("submit", measure); // the size at the moment of consent is the one recorded
  }

  // --- The answer form ------------------------------------------------------------------------------------
  // Active time counts only while the tab is visible, so a break in another tab does not count. One answer only;
  // keys 1-N choose an option (the viewer, while open, keeps its keys to itself).
  function setUpAnswerForm(form) {
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
  }

  // --- Enter follows the page's one link (practice feedback, practice done) -------------------------------
  function setUpEnterClicks(link) {
    document.addEventListener("keydown", (event) => { if (event.key === "Enter") link.click(); });
  }

  // --- The end page ---------------------------------------------------------------------------------------
  function setUpCopy(button) {
    const status = document.getElementById(button.dataset.status);
    const code = document.getElementById(button.dataset.copy);
    button.addEventListener("click", async () => {
      const text = code.textContent.trim();
      try {
        await navigator.clipboard.writeText(text);
      } catch (_) { // no clipboard API (an old browser, or not a secure context): select it for a manual copy
        const range = document.createRange();
        range.selectNodeContents(code);
        getSelection().removeAllRanges();
        getSelection().addRange(range);
        const copied = document.execCommand && document.execCommand("copy");
        status.textContent = copied ? "Copied." : "Selected: copy it with your device's Copy.";
        return;
      }
      status.textContent = "Copied.";
    });
  }

  function setUpCountdown(note) {
    const link = document.getElementById("redirect");
    const counter = note.querySelector("[data-countdown]");
    let left = Number(note.dataset.seconds) || 0;
    counter.textContent = left;
    const timer = setInterval(() => {
      left -= 1;
      counter.textContent = Math.max(0, left);
      if (left <= 0) { clearInterval(timer); window.location.assign(link.href); }
    }, 1000);
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll(".p-viewer").forEach(setUpViewer);
    const form = document.getElementById("answer-form");
    if (form) setUpAnswerForm(form);
    const enter = document.querySelector("[data-enter-clicks]");
    if (enter) setUpEnterClicks(enter);
    const check = document.getElementById("screen-check");
    if (check) setUpScreenCheck(check);
    document.querySelectorAll("[data-copy]").forEach(setUpCopy);
    const note = document.getElementById("redirect-note");
    if (note) setUpCountdown(note);
  });
})();
