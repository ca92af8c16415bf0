// The row shown as the open chat (at once on a click, before the server has answered).
const markOpen = (row) => {
  element.querySelectorAll('.ac-session.active').forEach((x) => x.classList.remove('active'));
  row.classList.add('active');
};
element.addEventListener('click', (e) => {
  if (e.target.closest('[data-more]')) { whenLoaded(() => trigger('expand', {})); return; }
  const row = e.target.closest('[data-sid]');
  if (!row) return;
  markOpen(row);
  if (window.acPageLoaded !== true) { early = row.dataset.sid; return; }
  pick(row.dataset.sid);
});
// One click on a row on its way at a time: Gradio dropped a second one sent before the first was
// answered (the row marked open, the first chat open and in the address; a fresh-user trial), and
// two on their way at once were drawn in either order. So a row clicked meanwhile waits for the
// answer (the window event ac-picked: signal_answered in webui/gui/app.py says when), the last
// one clicked only.
let picking = false;
let next = null;
const pick = (sid) => {
  if (picking) { next = sid; return; }
  picking = true;
  trigger('select', {index: sid, value: sid});
};
window.addEventListener('ac-picked', () => {
  picking = false;
  if (next === null) return;
  const sid = next;
  next = null;
  const row = element.querySelector(`[data-sid="${CSS.escape(sid)}"]`);
  if (row) markOpen(row);  // the answer drew the list again
  pick(sid);
});
// The list comes with the page's HTML (webui/gui/first_paint.py), before the page's load has
// answered; that answer would blank a chat opened earlier, so a row clicked so soon is opened
// once it is on the page (PAGE_LOADED_JS in webui/gui/app.py says when).
let early = null;
const whenLoaded = (run) => {
  if (window.acPageLoaded === true) run();
  else window.addEventListener('ac-page-loaded', run, {once: true});
};
window.addEventListener('ac-page-loaded', () => {
  if (early === null) return;
  const sid = early;
  early = null;
  const row = element.querySelector(`[data-sid="${CSS.escape(sid)}"]`);
  if (row) markOpen(row);  // the load's answer drew the list again
  pick(sid);
});
// The next page of the list when its "Show more" row scrolls into view (once per page).
let asked = null;
document.addEventListener('scroll', () => {
  const more = element.querySelector('[data-more]');
  if (!more || more === asked || window.acPageLoaded !== true) return;  // the load draws it again
  const r = more.getBoundingClientRect();
  if (r.top < window.innerHeight + 200 && r.bottom > 0) { asked = more; trigger('expand', {}); }
}, true);
