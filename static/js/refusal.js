/* A refused request's messages as a page shows them: the API's body names fields ("text: ..."), a person reads the
   field in words before the message, or the message alone when it names the field itself (as subtlebench/errors.py
   page_message). */
(function () {
  const WORDS = { text: "Caption", yt8m_id: "YouTube-8M id", base_url: "Base URL", api_key: "API key" };
  const inWords = (field) => (field === field.toUpperCase() ? field
    : WORDS[field] || (field.charAt(0).toUpperCase() + field.slice(1)).replace(/_/g, " "));
  window.sbRefusalMessages = function (data, status) {
    const messages = [];
    if (data && data.errors) {
      for (const [field, list] of Object.entries(data.errors)) {
        for (const m of [].concat(list)) {
          const named = field === "detail" || field === "__all__" || m.toLowerCase().includes(inWords(field).toLowerCase());
          messages.push(named ? m : `${inWords(field)}: ${m}`);
        }
      }
    }
    return messages.length ? messages : [(data && data.detail) || `Refused (${status}).`];
  };
})();
