/* The comparison viewer shared by the pair workbench, the pair review page and the caption pages
   (templates/_compare.html): two viewers of a fixed size, one zoom for both (fit, 1:1, drag to pan), and the
   comparison modes: hold f to see B, automatic flicker, the difference heat map, a swipe curtain. */
(() => {
  "use strict";

  const ONE_VIEWER_MODES = ["one", "auto", "diff", "swipe"];
  // Text fields (and menus) keep their keys; a slider or a button does not take letters.
  const typing = (el) =>
    !!el && (el.isContentEditable || (el.matches && el.matches("textarea, select, input:not([type=range], [type=checkbox], [type=radio], [type=button], [type=submit])")));

  function create(root, options = {}) {
    const q = (selector) => root.querySelector(selector);
    const names = { a: root.dataset.nameA || "A", b: root.dataset.nameB || "B" };
    const viewers = {};
    for (const slot of ["a", "b"]) {
      const figure = q(`[data-cmp-viewer=${slot}]`);
      viewers[slot] = {
        figure,
        box: figure.querySelector(".cmp-box"),
        img: figure.querySelector(".cmp-img"),
        badge: figure.querySelector(".cmp-badge"),
        where: figure.querySelector(".cmp-where"),
      };
    }
    const main = viewers.a;
    const over = q(".cmp-over");
    const canvas = q(".cmp-diff");
    const divider = q(".cmp-divider");
    const note = q("[data-cmp=note]");
    const readout = q("[data-cmp=readout]");
    const rate = q("[data-cmp=rate]");
    const gain = q("[data-cmp=gain]");
    const gainValue = q("[data-cmp=gain-value]");

    const frames = { a: null, b: null }; // {src, label, preview}
    const state = {
      mode: "two", // two | one | auto | diff | swipe
      layout: "two", // the layout auto/diff/swipe go back to
      held: false, // f is held: the main viewer shows B
      autoShowsB: false,
      swipe: 0.5,
      zoom: { fit: true, z: 1, cx: 0.5, cy: 0.5 },
    };

    /* --- Geometry: every layer is placed from the shared zoom (scale in CSS px per image pixel, and the image
       point at the centre of the box, as fractions), so the same spot sits under the same place everywhere. --- */
    const dpr = () => window.devicePixelRatio || 1;
    const natural = (el) =>
      el.tagName === "CANVAS" ? [el.width, el.height] : [el.naturalWidth || 0, el.naturalHeight || 0];
    const fitScale = (el, box) => {
      const [w, h] = natural(el);
      if (!w || !h || !box.clientWidth) return 1;
      return Math.min(box.clientWidth / w, box.clientHeight / h);
    };
    const scaleFor = (el, box) => (state.zoom.fit ? fitScale(el, box) : state.zoom.z);
    function place(el, box) {
      const [w, h] = natural(el);
      if (!w || !h) return null;
      const s = scaleFor(el, box);
      const width = w * s;
      const height = h * s;
      const left = box.clientWidth / 2 - state.zoom.cx * width;
      const top = box.clientHeight / 2 - state.zoom.cy * height;
      el.style.width = `${width}px`;
      el.style.height = `${height}px`;
      el.style.left = `${left}px`;
      el.style.top = `${top}px`;
      // Past 2 device pixels per image pixel, show the pixels as squares: smoothing would hide a one-pixel change.
      el.classList.toggle("pixelated", s * dpr() >= 2);
      return { left, top, width, height, s };
    }
    function layout() {
      place(viewers.a.img, viewers.a.box);
      place(viewers.b.img, viewers.b.box);
      if (state.mode === "swipe" && !state.held) {
        const spot = place(over, main.box);
        const x = state.swipe * main.box.clientWidth;
        divider.style.left = `${x}px`;
        if (spot) over.style.clipPath = `inset(0 0 0 ${Math.max(0, x - spot.left)}px)`;
      }
      if (state.mode === "diff" && !state.held) place(canvas, main.box);
      const s = scaleFor(main.img, main.box) * dpr();
      readout.textContent = natural(main.img)[0] ? `${state.zoom.fit ? "fit " : ""}${Math.round(s * 100)}%` : "–";
      readout.title = state.zoom.fit ? "fitted to the viewer" : "100% is one image pixel per screen pixel";
      // Layers drawn over the images (regions.js) follow them: which frame each viewer shows, now placed anew.
      root.dispatchEvent(new CustomEvent("cmp:layout", { detail: { a: state.mainShows || "a", b: "b", one: ONE_VIEWER_MODES.includes(state.mode) } }));
    }

    function setZoom(z, cx = state.zoom.cx, cy = state.zoom.cy) {
      const lowest = Math.min(fitScale(main.img, main.box), 1 / dpr()) / 2;
      state.zoom = {
        fit: false,
        z: Math.min(32, Math.max(lowest, z)),
        cx: Math.min(1, Math.max(0, cx)),
        cy: Math.min(1, Math.max(0, cy)),
      };
      layout();
    }
    const current = () => scaleFor(main.img, main.box);
    const zoomBy = (factor) => setZoom(current() * factor);
    const fit = () => { state.zoom = { fit: true, z: 1, cx: 0.5, cy: 0.5 }; layout(); };
    const pixels = () => setZoom(1 / dpr());

    /* --- What each viewer shows, and the badge that says so. --- */
    function badge(viewer, text, cls) {
      viewer.badge.textContent = text;
      viewer.badge.className = `cmp-badge ${cls}`;
    }
    // A label is text, or a list of texts and elements the page built (a <kbd>); a text is never parsed as markup, so
    // a file name such as `<meta http-equiv=refresh ...>.png` shows as the name it is.
    function showWhere(where, slot) {
      const frame = frames[slot];
      const label = frame && frame.label !== undefined && frame.label !== null ? frame.label : "";
      const parts = Array.isArray(label) ? label : [String(label)];
      where.replaceChildren(...parts.map((part) => (part instanceof Node ? part.cloneNode(true) : String(part))));
    }
    function setSrc(img, src) {
      if ((img.getAttribute("src") || "") !== (src || "")) {
        if (src) img.setAttribute("src", src);
        else img.removeAttribute("src");
      }
    }
    function render() {
      root.dataset.mode = state.mode;
      root.classList.toggle("cmp-one", ONE_VIEWER_MODES.includes(state.mode));
      root.classList.toggle("cmp-held", state.held);
      const plain = state.held || !["diff", "swipe"].includes(state.mode);
      const shown = state.held || (state.mode === "auto" && state.autoShowsB) ? "b" : "a";
      const frame = frames[plain ? shown : "a"];
      state.mainShows = plain ? shown : "both"; // the difference and swipe views show A and B at once
      setSrc(main.img, frame ? frame.src : "");
      main.figure.classList.toggle("preview", !!(frame && frame.preview));
      canvas.hidden = plain || state.mode !== "diff";
      over.hidden = plain || state.mode !== "swipe";
      divider.hidden = over.hidden;
      main.img.hidden = !canvas.hidden;
      if (plain) {
        badge(main, names[shown], `cmp-badge-${shown}`);
        showWhere(main.where, shown);
      } else if (state.mode === "diff") {
        badge(main, `|${names.a}−${names.b}|`, "cmp-badge-diff");
        main.where.textContent = "difference heat map";
      } else {
        badge(main, `${names.a} ◂ ▸ ${names.b}`, "cmp-badge-swipe");
        main.where.textContent = `${names.a} left, ${names.b} right of the line: drag it`;
        setSrc(over, frames.b ? frames.b.src : "");
      }
      const other = frames.b;
      setSrc(viewers.b.img, other ? other.src : "");
      viewers.b.figure.classList.toggle("preview", !!(other && other.preview));
      badge(viewers.b, names.b, "cmp-badge-b");
      showWhere(viewers.b.where, "b");
      for (const button of root.querySelectorAll("[data-cmp-mode]")) {
        button.classList.toggle("on", button.dataset.cmpMode === state.mode);
        button.setAttribute("aria-pressed", String(button.dataset.cmpMode === state.mode));
      }
      if (state.mode === "diff" && !state.held) drawDifference();
      layout();
    }

    /* --- Modes. --- */
    let autoTimer = null;
    function stopAuto() {
      clearInterval(autoTimer);
      autoTimer = null;
      state.autoShowsB = false;
    }
    function startAuto() {
      stopAuto();
      const hertz = Math.min(8, Math.max(1, Number(rate.value) || 2));
      autoTimer = setInterval(() => {
        state.autoShowsB = !state.autoShowsB;
        render();
      }, 1000 / hertz);
    }
    // The modes compare two chosen frames, not a preview of the cursor.
    const both = () => !!(frames.a && frames.b && frames.a.src && frames.b.src && !frames.a.preview && !frames.b.preview);
    function needsBoth(mode) {
      if (both()) return false;
      message(`Set ${names.a} and ${names.b} first: the ${mode} compares them.`);
      return true;
    }
    function setMode(mode) {
      if (mode === state.mode && mode !== "two" && mode !== "one") mode = state.layout; // a mode's key toggles it
      if (["auto", "diff", "swipe"].includes(mode) && needsBoth({ auto: "flicker", diff: "difference", swipe: "swipe" }[mode])) return;
      if (mode === "two" || mode === "one") state.layout = mode;
      state.mode = mode;
      stopAuto();
      if (mode === "auto") startAuto();
      message("");
      render();
    }
    const toggleLayout = () => setMode(state.mode === "two" ? "one" : "two");
    function hold(on) {
      if (state.held === on) return;
      if (on && (!frames.b || !frames.b.src)) return message(`Set ${names.b} first.`);
      state.held = on;
      render();
    }
    function message(text) {
      if (note) note.textContent = text;
      if (text && options.onMessage) options.onMessage(text);
    }

    /* --- The difference view: |A − B| per pixel, mean over the channels, times the gain, as a heat map
       (black, red, yellow, white). Computed here from the two frames' pixels; the frames come from this site. --- */
    let diffKey = "";
    const loaded = new Map();
    function pixelsOf(src) {
      if (!loaded.has(src)) {
        loaded.set(src, new Promise((resolve, reject) => {
          const image = new Image();
          if (new URL(src, location.href).origin !== location.origin) image.crossOrigin = "anonymous";
          image.onload = () => resolve(image);
          image.onerror = () => { loaded.delete(src); reject(new Error(`could not load ${src}`)); };
          image.src = src;
        }));
        // The last few frames only: a day of comparisons would otherwise keep every decoded frame.
        while (loaded.size > 4) loaded.delete(loaded.keys().next().value);
      }
      return loaded.get(src);
    }
    async function drawDifference() {
      const amount = Number(gain.value) || 1;
      if (gainValue) gainValue.textContent = `×${amount}`;
      const key = `${frames.a.src}|${frames.b.src}|${amount}`;
      if (key === diffKey) return;
      diffKey = key;
      let first, second;
      try {
        [first, second] = await Promise.all([pixelsOf(frames.a.src), pixelsOf(frames.b.src)]);
      } catch (error) {
        diffKey = "";
        return message(`Difference view: ${error.message}.`);
      }
      if (diffKey !== key) return;
      const width = first.naturalWidth;
      const height = first.naturalHeight;
      const scratch = document.createElement("canvas");
      scratch.width = width;
      scratch.height = height;
      const context = scratch.getContext("2d", { willReadFrequently: true });
      let one, two;
      try {
        context.drawImage(first, 0, 0);
        one = context.getImageData(0, 0, width, height).data;
        context.clearRect(0, 0, width, height);
        context.drawImage(second, 0, 0, width, height); // a B of another size is compared at A's size
        two = context.getImageData(0, 0, width, height).data;
      } catch (_) {
        diffKey = "";
        return message("Difference view: the browser may not read these frames' pixels (stored on another site without CORS).");
      }
      const out = new ImageData(width, height);
      const data = out.data;
      const scale = amount / 3;
      for (let i = 0; i < data.length; i += 4) {
        const v = (Math.abs(one[i] - two[i]) + Math.abs(one[i + 1] - two[i + 1]) + Math.abs(one[i + 2] - two[i + 2])) * scale;
        data[i] = Math.min(255, v * 3);
        data[i + 1] = Math.min(255, Math.max(0, v * 3 - 255));
        data[i + 2] = Math.min(255, Math.max(0, v * 3 - 510));
        data[i + 3] = 255;
      }
      canvas.width = width;
      canvas.height = height;
      canvas.getContext("2d").putImageData(out, 0, 0);
      canvas.dataset.ready = key;
      layout();
    }

    /* --- Pointer: wheel zooms about the pointer, a drag pans (only while the button is down), the swipe line
       follows its own drag. --- */
    for (const viewer of Object.values(viewers)) {
      const box = viewer.box;
      box.addEventListener("wheel", (event) => {
        event.preventDefault();
        const img = box === main.box && !canvas.hidden ? canvas : viewer.img;
        const [w, h] = natural(img);
        if (!w) return;
        const rect = box.getBoundingClientRect();
        const s = scaleFor(img, box);
        const next = Math.min(32, Math.max(Math.min(fitScale(img, box), 1 / dpr()) / 2, s * (event.deltaY < 0 ? 1.25 : 0.8)));
        const dx = event.clientX - rect.left - box.clientWidth / 2;
        const dy = event.clientY - rect.top - box.clientHeight / 2;
        const x = state.zoom.cx * w + dx / s;
        const y = state.zoom.cy * h + dy / s;
        setZoom(next, (x - dx / next) / w, (y - dy / next) / h);
      }, { passive: false });
      box.addEventListener("pointerdown", (event) => {
        if (event.button !== 0) return;
        event.preventDefault();
        const onLine = event.target === divider;
        const [w, h] = natural(viewer.img);
        const s = scaleFor(viewer.img, box);
        const start = { x: event.clientX, y: event.clientY, cx: state.zoom.cx, cy: state.zoom.cy, z: s };
        box.setPointerCapture(event.pointerId);
        box.classList.add("dragging");
        const move = (e) => {
          if (onLine) {
            const rect = box.getBoundingClientRect();
            state.swipe = Math.min(1, Math.max(0, (e.clientX - rect.left) / rect.width));
            layout();
          } else if (w && h) {
            setZoom(start.z, start.cx - (e.clientX - start.x) / (w * start.z), start.cy - (e.clientY - start.y) / (h * start.z));
          }
        };
        const up = () => {
          box.classList.remove("dragging");
          box.removeEventListener("pointermove", move);
          box.removeEventListener("pointerup", up);
          box.removeEventListener("pointercancel", up);
        };
        box.addEventListener("pointermove", move);
        box.addEventListener("pointerup", up);
        box.addEventListener("pointercancel", up);
      });
      viewer.img.addEventListener("load", layout);
    }
    over.addEventListener("load", layout);

    /* --- Controls and keys. --- */
    root.addEventListener("click", (event) => {
      const control = event.target.closest("[data-cmp-mode], [data-cmp-action]");
      if (!control) return;
      if (control.dataset.cmpMode) setMode(control.dataset.cmpMode);
      const action = control.dataset.cmpAction;
      if (action === "zoom-in") zoomBy(1.25);
      else if (action === "zoom-out") zoomBy(0.8);
      else if (action === "fit") fit();
      else if (action === "pixels") pixels();
    });
    // Keep the buttons from keeping the focus: the keys stay with the page.
    root.addEventListener("mouseup", (event) => { if (event.target.closest("button")) event.target.closest("button").blur(); });
    // A chosen rate gives the keys back to the viewer (a focused menu keeps its letters).
    rate.addEventListener("change", () => { rate.blur(); if (state.mode === "auto") startAuto(); });
    gain.addEventListener("input", () => { if (state.mode === "diff") render(); else if (gainValue) gainValue.textContent = `×${gain.value}`; });

    document.addEventListener("keydown", (event) => {
      if (document.querySelector("dialog[open]") || typing(event.target)) return;
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      const key = event.key;
      let handled = true;
      // A held key repeats: only the zoom keys act on each repeat, a mode key acts once.
      if (event.repeat && "fFtdwv".includes(key)) { event.preventDefault(); return; }
      if (key === "f" || key === "F") hold(true);
      else if (key === "t") setMode("auto");
      else if (key === "d") setMode("diff");
      else if (key === "w") setMode("swipe");
      else if (key === "v") toggleLayout();
      else if (key === "=" || key === "+") zoomBy(1.25);
      else if (key === "-") zoomBy(0.8);
      else if (key === "z" || key === "0") fit();
      else if (key === "1") pixels();
      else handled = false;
      if (handled) event.preventDefault();
    });
    // The key going up returns to A wherever the focus went meanwhile; so does leaving the window or the tab.
    document.addEventListener("keyup", (event) => { if (event.key === "f" || event.key === "F") hold(false); });
    window.addEventListener("blur", () => hold(false));
    document.addEventListener("visibilitychange", () => { if (document.hidden) hold(false); });
    window.addEventListener("resize", layout);

    return {
      /* {a: {src, label, preview}, b: {...}}: label is text (or texts and elements, see showWhere). */
      set(next) {
        for (const slot of ["a", "b"]) {
          frames[slot] = next[slot] || null;
          if (frames[slot] && frames[slot].src) new Image().src = frames[slot].src; // warm the cache: flicker is instant
        }
        if (["auto", "diff", "swipe"].includes(state.mode) && !both()) {
          stopAuto();
          state.mode = state.layout;
        }
        if (both()) message("");
        render();
      },
      state,
      fit,
      pixels,
      setMode,
    };
  }

  window.Compare = { create };

  // Pages that only show two fixed images (captions) describe them in data attributes.
  document.addEventListener("DOMContentLoaded", () => {
    for (const root of document.querySelectorAll("[data-compare][data-a-src]")) {
      const viewer = create(root);
      viewer.set({
        a: { src: root.dataset.aSrc, label: root.dataset.aLabel || "" },
        b: { src: root.dataset.bSrc, label: root.dataset.bLabel || "" },
      });
    }
  });
})();
