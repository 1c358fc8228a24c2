/* The edit jobs' start page (templates/editing/start.html): choosing a collection shows its images (a GET of the
   page), and "all" / "none" tick or clear every image. Without scripts the Show button does the first. */
(() => {
  "use strict";
  const chooser = document.getElementById("edit-collection");
  if (chooser) chooser.addEventListener("change", () => chooser.form.submit());
  const boxes = () => document.querySelectorAll("#edit-images input[type=checkbox]");
  for (const [id, state] of [["edit-all", true], ["edit-none", false]]) {
    const button = document.getElementById(id);
    if (button) button.addEventListener("click", () => boxes().forEach((box) => { box.checked = state; }));
  }
})();
