// Data manager tables: the header checkbox ticks every row of the page; ticking a row picks "ticked rows".
// Delegated from the document, so it keeps working after htmx swaps the table.
document.addEventListener("change", function (event) {
  var target = event.target;
  var form = target.closest("#dm-table");
  if (!form) return;
  if (target.classList.contains("dm-all")) {
    form.querySelectorAll("input[name=ids]").forEach(function (box) { box.checked = target.checked; });
  }
  if (target.name === "ids" || target.classList.contains("dm-all")) {
    var ticked = form.querySelector("input[name=scope][value=selected]");
    if (ticked) ticked.checked = true;
  }
});

// The filter form's empty fields stay out of the request, and so out of the address it pushes: the address names
// the filters in use, the sort and the search, nothing else.
document.addEventListener("htmx:configRequest", function (event) {
  if (!event.detail.elt || event.detail.elt.id !== "dm-filters") return;
  var parameters = event.detail.parameters;
  Object.keys(parameters).forEach(function (name) {
    if (parameters[name] === "") delete parameters[name];
  });
});
