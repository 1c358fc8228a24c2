/* Difference regions over the comparison viewer (templates/_regions.html; compare.js places the images): boxes
   marking where A and B differ, kept in pixels of the original image whatever the zoom.

   Regions.create(compareRoot, {editable, names, regions, onChange}) -> {set(list), get()}
   A region here is {frame: "a" | "b", x, y, w, h[, label]}; the page says what a and b are (frames A and B on the
   workbench, images 1 and 2 in review) and `onChange(list)` hears every change.

   Mouse: with drawing on (m, or the Draw button) a drag on an image draws a box; a drag on a box moves it, on its
   corner handle resizes it; the × removes it. Without drawing, a drag pans as before.
   Keys (docs/guides/keyboard.md): r a new box on A, Shift+R on B; on a selected (focused) box: arrows move it,
   Shift+arrows resize it (Alt: one pixel at a time), Delete or Backspace removes it, Esc lets go of it, Tab goes to
   the next box; Ctrl+Z undoes the last change to the boxes. */
(() => {
  "use strict";

  const SLOTS = ["a", "b"];
  const MIN_DRAG_PX = 3; // a click, not a drag: no box
  const typing = (el) => !!el && !!el.matches && el.matches("input, textarea, select, [contenteditable]");

  function create(compareRoot, options = {}) {
    const editable = !!options.editable;
    const names = options.names || { a: "A", b: "B" };
    const bar = options.bar || document.querySelector("[data-regions]");
    let regions = clean(options.regions || []);
    let drawing = false;
    let shows = { a: "a", b: "b" }; // what each viewer shows now (compare.js's cmp:layout)
    const history = [];
    const layers = {};

    function clean(list) {
      return (Array.isArray(list) ? list : [])
        .filter((r) => r && SLOTS.includes(r.frame))
        .map((r) => ({ ...r }));
    }

    for (const slot of SLOTS) {
      const box = compareRoot.querySelector(`[data-cmp-viewer=${slot}] .cmp-box`);
      const layer = document.createElement("div");
      layer.className = "rg-layer";
      layer.dataset.viewer = slot;
      box.appendChild(layer);
      layers[slot] = { box, layer, img: box.querySelector(".cmp-img") };
    }

    /* --- Geometry: the layer covers the image exactly; boxes are placed in percent of the image. --- */
    const naturalOf = (slot) => {
      const img = layers[slot].img;
      return [img.naturalWidth || 0, img.naturalHeight || 0];
    };
    function follow(detail) {
      if (detail) shows = { a: detail.a, b: detail.b };
      for (const slot of SLOTS) {
        const { layer, img } = layers[slot];
        for (const side of ["left", "top", "width", "height"]) layer.style[side] = img.style[side];
        layer.hidden = !naturalOf(slot)[0];
      }
      render();
    }
    compareRoot.addEventListener("cmp:layout", (event) => follow(event.detail));

    // The frames a viewer's layer shows boxes of: its own, or both over the difference and swipe views.
    const framesOn = (viewer) => (shows[viewer] === "both" ? SLOTS : [shows[viewer]]);
    const editableOn = (viewer) => editable && shows[viewer] !== "both";
    const numberOf = (i) => regions.slice(0, i + 1).filter((r) => r.frame === regions[i].frame).length;

    /* --- Drawing the boxes. --- */
    function render() {
      const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest(".rg-box");
      const keep = focused ? focused.dataset.index : null;
      for (const viewer of SLOTS) {
        const { layer } = layers[viewer];
        layer.classList.toggle("drawing", drawing && editableOn(viewer));
        layer.replaceChildren();
        const [width, height] = naturalOf(viewer);
        if (!width) continue;
        regions.forEach((region, i) => {
          if (!framesOn(viewer).includes(region.frame)) return;
          const el = document.createElement("div");
          el.className = `rg-box rg-${region.frame}`;
          el.dataset.index = String(i);
          el.style.left = `${(100 * region.x) / width}%`;
          el.style.top = `${(100 * region.y) / height}%`;
          el.style.width = `${(100 * region.w) / width}%`;
          el.style.height = `${(100 * region.h) / height}%`;
          const tag = document.createElement("span");
          tag.className = "rg-tag";
          tag.textContent = `${names[region.frame]}#${numberOf(i)}${region.label ? ` · ${region.label}` : ""}`;
          el.appendChild(tag);
          el.title = `${names[region.frame]}: x ${region.x}, y ${region.y}, ${region.w}×${region.h} px`;
          if (editableOn(viewer)) {
            el.tabIndex = 0;
            el.setAttribute("role", "button");
            el.setAttribute("aria-label", `Region ${names[region.frame]}#${numberOf(i)}: arrows move, Shift+arrows resize, Delete removes`);
            const handle = document.createElement("span");
            handle.className = "rg-handle";
            handle.title = "Drag to resize";
            const remove = document.createElement("button");
            remove.type = "button";
            remove.className = "rg-remove";
            remove.tabIndex = -1;
            remove.title = "Remove this box (Delete)";
            remove.textContent = "×";
            el.append(handle, remove);
          }
          layer.appendChild(el);
        });
      }
      if (keep !== null) {
        const again = compareRoot.querySelector(`.rg-box[data-index="${keep}"]`);
        if (again && again !== document.activeElement) again.focus({ preventScroll: true });
      }
      renderBar();
    }

    function renderBar() {
      if (!bar) return;
      const list = bar.querySelector("[data-rg-list]");
      const draw = bar.querySelector("[data-rg-draw]");
      if (draw) {
        draw.classList.toggle("on", drawing);
        draw.setAttribute("aria-pressed", String(drawing));
      }
      if (!list) return;
      list.replaceChildren();
      if (!regions.length) {
        const none = document.createElement("span");
        none.className = "muted";
        none.textContent = editable ? "none yet" : "none";
        list.appendChild(none);
      }
      regions.forEach((region, i) => {
        const item = document.createElement("span");
        item.className = `rg-item rg-${region.frame}`;
        item.dataset.index = String(i);
        item.textContent = `${names[region.frame]}#${numberOf(i)} ${region.x},${region.y} ${region.w}×${region.h}`;
        list.appendChild(item);
      });
    }

    /* --- Changes: each one can be undone; the page hears the new list. --- */
    function commit(next, focusIndex = null) {
      history.push(JSON.stringify(regions));
      if (history.length > 100) history.shift();
      regions = next;
      render();
      if (focusIndex !== null) focusBox(focusIndex);
      if (options.onChange) options.onChange(get());
    }
    function undo() {
      if (!history.length) return false;
      regions = JSON.parse(history.pop());
      render();
      if (options.onChange) options.onChange(get());
      return true;
    }
    function focusBox(i) {
      const el = compareRoot.querySelector(`.rg-box[data-index="${i}"][tabindex]`);
      if (el) el.focus({ preventScroll: true });
    }
    const clamp = (value, low, high) => Math.min(high, Math.max(low, value));
    function fitted(region) {
      const [width, height] = sizeOf(region.frame);
      if (!width) return region;
      const w = clamp(Math.round(region.w), 1, width);
      const h = clamp(Math.round(region.h), 1, height);
      return { ...region, w, h, x: clamp(Math.round(region.x), 0, width - w), y: clamp(Math.round(region.y), 0, height - h) };
    }
    // A frame's size: from the viewer that shows it (A's and B's own viewers in the side-by-side layout).
    function sizeOf(frame) {
      const viewer = SLOTS.find((v) => shows[v] === frame) || frame;
      return naturalOf(viewer);
    }
    function add(frame) {
      const [width, height] = sizeOf(frame);
      if (!width) return;
      const w = Math.max(1, Math.round(width / 4));
      const h = Math.max(1, Math.round(height / 4));
      const next = [...regions, fitted({ frame, x: (width - w) / 2, y: (height - h) / 2, w, h })];
      commit(next, next.length - 1);
    }
    function change(i, patch) {
      const next = regions.map((region, n) => (n === i ? fitted({ ...region, ...patch }) : region));
      commit(next, i);
    }
    function remove(i) {
      const next = regions.filter((_, n) => n !== i);
      commit(next, next.length ? Math.min(i, next.length - 1) : null);
    }

    /* --- Pointer. Positions are read against the layer (the image as shown) and turned into image pixels. --- */
    function imagePoint(viewer, event) {
      const rect = layers[viewer].layer.getBoundingClientRect();
      const [width, height] = naturalOf(viewer);
      return {
        x: clamp(((event.clientX - rect.left) / rect.width) * width, 0, width),
        y: clamp(((event.clientY - rect.top) / rect.height) * height, 0, height),
        scale: width / rect.width,
      };
    }
    function track(viewer, event, onMove, onUp) {
      const layer = layers[viewer].layer;
      layer.setPointerCapture(event.pointerId);
      const move = (e) => onMove(e);
      const up = (e) => {
        layer.removeEventListener("pointermove", move);
        layer.removeEventListener("pointerup", up);
        layer.removeEventListener("pointercancel", up);
        onUp(e);
      };
      layer.addEventListener("pointermove", move);
      layer.addEventListener("pointerup", up);
      layer.addEventListener("pointercancel", up);
    }
    for (const viewer of SLOTS) {
      const layer = layers[viewer].layer;
      layer.addEventListener("pointerdown", (event) => {
        if (event.button !== 0 || !editableOn(viewer)) return;
        const target = event.target;
        const boxEl = target.closest(".rg-box");
        if (!boxEl && !drawing) return; // compare.js pans
        event.stopPropagation();
        event.preventDefault();
        const start = imagePoint(viewer, event);
        if (boxEl && target.closest(".rg-remove")) return remove(Number(boxEl.dataset.index));
        if (boxEl) {
          const i = Number(boxEl.dataset.index);
          const before = regions[i];
          const resizing = !!target.closest(".rg-handle");
          boxEl.focus({ preventScroll: true });
          let latest = before;
          track(viewer, event, (e) => {
            const p = imagePoint(viewer, e);
            const dx = p.x - start.x;
            const dy = p.y - start.y;
            latest = fitted(resizing ? { ...before, w: before.w + dx, h: before.h + dy } : { ...before, x: before.x + dx, y: before.y + dy });
            boxEl.style.left = `${(100 * latest.x) / naturalOf(viewer)[0]}%`;
            boxEl.style.top = `${(100 * latest.y) / naturalOf(viewer)[1]}%`;
            boxEl.style.width = `${(100 * latest.w) / naturalOf(viewer)[0]}%`;
            boxEl.style.height = `${(100 * latest.h) / naturalOf(viewer)[1]}%`;
          }, () => {
            if (["x", "y", "w", "h"].some((k) => latest[k] !== before[k])) change(i, latest);
          });
          return;
        }
        const frame = shows[viewer];
        const ghost = document.createElement("div");
        ghost.className = `rg-box rg-${frame} rg-ghost`;
        layer.appendChild(ghost);
        let drawn = null;
        track(viewer, event, (e) => {
          const p = imagePoint(viewer, e);
          const [width, height] = naturalOf(viewer);
          drawn = { frame, x: Math.min(start.x, p.x), y: Math.min(start.y, p.y), w: Math.abs(p.x - start.x), h: Math.abs(p.y - start.y) };
          ghost.style.left = `${(100 * drawn.x) / width}%`;
          ghost.style.top = `${(100 * drawn.y) / height}%`;
          ghost.style.width = `${(100 * drawn.w) / width}%`;
          ghost.style.height = `${(100 * drawn.h) / height}%`;
        }, () => {
          ghost.remove();
          if (drawn && drawn.w / start.scale >= MIN_DRAG_PX && drawn.h / start.scale >= MIN_DRAG_PX) {
            const next = [...regions, fitted(drawn)];
            commit(next, next.length - 1);
          }
        });
      });
      // Keys on a selected box: handled here, before the page's own arrows (frames) and letters see them.
      layer.addEventListener("keydown", (event) => {
        const boxEl = event.target.closest && event.target.closest(".rg-box");
        if (!boxEl || event.ctrlKey || event.metaKey) return;
        const i = Number(boxEl.dataset.index);
        const region = regions[i];
        const [width, height] = sizeOf(region.frame);
        const step = (size) => (event.altKey ? 1 : Math.max(1, Math.round(size / 100)));
        const arrows = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
        let handled = true;
        if (event.key in arrows) {
          const [dx, dy] = arrows[event.key];
          if (event.shiftKey) change(i, { w: region.w + dx * step(width), h: region.h + dy * step(height) });
          else change(i, { x: region.x + dx * step(width), y: region.y + dy * step(height) });
        } else if (event.key === "Delete" || event.key === "Backspace") remove(i);
        else if (event.key === "Escape") boxEl.blur();
        else handled = false;
        if (handled) {
          event.preventDefault();
          event.stopPropagation();
        }
      });
    }

    if (bar) {
      bar.addEventListener("click", (event) => {
        const control = event.target.closest("[data-rg-draw], [data-rg-add]");
        if (!control) return;
        control.blur();
        if (control.dataset.rgAdd) add(control.dataset.rgAdd);
        else toggleDrawing();
      });
    }
    function toggleDrawing() {
      drawing = !drawing;
      render();
    }

    if (editable) {
      document.addEventListener("keydown", (event) => {
        if (document.querySelector("dialog[open]") || typing(event.target)) return;
        if ((event.ctrlKey || event.metaKey) && !event.shiftKey && event.key.toLowerCase() === "z") {
          if (undo()) event.preventDefault();
          return;
        }
        if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
        let handled = true;
        if (event.key === "r") add("a");
        else if (event.key === "R") add("b");
        else if (event.key === "m") toggleDrawing();
        else handled = false;
        if (handled) event.preventDefault();
      });
    }

    function get() {
      return regions.map((region) => ({ ...region }));
    }
    return {
      /* A new list from the page (a draft loaded, a pair opened for editing): no undo across it. */
      set(list) {
        regions = clean(list);
        history.length = 0;
        render();
      },
      get,
      undo,
      refresh: () => follow(),
    };
  }

  window.Regions = { create };
})();
