(sid) => {
  const url = new URL(window.location.href);
  if (sid) { url.searchParams.set('session', sid); } else { url.searchParams.delete('session'); }
  if (url.toString() !== window.location.href) { window.history.replaceState(null, '', url.toString()); }
  return sid;
}
