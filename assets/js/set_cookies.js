  try {
    var tz = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    var langs = (navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language]).join(",");
    var opts = "; path=/; max-age=31536000; SameSite=Strict";
    document.cookie = "__TZ__=" + encodeURIComponent(tz) + opts;
    document.cookie = "__NAV__=" + encodeURIComponent(langs) + opts;
  } catch (e) { /* an old browser: the server falls back to Accept-Language and its own zone */ }
