() => {
  // Issue 25: the page asks at most once a second, only while it is visible, whether the list
  // changed or another tab or process is writing a reply in the open chat (webui/chat/live.py).
  if (window.acLiveCheck) return;
  let waiting = false;
  window.acLiveCheck = setInterval(() => {
    if (document.visibilityState !== 'visible' || waiting) return;
    const button = document.querySelector('#ac-live-check');
    if (!button) return;
    waiting = true;  // one check in flight at a time, however slow the server is
    button.click();
    setTimeout(() => { waiting = false; }, __SECONDS_MS__ - 50);
  }, __SECONDS_MS__);
}
