/* The guidelines list (templates/picking/guidelines.html): "Open" goes to the editor of the chosen category and domain. */
(() => {
  "use strict";
  const form = document.getElementById("guideline-start");
  if (!form) return;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const category = encodeURIComponent(form.elements.category.value);
    const domain = encodeURIComponent(form.elements.domain.value);
    window.location.assign(`/guidelines/${category}/${domain}/`);
  });
})();
