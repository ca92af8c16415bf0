() => {
  // What the message box holds is kept per chat in this browser's localStorage (never sent to the
  // server), so a reload of the tab puts it back: typed and not sent yet, or given back by a send
  // that was refused ("changed elsewhere", an archived chat, a failed write). The fresh-user
  // trial's refused message lived only in the box, and was lost when the box was overwritten.
  // A value the server sets fires no input event, so the box is looked at a few times a second.
  if (window.acDrafts) return [];
  const PREFIX = 'anycode.draft.';
  const MAX_CHARS = 100000;
  const box = () => document.querySelector('#ac-input textarea');
  // the chat shown: the address bar follows it (url_sync.js); "new" for a chat not saved yet
  const chat = () => new URLSearchParams(window.location.search).get('session') || 'new';
  const read = (key) => { try { return localStorage.getItem(PREFIX + key) || ''; } catch (e) { return ''; } };
  const write = (key, text) => {
    try {
      if (text) localStorage.setItem(PREFIX + key, text.slice(0, MAX_CHARS));
      else localStorage.removeItem(PREFIX + key);
    } catch (e) { /* storage full or off: the box still holds the text */ }
  };
  // A sent text is no draft anywhere (a copy kept by an older page, or under "new" and the chat's
  // id at a new chat's first send).
  const forgetSent = (text) => {
    try {
      const kept = text.slice(0, MAX_CHARS);
      Object.keys(localStorage).filter((k) => k.startsWith(PREFIX) && localStorage.getItem(k) === kept)
        .forEach((k) => localStorage.removeItem(k));
    } catch (e) { /* storage off */ }
  };
  // put text into the box as if typed (Gradio reads the input event)
  const fill = (b, text) => {
    b.value = text;
    b.dispatchEvent(new Event('input', { bubbles: true }));
  };
  let last = null;  // {key, text} seen on the previous look
  // {key, text, at}: the box was emptied (a send hands the text over at once). The send may yet be
  // refused and the text put back; a reload in between must not lose it, so the draft is removed
  // only once the chat shows it as its last message, or after a while (cleared by hand, or shown
  // with Markdown that reads differently). CI saw a reload inside the 300 ms between the put-back
  // and the next look lose the refused text; the look on pagehide closes that window.
  let pending = null;
  const GRACE_MS = 10000;
  const shownAsLast = (text) => {
    const users = document.querySelectorAll('#ac-chat [data-testid=user]');
    const u = users[users.length - 1];
    return !!u && u.innerText.trim() === text.trim();
  };
  // Another chat was asked for (New chat, a row, a search hit, a memory's link) and is not shown
  // yet. ChatGPT shows a new chat at once; here the answer is a round trip, seconds on a busy
  // machine, and text typed in it was kept as the draft of the chat being left and taken out of
  // the box when the new chat came, or an Enter sent it into the chat being left (CI: typed right
  // after New chat, the message never reached the new chat). Now what is typed after the click is
  // the draft of the chat asked for, and an Enter meanwhile is held until that chat is shown.
  const ASK_MS = 15000;  // a switch not shown by then is not coming: the text stays where it is
  const ASKERS = '#ac-new, #ac-list [data-sid], #ac-search-results [data-hit], #ac-memory-list .ac-mem-link';
  let asked = null;  // {key, text, at, send}: the chat being left, its box at the click, an Enter held
  const submit = () => {
    const send = document.querySelector('#ac-input button.submit-button');
    if (send) send.click();
  };
  const release = () => {
    const held = asked;
    asked = null;
    if (held && held.send) submit();
  };
  // The last send from the box (Enter or the send button): {key, text, at}. A new chat's first
  // send gives that chat its address a moment later (with the reply's first update), and text
  // typed in between (Stop already shown) was kept as the draft of "new" and taken out of the box
  // when the address came, as if another chat had been opened (stop 44's CI, 1 run in 10).
  const SAVED_MS = 60000;  // the address of a chat saved by a send comes with the send's first update
  let sentFrom = null;
  const noteSend = (b) => { if (!asked && b.value.trim()) sentFrom = { key: chat(), text: b.value, at: Date.now() }; };
  const look = () => {
    const b = box();
    if (!b) return;
    const key = chat();
    const text = b.value;
    if (asked && Date.now() - asked.at > ASK_MS) release();
    if (last !== null && last.key === 'new' && key !== 'new' && !asked && sentFrom && sentFrom.key === 'new'
        && Date.now() - sentFrom.at < SAVED_MS) {
      // the new chat, saved by its first send: the same chat, so the box stays as it is and what
      // was typed since is this chat's draft
      const sent = sentFrom.text;
      sentFrom = null;
      write('new', '');
      forgetSent(sent);
      if (text.trim() && text !== sent) write(key, text);
      last = { key, text };
      return;
    }
    if (last !== null && key !== last.key && asked && asked.key === last.key) {
      const held = asked;
      asked = null;
      if (text !== held.text || held.send) {
        // typed (or sent) after the click: the chat asked for's; the one left keeps its box as it was
        write(last.key, held.text);
        write(key, text);
        last = { key, text };
        if (held.send) submit();
        return;
      }
    }
    if (asked && last !== null && key === last.key) return;  // typed now: for the chat on its way
    if (last === null) {
      // first look: put the chat's draft back into an empty box (Gradio reads the input event)
      const kept = read(key);
      if (!text && kept && shownAsLast(kept)) {
        forgetSent(kept);  // sent already (the chat ends with it): never put back into the box
      } else if (!text && kept) {
        fill(b, kept);
      }
      last = { key, text: b.value };
      return;
    }
    if (key !== last.key) {
      // Another chat is shown: each chat keeps its own draft, as ChatGPT's do. The box is not
      // emptied by a switch, so what it holds was typed in the chat before; it stays that chat's
      // and the box takes the one shown now's. Text that followed the user from chat to chat was
      // kept under each, and came back there after its send, or after it was deleted by hand in
      // one of them (fresh-user trials 16 and 17).
      if (text.trim() && shownAsLast(text)) forgetSent(text);  // a new chat's first send, seen late
      else if (text.trim()) write(last.key, text);
      else if (last.text) pending = { key: last.key, text: last.text, at: Date.now() };  // sent, or cleared
      const kept = read(key);
      const next = kept && !shownAsLast(kept) ? kept : '';
      if (b.value !== next) fill(b, next);
      last = { key, text: next };
      return;
    }
    if (text.trim()) {
      if (text !== last.text) write(key, text);
      pending = null;
    } else if (last.text) {
      // sent, or cleared by hand. The chat may have changed meanwhile: a new chat's first send
      // empties the box and gives the chat its id (the address) within one look, and the draft
      // kept under "new" then came back into the box of every new chat (round 16).
      pending = { key: last.key, text: last.text, at: Date.now() };
    }
    if (pending && shownAsLast(pending.text)) {
      forgetSent(pending.text);
      pending = null;
    } else if (pending && Date.now() - pending.at > GRACE_MS) {
      write(pending.key, '');  // cleared by hand (or shown with Markdown that reads differently)
      pending = null;
    }
    last = { key, text };
  };
  // Emptied by hand (deleted, cut): no draft from now on. The grace above is for a send, whose
  // text Gradio takes out of the box without an input event; a reload within it brought a
  // deleted draft back (fresh-user trial 17).
  document.addEventListener('input', (e) => {
    const b = box();
    if (!e.isTrusted || !b || e.target !== b || b.value.trim() || asked) return;
    write(chat(), '');
    pending = null;
    last = { key: chat(), text: '' };
  }, true);
  // Window listeners in the capture phase run before the page's others (shortcuts.js would take
  // the held Enter, sent again on its release, for a doubled send).
  window.addEventListener('click', (e) => {
    const b = box();
    const send = e.target.closest && e.target.closest('#ac-input button.submit-button');
    if (send && asked) {
      e.preventDefault();
      e.stopImmediatePropagation();
      asked.send = true;
      return;
    }
    if (send && b) noteSend(b);
    const asker = e.target.closest && e.target.closest(ASKERS);
    if (!asker || !b) return;
    const key = chat();
    // New chat leaves the typing in the box, as ChatGPT's does (the focus stayed on the button, and
    // text typed at once went nowhere: fresh-user trial 18)
    if (asker.matches('#ac-new')) setTimeout(() => b.focus(), 0);
    if (asker.matches('#ac-new') ? key === 'new' : asker.dataset.sid === key) return;  // shown already
    look();  // the box as it is now is the draft of the chat being left
    asked = { key, text: b.value, at: Date.now(), send: false };
  }, true);
  window.addEventListener('keydown', (e) => {
    const b = box();
    if (!b || e.target !== b || e.key !== 'Enter' || e.shiftKey || e.isComposing) return;
    if (!asked) { noteSend(b); return; }
    e.preventDefault();
    e.stopImmediatePropagation();
    asked.send = true;
  }, true);
  // The answer to a row, a hit or a memory's link is drawn (ac-picked, ac-hit-picked,
  // ac-memory-done: webui.gui.assets.signal_answered):
  // a chat already open (named by another version's id) shows no other address, so what was typed
  // and held is this chat's after all.
  const settle = () => setTimeout(() => { if (asked && chat() === asked.key) release(); }, 300);
  window.addEventListener('ac-picked', settle);
  window.addEventListener('ac-hit-picked', settle);
  window.addEventListener('ac-memory-done', settle);
  window.acDrafts = setInterval(look, 300);
  // The address names another chat (url_sync.js): look now. A look up to 300 ms later took text
  // typed into the chat just shown for the one before's, and emptied the box.
  window.addEventListener('ac-chat-shown', look);
  // a reload or a closed tab: what the box holds right now is kept (the interval may not have run)
  window.addEventListener('pagehide', () => { asked = null; look(); });
  return [];
}
