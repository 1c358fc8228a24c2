/* No page is shown from the browser's memory (issue 26). The server sends every page with `Cache-Control: no-store`
   (subtlebench.middleware.NoStoreMiddleware), so Back asks it again; a page the browser still restores from its
   back/forward cache (it may, for a page without open connections) holds the state of when it was left, perhaps
   older than what was saved since (a draft, a queue, a table): it is loaded again from the server. */
window.addEventListener("pageshow", (event) => {
  if (event.persisted) window.location.reload();
});
