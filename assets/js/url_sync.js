(sid) => {
  const url = new URL(window.location.href);
  if (sid) { url.searchParams.set('session', sid); } else { url.searchParams.delete('session'); }
  if (url.toString() !== window.location.href) {
    window.history.replaceState(null, '', url.toString());
    // the chat shown changed: its draft is put in the box at once (drafts.js), before more typing
    window.dispatchEvent(new Event('ac-chat-shown'));
  }
  return sid;
}
