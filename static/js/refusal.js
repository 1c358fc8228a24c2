/* A refused request's messages as a page shows them: the API's body names fields ("text: ..."), a person reads the
   message alone, or the field in words when the message continues its name (as subtlebench/errors.py page_message). */
(function () {
  const WORDS = { text: "Caption", yt8m_id: "YouTube-8M id", base_url: "Base URL", api_key: "API key" };
  const inWords = (field) => WORDS[field] || (field.charAt(0).toUpperCase() + field.slice(1)).replace(/_/g, " ");
  window.sbRefusalMessages = function (data, status) {
    const messages = [];
    if (data && data.errors) {
      for (const [field, list] of Object.entries(data.errors)) {
        for (const m of [].concat(list)) messages.push(field === "detail" || field === "__all__" || /^[A-Z]/.test(m) ? m : `${inWords(field)}: ${m}`);
      }
    }
    return messages.length ? messages : [(data && data.detail) || `Refused (${status}).`];
  };
})();
