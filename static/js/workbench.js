/* The pair editor (annotator/picking/editor.py, templates/picking/_pair_editor.html): filmstrip, the comparison viewer
   (compare.js), difference regions (regions.js) with the required-region rule, the question editor, autosave of the
   draft to the server, idempotent submit, lease heartbeats. The same script whatever the pair's source: the page's
   config says where its API lives and how it treats the item (a video's frames, a collection's candidate pair).
   Keyboard first: press ? for keys. */
(() => {
  "use strict";
  const config = JSON.parse(document.getElementById("workbench-config").textContent);
  const csrf = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"];
  const $ = (id) => document.getElementById(id);
  /* An element built from parts: strings become text nodes, never markup (a file name, a category, an author's name
     come from outside the page). */
  const el = (tag, attributes = {}, ...children) => {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
    element.append(...children);
    return element;
  };
  // In time order; a frame taken from the source video (timeline.js) is put in its place (addFrame).
  const frames = config.frames;
  const position = new Map(frames.map((frame, i) => [frame.i, i]));
  const HEARTBEAT_MS = 60000;
  const SAVE_DELAY_MS = 600;
  // The addresses this page talks to: the source's own (EditorSource.urls).
  const urls = config.urls;

  const newKey = () =>
    (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2)).replace(/-/g, "");
  const blank = () => ({
    cursor: 0, a: null, b: null, category: "", question: "", answer: "", distractors: [""],
    answer_frame: "", client_key: newKey(), pair: null, version: null, regions: [],
    model_draft: null, model_draft_from: null, // drafting.js: the model's draft the texts started from
  });
  // `start`: where a page without a draft begins (a candidate pair: its two images as A and B).
  const state = Object.assign(blank(), config.start || {}, config.draft || {});
  if (!Array.isArray(state.distractors) || !state.distractors.length) state.distractors = [""];
  state.cursor = Math.min(Math.max(0, state.cursor | 0), Math.max(0, frames.length - 1));

  async function api(method, url, body, options = {}) {
    try {
      const response = await fetch(url, {
        method,
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
        body: body === undefined ? undefined : JSON.stringify(body),
        ...options,
      });
      let data = null;
      try { data = await response.json(); } catch (_) { data = null; }
      return { ok: response.ok, status: response.status, data };
    } catch (error) {
      return { ok: false, status: 0, data: null };
    }
  }

  const frameAt = (index) => (index === null || index === undefined ? null : frames[position.get(index)]);
  const template = () => config.templates[state.category] || null;
  const seconds = (t) => `${t.toFixed(3)} s`;
  // A frame by its index and time; a candidate pair's image by its file name (it has no time); a frame picked from the
  // source video by its time alone (its index says nothing to a person).
  // A frame in a list (suggestions, pairs): a sampled one by its index, a picked one by its time.
  const shortName = (index) => { const frame = frameAt(index); return frame && frame.picked ? `@${seconds(frame.t)}` : `#${index}`; };
  const frameName = (frame) => (frame.name ? frame.name : frame.picked ? `picked · ${seconds(frame.t)}` : `#${frame.i} · ${seconds(frame.t)}`);

  /* --- Filmstrip: one strip of light buttons, images lazy-loaded by the browser as they scroll in. --- */
  const strip = $("filmstrip");
  const thumbs = [];
  function buildStrip() {
    const fragment = document.createDocumentFragment();
    thumbs.length = 0;
    frames.forEach((frame, i) => {
      const thumb = document.createElement("button");
      thumb.type = "button";
      thumb.className = frame.picked ? "thumb picked" : "thumb";
      thumb.dataset.pos = i;
      thumb.title = frameName(frame);
      thumb.append(el("img", { loading: "lazy", decoding: "async", alt: "", src: frame.th }), el("span", {}, frame.picked ? seconds(frame.t) : String(frame.i)));
      fragment.appendChild(thumb);
      thumbs.push(thumb);
    });
    strip.replaceChildren(fragment);
  }
  buildStrip();
  strip.addEventListener("click", (event) => {
    const thumb = event.target.closest(".thumb");
    if (thumb) moveTo(Number(thumb.dataset.pos));
  });

  let marked = [];
  function renderStrip() {
    marked.forEach((el) => el.classList.remove("cursor", "is-a", "is-b"));
    marked = [];
    const mark = (pos, cls) => {
      if (pos === undefined || !thumbs[pos]) return;
      thumbs[pos].classList.add(cls);
      marked.push(thumbs[pos]);
    };
    mark(state.cursor, "cursor");
    mark(position.get(state.a), "is-a");
    mark(position.get(state.b), "is-b");
    const thumb = thumbs[state.cursor];
    if (thumb) {
      const left = thumb.offsetLeft - strip.clientWidth / 2 + thumb.offsetWidth / 2;
      if (thumb.offsetLeft < strip.scrollLeft || thumb.offsetLeft + thumb.offsetWidth > strip.scrollLeft + strip.clientWidth) {
        strip.scrollLeft = left;
      }
    }
    const frame = frames[state.cursor];
    $("cursor-label").textContent = frame ? `${frameName(frame)} · ${state.cursor + 1}/${frames.length}` : "no frames";
  }

  /* --- Viewers (static/js/compare.js): an unset slot previews the cursor. The strip shows thumbnails, the
     viewers the full frames. --- */
  const viewer = Compare.create(document.querySelector("[data-compare]"));
  // Difference regions (regions.js) on frames A and B, in pixels of the frame; saved with the draft.
  const regionsView = Regions.create(document.querySelector("[data-compare]"), {
    editable: true,
    names: { a: "A", b: "B" },
    onChange: (list) => { state.regions = list; renderRequired(); scheduleSave(); },
  });
  function renderViewers() {
    const cursor = frames[state.cursor];
    const shown = {};
    for (const slot of ["a", "b"]) {
      const frame = frameAt(state[slot]);
      const frameShown = frame || cursor;
      shown[slot] = frameShown && {
        src: frameShown.src,
        preview: !frame,
        label: frame
          ? frameName(frame)
          : [`cursor #${cursor ? cursor.i : "–"} · press `, el("kbd", {}, slot), " to set"],
      };
    }
    viewer.set(shown);
    const a = frameAt(state.a);
    const b = frameAt(state.b);
    $("gap").textContent = a && b ? `Δ ${seconds(Math.abs(b.t - a.t))}` : "Δ –";
    $("gap").hidden = !config.timed;
  }

  /* --- Similarity of A and B, and the suggestions (both from the similarity API; pending until it exists). --- */
  let similarityFor = "";
  const similarityTries = {};
  async function renderSimilarity() {
    const element = $("similarity");
    const a = frameAt(state.a);
    const b = frameAt(state.b);
    const show = (text, status) => {
      element.textContent = text;
      element.className = `similarity badge badge-${status}`;
    };
    if (!a || !b) { similarityFor = ""; return show("similarity –", "pending"); }
    const key = `${a.im}-${b.im}`;
    if (key === similarityFor) return;
    similarityFor = key;
    show("similarity …", "pending");
    const result = await api("GET", `/api/similarity/?image_1=${a.im}&image_2=${b.im}`);
    if (similarityFor !== key) return;
    const data = result.ok ? result.data || {} : {};
    if (result.ok && typeof data.similarity === "number") {
      const verdict = data.status === "pass" ? "pass" : data.status === "fail" ? "fail" : "pending";
      const threshold = data.threshold !== undefined ? ` (≥ ${data.threshold})` : "";
      show(`similarity ${data.similarity.toFixed(3)} · ${verdict}${threshold}`, verdict);
      element.title = data.model ? `DINOv3 similarity · ${data.model}` : "DINOv3 similarity";
    } else {
      show("similarity pending", "pending");
      // A frame taken a moment ago is embedded on the worker: ask again, less often as time goes by.
      const wait = Math.min(10000, 1000 * 2 ** (similarityTries[key] = (similarityTries[key] || 0) + 1) / 2);
      setTimeout(() => { if (similarityFor === key) { similarityFor = ""; renderSimilarity(); } }, wait);
    }
  }

  let suggestions = [];
  let suggestionAt = -1;
  function suggestionItem(s, i) {
    const item = document.createElement("li");
    const pick = document.createElement("button");
    pick.type = "button";
    pick.className = "link";
    pick.textContent = `${shortName(s.index_1)} ↔ ${shortName(s.index_2)}`;
    const facts = document.createElement("span");
    facts.className = "muted";
    facts.textContent = ` · Δ ${Number(s.gap).toFixed(1)} s`;
    const reason = document.createElement("div");
    reason.className = "why";  // the similarity and the rule it meets or fails
    reason.textContent = s.reason || "";
    item.append(pick, facts, reason);
    if (i !== undefined) pick.addEventListener("click", () => useSuggestion(i));
    return item;
  }
  async function loadSuggestions() {
    const list = $("suggestions");
    const under = $("suggestions-under");
    if (!urls.suggestions) return;
    const result = await api("GET", urls.suggestions);
    const data = result.ok && result.data ? result.data : {};
    const ready = data.status === "ready";
    suggestions = ready && Array.isArray(data.results) ? data.results : [];
    const below = ready && Array.isArray(data.below_threshold) ? data.below_threshold : [];
    $("suggestions-demo").hidden = !data.demo;
    list.replaceChildren();
    under.replaceChildren();
    $("suggestions-under-head").hidden = !below.length;
    if (ready && data.counts) {
      const c = data.counts;
      $("suggestions-counts").textContent = `${c.subtle} subtle · ${c.under_threshold} under the threshold · ${c.near_duplicate} near-duplicate`;
    }
    below.forEach((s) => {
      const item = suggestionItem(s);
      // Not suggested, but loadable: seeing such a pair side by side shows what the rule keeps out.
      item.querySelector("button").addEventListener("click", () => {
        if (!position.has(s.index_1) || !position.has(s.index_2)) return;
        state.a = s.index_1;
        state.b = s.index_2;
        state.cursor = position.get(s.index_2);
        changed();
      });
      under.appendChild(item);
    });
    if (!suggestions.length) {
      const note = result.ok && data.status === "pending" ? "similarities are still being computed: pending" : "no subtle pairs within the gap";
      list.replaceChildren(el("li", { class: "muted" }, note));
      return;
    }
    suggestions.forEach((s, i) => list.appendChild(suggestionItem(s, i)));
  }
  function useSuggestion(i) {
    if (!suggestions.length) return flash("No suggestions yet.");
    suggestionAt = i === undefined ? (suggestionAt + 1) % suggestions.length : i;
    const s = suggestions[suggestionAt];
    if (!position.has(s.index_1) || !position.has(s.index_2)) return;
    state.a = s.index_1;
    state.b = s.index_2;
    state.cursor = position.get(s.index_2);
    [...$("suggestions").children].forEach((li, n) => li.classList.toggle("current", n === suggestionAt));
    changed();
  }

  /* --- The question editor. --- */
  const categoryButtons = {};
  (() => {
    const box = $("categories");
    const keyOf = Object.fromEntries(Object.entries(config.keys).map(([key, category]) => [category, key]));
    for (const category of config.categories) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "category";
      button.dataset.category = category;
      button.append(el("kbd", {}, `⇧${keyOf[category]}`), ` ${category}`);
      button.addEventListener("click", () => setCategory(category));
      box.appendChild(button);
      categoryButtons[category] = button;
    }
  })();

  function setCategory(category) {
    if (state.category === category) return;
    const before = template();
    const next = config.templates[category];
    const untouched = !state.question || (before && state.question === before.question);
    state.category = category;
    // An example question is the box's placeholder, never its value: it may name an object this pair lacks.
    if (untouched) state.question = next.example ? "" : next.question;
    const textsEmpty = !state.answer && state.distractors.every((d) => !d);
    if (!next.binary && textsEmpty) state.distractors = next.distractors.slice();
    renderEditor();
    changed();
  }

  function derivedAnswerFrame() {
    const a = frameAt(state.a);
    const b = frameAt(state.b);
    if (!a || !b || a.t === b.t) return "";
    return a.t > b.t ? "a" : "b";
  }

  // The required-region rule (the team's setting) said beside the submit while the category has no box yet.
  const requiresRegion = () => (config.regions_required || []).includes(state.category);
  const article = (word) => ("aeiou".includes(word.charAt(0)) ? "An" : "A");
  function renderRequired() {
    // Said once: not beside the refusal that says it too.
    $("regions-required").hidden = !(requiresRegion() && !state.regions.length) || $("errors").childElementCount > 0;
    $("regions-required-text").textContent = `${article(state.category)} ${state.category} pair needs a difference region: draw one on A or B (r, or m and drag).`;
  }

  function renderEditor() {
    const t = template();
    Object.entries(categoryButtons).forEach(([category, button]) => button.classList.toggle("on", category === state.category));
    const hint = t && t.binary ? "Options: first image / second image." : "";
    if (t) $("category-hint").textContent = t.hint || hint;
    else $("category-hint").replaceChildren("Pick a category with ", el("kbd", {}, "Shift"), "+", el("kbd", {}, "1"), "–", el("kbd", {}, "9"), ", ", el("kbd", {}, "0"), ".");
    if (document.activeElement !== $("question")) $("question").value = state.question || "";
    $("question").placeholder = t ? (t.example ? `e.g. ${t.question}` : t.question) : "Pick a category first";
    const binary = !!(t && t.binary);
    $("binary-answer").hidden = !binary;
    $("text-answer").hidden = binary;
    if (binary) {
      const frame = t.derived ? derivedAnswerFrame() : state.answer_frame;
      for (const button of $("binary-answer").querySelectorAll("button")) {
        button.classList.toggle("on", button.dataset.frame === frame);
        button.disabled = !!t.derived;
      }
      $("binary-note").textContent = t.derived ? "the later frame, from the timestamps" : "the app decides which image comes first";
    } else {
      if (document.activeElement !== $("answer")) $("answer").value = state.answer || "";
      const box = $("distractors");
      const inputs = box.querySelectorAll("input");
      if (inputs.length !== state.distractors.length || !box.contains(document.activeElement)) {
        box.replaceChildren();
        state.distractors.forEach((text, i) => {
          const row = document.createElement("div");
          row.className = "distractor";
          // An option has the answer's limit (the page sets it from the server's).
          row.append(
            el("input", { maxlength: String($("answer").maxLength), list: "choice-list", "aria-label": `Distractor ${i + 1}` }),
            el("button", { type: "button", class: "link", title: "Remove" }, "×"),
          );
          const input = row.querySelector("input");
          input.value = text;
          input.addEventListener("input", () => { state.distractors[i] = input.value; changed(false); });
          row.querySelector("button").addEventListener("click", () => {
            state.distractors.splice(i, 1);
            if (!state.distractors.length) state.distractors.push("");
            renderEditor();
            changed();
          });
          box.appendChild(row);
        });
      }
      $("add-distractor").hidden = state.distractors.length >= 4;
    }
    $("choice-list").replaceChildren(...(t && t.choices.length ? t.choices : []).map((c) => el("option", { value: c })));
    $("editing-note").textContent = state.pair ? `editing pair ${state.pair} (version ${state.version})` : "";
    renderRequired();
  }

  $("question").addEventListener("input", (event) => { state.question = event.target.value; changed(false); });
  $("answer").addEventListener("input", (event) => { state.answer = event.target.value; changed(false); });
  $("add-distractor").addEventListener("click", () => {
    if (state.distractors.length < 4) state.distractors.push("");
    renderEditor();
    changed();
    const inputs = $("distractors").querySelectorAll("input");
    inputs[inputs.length - 1].focus();
  });
  for (const button of $("binary-answer").querySelectorAll("button")) {
    button.addEventListener("click", () => { state.answer_frame = button.dataset.frame; renderEditor(); changed(); });
  }

  /* --- Autosave: debounced PUT of the whole state; a reload or a crash comes back to it. Each save names the
     draft version it was based on: if another tab of this annotator saved since, the server refuses (409), this
     tab stops saving, keeps its text on screen and asks which draft to keep (conflict, below). --- */
  let saveTimer = null;
  let dirty = false;
  let draftVersion = Number(config.draft_version) || 0;
  let leaseGone = false; // a coordinator gave the item to someone else: nothing more is saved from this page
  let conflict = null; // the newer draft another tab saved ({state, version}) while the annotator decides
  let stashed = null; // this tab's state, kept after "Load the newer draft" until it is saved over or dropped
  const saveStatus = (text, cls = "muted") => { const el = $("save-status"); el.textContent = text; el.className = `save-status ${cls}`; };
  /* The last typed state also lives in this browser (localStorage, synchronously on each change) with the server
     version it was based on. A reload before the debounced save, or before the pagehide save has reached the
     server, finds it there: the page takes it when it is based on the server's draft or newer (the server's is
     then older), saves it, and never shows the older draft. A server draft saved since (another tab) wins. */
  const localKey = `subtlebench:${config.kind}-draft:${config.user}:${config.item.id}`;
  // The server stores JSON with its own key order: states are compared in one canonical form.
  const canon = (value) => JSON.stringify(value, (_, x) => (x && typeof x === "object" && !Array.isArray(x)
    ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x));
  let sending = null; // the state of the save in flight: a server draft equal to it is this browser's own
  function remember() {
    try { localStorage.setItem(localKey, JSON.stringify({ state, base: draftVersion, sent: sending })); } catch (_) { /* full or off */ }
  }
  function forget() { try { localStorage.removeItem(localKey); } catch (_) { /* off */ } }
  function remembered() {
    try { return JSON.parse(localStorage.getItem(localKey) || "null"); } catch (_) { return null; }
  }
  // One save at a time: each names the version the one before it made. A second save sent while the first is on its
  // way (a slow server, a change typed meanwhile) would name the same older version, and be refused as another tab's.
  let saving = null;
  async function save() {
    clearTimeout(saveTimer);
    while (saving) await saving;
    if (!dirty || conflict || leaseGone) return;
    saving = saveNow();
    try { await saving; } finally { saving = null; }
  }
  async function saveNow() {
    dirty = false;
    saveStatus("Saving…");
    sending = canon(state);
    remember();
    const result = await api("PUT", urls.draft, { state, version: draftVersion });
    sending = null;
    if (result.ok) {
      draftVersion = result.data.version;
      if (dirty) remember(); else forget();
      saveStatus(dirty ? "Saving…" : "Draft saved", "saved");
    } else if (isLeaseGone(result)) {
      showLeaseGone(result);
    } else if (result.status === 409) {
      dirty = true;
      await showConflict();
    } else {
      dirty = true;
      saveStatus(result.status ? `Not saved: ${window.sbRefusalMessages(result.data, result.status).join(" ")}` : "Offline: retrying", "unsaved");
      saveTimer = setTimeout(save, 3000);
    }
  }
  const copy = (value) => JSON.parse(JSON.stringify(value));
  const describe = (s) => (s && s.question ? `“${s.question.length > 60 ? s.question.slice(0, 60) + "…" : s.question}”` : "an empty draft");
  async function showConflict() {
    const result = await api("GET", urls.draft);
    conflict = result.ok ? { state: result.data.state || {}, version: result.data.version } : { state: {}, version: null };
    $("draft-conflict-text").textContent =
      `The draft changed in another tab (now ${describe(conflict.state)}). This tab's work is kept on screen and not saved until you choose.`;
    $("draft-load-newer").hidden = false;
    $("draft-keep-mine").textContent = "Keep this tab's";
    $("draft-conflict").hidden = false;
    saveStatus("Not saved: the draft changed in another tab", "unsaved");
  }
  function applyState(next) {
    Object.assign(state, blank(), next);
    if (!Array.isArray(state.distractors) || !state.distractors.length) state.distractors = [""];
    state.cursor = Math.min(Math.max(0, state.cursor | 0), Math.max(0, frames.length - 1));
    if (!Array.isArray(state.regions)) state.regions = [];
    regionsView.set(state.regions);
  }
  $("draft-load-newer").addEventListener("click", () => {
    // This tab's version stays one click away: nothing is dropped without the annotator saying so.
    stashed = copy(state);
    applyState(conflict.state);
    draftVersion = conflict.version;
    conflict = null;
    dirty = false;
    renderEditor(); renderStrip(); renderViewers(); renderSimilarity();
    $("draft-conflict-text").textContent = `Loaded the newer draft. This tab's version was ${describe(stashed)}.`;
    $("draft-load-newer").hidden = true;
    $("draft-keep-mine").textContent = "Back to this tab's version";
    saveStatus("Draft loaded", "saved");
  });
  $("draft-keep-mine").addEventListener("click", async () => {
    if (stashed) { applyState(stashed); stashed = null; renderEditor(); renderStrip(); renderViewers(); renderSimilarity(); }
    else if (conflict) draftVersion = conflict.version; // save over the newer draft, knowingly
    if (draftVersion === null) { const now = await api("GET", urls.draft); draftVersion = now.ok ? now.data.version : 0; }
    conflict = null;
    $("draft-conflict").hidden = true;
    dirty = true;
    save();
  });
  function scheduleSave() {
    dirty = true;
    remember();
    saveStatus("Unsaved changes");
    clearTimeout(saveTimer);
    saveTimer = setTimeout(save, SAVE_DELAY_MS);
  }
  // Leaving with unsaved changes: sendBeacon delivers the save after the page is gone. A beacon sets no headers,
  // so it is a form post with the CSRF token in its body (the workbench's draft address, not the JSON API);
  // the version makes it a compare-and-set like every save, and the browser's own copy covers a lost beacon.
  window.addEventListener("pagehide", () => {
    if (!dirty || conflict || leaseGone) return;
    const body = new URLSearchParams({ state: JSON.stringify(state), csrfmiddlewaretoken: csrf });
    if (draftVersion !== null && draftVersion !== undefined) body.set("version", String(draftVersion));
    if (!(navigator.sendBeacon && navigator.sendBeacon(urls.beacon, body))) {
      fetch(urls.draft, {
        method: "PUT", keepalive: true, credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
        body: JSON.stringify({ state, version: draftVersion }),
      });
    }
  });

  /* The guideline of the chosen category beside the editor (htmx loads templates/picking/_guideline_panel.html into
     #guidelines-body when its hidden category field changes). */
  function renderGuideline() {
    const field = $("guideline-category");
    if (!field || field.value === (state.category || "")) return;
    field.value = state.category || "";
    document.body.dispatchEvent(new Event("guideline-category"));
  }
  function changed(rerenderEditor = true) {
    renderGuideline();
    renderStrip();
    renderViewers();
    renderSimilarity();
    if (rerenderEditor) renderEditor();
    else if (template() && template().derived) renderEditor();
    scheduleSave();
    document.dispatchEvent(new CustomEvent("workbench:change"));
  }

  /* --- For the page's other modules (drafting.js): the state, the frames, and filling the editor. --- */
  window.sbWorkbench = {
    state, frameAt, template, frames,
    /* A frame taken from the source video (timeline.js): put in the strip in time order (once), then set as A or B. */
    addFrame(frame) {
      if (!position.has(frame.i)) {
        const cursorIndex = frames[state.cursor] ? frames[state.cursor].i : null;
        let at = frames.findIndex((other) => other.t > frame.t);
        if (at < 0) at = frames.length;
        frames.splice(at, 0, frame);
        position.clear();
        frames.forEach((other, i) => position.set(other.i, i));
        marked = [];
        buildStrip();
        if (cursorIndex !== null) state.cursor = position.get(cursorIndex);
      }
    },
    setSlotTo(slot, index) {
      if (!position.has(index)) return;
      state[slot] = index;
      state.cursor = position.get(index);
      changed(template() && template().derived);
    },
    fill(fields) {
      Object.assign(state, fields);
      if (!Array.isArray(state.distractors) || !state.distractors.length) state.distractors = [""];
      renderEditor();
      changed();
    },
  };

  /* --- Submit: the client key travels with the draft, so a retry (or a reload and retry) makes one pair. --- */
  let submitting = false;
  function showErrors(messages) {
    $("errors").replaceChildren();
    for (const message of messages) {
      const li = document.createElement("li");
      li.textContent = message;
      $("errors").appendChild(li);
    }
    renderRequired();
  }
  async function submit() {
    if (submitting) return;
    const t = template();
    const problems = [];
    if (state.a === null || state.b === null) problems.push("Set frame A and frame B (keys a and b).");
    if (!t) problems.push("Pick a category (Shift+1-9, 0).");
    else if (!state.question.trim()) {
      problems.push(t.example
        ? `Write the question: “${t.question}” is only an example of ${article(state.category).toLowerCase()} ${state.category} question.`
        : "Write the question.");
    }
    if (t && requiresRegion() && !state.regions.length) {
      problems.push(`${article(state.category)} ${state.category} pair needs at least one difference region: draw a box on A or B (m, then drag; or r).`);
    }
    if (problems.length) return showErrors(problems);
    submitting = true;
    $("submit-pair").disabled = true;
    await save();
    const payload = {
      ...config.submit, index_a: state.a, index_b: state.b, category: state.category,
      question: state.question, answer: t.binary ? "" : state.answer,
      distractors: t.binary ? [] : state.distractors, answer_frame: t.binary && !t.derived ? state.answer_frame : "",
      client_key: state.client_key, pair: state.pair, version: state.version, draft_version: draftVersion,
      active_ms: window.activeTime ? window.activeTime.peek() : null,
      regions: state.regions.map(({ frame, x, y, w, h, label }) => (label ? { frame, x, y, w, h, label } : { frame, x, y, w, h })),
      model_draft: state.model_draft || null,
    };
    const result = await api("POST", urls.submit, payload);
    submitting = false;
    $("submit-pair").disabled = false;
    if (result.ok) {
      const pair = result.data;
      if (window.activeTime) window.activeTime.reset();
      draftVersion = pair.draft_version;
      showErrors([]);
      upsertPair({ ...pair, mine: true, editable: true, withdrawable: true, author: "you", rejection: "",
        index_a: state.a, index_b: state.b, regions: state.regions, answer_frame: t.binary ? (t.derived ? derivedAnswerFrame() : state.answer_frame) : "" });
      // A toast of its own: the autosave status that follows must not overwrite it.
      window.sbToast(`Submitted pair ${pair.id} for review.`);
      // An item of one pair (a candidate pair) is done once authored: the work page offers the next one.
      if (config.one_pair && !state.pair) { forget(); window.location.assign(urls.done); return; }
      // Out of the field typed in last, or it would keep showing the sent text over the emptied state.
      if (document.activeElement && document.activeElement.closest("#editor")) document.activeElement.blur();
      const keep = { cursor: state.cursor, category: state.category };
      Object.assign(state, blank(), keep, { question: t.example ? "" : t.question, distractors: t.binary ? [""] : t.distractors.slice() });
      regionsView.set(state.regions);
      renderEditor();
      changed();
    } else if (result.status === 0) {
      showErrors(["The server did not answer. Your draft is kept: press Ctrl+Enter to send it again (it will not be doubled)."]);
    } else {
      const data = result.data || {};
      showErrors(window.sbRefusalMessages(data, result.status));
    }
  }
  $("editor").addEventListener("submit", (event) => { event.preventDefault(); submit(); });

  /* --- Pairs already made on this video. --- */
  function upsertPair(pair) {
    const i = config.pairs.findIndex((p) => p.id === pair.id);
    if (i >= 0) config.pairs[i] = { ...config.pairs[i], ...pair };
    else config.pairs.unshift(pair);
    renderPairs();
  }
  function renderPairs() {
    const list = $("pairs");
    list.replaceChildren();
    if (!config.pairs.length) { list.append(el("li", { class: "muted" }, "none yet")); return; }
    for (const p of config.pairs) {
      const li = document.createElement("li");
      li.append(
        el("span", { class: `badge badge-${p.status}` }, p.status), " ",
        el("span", {}, p.category), " ",
        el("span", { class: "mono muted", title: "frames of image 1 and image 2" }, `${shortName(p.index_1)} → ${shortName(p.index_2)}`), " ",
        el("span", { class: "muted" }, p.mine ? "you" : String(p.author || "")),
      );
      if (p.drafted_by) li.append(" ", el("span", { class: "badge", title: "started from a model's draft" }, "model-drafted"));
      if (p.rejection) {
        const reason = document.createElement("div");
        reason.className = "reason";
        reason.textContent = `Returned: ${p.rejection}`;
        if (p.rejection_guideline) {
          reason.append(" ", el("a", { href: `/guidelines/versions/${p.rejection_guideline}/`, target: "_blank", rel: "noopener" }, "(the guideline it cites)"));
        }
        li.appendChild(reason);
      }
      if (p.editable) {
        const edit = document.createElement("button");
        edit.type = "button";
        edit.className = "link";
        edit.textContent = "edit";
        edit.addEventListener("click", () => editPair(p));
        li.appendChild(document.createTextNode(" "));
        li.appendChild(edit);
      }
      if (p.withdrawable) {
        const withdraw = document.createElement("button");
        withdraw.type = "button";
        withdraw.className = "link";
        withdraw.textContent = "withdraw";
        withdraw.title = "Take it back before it is reviewed: kept as withdrawn, its frames free again";
        withdraw.addEventListener("click", () => withdrawPair(p));
        li.appendChild(document.createTextNode(" "));
        li.appendChild(withdraw);
      }
      list.appendChild(li);
    }
  }
  async function withdrawPair(p) {
    const result = await api("POST", `/api/pairs/${p.id}/withdraw/`);
    if (!result.ok) return showErrors(result.data && (result.data.detail || result.data.errors) ? window.sbRefusalMessages(result.data, result.status) : [`Not withdrawn (${result.status}).`]);
    upsertPair({ id: p.id, status: "withdrawn", editable: false, withdrawable: false });
    if (state.pair === p.id) { Object.assign(state, { pair: null, version: null, client_key: newKey() }); changed(); }
    flash(`Withdrew pair ${p.id}: its frames are free again.`, "ok");
  }
  function editPair(p) {
    const t = config.templates[p.category];
    Object.assign(state, {
      pair: p.id, version: p.version, a: p.index_a, b: p.index_b, category: p.category, question: p.question,
      answer: t.binary ? "" : p.answer, distractors: t.binary ? [""] : p.distractors.slice(),
      answer_frame: p.answer_frame || "", client_key: newKey(), regions: (p.regions || []).map((r) => ({ ...r })),
    });
    regionsView.set(state.regions);
    if (position.has(p.index_a)) state.cursor = position.get(p.index_a);
    renderEditor();
    changed();
  }

  /* --- Lease: heartbeat while the page is open; release when done or skipped. --- */
  // The heartbeat's (or a save's) 409 with errors.lease = ["reassigned"]: a coordinator gave the item away.
  const isLeaseGone = (result) => result.status === 409 && !!(result.data && result.data.errors && result.data.errors.lease);
  let heartbeatTimer = null;
  function showLeaseGone(result) {
    leaseGone = true;
    clearTimeout(saveTimer);
    clearInterval(heartbeatTimer);
    saveStatus("Not saving", "unsaved");
    const el = $("lease-status");
    el.textContent = "lease: gone"; el.className = "error";
    let banner = $("lease-gone");
    if (!banner) {
      banner = document.createElement("div");
      banner.id = "lease-gone"; banner.className = "banner banner-warning"; banner.setAttribute("role", "alert");
      document.querySelector("main").prepend(banner);
    }
    banner.textContent = result.data.detail;
    document.querySelectorAll("#submit, #submit-pair, button[data-action='submit']").forEach((b) => { b.disabled = true; });
  }
  async function heartbeat() {
    if (leaseGone) return;
    const result = await api("POST", urls.heartbeat);
    const el = $("lease-status");
    if (isLeaseGone(result)) showLeaseGone(result);
    else if (result.ok) { el.textContent = "lease: yours"; el.className = "muted"; }
    else if (result.status === 409) { el.textContent = result.data && result.data.detail ? window.sbRefusalMessages(result.data, 409).join(" ") : "lease lost"; el.className = "error"; }
    else if (result.status === 0) { el.textContent = "offline"; el.className = "error"; }
  }
  async function release(reason, note = "") {
    await save();
    const result = await api("POST", urls.release, { reason, note });
    if (result.ok) window.location.assign(urls.done);
    else showErrors(result.data && (result.data.detail || result.data.errors) ? window.sbRefusalMessages(result.data, result.status) : ["Not given back: try again."]);
  }
  // A video is given back as done; a candidate pair is left untouched (no reason: it stays in the queue).
  $("done-video").addEventListener("click", () => release(config.leave_reason));
  const skipDialog = $("skip-dialog");
  // No reason is checked by default and "Skip video" stays disabled until one is: Enter in the dialog (the implicit
  // submission of a form whose default button is disabled) and Esc (cancel) never skip.
  $("skip-reasons").replaceChildren(...config.skip_reasons
    .filter((r) => r.value !== "done")
    .map((r) => el("label", { class: "radio" }, el("input", { type: "radio", name: "reason", value: r.value }), ` ${r.label}`)));
  const skipReason = () => skipDialog.querySelector("input[name=reason]:checked");
  const skipConfirm = $("skip-confirm");
  skipDialog.addEventListener("change", () => { skipConfirm.disabled = !skipReason(); });
  // Chromium's implicit submission can still close a method=dialog form on Enter: without a reason, Enter is eaten.
  skipDialog.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !skipReason()) event.preventDefault();
  });
  skipDialog.querySelector("form").addEventListener("submit", (event) => {
    if (event.submitter && event.submitter.value === "skip" && !skipReason()) event.preventDefault();
  });
  function openSkip() {
    skipDialog.querySelectorAll("input[name=reason]").forEach((radio) => { radio.checked = false; });
    skipConfirm.disabled = true;
    skipDialog.returnValue = "";
    skipDialog.showModal();
  }
  $("skip-video").addEventListener("click", openSkip);
  skipDialog.addEventListener("close", () => {
    const reason = skipReason();
    if (skipDialog.returnValue === "skip" && reason) release(reason.value, $("skip-note").value);
  });
  $("show-keys").addEventListener("click", () => $("keys-dialog").showModal());
  /* Large viewers (l): the editor's side panel moves below them, for zoom and the difference view at full size. */
  function toggleLarge() {
    const large = $("wb-grid").classList.toggle("wb-large");
    $("wb-large").setAttribute("aria-pressed", String(large));
    window.dispatchEvent(new Event("resize"));
  }
  $("wb-large").addEventListener("click", toggleLarge);

  let flashTimer = null;
  function flash(text, cls = "muted") {
    saveStatus(text, cls);
    clearTimeout(flashTimer);
    flashTimer = setTimeout(() => saveStatus(dirty ? "Unsaved changes" : "Draft saved", "saved"), 2500);
  }

  /* --- Keys. --- */
  function moveTo(pos) {
    state.cursor = Math.min(frames.length - 1, Math.max(0, pos));
    changed(false);
    // The timeline (timeline.js) shows the source video at the cursor's time.
    if (frames[state.cursor]) document.dispatchEvent(new CustomEvent("workbench:cursor", { detail: frames[state.cursor] }));
  }
  function setSlot(slot) {
    const frame = frames[state.cursor];
    if (!frame) return;
    state[slot] = frame.i;
    changed(template() && template().derived);
  }
  function setAnswerFrame(frame) {
    const t = template();
    if (!t || !t.binary || t.derived) return flash("Shift+A / Shift+B pick the answer frame of a first/second-image question.");
    state.answer_frame = frame;
    renderEditor();
    changed();
  }
  document.addEventListener("keydown", (event) => {
    if (document.querySelector("dialog[open]")) return;
    const target = event.target;
    const typing = target.matches && target.matches("input, textarea, select");
    if (typing) {
      if (event.key === "Escape") { target.blur(); event.preventDefault(); }
      else if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); submit(); }
      return;
    }
    if ((event.ctrlKey || event.metaKey) && event.key === "Enter") { event.preventDefault(); submit(); return; }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const step = event.shiftKey ? 10 : 1;
    const key = event.key;
    let handled = true;
    // Categories are Shift+digit (read from the key's place, so any layout works): the plain digits are the
    // viewer's (1 for 1:1, 0 to fit).
    const digit = event.shiftKey && /^Digit[0-9]$/.test(event.code) ? event.code.slice(5) : null;
    if (digit !== null && digit in config.keys) setCategory(config.keys[digit]);
    else if (key === "ArrowRight") moveTo(state.cursor + step);
    else if (key === "ArrowLeft") moveTo(state.cursor - step);
    else if (key === "Home") moveTo(0);
    else if (key === "End") moveTo(frames.length - 1);
    else if (key === "a" || key === "b") setSlot(key);
    else if (key === "A" || key === "B") setAnswerFrame(key.toLowerCase());
    else if (key === "s") useSuggestion();
    else if (key === "q") { $("question").focus(); $("question").select(); }
    else if (key === "Enter") { $("question").focus(); } // as on the caption page: Enter goes to the text
    else if (key === "l") toggleLarge();
    else if (key === "x") openSkip(); // deliberate: Esc only ever leaves a field or closes a dialog
    else handled = false;
    if (handled) event.preventDefault();
  });

  /* --- Start. --- */
  if (config.edit) {
    const p = config.pairs.find((x) => String(x.id) === String(config.edit));
    if (p && p.editable && state.pair !== p.id) editPair(p);
  }
  if (config.leased_to) $("lease-status").textContent = `leased to ${config.leased_to}: you can look, not submit`;
  else if (config.held_elsewhere) $("lease-status").textContent = `you hold ${config.held_elsewhere.title}`;
  const local = remembered();
  // This browser's copy is the newest when it is based on the server's draft (or a later one), or when the server's
  // draft is the save this browser had in flight when the page went away.
  const newerHere = !!(local && local.state &&
    (Number(local.base) >= draftVersion || (local.sent && local.sent === canon(config.draft || {}))));
  if (newerHere) applyState(local.state);
  else if (local) forget(); // the server has a draft saved after this browser's copy
  if (!newerHere) {
    if (!Array.isArray(state.regions)) state.regions = [];
    regionsView.set(state.regions);
  }
  renderEditor();
  renderGuideline();
  renderStrip();
  renderViewers();
  renderSimilarity();
  renderPairs();
  loadSuggestions();
  saveStatus(newerHere || (config.draft && Object.keys(config.draft).length) ? "Draft restored" : " ", "saved");
  if (newerHere) scheduleSave();
  // A video someone else holds, or this one while the annotator holds another: no heartbeat, it would take nothing;
  // nor an item out of the queue (an authored candidate pair, open to fix its pair).
  if (!config.leased_to && !config.held_elsewhere && config.heartbeat !== false) { heartbeat(); heartbeatTimer = setInterval(heartbeat, HEARTBEAT_MS); }
})();
