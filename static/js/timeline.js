/* The timeline of the whole source video on the pair workbench (templates/picking/_timeline.html): plays and scrubs the
   original file (an HTML5 <video>: served by range requests, or a signed S3 URL), frame by frame with , and . ; the
   sampled frames are marks on the track. "Take as A/B" posts the time: the server decodes that frame at its exact
   presentation time (annotator/videos/frame_at.py), stores it as a picked frame of the video and queues its
   embedding; workbench.js puts it in the strip and sets it as A or B, and shows the similarity once it exists.
   A codec the browser cannot play falls back to frames rendered on the server at the chosen time. */
(() => {
  "use strict";
  const config = JSON.parse(document.getElementById("workbench-config").textContent);
  const timeline = config.timeline;
  const root = document.getElementById("timeline");
  if (!timeline || !root) return;
  root.hidden = false;
  const csrf = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"];
  const $ = (id) => document.getElementById(id);
  const video = $("tl-video");
  const still = $("tl-still");
  const range = $("tl-range");
  const track = $("tl-track");
  const head = $("tl-head");
  const fps = timeline.fps;
  const duration = timeline.duration;
  const lastFrame = Math.max(0, Math.floor(duration * fps - 1e-6));
  let current = 0; // seconds: what the player shows (or the server-rendered frame, in the fallback)
  let fallback = false;
  let stillTimer = null;

  range.max = String(duration);
  range.step = "any";
  $("tl-end").textContent = `${duration.toFixed(2)} s`;
  const percent = (t) => `${Math.min(100, Math.max(0, (t / duration) * 100))}%`;
  const status = (text, cls = "muted") => { $("tl-status").textContent = text; $("tl-status").className = cls; };

  /* --- Marks: every frame of the strip (sampled, and picked ones in another colour), and where A and B are. --- */
  function renderMarks() {
    const marks = $("tl-marks");
    marks.replaceChildren();
    const workbench = window.sbWorkbench;
    for (const frame of workbench.frames) {
      const mark = document.createElement("span");
      mark.className = frame.picked ? "tl-mark picked" : "tl-mark";
      mark.style.left = percent(frame.t);
      mark.title = frame.picked ? `picked · ${frame.t.toFixed(3)} s` : `#${frame.i} · ${frame.t.toFixed(3)} s`;
      marks.appendChild(mark);
    }
    for (const slot of ["a", "b"]) {
      const frame = workbench.frameAt(workbench.state[slot]);
      const flag = $(`tl-flag-${slot}`);
      flag.hidden = !frame;
      if (frame) flag.style.left = percent(frame.t);
    }
  }

  function show(t) {
    current = Math.min(duration, Math.max(0, t));
    range.value = String(current);
    head.style.left = percent(current);
    $("tl-time").textContent = `${current.toFixed(3)} s · frame ${Math.round(current * fps)}`;
  }

  /* --- Seeking: the <video> itself, or the server's frame at that time in the fallback. --- */
  function seek(t) {
    show(t);
    if (!fallback) {
      video.currentTime = current;
      return;
    }
    clearTimeout(stillTimer);
    stillTimer = setTimeout(() => {
      still.src = `${timeline.frame_at}?t=${current.toFixed(6)}`;
    }, 120); // while dragging, only where the thumb rests
  }
  const step = (frames) => {
    pause();
    const frame = Math.min(lastFrame, Math.max(0, Math.round(current * fps) + frames));
    seek(frame / fps);
  };

  function useFallback(reason) {
    if (fallback) return;
    fallback = true;
    video.hidden = true;
    still.hidden = false;
    $("tl-play").disabled = true;
    status(`${reason}: frames are rendered on the server at the chosen time.`);
    root.classList.add("tl-fallback");
    seek(current);
  }

  function play() {
    if (fallback) return;
    if (video.paused) video.play().catch(() => {}); else video.pause();
  }
  function pause() { if (!fallback && !video.paused) video.pause(); }

  /* --- Take the frame on screen as A or B. --- */
  let taking = false;
  async function take(slot) {
    if (taking) return;
    pause();
    taking = true;
    const t = fallback ? current : video.currentTime;
    status(`decoding the frame at ${t.toFixed(3)} s…`);
    try {
      const body = new URLSearchParams({ t: t.toFixed(6) });
      const response = await fetch(timeline.pick, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRFToken": csrf, Accept: "application/json" },
        body,
      });
      let data = null;
      try { data = await response.json(); } catch (_) { data = null; }
      if (!response.ok || !data) {
        status((data && data.detail) || `The frame could not be taken (HTTP ${response.status}).`, "reason");
        return;
      }
      window.sbWorkbench.addFrame(data);
      window.sbWorkbench.setSlotTo(slot, data.i);
      status(`${slot.toUpperCase()} = the frame at ${data.t.toFixed(3)} s (pts ${data.pts})${data.created ? "" : ", taken before"}.`);
    } catch (_) {
      status("The frame could not be taken: the server did not answer.", "reason");
    } finally {
      taking = false;
    }
  }

  /* --- Wiring. --- */
  if (video.canPlayType && !video.canPlayType(timeline.type || "video/mp4")) useFallback("This browser cannot play the file");
  video.addEventListener("error", () => useFallback("This browser cannot play the file's codec"));
  video.addEventListener("loadedmetadata", () => { if (!video.videoWidth) useFallback("This browser shows no picture of the file"); });
  video.addEventListener("timeupdate", () => { if (!fallback) show(video.currentTime); });
  video.addEventListener("seeked", () => { if (!fallback) show(video.currentTime); });
  video.addEventListener("play", () => { $("tl-play").textContent = "Pause"; });
  video.addEventListener("pause", () => { $("tl-play").textContent = "Play"; });
  if (!fallback) video.src = timeline.source;
  range.addEventListener("input", () => { pause(); seek(Number(range.value)); });
  range.addEventListener("change", () => range.blur()); // the page's keys (a, b, arrows) work again at once
  track.addEventListener("click", (event) => {
    if (event.target === range) return;
    const box = track.getBoundingClientRect();
    pause();
    seek(((event.clientX - box.left) / box.width) * duration);
  });
  $("tl-play").addEventListener("click", play);
  $("tl-prev").addEventListener("click", () => step(-1));
  $("tl-next").addEventListener("click", () => step(1));
  $("tl-take-a").addEventListener("click", () => take("a"));
  $("tl-take-b").addEventListener("click", () => take("b"));
  document.addEventListener("workbench:change", renderMarks);
  document.addEventListener("workbench:cursor", (event) => { if (fallback || video.paused) seek(event.detail.t); });
  document.addEventListener("keydown", (event) => {
    if (document.querySelector("dialog[open]")) return;
    const target = event.target;
    if (target.matches && target.matches("input:not([type=range]), textarea, select")) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const key = event.key;
    let handled = true;
    if (key === ",") step(-1);
    else if (key === ".") step(1);
    else if (key === "<") step(-Math.round(fps));
    else if (key === ">") step(Math.round(fps));
    else if (key === "p") play();
    else if (key === "[") take("a");
    else if (key === "]") take("b");
    else handled = false;
    if (handled) event.preventDefault();
  });
  const cursor = window.sbWorkbench.frames[window.sbWorkbench.state.cursor];
  seek(cursor ? cursor.t : 0);
  renderMarks();
})();
