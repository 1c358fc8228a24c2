/* The new-run form shows the fields of the source chosen under "Items from", and only those (issue 26): with all
   of them on screen, a study or an export picked under another source was ignored, and the error named the field
   left empty. The server reads only the chosen source's fields. */
(() => {
  "use strict";
  const form = document.getElementById("run-form");
  if (!form) return;
  function show() {
    const chosen = form.querySelector("input[name=source]:checked");
    const source = chosen ? chosen.value : "";
    form.querySelectorAll("[data-source]").forEach((part) => {
      const on = part.dataset.source.split(" ").includes(source);
      part.hidden = !on;
    });
  }
  form.addEventListener("change", (event) => { if (event.target.name === "source") show(); });
  show();
})();
