// The collections page's upload: a zip or a folder (its files with their relative paths), sent with a progress bar;
// checked here against the size and file-count limits first, then by the server, whose refusal shows beside the form.
(() => {
  const form = document.getElementById("collection-upload");
  if (!form || !document.getElementById("upload-progress")) return;
  const zip = document.getElementById("upload-zip");
  const folder = document.getElementById("upload-folder");
  const bar = document.getElementById("upload-bar");
  const said = document.getElementById("upload-said");
  const error = document.getElementById("upload-error");
  const button = document.getElementById("upload-button");
  const maxBytes = Number(form.dataset.maxBytes);
  const maxFiles = Number(form.dataset.maxFiles);
  const mb = (n) => (n / 1024 / 1024).toFixed(1) + " MB";
  const show = (message) => { error.textContent = message; error.hidden = !message; };
  // One source at a time: choosing a zip clears the folder and the other way round.
  zip.addEventListener("change", () => { if (zip.files.length) folder.value = ""; show(""); });
  folder.addEventListener("change", () => { if (folder.files.length) zip.value = ""; show(""); });

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const files = zip.files.length ? [...zip.files] : [...folder.files];
    if (!files.length) return show("Choose a zip file or a folder of images.");
    const total = files.reduce((sum, f) => sum + f.size, 0);
    if (total > maxBytes) return show(`The upload is ${mb(total)}, over the limit of ${mb(maxBytes)}.`);
    if (files.length > maxFiles) return show(`The folder holds ${files.length} files, more than ${maxFiles}.`);
    const data = new FormData();
    for (const name of ["csrfmiddlewaretoken", "idempotency_key", "name", "domain", "layout"]) data.append(name, form.elements[name].value);
    for (const file of files) {
      data.append("files", file, file.name);
      if (!zip.files.length) data.append("paths", file.webkitRelativePath || file.name);
    }
    const request = new XMLHttpRequest();
    request.open("POST", form.action);
    request.setRequestHeader("Accept", "application/json");
    document.getElementById("upload-progress").hidden = false;
    button.disabled = true;
    show("");
    request.upload.addEventListener("progress", (e) => {
      if (!e.lengthComputable) return;
      const percent = Math.round((100 * e.loaded) / e.total);
      bar.style.width = percent + "%";
      said.textContent = `${percent} % of ${mb(e.total)}${percent === 100 ? ": unpacking and checking…" : ""}`;
    });
    request.addEventListener("load", () => {
      let body = {};
      try { body = JSON.parse(request.responseText); } catch (_) { /* a page, not JSON */ }
      if (request.status === 200 && body.url) { window.location.assign(body.url); return; }
      button.disabled = false;
      show(body.detail ? window.sbRefusalMessages(body, request.status).join(" ") : `Not uploaded (HTTP ${request.status}).`);
    });
    request.addEventListener("error", () => { button.disabled = false; show("The upload did not reach the server: check the connection and try again."); });
    request.send(data);
  });
})();
