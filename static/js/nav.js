// The top bar's menus (templates/base.html): <details> elements, so a click, a tap, Enter or Space opens one with no
// script at all. This adds what a menu bar is expected to do: one menu open at a time, Escape or a click elsewhere
// closes it, and the arrow keys move between its links.
(function () {
  "use strict";
  function menus() { return Array.prototype.slice.call(document.querySelectorAll("#nav details")); }
  function closeAll(except) {
    menus().forEach(function (menu) { if (menu !== except) menu.open = false; });
  }
  document.addEventListener("toggle", function (event) {
    var menu = event.target;
    if (menu.matches && menu.matches("#nav details") && menu.open) closeAll(menu);
  }, true);
  document.addEventListener("click", function (event) {
    if (!event.target.closest || !event.target.closest("#nav")) closeAll(null);
  });
  var nav = document.getElementById("nav");
  if (!nav) return;
  nav.addEventListener("keydown", function (event) {
    var menu = event.target.closest && event.target.closest("#nav details");
    if (!menu) return;
    var links = Array.prototype.slice.call(menu.querySelectorAll(".menu-links a"));
    var at = links.indexOf(event.target);
    if (event.key === "Escape") {
      menu.open = false;
      menu.querySelector("summary").focus();
      event.preventDefault();
    } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      if (!menu.open) menu.open = true;
      var next = event.key === "ArrowDown" ? at + 1 : (at < 0 ? links.length - 1 : at - 1);
      if (links.length) links[(next + links.length) % links.length].focus();
      event.preventDefault();
    } else if ((event.key === "ArrowRight" || event.key === "ArrowLeft") && event.target.tagName === "SUMMARY") {
      var all = menus();
      var to = all[(all.indexOf(menu) + (event.key === "ArrowRight" ? 1 : all.length - 1)) % all.length];
      var wasOpen = menu.open;
      to.querySelector("summary").focus();
      if (wasOpen) { menu.open = false; to.open = true; }
      event.preventDefault();
    }
    event.stopPropagation();  // the page's own shortcuts (on the document) never see keys meant for the menu
  });
})();
