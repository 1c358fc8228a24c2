/* Active time on the pair workbench: milliseconds the tab was visible with a key, pointer or wheel input in the
   last minute. The workbench sends it with each submit (Pair.active_ms, team analytics) and starts again. */
(function () {
  "use strict";
  const IDLE_MS = 60000;
  const TICK_MS = 1000;
  let total = 0;
  let lastInput = Date.now();
  let lastTick = Date.now();
  const input = () => { lastInput = Date.now(); };
  for (const name of ["keydown", "pointerdown", "pointermove", "wheel"]) {
    window.addEventListener(name, input, { passive: true, capture: true });
  }
  setInterval(() => {
    const now = Date.now();
    const step = Math.min(now - lastTick, TICK_MS * 5);
    lastTick = now;
    if (document.visibilityState === "visible" && now - lastInput <= IDLE_MS) total += step;
  }, TICK_MS);
  window.activeTime = {
    peek: () => Math.round(total),
    reset: () => { total = 0; },
  };
})();
