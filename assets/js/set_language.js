(code) => {
  document.cookie = "__LANG_COOKIE__=" + encodeURIComponent(code || "auto") + "; path=/; max-age=31536000; SameSite=Strict";
  window.location.reload();
  return code;
}
