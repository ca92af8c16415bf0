// Pins and tags (issue 31): the sidebar rows' menu (Pin / Unpin, Edit tags…), the tag chips
// (a click filters the list by that tag: "tag:NAME" in the search box) and the open chat's tag
// bar (× removes a tag, "+ Tag" adds). Every change becomes this element's `select` event with
// the action as JSON in `value` (webui/chat/organise.py's apply). Listeners sit on the document
// in the capture phase, so a click on a row's menu or chip never also opens the row.
// `trigger` of the element mounted last (the document listeners outlive a re-mount).
window.__acOrganiseSend = (data) => trigger('select', {index: 0, value: JSON.stringify(data)});
// The list comes with the page's HTML (webui/gui/first_paint.py): an action taken before the page's
// load has answered goes once it has, with the tab's state to act in (PAGE_LOADED_JS, app.py).
const send = (data) => {
  if (window.acPageLoaded === true) { window.__acOrganiseSend(data); return; }
  window.addEventListener('ac-page-loaded', () => window.__acOrganiseSend(data), {once: true});
};
const closeMenu = () => document.querySelectorAll('.ac-row-popup').forEach((m) => m.remove());
const filterBy = (tag) => {
  const box = document.querySelector('#ac-search textarea, #ac-search input');
  if (!box) return;
  box.value = `tag:${tag}`;
  box.dispatchEvent(new Event('input', {bubbles: true}));
};
const labelsOf = (row) => {
  const nav = row.closest('[data-menu-labels]');
  try { return JSON.parse(nav.dataset.menuLabels); } catch (e) { return {pin: 'Pin', unpin: 'Unpin', tags: 'Edit tags…', prompt: 'Tags'}; }
};
const openMenu = (opener) => {
  closeMenu();
  const row = opener.closest('[data-sid]');
  if (!row) return;
  const labels = labelsOf(row);
  const pinned = row.dataset.pinned === '1';
  const menu = document.createElement('div');
  menu.className = 'ac-row-popup';
  menu.setAttribute('role', 'menu');
  const item = (text, run) => {
    const b = document.createElement('button');
    b.type = 'button'; b.setAttribute('role', 'menuitem'); b.textContent = text;
    b.addEventListener('click', (e) => { e.stopPropagation(); closeMenu(); run(); });
    menu.appendChild(b);
    return b;
  };
  const first = item(pinned ? labels.unpin : labels.pin,
                     () => send({action: pinned ? 'unpin' : 'pin', sid: row.dataset.sid}));
  item(labels.tags, () => {
    const text = window.prompt(labels.prompt, row.dataset.tags || '');
    if (text !== null) send({action: 'tags', sid: row.dataset.sid, tags: text});
  });
  // Inside the app's container: Gradio scopes the page's CSS to it (assets/organise.css).
  (document.querySelector('.gradio-container .contain') || document.body).appendChild(menu);
  const r = opener.getBoundingClientRect();
  const w = menu.offsetWidth, h = menu.offsetHeight;
  menu.style.left = `${Math.max(4, Math.min(r.right - w, window.innerWidth - w - 4))}px`;
  menu.style.top = `${r.bottom + h + 4 > window.innerHeight ? Math.max(4, r.top - h - 4) : r.bottom + 4}px`;
  first.focus();
};
const act = (e) => {
  const t = e.target;
  if (!(t instanceof Element)) return false;
  const opener = t.closest('#ac-list [data-menu]');
  if (opener) { openMenu(opener); return true; }
  const chip = t.closest('[data-tag]');
  if (chip && (chip.closest('#ac-list') || chip.closest('.ac-tagbar'))) { closeMenu(); filterBy(chip.dataset.tag); return true; }
  const bar = t.closest('.ac-tagbar');
  if (bar) {
    const un = t.closest('[data-untag]');
    if (un) { send({action: 'untag', sid: bar.dataset.sid, tag: un.dataset.untag}); return true; }
    if (t.closest('[data-add-tag]')) {
      const text = window.prompt(bar.dataset.prompt, '');
      if (text !== null && text.trim()) send({action: 'add_tags', sid: bar.dataset.sid, tags: text});
      return true;
    }
  }
  return false;
};
if (!window.__acOrganise) {
  window.__acOrganise = true;
  document.addEventListener('click', (e) => {
    if (e.target instanceof Element && e.target.closest('.ac-row-popup')) return;
    if (act(e)) { e.preventDefault(); e.stopPropagation(); return; }
    // Only a person's click elsewhere closes the menu: the page's own clicks on hidden buttons
    // (the live check clicks one every second) closed it under the user's pointer.
    if (e.isTrusted) closeMenu();
  }, true);
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') { closeMenu(); return; }
    if ((e.key === 'Enter' || e.key === ' ') && e.target instanceof Element
        && e.target.matches('[data-menu], [data-tag], [data-untag]')) {
      if (act(e)) { e.preventDefault(); e.stopPropagation(); }
    }
  }, true);
}
