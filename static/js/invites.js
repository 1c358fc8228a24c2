/* The invites page: each [data-copy] button copies its text (a link, or every usable link, one a line) and says so. */
(function () {
  const state = document.getElementById("copy-state");
  async function copy(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    // Plain http on another host: no clipboard API; the old way through a selected text box.
    const box = document.createElement("textarea");
    box.value = text;
    document.body.appendChild(box);
    box.select();
    const done = document.execCommand("copy");
    box.remove();
    if (!done) throw new Error("the browser refused");
  }
  document.addEventListener("click", async (event) => {
    const button = event.target.closest("[data-copy]");
    if (!button) return;
    const text = button.dataset.copy;
    const lines = text.split("\n").length;
    try {
      await copy(text);
      state.textContent = lines > 1 ? `Copied ${lines} links.` : `Copied ${text}`;
      state.className = "muted small copied";
    } catch (error) {
      state.textContent = `Not copied (${error.message}): select the link and copy it by hand.`;
      state.className = "error small";
    }
  });
})();
