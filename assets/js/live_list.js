(packed, query, archived, current, token) => {
  // The live check's sidebar list (webui/gui/live.py), drawn on the server for the search text
  // and "Show archived" the page sent with the check. It is shown only if they are still what
  // the page shows now: an Unarchive, a search or the archive switch answered while the check
  // was on its way drew the list for the page as it is, and an older list must not come back
  // over it (CI, stop 45). Dropped, the next check draws the list again ("redraw" is never a
  // list token, so that check finds the list changed).
  let drawn = null;
  try { drawn = JSON.parse(packed || 'null'); } catch (e) { drawn = null; }
  if (!drawn || typeof drawn.html !== 'string') return [current, token];
  const same = drawn.query === (query || '') && drawn.archived === Boolean(archived);
  return same ? [drawn.html, token] : [current, 'redraw'];
}
