() => {
  const mac = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);
  const dialog = () => document.getElementById('ac-shortcuts');
  const showHelp = () => {
    const d = dialog();
    if (!d) return;
    if (mac) d.querySelectorAll('[data-ac-mod]').forEach((k) => { k.textContent = '⌘'; });
    if (!d.open) d.showModal();
  };
  const editable = (el) => !!el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  const box = () => document.querySelector('#ac-input textarea');
  const click = (sel) => { const b = document.querySelector(sel); if (b) b.click(); return !!b; };
  // The edit box (issue 31, item 8): Gradio sizes it from a width it measures as 0 here (a
  // 160 x 64 px box); the message's own size, read before the editor replaces it, is kept on
  // the row for the CSS (assets/style.css, --ac-edit-w / --ac-edit-h).
  const measure = (row) => {
    const bubble = row && row.querySelector('.message.user, [data-testid=user]');
    if (!bubble) return;
    const r = bubble.getBoundingClientRect();
    const wrap = row.closest('.message-wrap') || row.parentElement;
    const room = wrap.getBoundingClientRect().width - 16;  // within the chat
    if (!(r.width > 0)) return;
    const target = Math.min(room, Math.max(r.width, 260));
    const cs = getComputedStyle(bubble);  // the box sits inside the bubble's padding
    const pad = (parseFloat(cs.paddingLeft) + parseFloat(cs.paddingRight)) || 0;
    row.style.setProperty('--ac-edit-w', Math.round(target - pad) + 'px');
    row.style.setProperty('--ac-edit-h', Math.round(r.height) + 'px');
  };
  const rowOfButtons = (buttons) => {
    let r = buttons && buttons.previousElementSibling;
    while (r && !r.classList.contains('message-row')) r = r.previousElementSibling;
    return r && r.classList.contains('user-row') ? r : null;
  };
  // The row of buttons Gradio puts after a message's row (null when there is none yet).
  const buttonsOf = (row) => {
    let n = row && row.nextElementSibling;
    while (n && !n.classList.contains('message-buttons')) n = n.nextElementSibling;
    return n;
  };
  // A button of an open edit: Gradio shows Submit then Cancel in its row while it is edited
  // (names translated with the page: else told by place), or null while that row still shows
  // its old buttons.
  const editButton = (t, name, place) => {
    const n = buttonsOf(t.closest('.message-row'));
    if (!n) return null;
    const own = [...n.querySelectorAll('button.icon-button')];
    return n.querySelector(`button[aria-label="${name}"]`) || (own.length === 2 ? own[place] : null);
  };
  const cancelOf = (t) => editButton(t, 'Cancel', 1);
  const submitOf = (t) => editButton(t, 'Submit', 0);
  const cancelEdits = () => {
    let any = false;
    document.querySelectorAll('#ac-chat textarea.edit-textarea').forEach((t) => {
      const cancel = cancelOf(t);
      if (cancel && !cancel.disabled) { cancel.click(); any = true; }
    });
    return any;
  };
  // A message sent while an edit is open leaves the edit. Gradio disables the edit's Cancel
  // while the chat is being written to (the send just fired, or a reply still streams), and
  // on a busy machine the Cancel button can come a moment after the text box: look again
  // until the edit is gone, for as long as a reply may take (stop 34: a one-second retry
  // left the edit open under CI's load).
  const LEAVE_EDIT_MS = 60000;
  const ESC_EDIT_MS = 10000;  // an Esc is about the edit on screen now: not one opened much later
  let leaving = null;
  const leaveEdits = (ms = LEAVE_EDIT_MS) => {
    const until = Date.now() + ms;
    if (leaving) { leaving.until = Math.max(leaving.until, until); return; }
    leaving = { until };
    const step = () => {
      cancelEdits();
      if (document.querySelector('#ac-chat textarea.edit-textarea') && Date.now() < leaving.until) {
        setTimeout(step, 100);
      } else {
        leaving = null;
      }
    };
    step();
  };
  // A double Enter or double click sends once (stop 34): the second one fires before the
  // server has answered the first, so it carries the same text. It is told by the page's own
  // clock, which a loaded server cannot delay: the same text, not typed again, within DOUBLE_MS
  // of the first, while nothing has answered that send — no new user message in the chat, no
  // new toast, the box not emptied meanwhile. Once something answered (the text put back after
  // "changed elsewhere", an archived chat, a failed write), the same text sent again is on
  // purpose (stop 35). Only answers to the send count: the previous reply's late updates (its
  // last row redrawn, a title) can land between the two presses of a double Enter (trial 9).
  // (The server ignores a repeat of a run still running too, webui.chat.send.take.)
  const DOUBLE_MS = 2000;
  const userRows = () => {
    const rows = document.querySelectorAll('#ac-chat [data-testid=user]');
    return `${rows.length}|${rows.length ? rows[rows.length - 1].textContent : ''}`;
  };
  let sent = null;  // {text, at, users, toasts, answered} of the last hand-over, until typed in
  const repeatSend = () => {
    const b = box();
    const text = b ? b.value : '';
    if (!text.trim()) return false;
    const toasts = [...document.querySelectorAll('.toast-body')];
    if (sent && sent.text === text && Date.now() - sent.at < DOUBLE_MS && !sent.answered
        && sent.users === userRows() && toasts.every((x) => sent.toasts.has(x))) return true;
    const mine = { text, at: Date.now(), users: userRows(), toasts: new Set(toasts), answered: false };
    sent = mine;
    // The box emptied by the server's answer (and maybe filled again by a refusal): watched,
    // as a value set by the page's code fires no input event.
    const watch = () => {
      if (sent !== mine) return;
      const now = box();
      if (!now || now.value !== text) { mine.answered = true; return; }
      if (Date.now() - mine.at < DOUBLE_MS) setTimeout(watch, 25);
    };
    setTimeout(watch, 25);
    return false;
  };
  const swallow = (e) => { e.preventDefault(); e.stopImmediatePropagation(); };
  document.addEventListener('input', (e) => { if (e.target === box()) sent = null; }, true);
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('#ac-input button.submit-button') && repeatSend()) {
      swallow(e);
      return;
    }
    const b = e.target.closest && e.target.closest('#ac-chat .message-buttons button');
    if (b) { measure(rowOfButtons(b.closest('.message-buttons'))); return; }
    // Sending from the box while an edit is open: the edit is left (it kept the chat from updating).
    if (e.target.closest && e.target.closest('#ac-input button')) leaveEdits();
  }, true);
  const editLast = () => {
    const rows = document.querySelectorAll('#ac-chat .message-row.user-row');
    if (!rows.length) return false;
    const n = buttonsOf(rows[rows.length - 1]);
    if (!n) return false;
    // Gradio names the button "Edit" (translated when the page is): else it is the last icon
    // button outside the feedback menu (Copy, Edit, then the menu).
    const own = [...n.querySelectorAll('button.icon-button')].filter((b) => !b.closest('.extra-feedback'));
    const edit = n.querySelector('button[aria-label="Edit"]') || (own.length >= 2 ? own[own.length - 1] : null);
    if (!edit || edit.disabled) return false;
    edit.click();
    const started = Date.now();
    const focus = () => {  // the editor replaces the bubble on the next render
      const t = document.querySelector('#ac-chat .message-row.user-row textarea');
      if (t) { t.focus(); t.setSelectionRange(t.value.length, t.value.length); return; }
      if (Date.now() - started < 8000) setTimeout(focus, 30);
    };
    focus();
    return true;
  };
  // ArrowUp pressed while a reply is still being written (Stop is shown until the turn is saved,
  // a moment after its last words are on screen) or while Gradio keeps Edit disabled (the chat
  // being written to) was ignored: stop 44's CI pressed it as the reply showed, and the edit never
  // opened. The edit opens once the reply has ended and Edit can be used, within EDIT_WAIT_MS,
  // unless the user did something else first: another key, a click, text in the box, or the
  // focus moved out of it.
  const EDIT_WAIT_MS = 10000;
  let wantEdit = null;
  const streaming = () => !!document.querySelector('#ac-input button.stop-button');
  const editWhenReady = () => {
    const mine = { until: Date.now() + EDIT_WAIT_MS };
    wantEdit = mine;
    const step = () => {
      if (wantEdit !== mine) return;
      const b = box();
      if (!b || b.value || document.activeElement !== b) { wantEdit = null; return; }
      if (!streaming() && editLast()) { wantEdit = null; return; }
      if (Date.now() < mine.until) setTimeout(step, 50); else wantEdit = null;
    };
    step();
  };
  document.addEventListener('pointerdown', () => { wantEdit = null; }, true);
  document.addEventListener('keydown', (e) => {
    if (e.isComposing || e.defaultPrevented) return;
    wantEdit = null;
    const mod = mac ? e.metaKey : e.ctrlKey;
    const key = (e.key || '').toLowerCase();
    const helpOpen = dialog() && dialog().open;
    if (mod && e.shiftKey && !e.altKey && (key === 'o' || e.code === 'KeyO')) {
      e.preventDefault();
      if (helpOpen) dialog().close();
      if (click('#ac-new')) setTimeout(() => { const b = box(); if (b) b.focus(); }, 50);
      return;
    }
    if (mod && !e.shiftKey && !e.altKey && (key === 'k' || e.code === 'KeyK')) {
      e.preventDefault();
      if (helpOpen) dialog().close();
      if (window.acSidebar && window.acSidebar.narrow() && !window.acSidebar.isOpen()) window.acSidebar.open();
      const s = document.querySelector('#ac-search input, #ac-search textarea');
      if (s) { s.focus(); s.select(); }
      return;
    }
    if (mod && !e.altKey && (key === '/' || e.code === 'Slash')) {
      e.preventDefault();
      if (helpOpen) dialog().close(); else showHelp();
      return;
    }
    if (helpOpen) return;  // the dialog's own keys (Esc closes it)
    // Enter in an edit sends it, Shift+Enter starts a new line: as in the message box, and as
    // ChatGPT's edit does (a fresh-user trial pressed Enter, got a new line and looked for the
    // small ✓). While its Submit is disabled (the chat being written to) the key does nothing.
    if (key === 'enter' && !e.shiftKey && !e.altKey && e.target.matches && e.target.matches('#ac-chat textarea.edit-textarea')) {
      e.preventDefault();
      const submit = submitOf(e.target);
      if (submit && !submit.disabled && e.target.value.trim()) submit.click();
      return;
    }
    if (key === 'escape' && e.target.closest && e.target.closest('#ac-chat textarea.edit-textarea')) {
      e.preventDefault();  // Esc leaves the edit, as its Cancel button does
      // ...once that button is there and enabled: under load it comes a moment after the text
      // box (stop 42's CI: an Esc pressed in between was lost and the edit stayed open), so
      // look again until the edit is gone, as a send does.
      leaveEdits(ESC_EDIT_MS);
      setTimeout(() => { const b = box(); if (b) b.focus(); }, 30);
      return;
    }
    if (key === 'enter' && !e.shiftKey && e.target === box() && box().value.trim()) {
      if (repeatSend()) { swallow(e); return; }
      leaveEdits();
    }
    if (key === 'escape') {
      const stop = document.querySelector('#ac-input button.stop-button');
      if (stop && stop.offsetParent !== null) { e.preventDefault(); stop.click(); return; }
      // An edit left open while the focus went back to the message box (a fresh-user trial: Esc
      // then did nothing): Esc leaves it too, as its Cancel does.
      if (document.querySelector('#ac-chat textarea.edit-textarea')) { e.preventDefault(); leaveEdits(ESC_EDIT_MS); return; }
      if (window.acSidebar && window.acSidebar.narrow() && window.acSidebar.isOpen()) { window.acSidebar.close(); }
      return;
    }
    if (e.key === '?' && !mod && !e.altKey && !editable(e.target)) { e.preventDefault(); showHelp(); return; }
    if (e.key === 'ArrowUp' && !mod && !e.shiftKey && !e.altKey && e.target === box() && !box().value) {
      e.preventDefault();  // (in an empty box the key moves nothing)
      editWhenReady();
    }
  }, true);
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('#ac-shortcuts-open')) showHelp();
  });
  return [];
}
